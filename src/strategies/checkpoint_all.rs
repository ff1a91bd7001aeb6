//! Keep every activation until its last use: the framework default, and
//! the reference point for overheads.

use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::schedule::Schedule;
use crate::units::Bytes;

pub struct CheckpointAll;

impl Strategy for CheckpointAll {
    fn name(&self) -> &'static str {
        "checkpoint-all"
    }

    fn describe(&self) -> &'static str {
        "keep every value until its last use; computes each node once"
    }

    fn handles_groups(&self) -> bool {
        true
    }

    fn solve(&self, g: &Graph, budget: Bytes, _: &SolveOptions) -> Result<Solution, StrategyError> {
        if crate::graph::analysis::checkpoint_all_peak(g) > budget {
            return Ok(Solution::no_fit(
                "checkpoint-all needs its full peak; lower budgets need recomputation",
            ));
        }
        let mut s = Solution::feasible(Schedule::checkpoint_all(g), None);
        s.lower_bound = Some(g.total_cost());
        s.status = super::Status::Optimal;
        Ok(s)
    }
}
