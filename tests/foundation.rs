//! Graph format, backward generation, plan generation and the simulator.

use proptest::prelude::*;
use remat::graph::{analysis, Graph, GraphFile};
use remat::schedule::{generate_plan, simulate, Plan, Schedule, Statement};
use remat::zoo::synthetic::{self, Dist, RandomDag};
use remat::{Bytes, NodeId};

fn parse(text: &str) -> Result<Graph, String> {
    let f = GraphFile::parse(text).map_err(|e| format!("test.yaml: {e}"))?;
    Graph::from_file(&f, "test.yaml").map_err(|e| e.to_string())
}

#[test]
fn linear_forward_chain_yields_checkmate_training_graph() {
    let g = synthetic::linear(8);
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    let mut want: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    want.push("loss".into());
    want.extend((0..8).rev().map(|i| format!("grad/f{i}")));
    assert_eq!(names, want);
    let mut edges: Vec<(u32, u32)> = g.edges().map(|(i, k)| (i.0, k.0)).collect();
    edges.sort();
    let mut expect: Vec<(u32, u32)> = (0..16).map(|i| (i, i + 1)).collect();
    expect.extend((0..8).map(|i| (i, 16 - i)));
    expect.sort();
    assert_eq!(edges, expect);
    assert_eq!(g.num_edges(), 24);
}

#[test]
fn default_saves_are_self_and_deps_and_overrides_apply() {
    let g = parse(
        "name: t\ngraph: forward\nnodes:\n\
         - {name: x, cost: 0, memory: 4, deps: [], requires_grad: false}\n\
         - {name: a, cost: 3, memory: 8, deps: [x]}\n\
         - {name: b, cost: 5, memory: 2, deps: [a], grad_cost: 7, grad_memory: 16}\n\
         - {name: loss, cost: 1, memory: 1, deps: [a, b]}\n",
    )
    .unwrap();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["x", "a", "b", "loss", "grad/b", "grad/a"]);
    let gb = g.find("grad/b").unwrap();
    let dep_names = |id: NodeId| -> Vec<&str> {
        g.deps(id)
            .iter()
            .map(|d| g.node(*d).name.as_str())
            .collect()
    };
    assert_eq!(dep_names(gb), ["loss", "b", "a"]);
    assert_eq!(g.cost(gb), 7.0);
    assert_eq!(g.memory(gb), Bytes(16));
    let ga = g.find("grad/a").unwrap();
    // a is read by b and by the loss: both gradients flow in.
    assert_eq!(dep_names(ga), ["grad/b", "loss", "a", "x"]);
    assert_eq!(g.cost(ga), 6.0);
    assert_eq!(g.memory(ga), Bytes(8));
    assert!(g.node(ga).backward && !g.node(g.find("loss").unwrap()).backward);
}

#[test]
fn file_order_is_kept_where_dependencies_allow() {
    let g = parse(
        "name: t\ngraph: training\nnodes:\n\
         - {name: c, cost: 1, memory: 1, deps: [b]}\n\
         - {name: a, cost: 1, memory: 1}\n\
         - {name: d, cost: 1, memory: 1, deps: [a]}\n\
         - {name: b, cost: 1, memory: 1, deps: [a]}\n",
    )
    .unwrap();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "d", "b", "c"]);
}

#[test]
fn json_is_accepted() {
    let g = parse(
        r#"{"name": "j", "graph": "training", "nodes": [
            {"name": "a", "cost": 1, "memory": 2, "deps": []},
            {"name": "b", "cost": 1.5, "memory": 3, "deps": ["a"]}]}"#,
    )
    .unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(analysis::checkpoint_all_peak(&g), Bytes(5));
}

/// Each bad input and a fragment its one-line message must contain.
const BAD: &[(&str, &str)] = &[
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1, deps: [zz]}\n", "node 'a': unknown dependency 'zz'"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1}\n - {name: a, cost: 1, memory: 1}\n", "node 'a' is defined more than once"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1, deps: [a]}\n", "node 'a' depends on itself"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1, deps: [c]}\n - {name: b, cost: 1, memory: 1, deps: [a]}\n - {name: c, cost: 1, memory: 1, deps: [b]}\n", "cycle through nodes"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: -1, memory: 1}\n", "node 'a': cost must be a finite number >= 0"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: .nan, memory: 1}\n", "node 'a': cost must be a finite number"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: .inf, memory: 1}\n", "node 'a': cost must be a finite number"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: -8}\n", "node 'a': memory must be a finite number >= 0"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1.5}\n", "node 'a': memory must be a whole number of bytes"),
    ("name: t\ngraph: training\nnodes: []\n", "the graph has no nodes"),
    ("name: t\ngraph: training\nnodes:\n - {name: g, cost: 1, memory: 1, backward: true}\n - {name: f, cost: 1, memory: 1, deps: [g]}\n", "forward node 'f' reads gradient node 'g'"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: 1, memory: 1, colour: red}\n", "node 'a': unknown field `colour`"),
    ("name: t\ngraph: training\nsize: 3\nnodes:\n - {name: a, cost: 1, memory: 1}\n", "unknown field `size`"),
    ("name: t\ngraph: training\nnodes:\n - {name: a, cost: lots, memory: 1}\n", "node 'a': cost: expected a number, got the string 'lots'"),
    ("name: t\ngraph: sideways\nnodes:\n - {name: a, cost: 1, memory: 1}\n", "graph: expected forward or training, got the string 'sideways'"),
    ("\u{0}\u{1}binary{{[", "not a YAML or JSON graph file"),
    ("- just\n- a list\n", "top level must be a mapping"),
    ("name: t\ngraph: forward\nnodes:\n - {name: a, cost: 1, memory: 1}\n - {name: b, cost: 1, memory: 1}\n", "exactly one node, the loss"),
    ("name: t\ngraph: forward\nnodes:\n - {name: a, cost: 1, memory: 1, saves: [q]}\n - {name: l, cost: 1, memory: 1, deps: [a]}\n", "node 'a': saves unknown value 'q'"),
];

