//! Multi-output kernels (`group` in the graph format): computed together,
//! freed one by one, by every strategy, through the one plan generator and
//! simulator.

use proptest::prelude::*;
use remat::graph::analysis;
use remat::graph::{GraphFile, NodeSpec};
use remat::schedule::groups::{outside_kernel_stages, Merged};
use remat::schedule::{generate_plan, simulate, Schedule, Statement};
use remat::solve;
use remat::solver::checkmate::{milp_usage, Formulation};
use remat::solver::Backend;
use remat::strategies::checkmate_ilp::CheckmateIlp;
use remat::strategies::remat_exact::RematExact;
use remat::strategies::{self, SolveOptions};
use remat::zoo::synthetic::{self, RandomDag};
use remat::{Bytes, Graph, NodeId};
use std::time::Duration;

fn opts() -> SolveOptions {
    SolveOptions {
        time_limit: Duration::from_secs(60),
        gap: 1e-6,
        threads: 1,
        backend: Backend::Highs,
        ..SolveOptions::default()
    }
}

/// A layer norm (output, mean, rstd) whose statistics the backward reads
/// long after its output could go, and a dropout whose mask does too.
const TOY: &str = r#"
name: groups-toy
graph: training
batch_size: 1
fixed_memory: 0
nodes:
  - {name: x1, cost: 1, memory: 100, deps: []}
  - {name: ln, cost: 2, memory: 100, deps: [x1], group: ln}
  - {name: ln.1, cost: 0, memory: 1, deps: [x1], group: ln}
  - {name: ln.2, cost: 0, memory: 1, deps: [x1], group: ln}
  - {name: mm, cost: 5, memory: 100, deps: [ln]}
  - {name: do, cost: 1, memory: 100, deps: [mm], group: do}
  - {name: do.1, cost: 0, memory: 25, deps: [mm], group: do}
  - {name: loss, cost: 1, memory: 4, deps: [do]}
  - {name: g_do, cost: 1, memory: 100, deps: [loss, do.1], backward: true}
  - {name: g_mm, cost: 10, memory: 100, deps: [g_do, ln], backward: true}
  - {name: g_ln, cost: 2, memory: 100, deps: [g_mm, x1, ln.1, ln.2], backward: true, group: g_ln}
  - {name: g_ln.1, cost: 0, memory: 8, deps: [g_mm, x1, ln.1, ln.2], backward: true, group: g_ln}
  - {name: g_x1, cost: 1, memory: 100, deps: [g_ln], backward: true}
"#;

fn toy() -> Graph {
    Graph::from_file(&GraphFile::parse(TOY).unwrap(), "toy").unwrap()
}

/// Every group's members are computed back to back (allocate, compute per
/// member, nothing in between) and none is freed before the last is made.
fn assert_groups_back_to_back(g: &Graph, statements: &[Statement]) {
    let mut k = 0;
    while k < statements.len() {
        let Statement::Compute { node, .. } = &statements[k] else {
            k += 1;
            continue;
        };
        let members = g.group(*node);
        if members.clone().count() == 1 {
            k += 1;
            continue;
        }
        assert_eq!(
            node.idx(),
            *members.start(),
            "a group starts with its first member"
        );
        for (j, m) in members.clone().enumerate().skip(1) {
            let at = k + 2 * j;
            assert!(
                matches!(statements[at - 1], Statement::Allocate { node, .. } if node.idx() == m)
                    && matches!(statements[at], Statement::Compute { node, .. } if node.idx() == m),
                "member {m} of the group of {} is not made right after the one before it",
                node.idx()
            );
        }
        k += 2 * members.count() - 1;
    }
}

