//! `autotm-async`: AutoTM's asynchronous extension (Hildebrand et al.,
//! ASPLOS 2020, section 7): the synchronous ILP with moves that overlap
//! computation on the device's copy engines. A stage then lasts as long as
//! the busiest of its compute stream and copy engines
//! ([`crate::solver::autotm`] with [`Moves::Async`]), which is the
//! simulator's stage time exactly, so an optimum is optimal for the device.
//!
//! Choices: a value may leave fast memory in any of the [`WINDOW`] stages
//! after a use and come back in any of the [`WINDOW`] stages before the
//! next (AutoTM overlaps a move with kernels near the tensor's uses; the
//! window keeps the model to a few columns per use). A device without
//! copy engines (`engines: synchronous`, the CPU moves the bytes) cannot
//! overlap a move with anything (AutoTM found the extension performed
//! poorly on its CPU system for that reason): not applicable there;
//! autotm-sync is that device's formulation. The window (8) was measured
//! against 4 and 16 on the A100 (docs/tiers.md, "Limits").

use super::tiered;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::device::Engines;
use crate::graph::Graph;
use crate::solver::autotm::Moves;
use crate::units::Bytes;

pub struct AutotmAsync;

/// Stages after a use in which a value may leave, and before the next use
/// in which it may come back.
pub const WINDOW: usize = 8;

impl Strategy for AutotmAsync {
    fn name(&self) -> &'static str {
        "autotm-async"
    }

    fn describe(&self) -> &'static str {
        "AutoTM asynchronous ILP (HiGHS): moves overlap compute on the copy engines, stage time = its busiest resource (needs --device with copy engines)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        if dev.slow.engines == Engines::Synchronous {
            return Err(StrategyError::NotApplicable {
                strategy: self.name(),
                reason: format!(
                    "{} has no copy engine to overlap moves with compute (engines: synchronous); use autotm-sync",
                    dev.name
                ),
            });
        }
        let moves = Moves::Async { window: WINDOW };
        tiered::solve_autotm(g, budget, dev, opts, moves, true, self.name())
    }
}
