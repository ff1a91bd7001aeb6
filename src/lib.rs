//! `remat`: optimal tensor rematerialization (Checkmate, MLSys 2020) as a
//! library. Data flows one way: graph file → [`graph::Graph`] → strategy →
//! [`schedule::Schedule`] → [`schedule::Plan`] → simulator → report.
//! See ARCHITECTURE.md for the map.

// Links the vendored, statically built CBC into every binary.
extern crate cbc_src;

pub mod baselines;
pub mod budgets;
pub mod cli;
pub mod device;
pub mod graph;
pub mod hints;
pub mod maxbatch;
pub mod plot;
pub mod report;
pub mod resultlog;
pub mod schedule;
pub mod solve;
pub mod solver;
pub mod strategies;
pub mod sweep;
pub mod units;
pub mod zoo;

pub use graph::{Graph, NodeId};
pub use units::Bytes;
