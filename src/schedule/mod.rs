//! Frontier-advancing schedules (R, S), the plans made from them, and the
//! simulator that checks any plan independently of how it was made.
//!
//! Stage `t` computes node `t` (the frontier) plus any recomputations of
//! earlier nodes; `S[t]` is what is carried into stage `t` from stage `t-1`.
//! With a slow tier, a schedule also says which values start a copy out
//! (O), which are copied back in (P), and which slow copies exist (H), per
//! stage: the tiered MILP's variables, one for one (see [`Transfers`]).

pub mod groups;
pub mod plan;
pub mod simulator;
pub mod solve_r;

use crate::graph::{Graph, NodeId};
use fixedbitset::FixedBitSet;

pub use plan::{generate_plan, Plan, PlanFile, Register, Statement};
pub use simulator::{
    simulate, simulate_on, simulate_timeline, ComputeSpan, CopySpan, Lane, MemoryPoint, SimError,
    SimReport, Timeline, Timing,
};
pub use solve_r::{solve_r, solve_r_tiered};

/// Binary matrices R (compute) and S (keep), one bit row per stage. Rows are
/// bitsets because schedules of 10^4-node graphs have 10^8 cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    r: Vec<FixedBitSet>,
    s: Vec<FixedBitSet>,
    /// `None` for recompute-only schedules, so that they cost nothing extra
    /// and generate exactly the plans they always did.
    tr: Option<Box<Transfers>>,
}

/// Transfer decisions, sparse (most values never leave the fast tier):
/// per stage, sorted node indices.
///
/// - `O[t]`: values whose copy to the slow tier starts in stage `t`. The
///   source is the fast copy held in the stage (kept, `S[t,i]`, or
///   computed, `R[t,i]`); the copy completes within the stage, and the fast
///   copy is not freed before the stage ends.
/// - `P[t]`: values copied back during stage `t` from their slow copy into
///   a newly allocated fast buffer, counted from the start of the stage;
///   like a copy out, the copy runs alongside the stage's computations and
///   completes within it, so the value is resident from stage `t+1`
///   (`S[t+1,i]`, which must be set), not readable in stage `t`.
/// - `H[t]`: values with a slow copy at the start of stage `t`. A slow copy
///   that stage `t+1` does not hold is dropped at the end of stage `t`.
///
/// Rules (checked by [`Schedule::validate`]): `H[t+1,i] ≤ H[t,i] + O[t,i]`,
/// `O[t,i] ≤ S[t,i] + R[t,i]`, `P[t,i] ≤ H[t,i]`, `P[t,i] ≤ S[t+1,i]`,
/// `S[t+1,i] ≤ S[t,i] + R[t,i] + P[t,i]`; no copy out of a value that
/// already has a slow copy, no copy in of a value already in fast memory.
/// A computation's inputs come from R or S, or, as a direct read of the
/// slow copy, from H.
///
/// Because every copy of stage `t` starts with the stage (a copy out of a
/// value computed in the stage: right after that computation) and is waited
/// for at its end, the simulated time of stage `t` is the larger of its
/// compute time and each copy engine's load, the tiered MILP's `τ_t`,
/// exactly when copies out are of kept values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transfers {
    out: Vec<Vec<u32>>,
    fetch: Vec<Vec<u32>>,
    held: Vec<Vec<u32>>,
}

fn row_has(row: &[u32], i: usize) -> bool {
    row.binary_search(&(i as u32)).is_ok()
}

fn row_set(row: &mut Vec<u32>, i: usize, v: bool) {
    match (row.binary_search(&(i as u32)), v) {
        (Err(p), true) => row.insert(p, i as u32),
        (Ok(p), false) => {
            row.remove(p);
        }
        _ => {}
    }
}

