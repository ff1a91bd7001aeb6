//! Frontier-advancing schedules (R, S), the plans made from them, and the
//! simulator that checks any plan independently of how it was made.
//!
//! Stage `t` computes node `t` (the frontier) plus any recomputations of
//! earlier nodes; `S[t]` is what is carried into stage `t` from stage `t-1`.

pub mod plan;
pub mod simulator;
pub mod solve_r;

use crate::graph::{Graph, NodeId};
use fixedbitset::FixedBitSet;

pub use plan::{generate_plan, Plan, PlanFile, Statement};
pub use simulator::{simulate, SimError, SimReport};
pub use solve_r::solve_r;

/// Binary matrices R (compute) and S (keep), one bit row per stage. Rows are
/// bitsets because schedules of 10^4-node graphs have 10^8 cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    r: Vec<FixedBitSet>,
    s: Vec<FixedBitSet>,
}

/// A schedule that breaks the rules every strategy must follow. Reaching
/// this is a strategy bug, so the message says exactly where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("schedule has {got} stages but the graph has {want} nodes")]
    Size { got: usize, want: usize },
    #[error("stage {t} does not compute its frontier node {t}")]
    NoFrontier { t: usize },
    #[error("stage {t} computes or keeps node {i}, which is not yet reachable (i must be < t for S, <= t for R)")]
    Ahead { t: usize, i: usize },
    #[error("stage {t} keeps node {i}, which was neither computed nor kept in stage {}", t - 1)]
    KeptFromNothing { t: usize, i: usize },
    #[error("stage {t} computes node {k} but its dependency {i} is neither computed nor kept in that stage")]
    MissingDep { t: usize, i: usize, k: usize },
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
        }
    }

    /// Every value is computed once and kept while anything later reads it:
    /// the schedule frameworks run by default.
    pub fn checkpoint_all(g: &Graph) -> Schedule {
        let mut sch = Schedule::identity(g.len());
        let last = crate::graph::analysis::last_use(g);
        for i in g.ids() {
            for t in i.idx() + 1..=last[i.idx()].idx() {
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

    /// How many computations beyond one per node.
    pub fn recomputations(&self) -> usize {
        self.r.iter().map(|row| row.count_ones(..)).sum::<usize>() - self.r.len()
    }

    /// Checks the frontier-advancing structure and the correctness
    /// constraints (1b) S[t+1,i] <= S[t,i] + R[t,i] and
    /// (1c) R[t,k] <= R[t,i] + S[t,i] for every edge (i, k).
    pub fn validate(&self, g: &Graph) -> Result<(), ScheduleError> {
        let n = g.len();
        if self.r.len() != n || self.s.len() != n {
            return Err(ScheduleError::Size {
                got: self.r.len().min(self.s.len()),
                want: n,
            });
        }
        for t in 0..n {
            if !self.r[t].contains(t) {
                return Err(ScheduleError::NoFrontier { t });
            }
            if let Some(i) = self.r[t].ones().find(|&i| i > t) {
                return Err(ScheduleError::Ahead { t, i });
            }
            if let Some(i) = self.s[t].ones().find(|&i| i >= t) {
                return Err(ScheduleError::Ahead { t, i });
            }
            if t > 0 {
                for i in self.s[t].ones() {
                    if !self.s[t - 1].contains(i) && !self.r[t - 1].contains(i) {
                        return Err(ScheduleError::KeptFromNothing { t, i });
                    }
                }
            }
            for k in self.r[t].ones() {
                for &i in g.deps(NodeId::from(k)) {
                    let i = i.idx();
                    if !self.r[t].contains(i) && !self.s[t].contains(i) {
                        return Err(ScheduleError::MissingDep { t, i, k });
                    }
                }
            }
        }
        Ok(())
    }
}
