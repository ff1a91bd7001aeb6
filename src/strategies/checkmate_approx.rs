//! Checkmate's two-phase LP rounding (Algorithm 2): solve the LP relaxation
//! at a slightly reduced budget, round S, and repair R so the schedule is
//! correct. Rounding can overshoot memory, so a grid of budget reductions ε
//! and rounding thresholds is searched and the cheapest plan that the
//! simulator confirms fits is kept (§5.3, Appendix D).

use super::portfolio::{acceptable, evaluate};
use super::{Solution, SolveOptions, Status, Strategy, StrategyError};
use crate::graph::{Graph, NodeId};
use crate::schedule::Schedule;
use crate::solver::checkmate::{drop_spurious, Formulation};
use crate::solver::highs::{LpMethod, LpSession};
use crate::solver::{LpStatus, Params};
use crate::units::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

/// Budget reductions tried: 0, 0.05, …, 0.5.
pub fn epsilons() -> impl Iterator<Item = f64> {
    (0..=10).map(|i| i as f64 * 0.05)
}

/// Deterministic rounding thresholds: 0.1, 0.2, …, 0.9.
pub fn thresholds() -> impl Iterator<Item = f64> {
    (1..=9).map(|i| i as f64 * 0.1)
}

/// How S* is rounded.
#[derive(Debug, Clone, Copy)]
pub enum Rounding {
    /// S = 1 where S* ≥ threshold, for every threshold of the grid.
    Threshold,
    /// S = 1 with probability S*, `samples` draws per ε from a ChaCha8
    /// stream seeded with `seed`.
    Randomized { seed: u64, samples: usize },
}

/// Phase two of Algorithm 2: with S fixed, start from R = I and add exactly
/// the computations correctness forces. Per stage, first (1b): a value kept
/// into stage t+1 but not into t must be computed in t; then (1c), scanning
/// the stage in reverse topological order so that a dependency added for a
/// later node is itself repaired. The paper alternates the two repairs until
/// nothing changes; since S never changes, this single pass reaches the same
/// fixed point. With multi-output kernels this is [`solve_r`]'s closure,
/// which computes a member's whole kernel.
pub fn two_phase_round(g: &Graph, keep: impl Fn(usize, usize) -> bool) -> Schedule {
    let n = g.len();
    let mut sch = Schedule::identity(n);
    for t in 1..n {
        for i in 0..t {
            if keep(t, i) {
                sch.set_s(t, i, true);
            }
        }
    }
    if g.has_groups() {
        return crate::schedule::solve_r(g, sch);
    }
    for t in 0..n {
        if t + 1 < n {
            let next: Vec<usize> = sch.kept(t + 1).map(|i| i.idx()).collect();
            for i in next {
                if i < t && !sch.s(t, i) {
                    sch.set_r(t, i, true);
                }
            }
        }
        for k in (0..=t).rev() {
            if !sch.r(t, k) {
                continue;
            }
            for &d in g.deps(NodeId::from(k)) {
                let d = d.idx();
                if !sch.r(t, d) && !sch.s(t, d) {
                    sch.set_r(t, d, true);
                }
            }
        }
    }
    sch
}

fn params(opts: &SolveOptions, time: Duration) -> Params {
    Params {
        time_limit: time,
        gap: opts.gap,
        threads: opts.threads,
        stop: opts.stop.clone(),
        ..Params::default()
    }
}

/// LP method by size: dual simplex re-solves the ε sequence from the last
/// basis, and is the faster first solve too up to [`LP_SIMPLEX_COLUMNS`];
/// larger models start with interior point (crossover on: we need a vertex
/// for the warm basis and an exact objective for the bound).
pub fn lp_method(f: &Formulation) -> LpMethod {
    if f.model.num_cols() > LP_SIMPLEX_COLUMNS {
        LpMethod::Ipm
    } else {
        LpMethod::Choose
    }
}