#[test]
fn checkpoint_all_frees_the_dropout_output_before_its_mask() {
    let g = toy();
    assert!(g.has_groups());
    assert_eq!(g.group(NodeId(2)), 1..=3);
    assert_eq!(g.group_end(NodeId(1)), 3);
    // Checkpoint-all, counted by hand. Grouped, the peak is at the dropout
    // kernel: x1 (100), the three layer-norm outputs (102), mm (100) and
    // both dropout outputs (125) = 427; then the dropout output goes after
    // `loss` reads it, and only its mask (25) waits for g_do, where 331
    // bytes are live. Merged, the dropout node (125) stays whole until
    // g_do, which then holds 431.
    let peak = analysis::checkpoint_all_peak(&g);
    let merged = Merged::of(&g);
    let merged_peak = analysis::checkpoint_all_peak(&merged.graph);
    assert_eq!(merged.graph.len(), g.len() - 4);
    assert_eq!(peak, Bytes(427));
    assert_eq!(merged_peak, Bytes(431));
    let sch = Schedule::checkpoint_all(&g);
    let plan = generate_plan(&g, &sch).unwrap();
    assert_eq!(simulate(&g, &plan).unwrap().peak, peak);
    assert_groups_back_to_back(&g, &plan.statements);
}

#[test]
fn the_group_aware_milps_agree_and_beat_the_merged_graph() {
    let g = toy();
    let merged = Merged::of(&g);
    let lo = analysis::min_feasible_budget(&g);
    let hi = analysis::checkpoint_all_peak(&g);
    // The kernel with the most bytes: g_ln's 108 plus its inputs
    // g_mm, x1, ln.1, ln.2 (202).
    assert_eq!(lo, Bytes(310));
    let mut beat = 0;
    for b in (lo.get()..=hi.get()).step_by(7) {
        let budget = Bytes(b);
        let exact = solve::run(&g, &RematExact, budget, &opts()).unwrap();
        let ilp = solve::run(&g, &CheckmateIlp, budget, &opts()).unwrap();
        assert_eq!(exact.cost(), ilp.cost(), "at {b} bytes");
        let on_merged = solve::run(&merged.graph, &CheckmateIlp, budget, &opts());
        let merged_cost = on_merged.ok().and_then(|o| o.cost());
        if let Some(c) = exact.cost() {
            assert_eq!(exact.status, strategies::Status::Optimal, "at {b} bytes");
            assert_groups_back_to_back(&g, &exact.plan.as_ref().unwrap().statements);
            match merged_cost {
                Some(m) => {
                    assert!(c <= m + 1e-9, "at {b}: grouped {c} > merged {m}");
                    beat += (c < m - 1e-9) as usize;
                }
                None => beat += 1,
            }
        }
    }
    assert!(beat > 0, "freeing outputs one by one never helped");
}