/// A schedule that breaks the rules every strategy must follow. Reaching
/// this is a strategy bug, so the message says exactly where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("schedule has {got} stages but the graph has {want} nodes")]
    Size { got: usize, want: usize },
    #[error("stage {t} does not compute its frontier node {t}")]
    NoFrontier { t: usize },
    #[error("stage {t} computes node {k} but not node {i}, another output of the same kernel (a kernel's outputs are computed together)")]
    PartialGroup { t: usize, i: usize, k: usize },
    #[error("stage {t} computes or keeps node {i}, which is not yet reachable (i must be < t for S, <= t for R)")]
    Ahead { t: usize, i: usize },
    #[error("stage {t} keeps node {i}, which was neither computed nor kept in stage {}", t - 1)]
    KeptFromNothing { t: usize, i: usize },
    #[error("stage {t} computes node {k} but its dependency {i} is neither computed, kept, nor held in the slow tier in that stage")]
    MissingDep { t: usize, i: usize, k: usize },
    #[error("stage {t} holds a slow copy of node {i}, which stage {} neither held nor copied out", t - 1)]
    HeldFromNothing { t: usize, i: usize },
    #[error("stage {t} copies node {i} out, but the stage neither keeps nor computes it")]
    OutWithoutValue { t: usize, i: usize },
    #[error("stage {t} copies node {i} out, but a slow copy of it already exists")]
    OutTwice { t: usize, i: usize },
    #[error(
        "stage {t} copies node {i} in, but no slow copy of it exists at the start of the stage"
    )]
    FetchWithoutCopy { t: usize, i: usize },
    #[error("stage {t} copies node {i} in, but the stage already keeps or computes it")]
    FetchPresent { t: usize, i: usize },
    #[error("stage {t} copies node {i} in, but stage {} does not keep it", t + 1)]
    FetchUnused { t: usize, i: usize },
}

impl Schedule {
    /// R = I, S = 0: each stage computes only its frontier. Not correct by
    /// itself for any graph with edges; a starting point for strategies.
    pub fn identity(n: usize) -> Schedule {
        let mut r = vec![FixedBitSet::with_capacity(n); n];
        for (t, row) in r.iter_mut().enumerate() {
            row.insert(t);
        }
        Schedule {
            r,
            s: vec![FixedBitSet::with_capacity(n); n],
            tr: None,
        }
    }

    /// Each stage computes its frontier only, as [`Schedule::identity`],
    /// except that a kernel with several outputs computes all of them in
    /// the stage of its last one, and the stages of the others compute
    /// nothing (see [`Graph::group`]).
    pub fn frontiers(g: &Graph) -> Schedule {
        let mut sch = Schedule::identity(g.len());
        if g.has_groups() {
            for t in g.ids() {
                let (a, b) = (g.group_start(t), g.group_end(t));
                if b != t.idx() {
                    sch.r[t.idx()].set(t.idx(), false);
                } else {
                    sch.r[t.idx()].insert_range(a..b + 1);
                }
            }
        }
        sch
    }

    /// Every value is computed once and kept while anything later reads it:
    /// the schedule frameworks run by default.
    pub fn checkpoint_all(g: &Graph) -> Schedule {
        let mut sch = Schedule::frontiers(g);
        let last = crate::graph::analysis::last_use(g);
        for i in g.ids() {
            for t in g.group_end(i) + 1..=last[i.idx()].idx() {
                sch.s[t].insert(i.idx());
            }
        }
        sch
    }

    pub fn stages(&self) -> usize {
        self.r.len()
    }

    pub fn r(&self, t: usize, i: usize) -> bool {
        self.r[t].contains(i)
    }

    pub fn s(&self, t: usize, i: usize) -> bool {
        t < self.s.len() && self.s[t].contains(i)
    }

    pub fn set_r(&mut self, t: usize, i: usize, v: bool) {
        self.r[t].set(i, v);
    }

    pub fn set_s(&mut self, t: usize, i: usize, v: bool) {
        self.s[t].set(i, v);
    }

    pub fn r_row(&self, t: usize) -> &FixedBitSet {
        &self.r[t]
    }

    pub fn s_row(&self, t: usize) -> &FixedBitSet {
        &self.s[t]
    }

    fn transfers_mut(&mut self) -> &mut Transfers {
        let n = self.r.len();
        self.tr.get_or_insert_with(|| {
            Box::new(Transfers {
                out: vec![Vec::new(); n],
                fetch: vec![Vec::new(); n],
                held: vec![Vec::new(); n],
            })
        })
    }

    /// True when any transfer decision is set: the plan needs a device.
    pub fn has_transfers(&self) -> bool {
        self.tr.as_ref().is_some_and(|tr| {
            tr.out.iter().any(|r| !r.is_empty())
                || tr.fetch.iter().any(|r| !r.is_empty())
                || tr.held.iter().any(|r| !r.is_empty())
        })
    }

