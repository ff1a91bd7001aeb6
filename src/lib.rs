//! `remat`: optimal tensor rematerialization (Checkmate, MLSys 2020) as a
//! library. Data flows one way: graph file → [`graph::Graph`] → strategy →
//! [`schedule::Schedule`] → [`schedule::Plan`] → simulator → report.
//! See ARCHITECTURE.md for the map.

// Links the vendored, statically built CBC into every binary.
extern crate cbc_src;

pub mod cli;
pub mod device;
pub mod graph;
pub mod hints;
pub mod input;
pub mod reports;
pub mod schedule;
pub mod solve;
pub mod solver;
pub mod strategies;
pub mod units;
pub mod workflows;
pub mod zoo;

pub use graph::{Graph, NodeId};
pub use units::Bytes;