#[test]
fn bad_groups_are_refused_with_the_node_named() {
    let cases = [
        (
            "{name: a, cost: 1, memory: 1, deps: [], group: k}\n  - {name: b, cost: 1, memory: 1, deps: [a]}\n  - {name: c, cost: 1, memory: 1, deps: [], group: k}",
            "'c'",
            "split",
        ),
        (
            "{name: a, cost: 1, memory: 1, deps: [], group: k}\n  - {name: b, cost: 1, memory: 1, deps: [a], group: k}",
            "'b'",
            "its own group",
        ),
        (
            "{name: z, cost: 1, memory: 1, deps: []}\n  - {name: a, cost: 1, memory: 1, deps: [z], group: k}\n  - {name: b, cost: 1, memory: 1, deps: [], group: k}",
            "'b'",
            "deps differ",
        ),
        // Half forward, half backward: it passed, and the baselines that
        // split the graph at the turn failed with internal errors.
        (
            "{name: x, cost: 1, memory: 2, deps: []}\n  - {name: y, cost: 1, memory: 2, deps: [x], group: k}\n  - {name: s, cost: 0, memory: 1, deps: [x], group: k, backward: true}",
            "'s'",
            "is a backward node but 'y' is forward: members of group 'k' are outputs of one kernel and run in one pass",
        ),
    ];
    for (nodes, node, what) in cases {
        let text = format!(
            "name: bad\ngraph: training\nbatch_size: 1\nfixed_memory: 0\nnodes:\n  - {nodes}\n"
        );
        let err = Graph::from_file(&GraphFile::parse(&text).unwrap(), "bad.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.yaml") && err.contains(node) && err.contains(what),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }
    let fwd = "name: f\ngraph: forward\nbatch_size: 1\nfixed_memory: 0\nnodes:\n  - {name: a, cost: 1, memory: 1, deps: [], group: k}\n";
    let err = Graph::from_file(&GraphFile::parse(fwd).unwrap(), "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("'a'") && err.contains("training"), "{err}");
}

/// A random training graph with some nodes split into kernels of two or
/// three outputs: each reader of the old node reads one output, and the
/// kernel's cost sits on its first output.
fn grouped(seed: u64, nodes: usize) -> Graph {
    let g = synthetic::random_layered(&RandomDag {
        nodes,
        seed,
        forward: true,
        cost: synthetic::Dist::Uniform(1, 20),
        memory: synthetic::Dist::Uniform(1, 30),
        ..RandomDag::default()
    });
    let file = g.to_file();
    let mut rng = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut out: Vec<NodeSpec> = Vec::new();
    let mut renamed: std::collections::HashMap<String, Vec<String>> = Default::default();
    for n in &file.nodes {
        let mut n = n.clone();
        // Readers pick one of the outputs of a split dep, or read them all
        // (as a norm's backward reads both statistics).
        let mut deps = Vec::new();
        for d in &n.deps {
            match renamed.get(d) {
                Some(outs) if next() % 3 == 0 => deps.extend(outs.iter().cloned()),
                Some(outs) => deps.push(outs[next() as usize % outs.len()].clone()),
                None => deps.push(d.clone()),
            }
        }
        n.deps = deps;
        let k = match next() % 3 {
            0 => 2 + (next() % 2) as usize,
            _ => 1,
        };
        if k == 1 {
            out.push(n);
            continue;
        }
        let names: Vec<String> = (0..k)
            .map(|j| {
                if j == 0 {
                    n.name.clone()
                } else {
                    format!("{}.{j}", n.name)
                }
            })
            .collect();
        for (j, name) in names.iter().enumerate() {
            let mut m = n.clone();
            m.name = name.clone();
            m.group = Some(n.name.clone());
            if j > 0 {
                m.cost = 0.0;
                m.memory = (1 + next() % 8) as f64;
            }
            out.push(m);
        }
        renamed.insert(n.name.clone(), names);
    }
    let file = GraphFile { nodes: out, ..file };
    Graph::from_file(&file, "random-grouped").unwrap()
}

/// Every strategy, at budgets across the whole range, gives plans that
/// make each kernel's outputs together and fit. Where the two group-aware
/// MILPs both prove an optimum they agree, and no plan with a stage per
/// kernel (the MILP's model) undercuts it; a plan that computes in the
/// stages before a kernel's last output may (remat-fast's can: a 25-node
/// graph at 114 bytes, 233 where the MILP's model admits no plan), but
/// never the graph's eviction bound, and it is not called optimal on the
/// MILP's bound.
fn every_strategy_respects_groups(seed: u64, nodes: usize, frac: f64) -> Result<(), TestCaseError> {
    let g = grouped(seed, nodes);
    let lo = analysis::min_feasible_budget(&g).get();
    let hi = analysis::checkpoint_all_peak(&g).get();
    let budget = Bytes(lo + ((hi - lo) as f64 * frac).round() as u64);
    let all = Schedule::checkpoint_all(&g);
    let sim = simulate(&g, &generate_plan(&g, &all).unwrap()).unwrap();
    prop_assert_eq!(sim.peak.get(), hi);
    prop_assert!(hi <= analysis::checkpoint_all_peak(&Merged::of(&g).graph).get());
    // Whole costs: the bound rounds up to a whole one (Graph::tidy_bound),
    // as every reported bound does.
    let floor = g.tidy_bound(analysis::eviction_bound(&g, budget));
    // Ten seconds, not sixty: remat-fast spends its whole limit on a plan
    // more than 3% from its bound, which is common at these sizes.
    let opts = || SolveOptions {
        time_limit: Duration::from_secs(10),
        ..opts()
    };
    let exact = solve::run(&g, &RematExact, budget, &opts()).unwrap();
    let ilp = solve::run(&g, &CheckmateIlp, budget, &opts()).unwrap();
    let proven = |o: &solve::Outcome| {
        (o.status == strategies::Status::Optimal)
            .then(|| o.cost())
            .flatten()
    };
    if let (Some(a), Some(b)) = (proven(&exact), proven(&ilp)) {
        prop_assert!(
            (a - b).abs() <= 1e-6 * a.max(b),
            "remat-exact {a}, checkmate-ilp {b}"
        );
    }
    // A plan off the MILP's model is bounded by the graph alone.
    for o in [&exact, &ilp] {
        if o.schedule
            .as_ref()
            .is_some_and(|s| outside_kernel_stages(&g, s))
        {
            let lb = o.lower_bound.unwrap();
            prop_assert!(
                lb <= floor * (1.0 + 1e-9),
                "{}: bound {lb} above the graph's {floor}",
                o.strategy
            );
            if let Some(c) = proven(o) {
                prop_assert!(
                    c <= floor / (1.0 - 1e-6),
                    "{} optimal off the MILP's model",
                    o.strategy
                );
            }
        }
    }
    let optimum = proven(&exact).or(proven(&ilp));
    let Some(best) = exact.cost().or(ilp.cost()) else {
        return Ok(());
    };
    prop_assert!(floor <= best * (1.0 + 1e-9));
    for s in strategies::all() {
        let out = match solve::run(&g, s.as_ref(), budget, &opts()) {
            Ok(o) => o,
            Err(solve::SolveError::Bug { msg, .. }) => {
                return Err(TestCaseError::fail(format!("{}: {msg}", s.name())));
            }
            Err(_) => continue,
        };
        if let (Some(c), Some(plan)) = (out.cost(), out.plan.as_ref()) {
            let sch = out.schedule.as_ref().unwrap();
            if let Some(opt) = optimum.filter(|_| !outside_kernel_stages(&g, sch)) {
                prop_assert!(
                    c >= opt * (1.0 - 1e-9),
                    "{} costs {} below the optimum {}",
                    s.name(),
                    c,
                    opt
                );
            }
            prop_assert!(
                c >= floor * (1.0 - 1e-9),
                "{} below the eviction bound",
                s.name()
            );
            prop_assert!(out.peak().unwrap() <= budget);
            assert_groups_back_to_back(&g, &plan.statements);
        }
    }
    // On a device, the offload searches and policies too (a GH200,
    // whose link makes offloading worth it at these sizes).
    let dev = remat::device::Device::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("devices/gh200.yaml"),
    )
    .unwrap();
    let recompute_step = optimum.map(|c| dev.compute_time(c).get());
    let on_dev = SolveOptions {
        device: Some(std::sync::Arc::new(dev)),
        time_limit: Duration::from_secs(3),
        ..opts()
    };
    // remat-tiered models the kernels itself: it has a plan wherever
    // the recompute-only optimum exists (merging every kernel, it once
    // answered no-fit there), and it is never slower than that optimum
    // when it calls its own answer optimal. (Within 3 s it may not
    // reach the optimum: remat-exact gets part of that time.)
    let tiered = solve::run(
        &g,
        strategies::by_name("remat-tiered").unwrap().as_ref(),
        budget,
        &on_dev,
    );
    let (status, step) = match &tiered {
        Ok(o) => (Some(o.status), o.timing().map(|t| t.step.get())),
        Err(_) => (None, None),
    };
    prop_assert!(
        step.is_some(),
        "remat-tiered has no plan where remat-exact has one"
    );
    if let (Some(strategies::Status::Optimal), Some(recompute_step)) = (status, recompute_step) {
        prop_assert!(
            step.is_some_and(|s| s <= recompute_step * (1.0 + 1e-9)),
            "remat-tiered {:?} called optimal, above the recompute-only optimum {}",
            step,
            recompute_step
        );
    }
    for s in [
        strategies::by_name("remat-fast").unwrap(),
        strategies::by_name("remat-tiered").unwrap(),
        strategies::by_name("autotm-async").unwrap(),
    ] {
        match solve::run(&g, s.as_ref(), budget, &on_dev) {
            Ok(out) => {
                if let Some(plan) = out.plan.as_ref() {
                    prop_assert!(out.peak().unwrap() <= budget);
                    assert_groups_back_to_back(&g, &plan.statements);
                }
            }
            Err(solve::SolveError::Bug { msg, .. }) => {
                return Err(TestCaseError::fail(format!(
                    "{} on a device: {msg}",
                    s.name()
                )));
            }
            Err(_) => {}
        }
    }
    Ok(())
}

