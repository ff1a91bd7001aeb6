//! `remat baselines`: every prior-work heuristic at every knob setting on
//! one graph, with the simulated cost and peak of each. These are the
//! points of each heuristic's memory/compute trade-off curve, the raw
//! material of the budget-sweep plots, and what the optimal plan is judged
//! against.

use crate::graph::analysis::checkpoint_all_peak;
use crate::graph::Graph;
use crate::schedule::{generate_plan, simulate, Schedule};
use crate::strategies::knobs::{
    evaluate_all_within, Evaluated, LeftOut, MAX_REPLAYED_COMPUTATIONS,
};
use crate::strategies::{baselines, StrategyError};

/// One strategy's trade-off curve on a graph, or why it does not apply.
#[derive(Debug, Clone)]
pub struct Curve {
    pub strategy: &'static str,
    pub result: Result<Vec<Point>, String>,
    /// Settings left out: past [`MAX_REPLAYED_COMPUTATIONS`], or not
    /// reached before the run was stopped.
    pub left_out: LeftOut,
    /// False when the run was stopped before this strategy began: it has
    /// no points, and how many settings it has is not known.
    pub started: bool,
}

/// One knob setting as measured by the simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub eval: Evaluated,
    /// No other setting of the same strategy is at least as good in both
    /// cost and peak and better in one.
    pub pareto: bool,
}

/// The curves of checkpoint-all and of every baseline in
/// [`crate::strategies::baselines`]. `tick(strategy, done, total)` reports
/// progress. Once `stop()` is true (a time limit, an interrupt) the
/// settings not yet evaluated are counted, not evaluated, so that what was
/// measured is still reported; a strategy not started by then is listed
/// with none. An internal failure of a heuristic (a plan the simulator
/// rejects) is an error, never a listed point.
pub fn curves(
    g: &Graph,
    stop: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(&str, usize, usize),
) -> Result<Vec<Curve>, StrategyError> {
    let mut out = vec![Curve {
        strategy: "checkpoint-all",
        result: Ok(mark_pareto(vec![checkpoint_all_point(g)?])),
        left_out: LeftOut::default(),
        started: true,
    }];
    for s in baselines() {
        let name = s.name();
        // Making a strategy's settings can take seconds on a large graph
        // (2.7 s in all on a 50,000-node chain): not once stopped.
        if stop() {
            // What does not apply is known without making its settings, and
            // is not "not evaluated" (griewank-logn on a forward-only graph).
            let reason = s.not_applicable(g);
            out.push(Curve {
                strategy: name,
                started: reason.is_some(),
                result: reason.map_or(Ok(Vec::new()), Err),
                left_out: LeftOut::default(),
            });
            continue;
        }
        let mut left_out = LeftOut::default();
        let result = match evaluate_all_within(
            g,
            s.as_ref(),
            MAX_REPLAYED_COMPUTATIONS,
            stop,
            &mut |d, t| tick(name, d, t),
        ) {
            Ok((points, left)) => {
                left_out = left;
                Ok(mark_pareto(points))
            }
            Err(StrategyError::NotApplicable { reason, .. }) => Err(reason),
            Err(e) => return Err(e),
        };
        out.push(Curve {
            strategy: name,
            result,
            left_out,
            started: true,
        });
    }
    Ok(out)
}

/// True when some setting was not reached (see [`curves`]).
pub fn stopped_early(curves: &[Curve]) -> bool {
    curves
        .iter()
        .any(|c| c.left_out.not_reached > 0 || !c.started)
}

fn checkpoint_all_point(g: &Graph) -> Result<Evaluated, StrategyError> {
    let sch = Schedule::checkpoint_all(g);
    let bug = |m: String| StrategyError::Other(format!("internal error in checkpoint-all: {m}"));
    let plan = generate_plan(g, &sch).map_err(|e| bug(e.to_string()))?;
    let sim = simulate(g, &plan).map_err(|e| bug(e.to_string()))?;
    Ok(Evaluated {
        knob: "-".into(),
        value: 0.0,
        cost: sim.cost,
        peak: sim.peak,
        computations: sim.computations,
    })
}

fn mark_pareto(points: Vec<Evaluated>) -> Vec<Point> {
    let dominated = |p: &Evaluated| {
        points
            .iter()
            .any(|q| q.cost <= p.cost && q.peak <= p.peak && (q.cost < p.cost || q.peak < p.peak))
    };
    // A setting that lands on the same point as an earlier one is not a
    // trade-off point of its own (lin-greedy listed one point five times).
    let repeats = |i: usize, p: &Evaluated| {
        points[..i]
            .iter()
            .any(|q| q.cost == p.cost && q.peak == p.peak)
    };
    // Quadratic, but curves have at most a few thousand points and this is
    // negligible next to simulating them.
    let flags: Vec<bool> = points
        .iter()
        .enumerate()
        .map(|(i, p)| !dominated(p) && !repeats(i, p))
        .collect();
    points
        .into_iter()
        .zip(flags)
        .map(|(eval, pareto)| Point { eval, pareto })
        .collect()
}

