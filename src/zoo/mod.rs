//! The model zoo: real network shapes and synthetic graph families, emitted
//! as graph files so that anyone can regenerate and check them. See
//! docs/zoo.md for the exact variants, the cost and memory conventions and
//! the published figures each network is tested against.

pub mod budgets;
pub mod command;
pub mod layers;
pub mod net;
pub mod networks;
pub mod ops;
pub mod synthetic;

use crate::graph::Graph;

#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    /// A layer cannot take its inputs (usually: a resolution the network
    /// does not support).
    #[error("{net}: layer '{layer}': {msg}")]
    Layer {
        net: String,
        layer: String,
        msg: String,
    },
    #[error("unknown model '{0}'; see `remat zoo --list`")]
    Unknown(String),
    #[error("{0}")]
    Invalid(String),
}

/// The command that regenerates `models/` and `budgets/`.
pub const REGENERATE: &str = "remat zoo --all";

/// One committed file: a path relative to the repository root and its
/// exact contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooFile {
    pub path: String,
    pub contents: String,
}

/// Every file under `models/` and `budgets/`, generated in memory: what
/// `remat zoo --all` writes and what the tests compare byte for byte.
pub fn committed_files() -> Result<Vec<ZooFile>, ZooError> {
    let mut out = Vec::new();
    for spec in networks::NETWORKS.iter().filter(|s| s.committed) {
        let net = networks::build(spec.name, None)?;
        let file = net.to_file(spec.batch);
        let model = file.to_yaml(Some(&net.header(spec.batch, REGENERATE)));
        let g = Graph::from_file(&file, spec.name).map_err(|e| {
            ZooError::Invalid(format!("generated model is invalid (a zoo bug): {e}"))
        })?;
        out.push(ZooFile {
            path: format!("models/{}.yaml", spec.name),
            contents: model,
        });
        out.push(ZooFile {
            path: format!("budgets/{}.yaml", spec.name),
            contents: budgets::budget_file(spec.name, &g),
        });
    }
    Ok(out)
}