    /// O[t,i]: a copy of node `i` to the slow tier starts in stage `t`.
    pub fn o(&self, t: usize, i: usize) -> bool {
        self.tr.as_ref().is_some_and(|tr| row_has(&tr.out[t], i))
    }

    /// P[t,i]: node `i` is copied back into fast memory in stage `t`.
    pub fn p(&self, t: usize, i: usize) -> bool {
        self.tr.as_ref().is_some_and(|tr| row_has(&tr.fetch[t], i))
    }

    /// H[t,i]: a slow copy of node `i` exists at the start of stage `t`.
    pub fn h(&self, t: usize, i: usize) -> bool {
        self.tr
            .as_ref()
            .is_some_and(|tr| t < tr.held.len() && row_has(&tr.held[t], i))
    }

    pub fn set_o(&mut self, t: usize, i: usize, v: bool) {
        row_set(&mut self.transfers_mut().out[t], i, v);
    }

    pub fn set_p(&mut self, t: usize, i: usize, v: bool) {
        row_set(&mut self.transfers_mut().fetch[t], i, v);
    }

    pub fn set_h(&mut self, t: usize, i: usize, v: bool) {
        row_set(&mut self.transfers_mut().held[t], i, v);
    }

    /// O, P and H of stage `t` as sorted node indices (empty without
    /// transfers).
    pub fn o_row(&self, t: usize) -> &[u32] {
        self.tr.as_ref().map_or(&[], |tr| &tr.out[t])
    }

    pub fn p_row(&self, t: usize) -> &[u32] {
        self.tr.as_ref().map_or(&[], |tr| &tr.fetch[t])
    }

    pub fn h_row(&self, t: usize) -> &[u32] {
        self.tr.as_ref().map_or(&[], |tr| &tr.held[t])
    }

    /// The common offload pattern in one call: copy `i` out during stage
    /// `out`, hold the slow copy through stage `fetch`, copy it back during
    /// stage `fetch`, and keep no fast copy in between (stages
    /// `out+1..=fetch`): the value is resident again from stage `fetch+1`.
    /// How long it stays (S after `fetch+1`) and whether the slow copy is
    /// kept for a second fetch (H after `fetch`) stay the caller's choice.
    pub fn offload(&mut self, i: usize, out: usize, fetch: usize) {
        assert!(
            out < fetch && fetch + 1 < self.stages(),
            "offload of node {i}: stages {out} and {fetch} do not leave a stage to read it in"
        );
        self.set_o(out, i, true);
        for t in out + 1..=fetch {
            self.set_h(t, i, true);
            self.set_s(t, i, false);
        }
        self.set_p(fetch, i, true);
        self.set_s(fetch + 1, i, true);
    }

