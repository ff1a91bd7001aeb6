//! The `remat` binary end to end: outputs, exit codes, one-line errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .output()
        .expect("run remat")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn linear8(dir: &Path) -> PathBuf {
    let mut s = String::from("name: linear8\ngraph: forward\ncost_unit: unit\nnodes:\n");
    for i in 0..8 {
        let deps = if i == 0 {
            String::new()
        } else {
            format!("f{}", i - 1)
        };
        s.push_str(&format!(
            "  - {{name: f{i}, cost: 1, memory: 1, deps: [{deps}], saves: [self], grad_cost: 1}}\n"
        ));
    }
    s.push_str("  - {name: loss, cost: 1, memory: 1, deps: [f7]}\n");
    write(dir, "linear8.yaml", &s)
}

#[test]
fn graph_writes_checkmate_linear_training_graph() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let out = dir.path().join("train.yaml");
    let o = remat(&["graph", m.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let g = remat::Graph::load(&out).unwrap();
    assert_eq!(g.len(), 17);
    assert_eq!(g.num_edges(), 24);
    for (i, k) in g.edges() {
        assert!(
            k.0 == i.0 + 1 || k.0 == 16 - i.0,
            "unexpected edge {i}->{k}"
        );
    }
    // The written file is itself a valid model that gives the same graph.
    let again = dir.path().join("again.yaml");
    let o = remat(&[
        "graph",
        out.to_str().unwrap(),
        "-o",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(remat::Graph::load(&again).unwrap().nodes(), g.nodes());
}

#[test]
fn inspect_reports_peak_and_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let o = remat(&["inspect", m.to_str().unwrap()]);
    let s = stdout(&o);
    assert!(o.status.success());
    assert!(s.contains("17 (9 forward, 8 backward), 24 edges"), "{s}");
    assert!(s.contains("(10 bytes)"), "{s}");
    assert!(s.contains("smallest budget  3 B (3 bytes)"), "{s}");
}

#[test]
fn solve_writes_a_plan_that_simulate_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let plan = dir.path().join("plan.json");
    let o = remat(&[
        "solve",
        m.to_str().unwrap(),
        "--budget",
        "100%",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("status           optimal"));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(json["cost"], 17.0);
    assert_eq!(json["peak_memory"], 10);
    assert_eq!(json["budget"], 10);
    let o = remat(&[
        "simulate",
        m.to_str().unwrap(),
        plan.to_str().unwrap(),
        "-b",
        "10",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("fits"));
    // The same plan does not fit a smaller budget.
    let o = remat(&[
        "simulate",
        m.to_str().unwrap(),
        plan.to_str().unwrap(),
        "-b",
        "9",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("exceeds the budget 9"));

    // A plan broken by hand is rejected with the statement and the reason.
    let text = std::fs::read_to_string(&plan).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["statements"].as_array_mut().unwrap().remove(1);
    let bad = write(dir.path(), "bad.json", &v.to_string());
    let o = remat(&["simulate", m.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("bad.json: plan statement") && e.contains("before it was computed"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn text_plan_form() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let plan = dir.path().join("plan.txt");
    let o = remat(&[
        "solve",
        m.to_str().unwrap(),
        "-b",
        "10",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.starts_with(
            "%0 = allocate f0\ncompute f0, %0\n%1 = allocate f1\ncompute f1, %1 <- %0\n"
        ),
        "{text}"
    );
    assert!(text.contains("deallocate %0\n"));
}

#[test]
fn budget_below_minimum_is_an_immediate_clear_answer() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let o = remat(&["solve", m.to_str().unwrap(), "-b", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("infeasible: needs at least 3 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_inputs_exit_2_with_one_line_naming_file_and_node() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "dep.yaml",
            "name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1, deps: [zz]}\n",
            "node 'a': unknown dependency 'zz'",
        ),
        (
            "nan.yaml",
            "name: t\ngraph: training\nnodes:\n - {name: a, cost: .nan, memory: 1}\n",
            "node 'a': cost",
        ),
        (
            "junk.yaml",
            "{{{{ not yaml",
            "not a YAML or JSON graph file",
        ),
        (
            "cyc.json",
            r#"{"name":"t","graph":"training","nodes":[{"name":"a","cost":1,"memory":1,"deps":["b"]},{"name":"b","cost":1,"memory":1,"deps":["a"]}]}"#,
            "cycle through nodes",
        ),
    ];
    for (file, text, want) in cases {
        let p = write(dir.path(), file, text);
        let o = remat(&["inspect", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{file}");
        let e = stderr(&o);
        assert!(e.contains(file) && e.contains(want), "{file}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(!e.contains("panicked"));
    }
    let o = remat(&["inspect", dir.path().join("missing.yaml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.yaml: cannot read"));
    let m = linear8(dir.path());
    for (flag, want) in [("12XB", "unknown unit"), ("abc", "expected a number")] {
        let o = remat(&["solve", m.to_str().unwrap(), "-b", flag]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
    }
    let o = remat(&["solve", m.to_str().unwrap(), "-b", "10", "-s", "magic"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown strategy 'magic'"));
}
