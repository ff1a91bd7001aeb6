//! The model zoo: real network shapes and synthetic graph families, emitted
//! as graph files so that anyone can regenerate and check them.

pub mod synthetic;
