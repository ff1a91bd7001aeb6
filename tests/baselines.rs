#![allow(clippy::needless_range_loop)]
//! Baselines from prior work (issue 4): minimal recomputation for a fixed S,
//! segment checkpointing, Chen √n / greedy and their AP / linearized
//! generalizations, and Griewank–Walther revolve.

use proptest::prelude::*;
use remat::graph::{Graph, GraphFile, GraphKind, NodeSpec};
use remat::schedule::{generate_plan, simulate, solve_r, Schedule};
use remat::solver::checkmate::Formulation;
use remat::solver::{solve_mip, Backend, MipStatus, Params};
use remat::strategies::candidates::{articulation_points, forward_nodes, linearized};
use remat::strategies::chen::{
    greedy_checkpoints, greedy_sweep, sqrtn_checkpoints, Candidates, Chen, Rule,
};
use remat::strategies::griewank::{
    advances, beta, min_forward_steps, revolve, revolve_schedule, Action, Chain, Griewank,
};
use remat::strategies::knobs::{evaluate_all, TradeOff};
use remat::strategies::segments::segments_to_schedule;
use remat::strategies::{self, SolveOptions, Status, Strategy, StrategyError};
use remat::zoo::synthetic::{linear, random_layered, RandomDag};
use remat::{Bytes, NodeId};

fn sim(g: &Graph, sch: &Schedule) -> (f64, u64) {
    let plan = generate_plan(g, sch).expect("valid schedule");
    let rep = simulate(g, &plan).expect("plan passes the simulator");
    (rep.cost, rep.peak.get())
}

fn ids(v: &[usize]) -> Vec<NodeId> {
    v.iter().map(|&i| NodeId::from(i)).collect()
}

/// A chain of `n` layers with the given memories and costs, as a forward
/// file (gradients generated, each reading its layer and the layer's input).
fn chain_graph(mem: &[u64], cost: &[f64]) -> Graph {
    let mut nodes = Vec::new();
    for i in 0..mem.len() {
        let deps = if i == 0 {
            vec![]
        } else {
            vec![format!("l{}", i - 1)]
        };
        nodes.push(NodeSpec::new(format!("l{i}"), cost[i], mem[i], deps));
    }
    nodes.push(NodeSpec::new(
        "loss",
        1.0,
        1,
        vec![format!("l{}", mem.len() - 1)],
    ));
    let file = GraphFile {
        meta: Default::default(),
        name: "chain".into(),
        graph: GraphKind::Forward,
        batch_size: 1,
        cost_unit: None,
        fixed_memory: 0.0,
        nodes,
    };
    Graph::from_file(&file, "<chain>").unwrap()
}

/// A random layered DAG turned into a training graph: a loss reads every
/// sink, and the backward pass is generated (each gradient reads its node
/// and the node's inputs), so the backward pass is as branchy as the
/// forward one.
fn random_training(p: &RandomDag) -> Graph {
    let mut file = remat::zoo::synthetic::random_layered_file(p);
    let mut has_user = vec![false; file.nodes.len()];
    let index: std::collections::HashMap<String, usize> = file
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for n in &file.nodes {
        for d in &n.deps {
            has_user[index[d]] = true;
        }
    }
    let sinks: Vec<String> = file
        .nodes
        .iter()
        .zip(&has_user)
        .filter(|(_, u)| !**u)
        .map(|(n, _)| n.name.clone())
        .collect();
    file.nodes.push(NodeSpec::new("loss", 1.0, 1, sinks));
    file.graph = GraphKind::Forward;
    Graph::from_file(&file, "<random-training>").unwrap()
}

// ---------------------------------------------------------------- solve_r

/// All R matrices (lower triangular, R[t,t]=1) satisfying (1b) and (1c) for
/// a fixed S, by enumeration: the minimum cost and the intersection of all.
fn brute_force_r(g: &Graph, s: &Schedule) -> (f64, Vec<Vec<bool>>) {
    let n = g.len();
    let cells: Vec<(usize, usize)> = (0..n).flat_map(|t| (0..t).map(move |i| (t, i))).collect();
    assert!(cells.len() <= 16, "brute force is for tiny graphs");
    let mut best = f64::INFINITY;
    let mut all_feasible = vec![vec![true; n]; n];
    for mask in 0u32..(1u32 << cells.len()) {
        let mut sch = s.clone();
        for (b, &(t, i)) in cells.iter().enumerate() {
            sch.set_r(t, i, mask >> b & 1 == 1);
        }
        if sch.validate(g).is_ok() {
            best = best.min(sch.cost(g));
            for t in 0..n {
                for i in 0..n {
                    all_feasible[t][i] &= sch.r(t, i);
                }
            }
        }
    }
    (best, all_feasible)
}