#[test]
fn every_bad_input_gets_its_message() {
    for (text, want) in BAD {
        let err = parse(text).expect_err(want);
        assert!(err.starts_with("test.yaml: "), "{err}");
        assert!(err.contains(want), "expected '{want}' in: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn cycle_names_its_nodes() {
    let err = parse(BAD[3].0).unwrap_err();
    for n in ["'a'", "'b'", "'c'"] {
        assert!(err.contains(n), "{err}");
    }
}

fn plan_of(g: &Graph, s: &Schedule) -> Plan {
    generate_plan(g, s).unwrap()
}

#[test]
fn checkpoint_all_on_linear8_costs_17_peaks_10() {
    let g = synthetic::linear(8);
    let p = plan_of(&g, &Schedule::checkpoint_all(&g));
    let r = simulate(&g, &p).unwrap();
    assert_eq!(r.cost, 17.0);
    assert_eq!(r.peak, Bytes(10));
    assert_eq!(r.computations, 17);
    // Every register is freed exactly once: the final gradient included.
    let allocs = p
        .statements
        .iter()
        .filter(|s| matches!(s, Statement::Allocate { .. }))
        .count();
    let frees = p
        .statements
        .iter()
        .filter(|s| matches!(s, Statement::Deallocate { .. }))
        .count();
    assert_eq!((allocs, frees), (17, 17));
}

#[test]
fn spurious_checkpoints_are_freed_at_stage_start() {
    // Keeping f0 through the whole forward pass costs memory only if the
    // plan generator honours it; it should free f0 where nothing needs it.
    let g = synthetic::linear(4);
    let mut s = Schedule::checkpoint_all(&g);
    let base = simulate(&g, &plan_of(&g, &s)).unwrap().peak;
    // f3 (index 3) is read by the loss (4) and grad/f3 (5). Keeping it one
    // more stage into 6 is spurious: it must not raise the peak.
    s.set_s(6, 3, true);
    let p = plan_of(&g, &s);
    assert_eq!(simulate(&g, &p).unwrap().peak, base);
}

fn broken(mut p: Plan, f: impl FnOnce(&mut Vec<Statement>)) -> Plan {
    f(&mut p.statements);
    p
}

#[test]
fn hand_broken_plans_are_rejected() {
    let g = synthetic::linear(2);
    let good = plan_of(&g, &Schedule::checkpoint_all(&g));
    simulate(&g, &good).unwrap();
    let cases: Vec<(Plan, &str)> = vec![
        (
            broken(good.clone(), |s| {
                let i = s
                    .iter()
                    .position(|x| matches!(x, Statement::Deallocate { .. }))
                    .unwrap();
                let d = s[i].clone();
                s.insert(i + 1, d);
            }),
            "deallocated twice",
        ),
        (
            broken(good.clone(), |s| {
                let a = s[0].clone();
                s.insert(1, a);
            }),
            "allocated twice",
        ),
        (
            broken(good.clone(), |s| {
                // Drop the computation of f0: f1 then reads an empty register.
                s.remove(1);
            }),
            "before it was computed",
        ),
        (
            broken(good.clone(), |s| {
                s.insert(2, Statement::Deallocate { register: 0 });
            }),
            "already deallocated",
        ),
        (
            broken(good.clone(), |s| {
                if let Statement::Allocate { bytes, .. } = &mut s[0] {
                    *bytes = Bytes(99);
                }
            }),
            "reserves 99 bytes",
        ),
        (
            broken(good.clone(), |s| {
                for st in s.iter_mut() {
                    if let Statement::Compute { args, .. } = st {
                        if args.len() == 1 {
                            args[0] = 77;
                            break;
                        }
                    }
                }
            }),
            "never allocated",
        ),
        (
            broken(good.clone(), |s| {
                let last_compute = s
                    .iter()
                    .rposition(|x| matches!(x, Statement::Compute { .. }))
                    .unwrap();
                s.truncate(last_compute - 1);
            }),
            "never computes 'grad/f0'",
        ),
        (
            broken(good.clone(), |s| {
                // Point f1's input at f1's own (uncomputed) register.
                if let Statement::Compute { args, register, .. } = &mut s[3] {
                    args[0] = *register;
                }
            }),
            "expects 'f0'",
        ),
    ];
    for (plan, want) in cases {
        let e = simulate(&g, &plan).expect_err(want).to_string();
        assert!(e.contains(want), "expected '{want}' in: {e}");
    }
}

#[test]
fn plan_json_round_trips() {
    let g = synthetic::linear(3);
    let p = plan_of(&g, &Schedule::checkpoint_all(&g));
    let st = p.to_file_statements(&g);
    let json = serde_json::to_string(&st).unwrap();
    assert!(
        json.contains(r#"{"op":"allocate","register":0,"node":"f0","bytes":1}"#),
        "{json}"
    );
    assert!(
        json.contains(r#"{"op":"compute","node":"f1","register":1,"args":[0]}"#),
        "{json}"
    );
    let back: Vec<remat::schedule::plan::FileStatement> = serde_json::from_str(&json).unwrap();
    assert_eq!(Plan::from_file_statements(&g, &back).unwrap(), p);
    let text = p.to_text(&g);
    assert!(
        text.starts_with("%0 = allocate f0\ncompute f0, %0\n"),
        "{text}"
    );
}

#[test]
fn at_batch_scales_activations_not_parameters() {
    let g = parse("name: t\ngraph: training\nbatch_size: 2\nfixed_memory: 100\nnodes:\n - {name: a, cost: 4, memory: 6}\n").unwrap();
    let h = g.at_batch(5);
    assert_eq!(h.memory(NodeId(0)), Bytes(15));
    assert_eq!(h.cost(NodeId(0)), 10.0);
    assert_eq!(h.fixed_memory, Bytes(100));
}

fn random_graph(seed: u64, nodes: usize, width: usize) -> Graph {
    synthetic::random_layered(&RandomDag {
        nodes,
        width,
        skip_prob: 0.3,
        cost: Dist::Uniform(0, 9),
        memory: Dist::Uniform(0, 50),
        seed,
        ..RandomDag::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The simulator accepts every checkpoint-all plan and its peak equals
    /// the independent closed-form computation.
    #[test]
    fn checkpoint_all_peak_matches_formula(seed in 0u64..10_000, n in 1usize..60, w in 1usize..6) {
        let g = random_graph(seed, n, w);
        let p = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
        let r = simulate(&g, &p).unwrap();
        prop_assert_eq!(r.peak, analysis::checkpoint_all_peak(&g));
        prop_assert!((r.cost - g.total_cost()).abs() < 1e-9);
        prop_assert!(analysis::min_feasible_budget(&g) <= r.peak);
    }

    /// Forward graphs with random shapes: backward generation always yields
    /// a valid graph whose checkpoint-all plan simulates.
    #[test]
    fn generated_training_graphs_simulate(seed in 0u64..10_000, n in 2usize..40) {
        let mut f = synthetic::random_layered_file(&RandomDag { nodes: n, width: 3, seed, ..RandomDag::default() });
        // Make it a forward graph with one sink: a loss reading every sink.
        let mut has_user = vec![false; f.nodes.len()];
        let idx: std::collections::HashMap<String, usize> =
            f.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        for n in &f.nodes { for d in &n.deps { has_user[idx[d]] = true; } }
        let sinks: Vec<String> = f.nodes.iter().zip(&has_user).filter(|(_, u)| !**u).map(|(n, _)| n.name.clone()).collect();
        f.nodes.push(remat::graph::NodeSpec::new("loss", 1.0, 1, sinks));
        f.graph = remat::graph::GraphKind::Forward;
        let g = Graph::from_file(&f, "rand").unwrap();
        prop_assert_eq!(g.len(), 2 * f.nodes.len() - 1);
        let p = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
        let r = simulate(&g, &p).unwrap();
        prop_assert_eq!(r.peak, analysis::checkpoint_all_peak(&g));
    }

    /// Mutated files never panic: they parse, or they fail with an error.
    #[test]
    fn mutated_files_error_not_panic(seed in 0u64..10_000, edits in proptest::collection::vec((0usize..4000, 0usize..24), 1..6)) {
        let f = synthetic::random_layered_file(&RandomDag { nodes: 12, seed, ..RandomDag::default() });
        let mut text = f.to_yaml(None).into_bytes();
        const TOKENS: [&str; 24] = ["", "-", "[", "]", "{", "}", ":", ",", "\n", " ", "v1", "v999", ".nan", "-3", "1.5", "name", "deps", "cost", "memory", "backward: true", "\"", "'", "#", "\u{0}"];
        for (pos, tok) in edits {
            let pos = pos % (text.len() + 1);
            if tok == 0 { if pos < text.len() { text.remove(pos); } }
            else { for (k, b) in TOKENS[tok].bytes().enumerate() { text.insert(pos + k, b); } }
        }
        let s = String::from_utf8_lossy(&text).into_owned();
        if let Ok(file) = GraphFile::parse(&s) {
            if let Ok(g) = Graph::from_file(&file, "m") {
                let p = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
                prop_assert!(simulate(&g, &p).is_ok());
            }
        }
    }
}
