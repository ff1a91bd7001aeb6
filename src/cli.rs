//! Helpers for the command-line edge: error classes and exit codes, and
//! loading user files with messages that name the file.

use crate::graph::Graph;
use crate::schedule::{Plan, PlanFile};
use crate::units::{BudgetSpec, Bytes};
use std::fmt;
use std::path::Path;

/// Bad user input (a file, a flag value): exit code 2, one line, no trace.
#[derive(Debug)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

pub fn input_err(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Exit code for an error: 2 for bad input, 1 for anything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<InputError>()) {
        2
    } else {
        1
    }
}

pub fn load_device(path: &Path) -> anyhow::Result<crate::device::Device> {
    crate::device::Device::load(path).map_err(|e| input_err(e.to_string()))
}

pub fn load_graph(path: &Path) -> anyhow::Result<Graph> {
    Graph::load(path).map_err(|e| input_err(e.to_string()))
}

/// Resolves a budget string against the graph's checkpoint-all peak.
pub fn parse_budget(g: &Graph, s: &str) -> anyhow::Result<Bytes> {
    let spec = BudgetSpec::parse(s).map_err(|e| input_err(format!("--budget: {e}")))?;
    Ok(spec.resolve(crate::graph::analysis::checkpoint_all_peak(g)))
}

pub fn load_plan(g: &Graph, path: &Path) -> anyhow::Result<(PlanFile, Plan)> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| input_err(format!("{name}: cannot read: {e}")))?;
    let file: PlanFile = serde_json::from_str(&text)
        .map_err(|e| input_err(format!("{name}: not a plan JSON file: {e}")))?;
    let plan = Plan::from_file_statements(g, &file.statements)
        .map_err(|e| input_err(format!("{name}: {e}")))?;
    Ok((file, plan))
}

/// Writes a file atomically: a crash never leaves a half-written file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