/// The CSV the sweep and the plots read: one row per knob setting, and one
/// `not-applicable` row per strategy that refuses the graph.
pub fn to_csv(g: &Graph, curves: &[Curve]) -> Result<Vec<u8>, csv::Error> {
    let base_cost = g.total_cost();
    let base_peak = checkpoint_all_peak(g).as_f64();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "model",
        "strategy",
        "status",
        "knob",
        "knob_value",
        "cost",
        "cost_ratio",
        "peak_bytes",
        "peak_ratio",
        "recomputations",
        "pareto",
        "note",
    ])?;
    for c in curves {
        let note_row = |w: &mut csv::Writer<Vec<u8>>, status: &str, note: String| {
            let mut row = vec![g.name.clone(), c.strategy.to_string(), status.into()];
            row.extend(std::iter::repeat_n(String::new(), 8));
            row.push(note);
            w.write_record(row)
        };
        match &c.result {
            Ok(points) => {
                for p in points {
                    let e = &p.eval;
                    w.write_record([
                        g.name.clone(),
                        c.strategy.to_string(),
                        "ok".into(),
                        e.knob.clone(),
                        e.value.to_string(),
                        e.cost.to_string(),
                        ratio(e.cost, base_cost),
                        e.peak.get().to_string(),
                        ratio(e.peak.as_f64(), base_peak),
                        (e.computations - g.len()).to_string(),
                        p.pareto.to_string(),
                        String::new(),
                    ])?;
                }
            }
            Err(reason) => note_row(&mut w, "not-applicable", reason.clone())?,
        }
        // Settings without a row are counted, so that a partial CSV does
        // not pass for a whole curve.
        if c.left_out.past_cap > 0 {
            note_row(
                &mut w,
                "left-out",
                format!(
                    "{} settings recompute more than {MAX_REPLAYED_COMPUTATIONS} times",
                    c.left_out.past_cap
                ),
            )?;
        }
        if !c.started {
            note_row(
                &mut w,
                "not-evaluated",
                "not evaluated: the run was stopped first".into(),
            )?;
        }
        if c.left_out.not_reached > 0 {
            note_row(
                &mut w,
                "not-evaluated",
                format!(
                    "{} settings not evaluated: the run was stopped first",
                    c.left_out.not_reached
                ),
            )?;
        }
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.6}", a / b)
    } else {
        String::new()
    }
}

/// The terminal table. With `all` false only the trade-off points (Pareto
/// optimal within each strategy) are listed; the CSV always has every one.
pub fn to_table(g: &Graph, curves: &[Curve], all: bool) -> String {
    let base_cost = g.total_cost();
    let base_peak = checkpoint_all_peak(g);
    let mut s = format!(
        "model {} ({} nodes); checkpoint-all: cost {}, peak {} ({} bytes)\n",
        g.name,
        g.len(),
        base_cost,
        base_peak.human(),
        base_peak
    );
    s.push_str(&format!(
        "{:<15} {:>9} {:>10} {:>18} {:>8} {:>7}  {}\n",
        "strategy", "cost", "overhead", "peak bytes", "peak %", "recomp", "knob"
    ));
    for c in curves {
        match &c.result {
            Err(reason) => s.push_str(&format!("{:<15} not applicable: {reason}\n", c.strategy)),
            Ok(points) => {
                let mut shown: Vec<&Point> = points.iter().filter(|p| all || p.pareto).collect();
                shown.sort_by_key(|a| a.eval.peak);
                for p in &shown {
                    let e = &p.eval;
                    s.push_str(&format!(
                        "{:<15} {:>9} {:>9.4}x {:>18} {:>7.2}% {:>7}  {}{}\n",
                        c.strategy,
                        trim(e.cost),
                        g.overhead(e.cost),
                        e.peak.get(),
                        if base_peak.get() > 0 {
                            100.0 * e.peak.as_f64() / base_peak.as_f64()
                        } else {
                            100.0
                        },
                        e.computations - g.len(),
                        e.knob,
                        if all && !p.pareto {
                            "  (dominated)"
                        } else {
                            ""
                        }
                    ));
                }
                if shown.len() < points.len() {
                    s.push_str(&format!(
                        "{:<15} ({} of {} settings shown: the rest are dominated or repeat a shown point; --all lists them)\n",
                        "",
                        shown.len(),
                        points.len()
                    ));
                }
            }
        }
        // A strategy with no point listed still names itself.
        let listed = matches!(&c.result, Ok(p) if !p.is_empty()) || c.result.is_err();
        let label = if listed { "" } else { c.strategy };
        if c.left_out.past_cap > 0 {
            s.push_str(&format!(
                "{label:<15} ({} left out: each recomputes more than {} times, past what a plan can be replayed in memory)\n",
                crate::cli::plural(c.left_out.past_cap, "setting", "settings"),
                MAX_REPLAYED_COMPUTATIONS
            ));
        }
        if !c.started {
            s.push_str(&format!(
                "{:<15} (not evaluated: the run was stopped first)\n",
                c.strategy
            ));
        }
        if c.left_out.not_reached > 0 {
            s.push_str(&format!(
                "{:<15} ({} not evaluated: the run was stopped first)\n",
                if listed || c.left_out.past_cap > 0 {
                    ""
                } else {
                    c.strategy
                },
                crate::cli::plural(c.left_out.not_reached, "setting", "settings")
            ));
        }
    }
    s
}

/// Costs print without a trailing `.0` when whole.
fn trim(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.3}")
    }
}
