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

/// The settings of a strategy on one graph, made on demand by index.
pub struct Points<'a> {
    pub len: usize,
    pub at: Box<dyn Fn(usize) -> KnobPoint + 'a>,
    /// The peak roughly grows and the cost falls with the index (revolve's
    /// snapshot count). A bisection then finds a good setting in a few
    /// evaluations, where a sweep of a long chain's hundreds of settings
    /// may run out of time first. Only roughly: on the Checkmate paper's
    /// VGG and SegNet graphs the uneven steps of the articulation chain
    /// make the boundary setting up to 70% dearer than the best one, so the
    /// others are still evaluated, as time allows.
    pub monotone: bool,
}

impl Points<'_> {
    /// Indices in the order to evaluate them for `fits`: for monotone
    /// settings, a bisection for the last index that fits, then the ones
    /// above it (more snapshots that may still fit), then those below it,
    /// nearest first: the fewest snapshots are the slowest to evaluate,
    /// O(n²) recomputations, seconds apiece on a 3000-node chain. Otherwise
    /// all, in order. Also returns how many of them the bisection has
    /// already evaluated.
    fn order(&self, fits: &mut dyn FnMut(usize) -> bool) -> (Vec<usize>, usize) {
        if !self.monotone || self.len == 0 {
            return ((0..self.len).collect(), 0);
        }
        let mut visited = Vec::new();
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            visited.push(mid);
            if fits(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let edge = lo.saturating_sub(1);
        let bisected = visited.len();
        let above = edge + 1..self.len;
        let below = (0..edge).rev();
        let rest: Vec<usize> = above
            .chain(below)
            .filter(|i| !visited.contains(i))
            .collect();
        visited.extend(rest);
        (visited, bisected)
    }
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

    /// Why the heuristic does not apply to `g`, where that is known without
    /// making its settings: `baselines` stopped by its time limit still
    /// says so instead of "not evaluated".
    fn not_applicable(&self, _g: &Graph) -> Option<String> {
        None
    }
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
/// `f` on the settings of `strategy` on `g`, as both `baselines` and
/// `solve` see them. On a graph with multi-output kernels the heuristic runs
/// on the graph with each kernel merged into one node (its candidates and
/// chains are about values, and a kernel's outputs are made together), and
/// every setting's schedule is lifted back to `g`, where it is simulated: a
/// setting is judged by the plan it gives. `baselines` used to run the
/// heuristics on the unmerged graph and `solve` on the merged one, judging
/// each setting by the merged graph's peak: none of a grouped graph's
/// trade-off points could be reproduced with `solve`.
fn with_points<T>(
    strategy: &dyn TradeOff,
    g: &Graph,
    f: impl FnOnce(Points<'_>) -> Result<T, StrategyError>,
) -> Result<T, StrategyError> {
    if !g.has_groups() {
        return f(strategy.points(g)?);
    }
    let merged = crate::schedule::groups::Merged::of(g);
    let inner = strategy.points(&merged.graph)?;
    let lifted = Points {
        len: inner.len,
        monotone: inner.monotone,
        at: Box::new(|i| {
            let p = (inner.at)(i);
            KnobPoint {
                schedule: merged.lift(g, &p.schedule),
                ..p
            }
        }),
    };
    f(lifted)
}

pub fn evaluate_all(
    g: &Graph,
    strategy: &dyn TradeOff,
    tick: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Evaluated>, StrategyError> {
    with_points(strategy, g, |points| {
        evaluate_points(g, strategy, &points, usize::MAX, &|| false, tick).map(|(e, _)| e)
    })
}

/// The most computations a setting may make and still be replayed: its plan
/// holds about three statements per computation. A setting with one
/// checkpoint on a 50,000-layer chain recomputes 3×10⁸ times, and its plan
/// asked for 30 GB at once (an abort, not an error).
pub const MAX_REPLAYED_COMPUTATIONS: usize = 10_000_000;

/// The settings [`evaluate_all_within`] did not evaluate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Past the cap on computations.
    pub past_cap: usize,
    /// Not reached: `stop` said so first (a time limit, an interrupt).
    pub not_reached: usize,
}

/// [`evaluate_all`], leaving out the settings past `max_computations`, and
/// the rest once `stop()` is true (checked before each setting); also says
/// how many it left out.
pub fn evaluate_all_within(
    g: &Graph,
    strategy: &dyn TradeOff,
    max_computations: usize,
    stop: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Evaluated>, LeftOut), StrategyError> {
    with_points(strategy, g, |points| {
        evaluate_points(g, strategy, &points, max_computations, stop, tick)
    })
}

fn evaluate_points(
    g: &Graph,
    strategy: &dyn TradeOff,
    points: &Points<'_>,
    max_computations: usize,
    stop: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Evaluated>, LeftOut), StrategyError> {
    let total = points.len;
    let mut out = Vec::with_capacity(total);
    let mut left = LeftOut::default();
    for i in 0..total {
        if stop() {
            left.not_reached = total - i;
            break;
        }
        let p = (points.at)(i);
        if p.schedule.recomputations().saturating_add(g.len()) > max_computations {
            left.past_cap += 1;
        } else {
            out.push(evaluate(g, strategy.name(), &p)?);
        }
        tick(out.len() + left.past_cap, total);
    }
    Ok((out, left))
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
    with_points(strategy, g, |points| {
        solve_with(strategy, g, budget, opts, points)
    })
}

fn solve_with(
    strategy: &dyn TradeOff,
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    points: Points<'_>,
) -> Result<Solution, StrategyError> {
    let name = strategy.name();
    let deadline = Instant::now() + opts.time_limit;
    let total = points.len;
    let mut tried = 0;
    let mut least_peak: Option<Evaluated> = None;
    let mut best: Option<(Evaluated, Schedule)> = None;
    let mut error: Option<StrategyError> = None;
    let mut timed_out = false;
    // The time settings take to generate and evaluate, on average (a
    // 20,001-node chain: seconds each): no setting starts unless it ends
    // within the limit, and, once a plan is in hand, the pipeline's final
    // evaluation of the answer too. Without a plan the next setting may
    // still be the first that fits, which is worth its evaluation.
    let mut spent = std::time::Duration::ZERO;
    // Evaluating a setting costs about its schedule's computations times a
    // rate learnt from the settings evaluated so far. The mean alone cannot
    // see one setting coming that is far dearer than the others: on an
    // 80,013-node chain at 50%, lin-greedy's first four settings took 0.2 s
    // each and its fifth (fewer checkpoints, quadratic recomputation) 60 s
    // and 10 GB, against a limit of 10 s.
    let (mut eval_secs, mut eval_work) = (0.0f64, 0.0f64);
    let n = g.len();
    let mut consider = |i: usize| -> bool {
        // A dense grid on a large graph can take minutes; past the time
        // limit the answer is the best setting so far, and says so.
        let mean = spent / (tried.max(1) as u32);
        let keep_back = if best.is_some() { mean * 2 } else { mean };
        if error.is_some() || (tried > 0 && Instant::now() + keep_back >= deadline) {
            timed_out |= error.is_none();
            return false;
        }
        let began = Instant::now();
        let p = (points.at)(i);
        let work = (p.schedule.recomputations() + n) as f64;
        // Past what a plan can be replayed in (MAX_REPLAYED_COMPUTATIONS):
        // steered past as if it did not fit, never evaluated.
        if work > MAX_REPLAYED_COMPUTATIONS as f64 {
            return false;
        }
        if eval_work > 0.0 {
            let predicted = std::time::Duration::from_secs_f64(work * eval_secs / eval_work);
            if Instant::now() + predicted >= deadline {
                timed_out = true;
                return false;
            }
        }
        tried += 1;
        let evaluating = Instant::now();
        let evaluated = evaluate(g, name, &p);
        eval_secs += evaluating.elapsed().as_secs_f64();
        eval_work += work;
        spent += began.elapsed();
        let e = match evaluated {
            Ok(e) => e,
            Err(err) => {
                error = Some(err);
                return false;
            }
        };
        // What the bisection steers by: the peak alone (a setting over the
        // cost bound still says the boundary is further up).
        let under = e.peak <= budget;
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
        under
    };
    let (order, bisected) = points.order(&mut consider);
    for &i in &order[bisected..] {
        consider(i);
    }
    if let Some(e) = error {
        return Err(e);
    }
    let total = if timed_out {
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
        None => Solution::no_fit(match least_peak {
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