// Six cases in two tests of three, so that they run side by side.
proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_respects_groups_on_random_graphs(
        seed in 0u64..10_000, nodes in 5usize..=8, frac in 0.0f64..=1.0
    ) {
        every_strategy_respects_groups(seed, nodes, frac)?;
    }

    #[test]
    fn every_strategy_respects_groups_on_more_random_graphs(
        seed in 0u64..10_000, nodes in 5usize..=8, frac in 0.0f64..=1.0
    ) {
        every_strategy_respects_groups(seed, nodes, frac)?;
    }
}

/// A kernel recomputed for one small output: the MILP frees the unread
/// large one right after the kernel, as the plan does, so the MILP's memory
/// equals the simulated peak and its model admits the plan at that budget.
/// (Held to the stage's end, it would charge 10 bytes more: c would be
/// made beside k.)
#[test]
fn the_milp_frees_a_recomputed_kernels_unread_outputs() {
    let g = Graph::from_file(
        &GraphFile::parse(
            r#"
name: unread-output
graph: training
batch_size: 1
fixed_memory: 0
nodes:
  - {name: a, cost: 1, memory: 10, deps: []}
  - {name: k, cost: 5, memory: 100, deps: [a], group: k}
  - {name: k.1, cost: 0, memory: 1, deps: [a], group: k}
  - {name: b, cost: 1, memory: 10, deps: [k]}
  - {name: c, cost: 1, memory: 10, deps: [b, k.1, a], backward: true}
"#,
        )
        .unwrap(),
        "unread-output",
    )
    .unwrap();
    // Stage 4 keeps a and b and recomputes the kernel for k.1 alone.
    let mut sch = Schedule::frontiers(&g);
    for (t, kept) in [(1, vec![0]), (2, vec![0]), (3, vec![0, 1]), (4, vec![0, 3])] {
        for i in kept {
            sch.set_s(t, i, true);
        }
    }
    sch.set_r(4, 1, true);
    sch.set_r(4, 2, true);
    sch.validate(&g).unwrap();
    let peak = simulate(&g, &generate_plan(&g, &sch).unwrap())
        .unwrap()
        .peak;
    assert_eq!(peak, Bytes(121));
    assert_eq!(milp_usage(&g, &sch).peak, Bytes(121));
    let f = Formulation::build(&g, peak, true, None);
    let (x, at) = f.vector_for(&g, &sch);
    assert_eq!(at, Bytes(121));
    assert!(f.model.max_violation(&x) <= 1e-7);
    // And the MILP's optimum at that budget is no costlier than the plan.
    let exact = solve::run(&g, &RematExact, peak, &opts()).unwrap();
    assert!(exact.cost().unwrap() <= sch.cost(&g) + 1e-9);
}