    /// Nodes computed in stage `t`, in topological order.
    pub fn computed(&self, t: usize) -> impl Iterator<Item = NodeId> + '_ {
        self.r[t].ones().map(NodeId::from)
    }

    /// Nodes carried into stage `t`.
    pub fn kept(&self, t: usize) -> impl Iterator<Item = NodeId> + '_ {
        self.s[t].ones().map(NodeId::from)
    }

    /// Total compute cost implied by R. Strategies use it to compare
    /// candidates; reported figures always come from the simulator.
    pub fn cost(&self, g: &Graph) -> f64 {
        self.r
            .iter()
            .map(|row| row.ones().map(|i| g.cost(NodeId::from(i))).sum::<f64>())
            .sum()
    }

    /// Each stage's time on `device` as the tiered model counts it: the
    /// larger of the stage's compute time and each copy engine's load (both
    /// directions on a shared engine; everything in sequence on a
    /// synchronous device). Their sum is the simulated step time whenever
    /// every copy out is of a kept value and nothing is read directly from
    /// the slow tier (tested); otherwise a lower bound. For strategies to
    /// rank candidates, as [`Schedule::cost`]; reported figures always come
    /// from the simulator.
    pub fn stage_times(
        &self,
        g: &Graph,
        device: &crate::device::Device,
    ) -> Vec<crate::units::Seconds> {
        use crate::device::Engines;
        let load = |row: &[u32], to_slow: bool| {
            row.iter()
                .map(|&i| {
                    device
                        .copy_time(g.memory(NodeId::from(i as usize)), to_slow)
                        .get()
                })
                .sum::<f64>()
        };
        (0..self.stages())
            .map(|t| {
                let cost: f64 = self.computed(t).map(|k| g.cost(k)).sum();
                let compute = device.compute_time(cost).get();
                let (out, inn) = (load(self.o_row(t), true), load(self.p_row(t), false));
                crate::units::Seconds(match device.slow.engines {
                    Engines::Duplex => compute.max(out).max(inn),
                    Engines::Shared => compute.max(out + inn),
                    Engines::Synchronous => compute + out + inn,
                })
            })
            .collect()
    }

    /// How many computations beyond one per node.
    pub fn recomputations(&self) -> usize {
        self.r.iter().map(|row| row.count_ones(..)).sum::<usize>() - self.r.len()
    }

    /// Checks the frontier-advancing structure and the correctness
    /// constraints (1b) S[t+1,i] <= S[t,i] + R[t,i] + P[t,i] and
    /// (1c) R[t,k] <= R[t,i] + S[t,i] + H[t,i] for every edge (i, k), and
    /// the transfer rules of [`Transfers`]. A dependency
    /// available only as a slow copy (H) is read directly from the slow
    /// tier, which the simulator accepts only on a device that allows it.
    pub fn validate(&self, g: &Graph) -> Result<(), ScheduleError> {
        let n = g.len();
        if self.r.len() != n || self.s.len() != n {
            return Err(ScheduleError::Size {
                got: self.r.len().min(self.s.len()),
                want: n,
            });
        }
        for t in 0..n {
            // A group's frontier is its last member (the others are made
            // with it): see `Graph::group`.
            if !self.r[t].contains(t) && g.group_end(NodeId::from(t)) == t {
                return Err(ScheduleError::NoFrontier { t });
            }
            if g.has_groups() {
                for k in self.r[t].ones() {
                    let k_id = NodeId::from(k);
                    if let Some(i) = g.group(k_id).find(|&i| !self.r[t].contains(i)) {
                        return Err(ScheduleError::PartialGroup { t, i, k });
                    }
                }
            }
            if let Some(i) = self.r[t].ones().find(|&i| i > t) {
                return Err(ScheduleError::Ahead { t, i });
            }
            if let Some(i) = self.s[t].ones().find(|&i| i >= t) {
                return Err(ScheduleError::Ahead { t, i });
            }
            if t > 0 {
                for i in self.s[t].ones() {
                    if !self.s[t - 1].contains(i) && !self.r[t - 1].contains(i) && !self.p(t - 1, i)
                    {
                        return Err(ScheduleError::KeptFromNothing { t, i });
                    }
                }
            }
            for k in self.r[t].ones() {
                for &i in g.deps(NodeId::from(k)) {
                    let i = i.idx();
                    if !self.r[t].contains(i) && !self.s[t].contains(i) && !self.h(t, i) {
                        return Err(ScheduleError::MissingDep { t, i, k });
                    }
                }
            }
            self.validate_transfers(t)?;
        }
        Ok(())
    }

    fn validate_transfers(&self, t: usize) -> Result<(), ScheduleError> {
        let Some(tr) = &self.tr else { return Ok(()) };
        for &i in &tr.held[t] {
            let i = i as usize;
            if i >= t {
                return Err(ScheduleError::Ahead { t, i });
            }
            if !self.h(t - 1, i) && !self.o(t - 1, i) {
                return Err(ScheduleError::HeldFromNothing { t, i });
            }
        }
        for &i in &tr.out[t] {
            let i = i as usize;
            if !self.s[t].contains(i) && !self.r[t].contains(i) {
                return Err(ScheduleError::OutWithoutValue { t, i });
            }
            if self.h(t, i) {
                return Err(ScheduleError::OutTwice { t, i });
            }
        }
        for &i in &tr.fetch[t] {
            let i = i as usize;
            if !self.h(t, i) {
                return Err(ScheduleError::FetchWithoutCopy { t, i });
            }
            if self.s[t].contains(i) || self.r[t].contains(i) {
                return Err(ScheduleError::FetchPresent { t, i });
            }
            if !self.s(t + 1, i) {
                return Err(ScheduleError::FetchUnused { t, i });
            }
        }
        Ok(())
    }
}
