//! Test-only strategies for the sweep and max-batch tests: they exercise
//! every path of the drivers (plans of several costs, infeasible budgets,
//! not-applicable graphs, bound-only rows, warm starts) without a solver.
#![allow(dead_code)]

use remat::graph::Graph;

/// Proven optima of Checkmate's 8-layer linear graph (issue fixtures):
/// (budget in bytes, optimal cost).
pub const LINEAR8_OPTIMA: [(u64, f64); 8] = [
    (3, 45.0),
    (4, 26.0),
    (5, 22.0),
    (6, 21.0),
    (7, 20.0),
    (8, 19.0),
    (9, 18.0),
    (10, 17.0),
];
use remat::schedule::{generate_plan, simulate, Schedule};
use remat::strategies::{Solution, SolveOptions, Status, Strategy, StrategyError};
use remat::units::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Keeps nothing between stages: every stage recomputes all ancestors of its
/// frontier node. The least memory, the most compute. Feasible iff its
/// simulated peak fits.
pub struct RecomputeAll;

pub fn recompute_all_schedule(g: &Graph) -> Schedule {
    let n = g.len();
    let mut sch = Schedule::identity(n);
    for t in 0..n {
        let mut need = vec![false; n];
        need[t] = true;
        for k in (0..=t).rev() {
            if need[k] {
                for d in g.deps(remat::NodeId::from(k)) {
                    need[d.idx()] = true;
                }
            }
        }
        for (i, &nd) in need.iter().enumerate().take(t) {
            if nd {
                sch.set_r(t, i, true);
            }
        }
    }
    sch
}

pub fn recompute_all_sim(g: &Graph) -> remat::schedule::SimReport {
    let plan = generate_plan(g, &recompute_all_schedule(g)).unwrap();
    simulate(g, &plan).unwrap()
}

impl Strategy for RecomputeAll {
    fn name(&self) -> &'static str {
        "test-recompute-all"
    }
    fn describe(&self) -> &'static str {
        "test: recompute every ancestor in every stage"
    }
    fn solve(&self, g: &Graph, budget: Bytes, _: &SolveOptions) -> Result<Solution, StrategyError> {
        if recompute_all_sim(g).peak > budget {
            return Ok(Solution::infeasible("peak too high"));
        }
        Ok(Solution::feasible(recompute_all_schedule(g), None))
    }
}

/// Returns its warm start as its answer: shows which schedule the driver
/// offered.
pub struct WarmEcho;

impl Strategy for WarmEcho {
    fn name(&self) -> &'static str {
        "test-warm-echo"
    }
    fn describe(&self) -> &'static str {
        "test: answer with the warm start"
    }
    fn solve(&self, _: &Graph, _: Bytes, o: &SolveOptions) -> Result<Solution, StrategyError> {
        Ok(match &o.warm_start {
            Some((origin, s)) => Solution::feasible(s.clone(), Some(format!("from {origin}"))),
            None => Solution::infeasible("no warm start"),
        })
    }
}

pub struct NeverApplies;

impl Strategy for NeverApplies {
    fn name(&self) -> &'static str {
        "test-never-applies"
    }
    fn describe(&self) -> &'static str {
        "test: not applicable to any graph"
    }
    fn solve(&self, _: &Graph, _: Bytes, _: &SolveOptions) -> Result<Solution, StrategyError> {
        Err(StrategyError::NotApplicable {
            strategy: "test-never-applies",
            reason: "it never does".into(),
        })
    }
}

/// A bound-only strategy: half the checkpoint-all cost.
pub struct HalfBound;

impl Strategy for HalfBound {
    fn name(&self) -> &'static str {
        "test-half-bound"
    }
    fn describe(&self) -> &'static str {
        "test: a lower bound only"
    }
    fn solve(&self, g: &Graph, _: Bytes, _: &SolveOptions) -> Result<Solution, StrategyError> {
        Ok(Solution {
            status: Status::Bound,
            schedule: None,
            lower_bound: Some(g.total_cost() / 2.0),
            detail: None,
            solver_peak: None,
            trace: Vec::new(),
            step_bound: None,
        })
    }
}

/// Counts the solves of the strategy it wraps.
pub struct Counting<S> {
    pub inner: S,
    pub calls: Arc<AtomicUsize>,
}