/// The exact feasibility search (`schedule::feasible`) treats a kernel as
/// the schedules do: one byte below its smallest budget the group-aware
/// MILP is infeasible too, and at every budget its schedules make each
/// kernel's outputs together and fit in simulation. (At the smallest
/// budget itself the MILP may still be infeasible: it counts a recomputed
/// kernel's memory more strictly than the simulator.)
#[test]
fn the_feasibility_search_agrees_with_the_group_aware_milp() {
    use remat::schedule::feasible::{decide, Feasibility};
    use remat::solver::{solve_mip, MipStatus, Params};
    let p = Params {
        // Only feasibility is compared: the first plan the MILP finds does.
        gap: 1.0,
        ..Params::default()
    };
    let mut raised = 0;
    for g in [
        toy(),
        grouped(1, 5),
        grouped(2, 6),
        grouped(5, 6),
        grouped(6, 5),
        grouped(7, 6),
    ] {
        assert!(g.has_groups());
        let lo = analysis::min_feasible_budget(&g).get();
        let hi = analysis::checkpoint_all_peak(&g).get();
        let mut smallest = None;
        for b in lo..=hi {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            match decide(&g, Bytes(b), deadline) {
                Feasibility::NoSchedule { .. } => assert!(smallest.is_none(), "{} at {b}", g.name),
                Feasibility::Fits(sch) => {
                    let plan = generate_plan(&g, &sch).unwrap();
                    assert_groups_back_to_back(&g, &plan.statements);
                    assert!(
                        simulate(&g, &plan).unwrap().peak <= Bytes(b),
                        "{} at {b}",
                        g.name
                    );
                    smallest.get_or_insert(b);
                }
                Feasibility::Unknown { .. } => panic!("{} at {b}: undecided", g.name),
            }
        }
        let b = smallest.expect("checkpoint-all fits at the peak");
        if b > lo {
            let f = Formulation::build(&g, Bytes(b - 1), true, None);
            let status = solve_mip(&f.model, Backend::Highs, &p, None)
                .unwrap()
                .status;
            assert_eq!(status, MipStatus::Infeasible, "{} at {}", g.name, b - 1);
            raised += 1;
        }
    }
    assert!(raised >= 2, "{raised} graphs");
}

