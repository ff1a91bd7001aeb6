//! `autotm-sync`: AutoTM's synchronous formulation (Hildebrand et al.,
//! ASPLOS 2020, section 3): an ILP on HiGHS places every value in fast or
//! slow memory between its uses and moves it, right after a use or right
//! before the next, with moves that block execution. The model is
//! [`crate::solver::autotm`] with [`Moves::Sync`]; its objective (compute
//! plus every copy and direct read, end to end) is the simulator's step
//! time exactly on a device whose `engines` are `synchronous` (the CPU
//! copies, as on AutoTM's Optane system), where an optimum is reported as
//! optimal. On a GPU the same placement runs with its copies overlapped,
//! faster than the model says; it is still AutoTM-sync's answer, reported
//! as feasible.

use super::tiered;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::device::Engines;
use crate::graph::Graph;
use crate::solver::autotm::Moves;
use crate::units::Bytes;

pub struct AutotmSync;

impl Strategy for AutotmSync {
    fn name(&self) -> &'static str {
        "autotm-sync"
    }

    fn describe(&self) -> &'static str {
        "AutoTM synchronous ILP (HiGHS): place and move every value between its uses, moves blocking compute (needs --device)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        let exact = dev.slow.engines == Engines::Synchronous;
        tiered::solve_autotm(g, budget, dev, opts, Moves::Sync, exact, self.name())
    }
}
