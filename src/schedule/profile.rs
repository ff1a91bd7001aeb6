//! A recompute-only schedule's memory, stage by stage, without its plan.
//!
//! Why: remat-fast prices every candidate move by the peak of the plan the
//! move leads to, and building that plan and replaying it in the simulator
//! was three quarters of its time on random-layered-n1000 (docs/scale.md).
//! For a schedule without transfers and without multi-output kernels, a
//! stage's memory depends only on what it computes (R[t]), what it is
//! handed (S[t]) and what it hands on (S[t+1]): the plan generator frees a
//! value after its last read in the stage unless the next stage keeps it,
//! and a handed value the stage never reads at once. So each stage can be
//! walked on its own, with no statements and no registers, and a move
//! re-walks only the stages it touches ([`Profile::stage`]).
//!
//! The figures are those of the plan: `the_profile_is_the_plan_replayed`
//! holds them to [`super::generate_plan`] and [`super::simulate`] on random
//! schedules. Nothing reported comes from here: the pipeline still
//! simulates every plan a strategy answers with.

use super::Schedule;
use crate::graph::{Graph, NodeId};

/// Per stage: the bytes held when it starts, its highest allocation, the
/// bytes right after its frontier is allocated, and its compute cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub kept: Vec<u64>,
    pub inner: Vec<u64>,
    pub frontier: Vec<u64>,
    pub cost: Vec<f64>,
}

/// One stage's figures (see [`Profile`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageMemory {
    pub inner: u64,
    pub frontier: u64,
    pub cost: f64,
}

/// Scratch for [`Walker::stage`]: each value's last read in the stage
/// being walked, stamped so that it is never cleared.
pub struct Walker {
    stamp: Vec<u32>,
    last: Vec<u32>,
    now: u32,
}

/// A last read that has already freed its value.
const FREED: u32 = u32::MAX;

impl Walker {
    pub fn new(n: usize) -> Walker {
        Walker {
            stamp: vec![0; n],
            last: vec![0; n],
            now: 0,
        }
    }

    fn read(&self, v: usize) -> Option<u32> {
        (self.stamp[v] == self.now).then_some(self.last[v])
    }

    /// Walks stage `t`: `order` is R[t] (ascending), `kept` the bytes of
    /// S[t], `ends` the values of S[t] that S[t+1] does not hold, and
    /// `next(i)` is S[t+1,i]. Mirrors the plan generator: handed values
    /// never read here and not handed on are freed first; each
    /// computation allocates its output (the moment a peak is counted),
    /// then frees the inputs it read last and do not go on, and its own
    /// output if nothing reads it and it does not go on.
    pub fn stage(
        &mut self,
        g: &Graph,
        t: usize,
        order: &[u32],
        kept: u64,
        ends: impl Iterator<Item = usize>,
        next: impl Fn(usize) -> bool,
    ) -> StageMemory {
        self.now = self.now.wrapping_add(1);
        if self.now == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.now = 1;
        }
        for (p, &k) in order.iter().enumerate() {
            for &d in g.deps(NodeId::from(k as usize)) {
                self.stamp[d.idx()] = self.now;
                self.last[d.idx()] = p as u32;
            }
        }
        let mem = |v: usize| g.memory(NodeId::from(v)).get();
        let mut bytes = kept;
        for i in ends {
            if self.read(i).is_none() {
                bytes -= mem(i);
            }
        }
        let (mut inner, mut frontier, mut cost) = (0u64, 0u64, 0.0f64);
        for (p, &k) in order.iter().enumerate() {
            let k = k as usize;
            bytes += mem(k);
            inner = inner.max(bytes);
            if k == t {
                frontier = bytes;
            }
            cost += g.cost(NodeId::from(k));
            for &d in g.deps(NodeId::from(k)) {
                let d = d.idx();
                if self.read(d) == Some(p as u32) && !next(d) {
                    bytes -= mem(d);
                    self.last[d] = FREED;
                }
            }
            if self.read(k).is_none() && !next(k) {
                bytes -= mem(k);
            }
        }
        StageMemory {
            inner,
            frontier,
            cost,
        }
    }
}

impl Profile {
    /// Whether [`Profile::of`] describes `sch`'s plan: no transfers and no
    /// multi-output kernels (whose members the plan generator holds for
    /// each other and whose stages the frontier rule merges).
    pub fn applies(g: &Graph, sch: &Schedule) -> bool {
        !g.has_groups() && !sch.has_transfers()
    }