fn s_from_bits(n: usize, bits: &[bool]) -> Schedule {
    let mut s = Schedule::identity(n);
    let mut k = 0;
    for t in 0..n {
        for i in 0..t {
            s.set_s(t, i, bits[k % bits.len()]);
            k += 1;
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// solve_r is the least R for its S: valid, as cheap as the cheapest R
    /// found by enumeration, and contained in every valid R.
    #[test]
    fn solve_r_is_the_least_r(seed in 0u64..1000, nodes in 3usize..=6, bits in prop::collection::vec(any::<bool>(), 15)) {
        let g = random_layered(&RandomDag { nodes, width: 2, skip_prob: 0.4, seed, ..RandomDag::default() });
        let s = s_from_bits(g.len(), &bits);
        let sch = solve_r(&g, s.clone());
        prop_assert!(sch.validate(&g).is_ok());
        let (best, intersection) = brute_force_r(&g, &s);
        prop_assert!((sch.cost(&g) - best).abs() < 1e-9, "solve_r {} vs brute force {}", sch.cost(&g), best);
        for t in 0..g.len() {
            for i in 0..g.len() {
                prop_assert_eq!(sch.r(t, i), intersection[t][i], "cell ({}, {})", t, i);
            }
        }
    }
}

#[test]
fn solve_r_on_linear2_matches_enumeration() {
    // linear(2): f0 f1 loss grad/f1 grad/f0; 10 free R cells.
    let g = linear(2);
    for mask in 0u32..(1 << 10) {
        let bits: Vec<bool> = (0..10).map(|b| mask >> b & 1 == 1).collect();
        let s = s_from_bits(g.len(), &bits);
        let sch = solve_r(&g, s.clone());
        assert!(sch.validate(&g).is_ok());
        assert_eq!(sch.cost(&g), brute_force_r(&g, &s).0, "S mask {mask:#b}");
    }
}

// ------------------------------------------------------------ candidates

#[test]
fn candidates_on_linear_graphs_are_all_forward_nodes() {
    for n in 1..=12 {
        let g = linear(n);
        let fwd = forward_nodes(&g);
        assert_eq!(fwd.len(), n + 1, "n layers and the loss");
        assert_eq!(articulation_points(&g), fwd, "linear({n})");
        assert_eq!(linearized(&g), fwd);
    }
}

#[test]
fn articulation_points_of_a_diamond_skip_the_branches() {
    // a -> {b, c} -> d -> e: b and c are inside a block, a, d, e are cuts.
    let file = GraphFile {
        meta: Default::default(),
        name: "diamond".into(),
        graph: GraphKind::Training,
        batch_size: 1,
        cost_unit: None,
        fixed_memory: 0.0,
        nodes: vec![
            NodeSpec::new("a", 1.0, 1, vec![]),
            NodeSpec::new("b", 1.0, 1, vec!["a".into()]),
            NodeSpec::new("c", 1.0, 1, vec!["a".into()]),
            NodeSpec::new("d", 1.0, 1, vec!["b".into(), "c".into()]),
            NodeSpec::new("e", 1.0, 1, vec!["d".into()]),
        ],
    };
    let g = Graph::from_file(&file, "<diamond>").unwrap();
    assert_eq!(articulation_points(&g), ids(&[0, 3, 4]));
    // Two sources feeding one node: neither source is a cut vertex once
    // the virtual source joins them.
    let file2 = GraphFile {
        meta: Default::default(),
        nodes: vec![
            NodeSpec::new("x", 1.0, 1, vec![]),
            NodeSpec::new("y", 1.0, 1, vec![]),
            NodeSpec::new("z", 1.0, 1, vec!["x".into(), "y".into()]),
            NodeSpec::new("w", 1.0, 1, vec!["z".into()]),
        ],
        ..file
    };
    let g2 = Graph::from_file(&file2, "<two-sources>").unwrap();
    assert_eq!(articulation_points(&g2), ids(&[2, 3]));
}

// ------------------------------------------------- Chen on linear graphs

#[test]
fn sqrtn_picks_every_isqrt_th_candidate() {
    let c: Vec<NodeId> = ids(&(0..10).collect::<Vec<_>>());
    // k = 10, ⌊√10⌋ = 3: positions 3, 6, 9.
    assert_eq!(sqrtn_checkpoints(&c), ids(&[2, 5, 8]));
    assert_eq!(sqrtn_checkpoints(&c[..9]), ids(&[2, 5, 8]));
    assert_eq!(sqrtn_checkpoints(&c[..3]), ids(&[0, 1, 2]));
    assert!(sqrtn_checkpoints(&[]).is_empty());
}

#[test]
fn greedy_checkpoints_when_the_running_sum_exceeds_b() {
    let g = chain_graph(&[4, 1, 1, 5, 2, 2, 2], &[1.0; 7]);
    let c = forward_nodes(&g); // l0..l6, loss (memory 1)
                               // b = 5: 4,5(>5? no)... sums: l0 4, l1 5, l2 6>5 ck; l3 5, l4 7>5 ck; l5 2, l6 4, loss 5.
    assert_eq!(greedy_checkpoints(&g, &c, 5), ids(&[2, 4]));
    assert_eq!(greedy_checkpoints(&g, &c, 0), c);
    assert!(greedy_checkpoints(&g, &c, 1000).is_empty());
    // The sweep lists each distinct outcome once, each at the least b
    // producing it, and agrees with a direct run at every b.
    let sweep = greedy_sweep(&g, &c);
    assert_eq!(sweep.first().unwrap().0, 0);
    assert!(sweep.last().unwrap().1.is_empty());
    for w in sweep.windows(2) {
        assert!(w[0].0 < w[1].0);
        assert_ne!(w[0].1, w[1].1);
    }
    for b in 0..=20u64 {
        let expect = greedy_checkpoints(&g, &c, b);
        let entry = sweep.iter().rev().find(|(lo, _)| *lo <= b).unwrap();
        assert_eq!(entry.1, expect, "b = {b}");
    }
}

/// Paper claim (§6.1): on linear graphs the AP and linearized variants give
/// exactly the original heuristics' checkpoint sets, hence the same plans.
#[test]
fn ap_and_linearized_reproduce_chen_on_linear_graphs() {
    let graphs = vec![
        linear(8),
        linear(17),
        chain_graph(
            &[4, 1, 1, 5, 2, 2, 2, 9, 1, 3],
            &[1.0, 2.0, 3.0, 1.0, 1.0, 5.0, 1.0, 2.0, 2.0, 1.0],
        ),
    ];
    for g in &graphs {
        let chen: Vec<NodeId> = Chen::new(Candidates::Chain, Rule::Sqrtn)
            .candidate_set(g)
            .unwrap();
        let ap = Chen::new(Candidates::ArticulationPoints, Rule::Sqrtn)
            .candidate_set(g)
            .unwrap();
        let lin = Chen::new(Candidates::Linearized, Rule::Sqrtn)
            .candidate_set(g)
            .unwrap();
        assert_eq!(ap, chen);
        assert_eq!(lin, chen);
        assert_eq!(sqrtn_checkpoints(&ap), sqrtn_checkpoints(&chen));
        assert_eq!(greedy_sweep(g, &ap), greedy_sweep(g, &chen));
        assert_eq!(greedy_sweep(g, &lin), greedy_sweep(g, &chen));
        // And therefore the same trade-off curves.
        for rule in [Rule::Sqrtn, Rule::Greedy] {
            let curve = |c| evaluate_all(g, &Chen::new(c, rule), &mut |_, _| {}).unwrap();
            let base = curve(Candidates::Chain);
            assert_eq!(curve(Candidates::ArticulationPoints), base);
            assert_eq!(curve(Candidates::Linearized), base);
        }
    }
}

/// linear(8): f0..f7, loss, grad/f7..grad/f0, unit cost and memory.
/// Checkpoint-all computes each of the 17 nodes once; its peak, 10, is at
/// grad/f7: f0..f7, the loss and grad/f7 itself.
///
/// chen-sqrtn: 9 candidates (f0..f7, loss), ⌊√9⌋ = 3, checkpoints at
/// positions 3, 6, 9: f2, f5, loss. Each other layer is dropped after the
/// forward pass, and its segment is recomputed once, in the first backward
/// stage that reads it, from the checkpoint before it: grad/f7 recomputes
/// f6, f7; grad/f4 f3, f4; grad/f1 f0, f1: 6 recomputations, cost 23. Peak
/// 6, at grad/f7: f2, f5, the loss, the recomputed f6 (kept for grad/f6) and
/// f7, and grad/f7.
#[test]
fn linear8_checkpoint_all_and_chen_sqrtn() {
    let g = linear(8);
    assert_eq!(sim(&g, &Schedule::checkpoint_all(&g)), (17.0, 10));
    let chen = Chen::new(Candidates::Chain, Rule::Sqrtn);
    let ck = sqrtn_checkpoints(&chen.candidate_set(&g).unwrap());
    assert_eq!(
        ck,
        vec![
            g.find("f2").unwrap(),
            g.find("f5").unwrap(),
            g.find("loss").unwrap()
        ]
    );
    let sch = segments_to_schedule(&g, &ck);
    assert_eq!(sch.recomputations(), 6);
    assert_eq!(sim(&g, &sch), (23.0, 6));
    // Through the strategy and the one pipeline: fits 6, not 5.
    let opts = SolveOptions::default();
    let out = remat::solve::run(&g, &chen, Bytes(6), &opts).unwrap();
    assert_eq!(out.status, Status::Feasible);
    assert_eq!((out.cost(), out.peak()), (Some(23.0), Some(Bytes(6))));
    // A heuristic that does not fit says so, without claiming that no plan
    // exists (5 bytes is above the graph's smallest budget).
    let out = remat::solve::run(&g, &chen, Bytes(5), &opts).unwrap();
    assert_eq!(out.status, Status::NoFit);
}

#[test]
fn chen_refuses_non_linear_graphs() {
    let g = random_training(&RandomDag {
        nodes: 12,
        seed: 3,
        ..RandomDag::default()
    });
    for rule in [Rule::Sqrtn, Rule::Greedy] {
        let s = Chen::new(Candidates::Chain, rule);
        match s.solve(&g, Bytes(u64::MAX), &SolveOptions::default()) {
            Err(StrategyError::NotApplicable { strategy, reason }) => {
                assert_eq!(strategy, s.name());
                assert!(reason.contains("linear graphs only"), "{reason}");
                assert!(reason.contains("not a chain"), "{reason}");
            }
            other => panic!("{} on a DAG: {other:?}", s.name()),
        }
    }
}

// --------------------------------------------------------------- revolve

/// t(l, s) by the recurrence alone: t(1, s) = 0, t(l, 1) = l(l−1)/2,
/// t(l, s) = min_{0<i<l} i + t(l−i, s−1) + t(i, s).
fn recurrence_table(lmax: usize, smax: usize) -> Vec<Vec<u64>> {
    let mut t = vec![vec![0u64; smax + 1]; lmax + 1];
    for l in 1..=lmax {
        for s in 1..=smax {
            t[l][s] = if l == 1 {
                0
            } else if s == 1 {
                (l * (l - 1) / 2) as u64
            } else {
                (1..l)
                    .map(|i| i as u64 + t[l - i][s - 1] + t[i][s])
                    .min()
                    .unwrap()
            };
        }
    }
    t
}

#[test]
fn binomial_formula_matches_the_recurrence() {
    let t = recurrence_table(80, 7);
    for l in 1..=80 {
        for s in 1..=7 {
            assert_eq!(
                min_forward_steps(l as u64, s as u64),
                t[l][s],
                "l={l} s={s}"
            );
        }
    }
    // A few by hand: with one slot every step re-advances from y_0.
    assert_eq!(min_forward_steps(10, 1), 45);
    // Enough slots: only the first sweep, l−1 steps.
    assert_eq!(min_forward_steps(10, 9), 9);
    // l = β(s, r) exactly: t = r·l − β(s+1, r−1).
    assert_eq!(beta(2, 3), 10);
    assert_eq!(min_forward_steps(10, 2), 3 * 10 - beta(3, 2) as u64); // 30 − 10 = 20
    assert_eq!(min_forward_steps(10, 2), 20);
    assert_eq!(min_forward_steps(11, 2), 4 * 11 - beta(3, 3) as u64); // 44 − 20 = 24
    assert_eq!(beta(3, 3), 20);
}

/// Replays revolve's actions on an abstract chain: every step is reversed
/// once, last to first, each from its input state; no more than `snaps`
/// slots are ever in use; returns how often each step was advanced.
fn replay(l: usize, snaps: usize, actions: &[Action]) -> Vec<u64> {
    let mut slots: Vec<usize> = Vec::new();
    let mut current: Option<usize> = Some(0);
    let mut next_reversal = l;
    let mut advanced = vec![0u64; l + 1];
    for a in actions {
        match *a {
            Action::Takeshot(i) => {
                assert_eq!(current, Some(i));
                slots.push(i);
                assert!(slots.len() <= snaps, "more than {snaps} slots");
            }
            Action::Advance { from, to } => {
                assert_eq!(current, Some(from));
                assert!(to > from && to < next_reversal);
                for step in from + 1..=to {
                    advanced[step] += 1;
                }
                current = Some(to);
            }
            Action::Firsturn(k) | Action::Youturn(k) => {
                assert_eq!(k, next_reversal, "reversal order");
                assert_eq!(current, Some(k - 1), "step {k} reversed from its input");
                assert_eq!(matches!(a, Action::Firsturn(_)), k == l);
                next_reversal -= 1;
                current = None;
            }
            Action::Restore(i) => {
                assert!(slots.contains(&i));
                current = Some(i);
            }
            Action::Release(i) => {
                let pos = slots
                    .iter()
                    .position(|&s| s == i)
                    .expect("released a held slot");
                slots.remove(pos);
            }
        }
    }
    assert_eq!(next_reversal, 0, "every step reversed");
    assert!(slots.is_empty());
    advanced
}

#[test]
fn revolve_is_optimal_and_binomial() {
    for l in 1..=60usize {
        for snaps in 1..=6usize {
            let actions = revolve(l, snaps);
            let per_step = replay(l, snaps, &actions);
            assert_eq!(
                advances(&actions),
                min_forward_steps(l as u64, snaps as u64),
                "l={l} snaps={snaps}"
            );
            // Repetition number: with β(s, r−1) < l ≤ β(s, r), no step is
            // advanced more than r times (Griewank 1992).
            let r = (0..).find(|&r| beta(snaps as u64, r) >= l as u128).unwrap();
            assert!(
                per_step.iter().all(|&c| c <= r),
                "l={l} snaps={snaps}: a step advanced {} > r={r} times",
                per_step.iter().max().unwrap()
            );
        }
    }
}

/// A long chain, with snapshots for every state and with a few: the
/// recursion ran as deep as the chain (a 15,000-layer chain overflowed the
/// solve thread's stack and aborted `remat solve`), and the action list is
/// still the replayable optimum. Runs on a thread with a small stack, as
/// the solvers' are.
#[test]
fn revolve_reverses_long_chains_without_recursing() {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            for (l, snaps) in [(60_000usize, 60_000usize), (60_000, 59_999), (3_000, 3)] {
                let actions = revolve(l, snaps);
                assert_eq!(
                    advances(&actions),
                    min_forward_steps(l as u64, snaps as u64),
                    "l={l} snaps={snaps}"
                );
                let per_step = replay(l, snaps, &actions);
                assert_eq!(per_step.len(), l + 1, "l={l}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// On linear(n) the chain has l = n+1 steps (n layers and the loss);
/// revolve with s snapshots plus the free input makes exactly
/// t(l, s+1) − (l−1) recomputations: its reversal-phase advances.
#[test]
fn revolve_schedule_on_linear_graphs_costs_what_revolve_counts() {
    for n in 1..=14 {
        let g = linear(n);
        let chain = Chain::of(&g);
        assert_eq!(chain.steps, n + 1);
        for s in chain.snapshot_range() {
            let sch = revolve_schedule(&g, &chain, s);
            let l = (n + 1) as u64;
            let expect = min_forward_steps(l, s as u64 + 1) - (l - 1);
            assert_eq!(sch.recomputations() as u64, expect, "linear({n}) s={s}");
            let (cost, _) = sim(&g, &sch);
            assert_eq!(cost, (2 * n + 1) as f64 + expect as f64);
            if s == *chain.snapshot_range().end() {
                assert_eq!(
                    cost,
                    (2 * n + 1) as f64,
                    "enough snapshots: no recomputation"
                );
            }
        }
    }
    // linear(8), one snapshot: l = 9, t(9, 2) = 3·9 − β(3, 2) = 17, so 9
    // recomputations, cost 26.
    let g = linear(8);
    let sch = revolve_schedule(&g, &Chain::of(&g), 1);
    assert_eq!(sim(&g, &sch).0, 26.0);
}

#[test]
fn griewank_refuses_graphs_without_a_backward_pass() {
    let g = random_layered(&RandomDag::default());
    assert!(matches!(
        Griewank.points(&g),
        Err(StrategyError::NotApplicable { .. })
    ));
}

// ------------------------------------------------ every plan is checked

fn check_all_baselines(g: &Graph, linear_graph: bool) -> Result<(), TestCaseError> {
    for s in strategies::baselines() {
        match evaluate_all(g, s.as_ref(), &mut |_, _| {}) {
            Ok(points) => {
                prop_assert!(!points.is_empty(), "{} has no points", s.name());
                for p in &points {
                    prop_assert!(p.cost >= g.total_cost() - 1e-9);
                    prop_assert!(p.peak >= remat::graph::analysis::min_feasible_budget(g));
                }
                // The strategy's answer at its least peak goes through the
                // one pipeline.
                let least = points.iter().map(|p| p.peak).min().unwrap();
                let out = remat::solve::run(g, s.as_ref(), least, &SolveOptions::default())
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", s.name())))?;
                // A heuristic's plan is optimal only when it meets its bound.
                let gap = out.gap().unwrap_or(1.0);
                prop_assert!(
                    out.status == Status::Feasible
                        || out.status == Status::Optimal && gap <= remat::solve::OPTIMAL_GAP,
                    "{} says {:?} at gap {gap}",
                    s.name(),
                    out.status
                );
            }
            Err(StrategyError::NotApplicable { strategy, .. }) => {
                prop_assert!(
                    strategy.starts_with("chen-") && !linear_graph
                        || strategy == "griewank-logn" && !g.nodes().iter().any(|n| n.backward),
                    "{strategy} refused"
                );
            }
            Err(e) => return Err(TestCaseError::fail(format!("{}: {e}", s.name()))),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_baseline_plan_passes_the_simulator_on_random_dags(
        seed in 0u64..10_000, nodes in 2usize..28, width in 1usize..4, skip in 0.0f64..0.6,
    ) {
        let p = RandomDag { nodes, width, skip_prob: skip, seed, ..RandomDag::default() };
        let plain = random_layered(&p);
        check_all_baselines(&plain, width == 1 && skip == 0.0)?;
        let training = random_training(&p);
        check_all_baselines(&training, false)?;
    }

    #[test]
    fn every_baseline_plan_passes_the_simulator_on_linear_graphs(n in 1usize..20) {
        check_all_baselines(&linear(n), true)?;
    }
}

// ------------------------------------------- baselines against the MILP

/// The MILP's proven optimum at `budget`, solved cold (no warm start from
/// the heuristics, so agreement is not inherited from the seed), in the
/// graph's cost units.
fn cold_milp_optimum(form: &Formulation) -> Option<f64> {
    let params = Params {
        time_limit: std::time::Duration::from_secs(60),
        gap: 1e-9,
        threads: 1,
        verbose: false,
        ..Params::default()
    };
    let res = solve_mip(&form.model, Backend::Highs, &params, None).expect("HiGHS runs");
    match res.status {
        MipStatus::Optimal => Some(res.objective.unwrap() * form.cost_scale),
        MipStatus::Infeasible => None,
        s => panic!("a tiny MILP did not finish: {s:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Every point of every baseline's trade-off curve is a plan within its
    /// own peak, so the optimum at that peak can only be cheaper.
    #[test]
    fn milp_at_each_baseline_point_costs_no_more(
        seed in 0u64..10_000, nodes in 3usize..7, width in 1usize..3, skip in 0.0f64..0.5,
    ) {
        let p = RandomDag { nodes, width, skip_prob: skip, seed, ..RandomDag::default() };
        let g = random_training(&p);
        // The cheapest baseline point at each distinct peak.
        let mut by_peak: std::collections::BTreeMap<u64, (f64, String)> = Default::default();
        for s in strategies::baselines() {
            let Ok(points) = evaluate_all(&g, s.as_ref(), &mut |_, _| {}) else { continue };
            for pt in points {
                let e = by_peak.entry(pt.peak.get()).or_insert((f64::INFINITY, String::new()));
                if pt.cost < e.0 {
                    *e = (pt.cost, format!("{} {}", s.name(), pt.knob));
                }
            }
        }
        prop_assert!(!by_peak.is_empty());
        for (peak, (cost, who)) in by_peak {
            let form = Formulation::build(&g, Bytes(peak), true, None);
            let opt = cold_milp_optimum(&form);
            prop_assert!(opt.is_some(), "MILP infeasible at {}'s peak {}", who, peak);
            let opt = opt.unwrap();
            prop_assert!(opt <= cost * (1.0 + 1e-9), "MILP {} > {} ({}) at peak {}", opt, cost, who, peak);
        }
    }

    /// solve_r's R is what the MILP chooses when S is fixed and memory is
    /// no object: the cheapest R for that S.
    #[test]
    fn solve_r_equals_the_milp_with_s_fixed(
        seed in 0u64..10_000, nodes in 3usize..8, bits in prop::collection::vec(any::<bool>(), 40),
    ) {
        let g = random_training(&RandomDag { nodes, width: 2, skip_prob: 0.3, seed, ..RandomDag::default() });
        let sch = solve_r(&g, s_from_bits(g.len(), &bits));
        prop_assert!(sch.validate(&g).is_ok());
        let plenty = Bytes(g.ids().map(|i| g.memory(i).get()).sum::<u64>() * 2) + g.fixed_memory;
        let mut form = Formulation::build(&g, plenty, true, None);
        for t in 0..g.len() {
            for i in 0..t {
                let v = if sch.s(t, i) { 1.0 } else { 0.0 };
                let c = form.s(t, i);
                form.model.col_lower[c] = v;
                form.model.col_upper[c] = v;
            }
        }
        let opt = cold_milp_optimum(&form);
        prop_assert!(opt.is_some(), "the MILP rejects solve_r's S");
        let want = sch.cost(&g);
        prop_assert!((opt.unwrap() - want).abs() <= want * 1e-9, "MILP {} vs solve_r {}", opt.unwrap(), want);
    }
}

/// Settings whose plans recompute past a cap are left out and counted, not
/// replayed: one checkpoint on a 50,000-layer chain recomputes 3×10⁸ times
/// and its plan asked for 30 GB at once (an abort). Here the cap is small
/// and the settings left out are exactly those past it.
#[test]
fn settings_past_the_replay_cap_are_left_out_and_counted() {
    use remat::strategies::knobs::evaluate_all_within;
    let g = linear(40);
    let s = Griewank;
    let all = evaluate_all(&g, &s, &mut |_, _| {}).unwrap();
    let cap = g.len() + 40;
    let (kept, left) = evaluate_all_within(&g, &s, cap, &|| false, &mut |_, _| {}).unwrap();
    let over = all.iter().filter(|e| e.computations > cap).count();
    assert!(over > 0 && over < all.len(), "{over} of {}", all.len());
    assert_eq!(left.past_cap, over);
    assert_eq!(left.not_reached, 0);
    assert_eq!(kept.len(), all.len() - over);
    assert!(kept.iter().all(|e| e.computations <= cap));
}

/// A stop requested part-way leaves the settings after it unevaluated and
/// counted: the points before it are exactly the first ones of a full run.
#[test]
fn a_stop_part_way_keeps_the_settings_evaluated_before_it() {
    use remat::strategies::knobs::evaluate_all_within;
    use std::cell::Cell;
    let g = linear(40);
    let s = Griewank;
    let all = evaluate_all(&g, &s, &mut |_, _| {}).unwrap();
    let asked = Cell::new(0usize);
    let stop = || {
        asked.set(asked.get() + 1);
        asked.get() > 5
    };
    let (kept, left) = evaluate_all_within(&g, &s, usize::MAX, &stop, &mut |_, _| {}).unwrap();
    assert_eq!(kept.len(), 5);
    assert_eq!(kept[..], all[..5]);
    assert_eq!(left.not_reached, all.len() - 5);
    assert_eq!(left.past_cap, 0);
}