impl<S: Strategy> Strategy for Counting<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn describe(&self) -> &'static str {
        self.inner.describe()
    }
    fn solve(&self, g: &Graph, b: Bytes, o: &SolveOptions) -> Result<Solution, StrategyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.solve(g, b, o)
    }
}

/// A fan: a small input `x` (1 byte) feeding `k` large values `a<i>` (100
/// bytes each), each read by a small output `o<i>` (1 byte); unit costs.
/// Checkpoint-all holds every `a<i>` at once (peak 100k + 1); recomputing
/// each branch from `x` in its output's stage needs only 101 bytes, at cost
/// 5k + 1 instead of 2k + 1.
pub fn fan(k: usize, fixed: u64) -> Graph {
    use remat::graph::{GraphFile, GraphKind, NodeSpec};
    let mut nodes = vec![NodeSpec::new("x", 1.0, 1, vec![])];
    for i in 0..k {
        nodes.push(NodeSpec::new(format!("a{i}"), 1.0, 100, vec!["x".into()]));
    }
    for i in 0..k {
        nodes.push(NodeSpec::new(
            format!("o{i}"),
            1.0,
            1,
            vec![format!("a{i}")],
        ));
    }
    let f = GraphFile {
        meta: Default::default(),
        name: format!("fan{k}"),
        graph: GraphKind::Training,
        batch_size: 1,
        cost_unit: None,
        fixed_memory: fixed as f64,
        nodes,
    };
    Graph::from_file(&f, "<fan>").unwrap()
}

/// The repository root, where `models/` and `devices/` live.
pub fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A shipped device file, by file name (`gh200.yaml`).
pub fn device(name: &str) -> remat::device::Device {
    remat::device::Device::load(&root().join("devices").join(name)).unwrap()
}

/// A shipped model, by name (`vgg16`).
pub fn model(name: &str) -> Graph {
    Graph::load(&root().join(format!("models/{name}.yaml"))).unwrap()
}

/// A random training DAG and, on its checkpoint-all schedule, random
/// offloads: each picked value is copied out `shift` stages after one of
/// its reads (or its computation; with `kept_only`, never right after
/// being computed) and back in during the stage before its next read, over
/// gaps long enough for that.
pub fn offloaded_case(
    seed: u64,
    nodes: usize,
    picks: &[(usize, usize)],
    kept_only: bool,
    shift: usize,
) -> (Graph, Schedule) {
    use remat::zoo::synthetic::{self, Dist, RandomDag};
    let g = synthetic::random_layered(&RandomDag {
        nodes,
        width: 3,
        skip_prob: 0.4,
        skip_span: 4,
        cost: Dist::Uniform(1, 20),
        memory: Dist::Uniform(1, 50),
        seed,
        forward: true,
        ..RandomDag::default()
    });
    let mut sch = Schedule::checkpoint_all(&g);
    let mut used = vec![false; g.len()];
    for &(v, k) in picks {
        let i = v % g.len();
        if used[i] {
            continue;
        }
        // Stages that read i, in order; i itself computes it.
        let mut at: Vec<usize> = vec![i];
        at.extend(
            (i + 1..g.len())
                .filter(|&t| g.deps(remat::NodeId::from(t)).iter().any(|d| d.idx() == i)),
        );
        let gaps: Vec<usize> = (usize::from(kept_only)..at.len().saturating_sub(1))
            .filter(|&j| at[j + 1] > at[j] + 1 + shift)
            .collect();
        if gaps.is_empty() {
            continue;
        }
        let j = gaps[k % gaps.len()];
        sch.offload(i, at[j] + shift, at[j + 1] - 1);
        used[i] = true;
    }
    (g, sch)
}

/// A public benchmark graph from `../shared/benchmarks/`, or `None` (with a
/// note) where that folder is absent.
pub fn shared(name: &str) -> Option<Graph> {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/benchmarks")
        .join(name);
    if !p.exists() {
        eprintln!("skipping: {} not found", p.display());
        return None;
    }
    Some(Graph::load(&p).expect("benchmark graphs load"))
}

/// A public graph and the budget at `pct` of its checkpoint-all peak.
pub fn shared_at(name: &str, pct: &str) -> Option<(Graph, Bytes)> {
    let g = shared(name)?;
    let budget = remat::units::BudgetSpec::parse(pct)
        .unwrap()
        .resolve(remat::graph::analysis::checkpoint_all_peak(&g));
    Some((g, budget))
}