    /// Every stage of `sch`, which must be complete (R closed under S, as
    /// [`super::solve_r`] makes it) and satisfy [`Profile::applies`].
    pub fn of(g: &Graph, sch: &Schedule) -> Profile {
        let n = sch.stages();
        let mut sweep = sch.kept_sweep();
        let mem = |v: u32| g.memory(NodeId::from(v as usize)).get();
        let mut walker = Walker::new(n);
        let mut p = Profile {
            kept: vec![0; n],
            inner: vec![0; n],
            frontier: vec![0; n],
            cost: vec![0.0; n],
        };
        if n == 0 {
            return p;
        }
        sweep.enter(0);
        let mut kept: u64 = sweep.events().starts(0).iter().map(|&i| mem(i)).sum();
        for t in 0..n {
            if t > 0 {
                let ev = sweep.events();
                let gone: u64 = ev.ends(t - 1).iter().map(|&i| mem(i)).sum();
                let come: u64 = ev.starts(t).iter().map(|&i| mem(i)).sum();
                kept = kept - gone + come;
            }
            p.kept[t] = kept;
            // S[t+1] is what the sweep holds once it has entered t+1; the
            // ends of stage t are read from the events before that.
            let ends: Vec<usize> = sweep.events().ends(t).iter().map(|&i| i as usize).collect();
            if t + 1 < n {
                sweep.enter(t + 1);
            }
            let last = t + 1 == n;
            let m = walker.stage(g, t, sch.r_row(t), kept, ends.into_iter(), |i| {
                !last && sweep.contains(i)
            });
            p.inner[t] = m.inner;
            p.frontier[t] = m.frontier;
            p.cost[t] = m.cost;
        }
        p
    }

    /// Stage `t`'s peak as the local search counts it: from the frontier
    /// of stage `t-1` (the bytes held when it was computed) to its own.
    pub fn window(&self, t: usize) -> u64 {
        let before = if t == 0 { 0 } else { self.frontier[t - 1] };
        before.max(self.inner[t])
    }

    /// The highest allocation of the plan, in activation bytes.
    pub fn peak(&self) -> u64 {
        self.inner.iter().copied().max().unwrap_or(0)
    }

    pub fn total_cost(&self) -> f64 {
        self.cost.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analysis::checkpoint_all_peak;
    use crate::schedule::{generate_plan, simulate, solve_r, Statement};
    use crate::zoo::synthetic::{self, RandomDag};
    use proptest::prelude::*;

    /// Each stage's peak as the local search's replay of the plan found
    /// it: the window from the previous frontier's computation to this
    /// one's.
    fn windows_from_plan(g: &Graph, sch: &Schedule) -> (Vec<u64>, u64, f64) {
        let plan = generate_plan(g, sch).expect("a valid schedule");
        let sim = simulate(g, &plan).expect("a valid plan");
        let mut live: Vec<Option<u64>> = Vec::new();
        let (mut bytes, mut peak, mut stage) = (0u64, 0u64, 0usize);
        let mut out = vec![0u64; g.len()];
        for st in &plan.statements {
            match st {
                Statement::Allocate {
                    register, bytes: b, ..
                } => {
                    let r = *register as usize;
                    if live.len() <= r {
                        live.resize(r + 1, None);
                    }
                    live[r] = Some(b.get());
                    bytes += b.get();
                    peak = peak.max(bytes);
                }
                Statement::Deallocate { register } => {
                    bytes -= live[*register as usize].take().unwrap();
                }
                Statement::Compute { node, .. } if node.idx() == stage => {
                    out[stage] = peak;
                    peak = bytes;
                    stage += 1;
                }
                _ => {}
            }
        }
        (out, sim.peak.get() - g.fixed_memory.get(), sim.cost)
    }

    /// A random S on `g` (each value kept over a few random runs), closed
    /// by solve_r.
    fn random_schedule(g: &Graph, seed: u64) -> Schedule {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n = g.len();
        let mut s = Schedule::checkpoint_all(g);
        for v in 0..n {
            for _ in 0..rng.random_range(0..3usize) {
                let a = rng.random_range(0..n);
                let b = rng.random_range(a..n);
                if a.max(v + 1) <= b {
                    s.set_s_range(v, a.max(v + 1)..=b, rng.random_bool(0.4));
                }
            }
        }
        solve_r(g, s)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_profile_is_the_plan_replayed(n in 2usize..50, seed in 0u64..1_000_000, forward in any::<bool>()) {
            let g = synthetic::random_layered(&RandomDag {
                nodes: n,
                seed,
                skip_prob: 0.5,
                skip_span: 4,
                forward,
                ..RandomDag::default()
            });
            prop_assume!(Profile::applies(&g, &Schedule::frontiers(&g)));
            for k in 0..4 {
                let sch = random_schedule(&g, seed * 7 + k);
                let p = Profile::of(&g, &sch);
                let (windows, peak, cost) = windows_from_plan(&g, &sch);
                let ours: Vec<u64> = (0..g.len()).map(|t| p.window(t)).collect();
                prop_assert_eq!(ours, windows);
                prop_assert_eq!(p.peak(), peak);
                prop_assert_eq!(p.total_cost(), cost);
            }
            // Checkpoint-all's peak is the published definition's.
            let all = Profile::of(&g, &solve_r(&g, Schedule::checkpoint_all(&g)));
            prop_assert_eq!(all.peak() + g.fixed_memory.get(), checkpoint_all_peak(&g).get());
        }
    }
}
