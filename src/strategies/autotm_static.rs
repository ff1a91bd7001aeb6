//! `autotm-static`: AutoTM's static formulation (Hildebrand et al., ASPLOS
//! 2020, section 3): each value lives in one tier for its whole life, and
//! kernels read slow-tier operands directly, only slower. An ILP on HiGHS
//! chooses the tier of every value ([`crate::solver::autotm`] with
//! [`Moves::Static`]).
//!
//! Choice where the plan format decides: a kernel writes its output to a
//! fast buffer (there are no direct writes to the slow tier), so a value
//! placed in the slow tier is copied out right after its computation,
//! within its stage, and read directly from then on. The objective
//! (compute, plus that copy and every direct read) is the simulator's
//! step time exactly, on any device. A device whose kernels cannot read
//! the slow tier (a GPU behind PCIe) has no static placement: not
//! applicable.

use super::tiered;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::solver::autotm::Moves;
use crate::units::Bytes;

pub struct AutotmStatic;

impl Strategy for AutotmStatic {
    fn name(&self) -> &'static str {
        "autotm-static"
    }

    fn describe(&self) -> &'static str {
        "AutoTM static ILP (HiGHS): every value lives in one tier, kernels read the slow tier directly (needs --device with direct_read)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        if dev.slow.direct_read.is_none() {
            return Err(StrategyError::NotApplicable {
                strategy: self.name(),
                reason: format!(
                    "kernels on {} cannot read the slow tier (direct_read: none), so a value placed there could never be used",
                    dev.name
                ),
            });
        }
        tiered::solve_autotm(g, budget, dev, opts, Moves::Static, true, self.name())
    }
}
