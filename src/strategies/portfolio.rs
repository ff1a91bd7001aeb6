//! The cheapest plan among the fast heuristics: what the exact solver
//! starts from, and what a time-limited run can always fall back on.

use super::{
    checkmate_approx::CheckmateApprox, checkpoint_all::CheckpointAll, local_search::RematFast,
};
use super::{SolveOptions, Strategy};
use crate::graph::Graph;
use crate::schedule::{generate_plan, simulate, Schedule, SimReport};
use crate::units::Bytes;

/// Runs a schedule through plan generation and the simulator. `None` if
/// the schedule is not valid (a strategy bug, never a plan to use).
pub fn evaluate(g: &Graph, sch: &Schedule) -> Option<SimReport> {
    let plan = generate_plan(g, sch).ok()?;
    simulate(g, &plan).ok()
}

/// Whether a simulated plan is acceptable at this budget and cost bound.
pub fn acceptable(sim: &SimReport, budget: Bytes, cost_bound: Option<f64>) -> bool {
    sim.peak <= budget && cost_bound.is_none_or(|b| sim.cost <= b * (1.0 + 1e-9))
}

/// The heuristics the portfolio tries, cheapest to run first.
fn heuristics() -> Vec<Box<dyn Strategy>> {
    // remat-fast runs the local search on S, DTR eviction and every
    // prior-work baseline; the LP-based rounding last: it is the slowest.
    vec![
        Box::new(CheckpointAll),
        Box::new(RematFast),
        Box::new(CheckmateApprox),
    ]
}

/// The cheapest simulator-confirmed plan that fits `budget` (and
/// `opts.cost_bound`) among the heuristics, with the heuristic's name.
/// Heuristics that fail or do not apply are skipped.
pub fn best_heuristic(g: &Graph, budget: Bytes, opts: &SolveOptions) -> Option<(String, Schedule)> {
    best_heuristic_with(g, budget, opts, 0.0, &mut |_| {})
}

/// [`best_heuristic`], calling `improved` with each new best cost as soon as
/// it is known (the exact strategies' progress trace starts there), and
/// stopping early once a plan costs at most `good_enough` (a plan already
/// provably within the requested gap need not wait for the LP rounding).
pub fn best_heuristic_with(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    good_enough: f64,
    improved: &mut dyn FnMut(f64),
) -> Option<(String, Schedule)> {
    let mut best: Option<(f64, String, Schedule)> = None;
    // Each heuristic is asked to stop within the limit, but its plan is
    // then simulated here: with a plan in hand, no further heuristic starts
    // after the limit.
    let deadline = std::time::Instant::now() + opts.time_limit;
    for h in heuristics() {
        if best.as_ref().is_some_and(|(c, _, _)| *c <= good_enough) {
            break;
        }
        if best.is_some() && std::time::Instant::now() >= deadline {
            break;
        }
        // Each gets what is left, not the whole share: the share is for
        // all of them together.
        // The seeds are recompute-only plans (evaluated without a device):
        // remat-fast given a device would spend half its time on offloads.
        let left = SolveOptions {
            time_limit: deadline
                .saturating_duration_since(std::time::Instant::now())
                .max(std::time::Duration::from_millis(100)),
            device: None,
            ..opts.clone()
        };
        let Ok(sol) = super::solve_groups(h.as_ref(), g, budget, &left) else {
            continue;
        };
        let Some(sch) = sol.schedule.filter(|_| sol.status.has_plan()) else {
            continue;
        };
        let Some(sim) = evaluate(g, &sch) else {
            continue;
        };
        if acceptable(&sim, budget, opts.cost_bound)
            && best.as_ref().is_none_or(|(c, _, _)| sim.cost < *c)
        {
            improved(sim.cost);
            best = Some((sim.cost, h.name().to_string(), sch));
        }
    }
    best.map(|(_, name, sch)| (name, sch))
}
