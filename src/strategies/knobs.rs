//! Heuristics with a knob (segment size, snapshot count, ...): each knob
//! setting yields one schedule, and the settings together trace the
//! heuristic's memory/compute trade-off curve. For a budget, such a
//! strategy answers with the cheapest setting whose *simulated* peak fits,
//! which is how the Checkmate paper ran its baselines.
//!
//! Points are produced lazily: a dense grid on a 1000-node graph has
//! hundreds of settings, and holding all their n×n schedules at once would
//! cost gigabytes.

use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::schedule::{generate_plan, simulate, Schedule};
use crate::units::Bytes;
use std::time::Instant;

/// One knob setting and the schedule it yields.
#[derive(Debug, Clone)]
pub struct KnobPoint {
    /// Human-readable setting, e.g. `b=4096` or `snapshots=3`.
    pub knob: String,
    /// The setting as a number, for sorting and plotting.
    pub value: f64,
    pub schedule: Schedule,
}

/// The settings of a strategy on one graph, made on demand.
pub struct Points<'a> {
    pub len: usize,
    pub iter: Box<dyn Iterator<Item = KnobPoint> + 'a>,
}

/// What the simulator measured for one knob point.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub knob: String,
    pub value: f64,
    pub cost: f64,
    pub peak: Bytes,
    pub computations: usize,
}

/// A strategy defined by its knob settings.
pub trait TradeOff: Strategy {
    /// Every knob setting worth trying on `g`, or why the heuristic does not
    /// apply to it.
    fn points<'a>(&'a self, g: &'a Graph) -> Result<Points<'a>, StrategyError>;
}

/// Runs the plan generator and the simulator on one point. A failure here
/// is a bug in the heuristic, reported with the knob that caused it.
pub fn evaluate(g: &Graph, strategy: &str, p: &KnobPoint) -> Result<Evaluated, StrategyError> {
    let bug = |msg: String| {
        StrategyError::Other(format!("internal error in {strategy} ({}): {msg}", p.knob))
    };
    let plan = generate_plan(g, &p.schedule).map_err(|e| bug(format!("invalid schedule: {e}")))?;
    let sim = simulate(g, &plan).map_err(|e| bug(format!("plan rejected: {e}")))?;
    Ok(Evaluated {
        knob: p.knob.clone(),
        value: p.value,
        cost: sim.cost,
        peak: sim.peak,
        computations: sim.computations,
    })
}

/// Evaluates every point of a trade-off strategy, calling `tick` after each
/// with (done, total).
pub fn evaluate_all(
    g: &Graph,
    strategy: &dyn TradeOff,
    tick: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Evaluated>, StrategyError> {
    let points = strategy.points(g)?;
    let total = points.len;
    let mut out = Vec::with_capacity(total);
    for p in points.iter {
        out.push(evaluate(g, strategy.name(), &p)?);
        tick(out.len(), total);
    }
    Ok(out)
}

/// `Strategy::solve` for any trade-off strategy: the cheapest setting whose
/// simulated peak fits the budget (and the cost bound, if any); ties go to
/// the smaller peak, then the earlier setting.
pub fn solve_by_points(
    strategy: &dyn TradeOff,
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Solution, StrategyError> {
    let name = strategy.name();
    let deadline = Instant::now() + opts.time_limit;
    let points = strategy.points(g)?;
    let total = points.len;
    let mut tried = 0;
    let mut least_peak: Option<Evaluated> = None;
    let mut best: Option<(Evaluated, Schedule)> = None;
    for p in points.iter {
        // A dense grid on a large graph can take minutes; past the time
        // limit the answer is the best setting so far, and says so.
        if tried > 0 && Instant::now() >= deadline {
            break;
        }
        tried += 1;
        let e = evaluate(g, name, &p)?;
        if least_peak.as_ref().is_none_or(|l| e.peak < l.peak) {
            least_peak = Some(e.clone());
        }
        let fits = e.peak <= budget && opts.cost_bound.is_none_or(|b| e.cost <= b);
        let better = best
            .as_ref()
            .is_none_or(|(b, _)| e.cost.total_cmp(&b.cost).then(e.peak.cmp(&b.peak)).is_lt());
        if fits && better {
            best = Some((e, p.schedule));
        }
    }
    let total = if tried < total {
        format!("{tried} of {total} settings, stopped at the time limit")
    } else {
        format!("{total} settings")
    };
    Ok(match best {
        Some((e, schedule)) => {
            let mut sol = Solution::feasible(
                schedule,
                Some(format!(
                    "{name} {} (best of {total}): simulated cost {}, peak {} bytes",
                    e.knob, e.cost, e.peak
                )),
            );
            sol.solver_peak = Some(e.peak.as_f64());
            sol
        }
        None => Solution::infeasible(match least_peak {
            Some(l) => format!(
                "{name} cannot fit {budget} bytes{}: the least peak among its {total} is {} bytes ({})",
                if opts.cost_bound.is_some() {
                    " within the cost bound"
                } else {
                    ""
                },
                l.peak,
                l.knob
            ),
            None => format!("{name} has no settings for this graph"),
        }),
    })
}
