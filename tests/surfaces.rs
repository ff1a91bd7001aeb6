//! Item 6 of the tiered-memory issue, from the command line: what a user
//! with a device file sees from `solve`, `sweep`, `max-batch` and
//! `plot-plan`.

use std::path::{Path, PathBuf};
use std::process::Output;

fn remat(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A chain a → b → c → d → e where e also reads a (checkpoint-all peak 8
/// bytes), and a device whose fast tier is 7 bytes: too small to keep
/// everything, so the default budget actually binds.
fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    let g = dir.join("five.yaml");
    std::fs::write(
        &g,
        "name: five\ngraph: training\nnodes:\n\
        - {name: a, cost: 1, memory: 4}\n\
        - {name: b, cost: 2, memory: 2, deps: [a]}\n\
        - {name: c, cost: 3, memory: 2, deps: [b]}\n\
        - {name: d, cost: 2, memory: 1, deps: [c]}\n\
        - {name: e, cost: 1, memory: 1, deps: [d, a]}\n",
    )
    .unwrap();
    let d = dir.join("dev.yaml");
    std::fs::write(
        &d,
        "name: test\ncompute: {cost_is_seconds: true}\nfast: {capacity: 7}\n\
         slow: {capacity: 100, to_slow: 2, to_fast: 4, latency: 0.5, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    (g, d)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn solve_with_a_device_defaults_the_budget_to_its_fast_tier() {
    let dir = tempfile::tempdir().unwrap();
    let (g, d) = setup(dir.path());
    let o = remat(&["solve", s(&g), "--device", s(&d), "-s", "remat-fast"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("budget           7 B (7 bytes), the fast-tier capacity of device 'test'"),
        "{out}"
    );
    assert!(out.contains("step time"), "{out}");
    // An explicit budget still wins, and is not attributed to the device.
    let o = remat(&["solve", s(&g), "--device", s(&d), "-b", "100%"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("budget           8 B (8 bytes)\n"), "{out}");
    // Neither: one line, exit 2, naming both flags.
    let o = remat(&["solve", s(&g)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--budget") && err.contains("--device"),
        "{err}"
    );
    // --help says so.
    let help = text(&remat(&["solve", "--help"]));
    assert!(help.contains("fast-tier capacity"), "{help}");
}