/// Which schedules the group-aware MILP's model covers: checkpoint-all
/// and any merged graph's schedule lifted back compute only at a kernel's
/// last output; recomputing `x1` in the stage of `ln` (before `ln.2`, the
/// kernel's last output) is outside it, and the plan still fits and runs.
#[test]
fn a_schedule_that_computes_before_a_kernels_last_output_is_outside_the_milp() {
    let g = toy();
    let all = Schedule::checkpoint_all(&g);
    assert!(!outside_kernel_stages(&g, &all));
    let merged = Merged::of(&g);
    let lifted = merged.lift(&g, &Schedule::checkpoint_all(&merged.graph));
    assert!(!outside_kernel_stages(&g, &lifted));
    let ln = g.find("ln").unwrap().idx();
    let x1 = g.find("x1").unwrap().idx();
    assert_ne!(g.group_end(NodeId::from(ln)), ln);
    let mut sch = all.clone();
    sch.set_s(ln, x1, false);
    sch.set_r(ln, x1, true);
    assert!(outside_kernel_stages(&g, &sch));
    let plan = generate_plan(&g, &sch).unwrap();
    let sim = simulate(&g, &plan).unwrap();
    assert_eq!(sim.cost, g.total_cost() + g.cost(NodeId::from(x1)));
}

/// `baselines` and `solve` see a heuristic's settings the same way on a
/// graph with kernels: every trade-off point `baselines` lists is what
/// `solve` answers at that point's peak, at no more than its cost. They
/// ran on the unmerged and the merged graph, and none of a grouped graph's
/// points could be reproduced (`solve` judged settings by the merged
/// graph's peak, 1,293 bytes, for a plan whose real peak is 1,193).
#[test]
fn every_baseline_point_is_what_solve_answers_on_a_grouped_graph() {
    for seed in [3, 11] {
        let g = grouped(seed, 18);
        for s in strategies::baselines() {
            let Ok(points) = remat::strategies::knobs::evaluate_all(&g, s.as_ref(), &mut |_, _| {})
            else {
                continue;
            };
            for p in &points {
                let out = solve::run(&g, s.as_ref(), p.peak, &opts()).unwrap();
                let (cost, peak) = (out.cost().unwrap(), out.peak().unwrap());
                assert!(
                    cost <= p.cost && peak <= p.peak,
                    "{} at {} ({}): solve gives cost {cost} peak {peak}, baselines said {} and {}",
                    s.name(),
                    p.peak,
                    p.knob,
                    p.cost,
                    p.peak
                );
            }
        }
    }
}
