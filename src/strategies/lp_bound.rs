//! The LP relaxation of the Checkmate MILP: its optimum is a lower bound on
//! the cost of every plan the MILP admits at this budget, so any plan's
//! ratio to it bounds how far that plan can be from optimal.
//!
//! Caveat worth knowing: the bound is under the MILP's memory model, which
//! is slightly more conservative than the simulator's (it never frees a
//! value that nothing later in the stage reads). Sensible plans are
//! measured the same by both.

use super::checkmate_approx::lp_method;
use super::{Solution, SolveOptions, Status, Strategy, StrategyError};
use crate::graph::Graph;
use crate::solver::checkmate::{Formulation, FreeModel};
use crate::solver::fixing::DualBound;
use crate::solver::highs::LpSession;
use crate::solver::{LpStatus, Params};
use crate::units::Bytes;

/// The LP lower bound at `budget`, in cost units; `None` if even the LP is
/// infeasible (then no plan fits) or it stopped at its limit without a
/// bound. Always solved by HiGHS.
pub fn lp_lower_bound(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Option<f64>, StrategyError> {
    match lp_outcome(g, budget, opts)? {
        LpOutcome::Bound(b) => Ok(Some(b)),
        // Stopped by its limit: no bound, and no failure either.
        LpOutcome::Infeasible | LpOutcome::Stopped(_) => Ok(None),
    }
}

/// What the LP relaxation gave. `Stopped`: the time limit came before a
/// bound (not a failure of the solver: the lp-bound strategy answers
/// no-solution then, as a search that found nothing in its time does).
enum LpOutcome {
    Bound(f64),
    Infeasible,
    Stopped(String),
}

fn lp_outcome(g: &Graph, budget: Bytes, opts: &SolveOptions) -> Result<LpOutcome, StrategyError> {
    if budget < g.fixed_memory {
        return Ok(LpOutcome::Infeasible);
    }
    super::model_fits(g, "lp-bound")?;
    // Building the model and the LP's presolve do not look at the clock:
    // the LP runs where it can be abandoned (see `super::abandonable`).
    let start = std::time::Instant::now();
    let stop: crate::solver::StopFlag = Default::default();
    let worker = {
        let g = std::sync::Arc::new(g.clone());
        let opts = SolveOptions {
            stop: Some(stop.clone()),
            ..opts.clone()
        };
        move || lp_bound_of(&g, budget, &opts, start)
    };
    let deadline = start + opts.time_limit + std::time::Duration::from_millis(100);
    super::abandonable(deadline, &stop, opts.stop.as_ref(), worker).unwrap_or_else(|| {
        Ok(LpOutcome::Stopped(format!(
            "the LP relaxation did not stop at the time limit and was abandoned after {:.1} s",
            start.elapsed().as_secs_f64()
        )))
    })
}

fn lp_bound_of(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    start: std::time::Instant,
) -> Result<LpOutcome, StrategyError> {
    // The tight FREE model's relaxation: same MILP, a higher bound.
    let f = Formulation::build_as(g, budget, false, None, FreeModel::Tight);
    let params = Params {
        time_limit: opts.time_limit.saturating_sub(start.elapsed()),
        threads: opts.threads,
        stop: opts.stop.clone(),
        ..Params::default()
    };
    let err = |e: crate::solver::SolverError| StrategyError::Solver(e.to_string());
    let mut lp = LpSession::new(&f.model, &params, lp_method(&f)).map_err(err)?;
    let r = lp.solve().map_err(err)?;
    // The bound is recomputed from the duals (valid for any multipliers),
    // so it holds whatever the solver's tolerances, and a stopped LP still
    // gives one if its duals are there.
    match r.status {
        LpStatus::Optimal => {
            let lagrange = DualBound::from_duals(&f.model, &r.row_dual).bound;
            Ok(LpOutcome::Bound(lagrange.min(r.objective) * f.cost_scale))
        }
        LpStatus::Infeasible => Ok(LpOutcome::Infeasible),
        LpStatus::Stopped if !r.row_dual.is_empty() => Ok(LpOutcome::Bound(
            DualBound::from_duals(&f.model, &r.row_dual).bound * f.cost_scale,
        )),
        LpStatus::Stopped => Ok(LpOutcome::Stopped(format!(
            "the LP relaxation stopped after {:.1} s without an optimum or duals (time limit?)",
            r.seconds
        ))),
    }
}

pub struct LpBound;

impl Strategy for LpBound {
    fn name(&self) -> &'static str {
        "lp-bound"
    }

    fn makes_plans(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "lower bound only: the LP relaxation of the Checkmate MILP (no plan)"
    }

    /// The formulation models groups exactly, so its bound holds for them.
    fn handles_groups(&self) -> bool {
        true
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        Ok(match lp_outcome(g, budget, opts)? {
            LpOutcome::Stopped(why) => Solution {
                status: Status::NoSolution,
                detail: Some(why),
                ..Solution::infeasible("")
            },
            LpOutcome::Bound(lb) => Solution {
                status: Status::Bound,
                schedule: None,
                lower_bound: Some(lb),
                detail: Some("LP relaxation of the Checkmate MILP (HiGHS)".into()),
                solver_peak: None,
                trace: Vec::new(),
                step_bound: None,
            },
            LpOutcome::Infeasible => {
                Solution::infeasible("the LP relaxation is infeasible: no plan fits")
            }
        })
    }
}