/// Up to this many columns, HiGHS's simplex solves the Checkmate LP
/// faster than its interior point method (measured at 70%: random-layered
/// n250, 192k columns, 67 s against 269 s; ResNet-18 imported with groups,
/// 80k columns, 11 s against 33 s; FCN8, 12k, 0.4 s against 2.0 s).
/// Above it (ResNet-50, 287k) neither finished in 300 s.
const LP_SIMPLEX_COLUMNS: usize = 250_000;

/// The best plan of the search so far: (cost, schedule, how).
type Best = std::sync::Arc<std::sync::Mutex<Option<(f64, Schedule, String)>>>;

/// Slack past the time limit before a search that has not stopped (model
/// build, LP presolve) is abandoned.
const ABANDON_SLACK: Duration = Duration::from_millis(100);

/// The search of Algorithm 2 over ε and the rounding; see the module doc.
/// It runs where it can be abandoned (see [`super::abandonable`]): building
/// the model and the LP's presolve do not look at the clock, and take
/// minutes on the largest models that fit.
pub fn approx(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    rounding: Rounding,
) -> Result<Solution, StrategyError> {
    let start = Instant::now();
    if budget < g.fixed_memory {
        return Ok(Solution::infeasible("the budget is below the fixed memory"));
    }
    super::model_fits(
        g,
        match rounding {
            Rounding::Threshold => "checkmate-approx",
            Rounding::Randomized { .. } => "checkmate-approx-randomized",
        },
    )?;
    let stop: crate::solver::StopFlag = Default::default();
    let best: Best = Default::default();
    let worker = {
        let (g, best) = (std::sync::Arc::new(g.clone()), best.clone());
        let opts = SolveOptions {
            stop: Some(stop.clone()),
            ..opts.clone()
        };
        move || search(&g, budget, &opts, rounding, start, &best)
    };
    let deadline = start + opts.time_limit + ABANDON_SLACK;
    if let Some(r) = super::abandonable(deadline, &stop, opts.stop.as_ref(), worker) {
        return r;
    }
    let note = format!(
        "the model build or the LP did not stop at the time limit and was abandoned after {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let best = best.lock().ok().and_then(|mut b| b.take());
    Ok(match best {
        Some((_, sch, how)) => Solution::feasible(sch, Some(format!("{how}; {note}"))),
        None => Solution {
            status: Status::NoSolution,
            ..Solution::infeasible(note)
        },
    })
}

fn search(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    rounding: Rounding,
    start: Instant,
    shared: &Best,
) -> Result<Solution, StrategyError> {
    let f = Formulation::build(g, budget, false, None);
    let solver_err = |e: crate::solver::SolverError| StrategyError::Solver(e.to_string());
    if super::stop_requested(opts) {
        return Err(StrategyError::Other("abandoned".into()));
    }
    let left = opts.time_limit.saturating_sub(start.elapsed());
    let mut lp =
        LpSession::new(&f.model, &params(opts, left), lp_method(&f)).map_err(solver_err)?;
    let u = f.u_cols();
    let lower = vec![0.0; u.len()];
    let mut lb: Option<f64> = None;
    let mut best: Option<(f64, Schedule, String)> = None;
    let mut lp_seconds = 0.0;
    // The time limit cut the ε search short: no plan then means time ran
    // out, not that none fits.
    let mut stopped = false;
    for (ei, eps) in epsilons().enumerate() {
        let left = opts.time_limit.saturating_sub(start.elapsed());
        if left.is_zero() || super::stop_requested(opts) {
            stopped = true;
            break;
        }
        let b = Bytes((budget.as_f64() * (1.0 - eps)).floor() as u64);
        if b < g.fixed_memory {
            break;
        }
        lp.set_time_limit(left.as_secs_f64());
        lp.change_col_bounds(u.start, &lower, &vec![f.u_cap(b); u.len()]);
        let r = lp.solve().map_err(solver_err)?;
        lp_seconds += r.seconds;
        if ei == 0 {
            // Later solves start from this basis: dual simplex is the
            // fastest way back to optimality after a bound change.
            lp.set_method(LpMethod::Simplex);
        }
        match r.status {
            LpStatus::Infeasible if ei == 0 => {
                return Ok(Solution::infeasible(
                    "the LP relaxation is infeasible: no plan fits this budget",
                ))
            }
            // Smaller budgets are infeasible too.
            LpStatus::Infeasible => break,
            LpStatus::Stopped => {
                stopped = true;
                break;
            }
            LpStatus::Optimal => {}
        }
        if ei == 0 {
            lb = Some(r.objective * f.cost_scale);
        }
        let sf = f.fractional_s(&r.x);
        let mut consider = |sch: Schedule, how: String| {
            let mut sch = sch;
            drop_spurious(g, &mut sch);
            if let Some(sim) = evaluate(g, &sch) {
                if acceptable(&sim, budget, opts.cost_bound)
                    && best.as_ref().is_none_or(|(c, _, _)| sim.cost < *c)
                {
                    if let Ok(mut s) = shared.lock() {
                        *s = Some((sim.cost, sch.clone(), how.clone()));
                    }
                    best = Some((sim.cost, sch, how));
                }
            }
        };
        match rounding {
            Rounding::Threshold => {
                for th in thresholds() {
                    let sch = two_phase_round(g, |t, i| sf[t][i] >= th - 1e-9);
                    consider(sch, format!("ε = {eps:.2}, threshold {th:.1}"));
                }
            }
            Rounding::Randomized { seed, samples } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((ei as u64) << 32));
                for k in 0..samples {
                    let draws: Vec<Vec<bool>> = sf
                        .iter()
                        .map(|row| row.iter().map(|&p| rng.random_bool(p)).collect())
                        .collect();
                    let sch = two_phase_round(g, |t, i| draws[t][i]);
                    consider(sch, format!("ε = {eps:.2}, sample {k} (seed {seed})"));
                }
            }
        }
    }
    let Some((cost, sch, how)) = best else {
        let (status, why) = if stopped {
            (
                Status::NoSolution,
                "the time limit stopped the LP before any rounding fitted",
            )
        } else {
            (Status::NoFit, "no rounding fitted the budget")
        };
        return Ok(Solution {
            status,
            lower_bound: lb,
            ..Solution::infeasible(format!("{why} (LP time {lp_seconds:.2} s)"))
        });
    };
    let mut sol = Solution::feasible(sch, Some(format!("{how}; LP time {lp_seconds:.2} s")));
    // The LP bound is a bound under the MILP's (conservative) memory model;
    // keep it only where it is consistent with the simulated plan.
    sol.lower_bound = lb.filter(|&b| b <= cost);
    if let Some(b) = sol.lower_bound {
        if cost - b <= opts.gap * cost {
            sol.status = Status::Optimal;
        }
    }
    Ok(sol)
}

/// Deterministic two-phase rounding over the (ε, threshold) grid.
pub struct CheckmateApprox;

impl Strategy for CheckmateApprox {
    fn name(&self) -> &'static str {
        "checkmate-approx"
    }

    fn describe(&self) -> &'static str {
        "LP relaxation + two-phase rounding (Checkmate Alg. 2), best of an ε × threshold grid"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        approx(g, budget, opts, Rounding::Threshold)
    }
}

/// Randomized rounding of S* (for comparison with the deterministic grid).
pub struct CheckmateApproxRandomized;

/// Draws per ε for the randomized variant: as many plans as the threshold
/// grid evaluates, so the two compare at equal effort.
pub const RANDOM_SAMPLES: usize = 9;

impl Strategy for CheckmateApproxRandomized {
    fn name(&self) -> &'static str {
        "checkmate-approx-randomized"
    }

    fn describe(&self) -> &'static str {
        "LP relaxation + randomized rounding of S (seeded), best over the ε grid"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        approx(
            g,
            budget,
            opts,
            Rounding::Randomized {
                seed: 0,
                samples: RANDOM_SAMPLES,
            },
        )
    }
}
