//! What the bench binaries share: resuming a results CSV.

use std::collections::HashSet;
use std::path::Path;

/// Rows already measured, keyed by (graph, budget %, backend or strategy):
/// columns 0, 3 and 5 of both bench CSVs.
pub type Done = HashSet<(String, String, String)>;

/// The CSV text so far (a fresh header if the file is missing or foreign)
/// and the keys of its rows, so a re-run only measures what is missing.
pub fn resume(out: &Path, header: &str) -> (String, Done) {
    let text = std::fs::read_to_string(out)
        .ok()
        .filter(|t| t.starts_with(header))
        .unwrap_or_else(|| format!("{header}\n"));
    let done = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() > 5).then(|| (f[0].to_string(), f[3].to_string(), f[5].to_string()))
        })
        .collect();
    (text, done)
}
