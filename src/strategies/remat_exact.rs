//! `remat-exact`: the Checkmate MILP made small by reduced-cost fixing, with
//! the same optimum.
//!
//! The model is the tight FREE variant ([`FreeModel::Tight`]): the same
//! optimum as eq. 9 with no FREE binaries and a higher LP bound.
//!
//! The LP relaxation of the Checkmate MILP is tight, but branch-and-bound on
//! the full model spends its time on O(n²) binaries that the LP already
//! prices out. So:
//!
//! 1. solve the LP relaxation and take its row duals: a Lagrangian bound L
//!    and, per binary, the cost of flipping it ([`fixing`]);
//! 2. find a good plan quickly: the LP's S rounded and repaired by local
//!    search, then MILPs restricted to the binaries whose flip costs at most
//!    a small, growing radius (a heuristic neighbourhood of the LP optimum
//!    that always contains the incumbent, time-limited);
//! 3. with the best plan's cost U, fix every binary whose flip costs more
//!    than U − L. No plan cheaper than U is lost, so the fixed MILP's
//!    optimum is the full MILP's optimum, and its bound stays valid;
//! 4. solve the fixed MILP, warm-started, through the shared pipeline.
//!
//! The closer U is to L, the more is fixed; on the public graphs almost all
//! of R and most of FREE go, which is what turns minutes into seconds.

use super::checkmate_approx::{lp_method, two_phase_round};
use super::checkmate_ilp::{solve_milp, Prepared, Seed, Shared};
use super::local_search;
use super::portfolio::evaluate;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::schedule::Schedule;
use crate::solver::checkmate::{drop_spurious, Formulation, FreeModel};
use crate::solver::fixing::{self, DualBound};
use crate::solver::highs::LpSession;
use crate::solver::{solve_mip, LpStatus, Model, Params};
use crate::units::Bytes;
use std::time::{Duration, Instant};

pub struct RematExact;

/// Share of the remaining time the restricted (heuristic) MILP may use.
const RESTRICTED_TIME_SHARE: f64 = 0.3;

/// The restricted MILP keeps binaries whose flip costs at most this share of
/// the gap between the seed and the Lagrangian bound.
const RESTRICTED_GAP_SHARE: f64 = 0.1;

/// ... but at most this share of the bound itself at first (0.1%), growing
/// by `RESTRICTED_GROWTH` per round while no round finds a better plan.
const RESTRICTED_BOUND_SHARE: f64 = 1e-3;
const RESTRICTED_GROWTH: f64 = 4.0;
const RESTRICTED_ROUNDS: usize = 4;

/// Step 2 runs only when the incumbent is further than this from the bound
/// (relative). Closer than that, the seed is usually optimal already (on
/// random-layered-n100 remat-fast's seed is, at 1.2% over the LP) and the
/// rounds only delay the proof: measured 44 s → 29 s at 90%, 123 s → 78 s
/// at 80%.
const RESTRICTED_MIN_GAP: f64 = 0.02;

/// Rounding thresholds for the LP-guided repair, and its share of the time.
const REPAIR_THRESHOLDS: [f64; 4] = [0.3, 0.5, 0.7, 0.9];
const REPAIR_TIME_SHARE: f64 = 0.1;
/// The repair's share when no plan is in hand: then it is the only source
/// of one before the MILP, which at tight budgets on random DAGs rarely
/// finds its own (random-layered-n100 at 60%: none in 30 s of HiGHS).
/// With a tenth of a 60 s limit the repair found none there; with half,
/// it finds one in ~20 s.
const REPAIR_TIME_SHARE_NO_PLAN: f64 = 0.5;

/// Relative slack on the bound when fixing, for floating-point error in the
/// duals and the summation.
const FIX_TOL: f64 = 1e-7;

impl Strategy for RematExact {
    fn name(&self) -> &'static str {
        "remat-exact"
    }

    fn may_reorder(&self) -> bool {
        true
    }

    fn describe(&self) -> &'static str {
        "optimal: the Checkmate MILP with tight FREE bounds, shrunk by LP reduced-cost fixing, seeded by repaired LP rounding (same optimum)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        solve_milp(g, budget, opts, FreeModel::Tight, Some(prepare))
            .map(|s| super::checkmate_ilp::kernel_stage_scope(g, budget, opts, s))
    }

    fn handles_groups(&self) -> bool {
        true
    }
}

fn solver_err(e: crate::solver::SolverError) -> StrategyError {
    StrategyError::Solver(e.to_string())
}

/// The seed as a model vector, if the MILP's own memory model admits it.
fn feasible_vector(g: &Graph, f: &Formulation, seed: &Seed) -> Option<Vec<f64>> {
    let (x, _) = f.vector_for(g, &seed.schedule);
    (f.model.max_violation(&x) <= 1e-7).then_some(x)
}

/// A schedule as a seed, if the simulator finds it within the budget (with
/// the checkpoints the MILP would pay for but no plan needs removed).
fn fitting_seed(g: &Graph, mut sch: Schedule, budget: Bytes, name: String) -> Option<Seed> {
    drop_spurious(g, &mut sch);
    let sim = evaluate(g, &sch)?;
    (sim.peak <= budget).then_some(Seed {
        name,
        schedule: sch,
        cost: sim.cost,
    })
}

/// Makes `cand` the seed if it is cheaper than the current one, and the
/// incumbent vector too if the MILP admits it (its own vector, else the
/// solver's `solver_x`) and it beats the incumbent. Returns whether the seed
/// changed.
fn adopt(
    g: &Graph,
    f: &Formulation,
    seed: &mut Option<Seed>,
    best: &mut Option<(f64, Vec<f64>)>,
    cand: Seed,
    solver_x: Option<Vec<f64>>,
) -> bool {
    if seed.as_ref().is_some_and(|s| cand.cost >= s.cost) {
        return false;
    }
    if let Some(v) = feasible_vector(g, f, &cand)
        .or(solver_x)
        .filter(|v| f.model.max_violation(v) <= 1e-7)
    {
        let obj = f.model.objective(&v);
        if best.as_ref().is_none_or(|(b, _)| obj < *b) {
            *best = Some((obj, v));
        }
    }
    *seed = Some(cand);
    true
}

fn prepare(
    g: &Graph,
    budget: Bytes,
    f: &mut Formulation,
    seed: &mut Option<Seed>,
    left: Duration,
    opts: &SolveOptions,
    shared: &Shared,
) -> Result<Prepared, StrategyError> {
    let start = Instant::now();
    let stopped = || super::stop_requested(opts);
    let params = Params {
        time_limit: left,
        threads: opts.threads,
        gap: opts.gap,
        stop: opts.stop.clone(),
        ..Params::default()
    };
    shared.enter("LP relaxation");
    let mut lp = LpSession::new(&f.model, &params, lp_method(f)).map_err(solver_err)?;
    let lp_res = lp.solve().map_err(solver_err)?;
    drop(lp);
    if stopped() {
        return Ok(Prepared::default());
    }
    match lp_res.status {
        LpStatus::Optimal => {}
        // Stopped with duals: a weaker bound, but still exact to fix by.
        LpStatus::Stopped if !lp_res.row_dual.is_empty() => {}
        // The MILP itself will say infeasible (or run out of time); there
        // is nothing to fix.
        LpStatus::Infeasible | LpStatus::Stopped => return Ok(Prepared::default()),
    }
    let db = DualBound::from_duals(&f.model, &lp_res.row_dual);
    let lb = db.bound;
    let mut note = format!(
        "; LP bound {:.6e} in {:.2} s",
        lb * f.cost_scale,
        lp_res.seconds
    );

    // The incumbent, in model units, and its vector.
    let mut best: Option<(f64, Vec<f64>)> = seed.as_ref().and_then(|s| {
        let x = feasible_vector(g, f, s)?;
        Some((f.model.objective(&x), x))
    });

    // Step 1b: the LP's S rounded at a few thresholds and repaired by local
    // search into plans that fit: on random DAGs at tight budgets this
    // beats every heuristic seed by far, and a good incumbent is what makes
    // the fixing below bite.
    let has_x = lp_res.status == LpStatus::Optimal && lp_res.x.len() == f.model.num_cols();
    let sf = if has_x {
        f.fractional_s(&lp_res.x)
    } else {
        Vec::new()
    };
    shared.enter("LP rounding repair");
    let share = if seed.is_some() {
        REPAIR_TIME_SHARE
    } else {
        REPAIR_TIME_SHARE_NO_PLAN
    };
    let repair_deadline = Instant::now() + left.mul_f64(share);
    let mut repaired: Option<Seed> = None;
    for th in REPAIR_THRESHOLDS
        .into_iter()
        .filter(|_| has_x && !stopped())
    {
        let rounded = two_phase_round(g, |t, i| sf[t][i] >= th);
        let name = format!("LP rounding at {th} repaired by local search");
        // Both rankings: the forecast is faster, but at tight budgets on
        // random DAGs only the cost-per-byte ranking repairs some roundings.
        let repaired_sch = [
            local_search::Ranking::Forecast,
            local_search::Ranking::CostPerByte,
        ]
        .into_iter()
        .find_map(|r| local_search::search_from(g, rounded.clone(), budget, r, repair_deadline))
        .or_else(|| {
            local_search::search_descending_from(
                g,
                rounded.clone(),
                budget,
                local_search::Ranking::Forecast,
                repair_deadline,
            )
        });
        if let Some(c) = repaired_sch.and_then(|sch| fitting_seed(g, sch, budget, name)) {
            if repaired.as_ref().is_none_or(|r| c.cost < r.cost) {
                shared.offer(&c);
                repaired = Some(c);
            }
        }
    }
    if let Some(r) = repaired {
        note.push_str(&format!("; {} (cost {})", r.name, r.cost));
        adopt(g, f, seed, &mut best, r, None);
    }

    // Step 2: restricted MILPs around the LP optimum, from a small
    // neighbourhood outwards until one yields a plan. The first radius is
    // capped relative to the bound, not only to the seed's gap: a poor seed
    // (random DAGs at tight budgets) would otherwise leave the whole model
    // free and the "restricted" MILP as hard as the full one.
    let room = best.as_ref().map_or(lb.abs() * 0.01, |(ub, _)| ub - lb);
    let step2_end = start
        + left
            .saturating_sub(start.elapsed())
            .mul_f64(RESTRICTED_TIME_SHARE);
    let mut keep = (room * RESTRICTED_GAP_SHARE).min(lb.abs() * RESTRICTED_BOUND_SHARE);
    let rounds = if best.is_none() || room > RESTRICTED_MIN_GAP * lb.abs() {
        RESTRICTED_ROUNDS
    } else {
        0
    };
    if rounds > 0 {
        shared.enter("restricted MILP");
    }
    for _ in 0..rounds {
        if room <= FIX_TOL * lb.abs().max(1.0) || keep >= room || stopped() {
            break;
        }
        let left2 = step2_end.saturating_duration_since(Instant::now());
        if left2.is_zero() {
            break;
        }
        let mut restricted: Model = f.model.clone();
        // The neighbourhood always contains the incumbent, so the
        // restricted MILP starts from it and can only improve on it.
        let fixes: Vec<(usize, f64)> = db
            .fixable(&restricted, lb + keep, 0.0)
            .into_iter()
            .filter(|&(j, v)| best.as_ref().is_none_or(|(_, x)| (x[j] - v).abs() < 0.5))
            .collect();
        fixing::apply(&mut restricted, &fixes);
        let warm = best
            .as_ref()
            .map(|(_, x)| x.clone())
            .filter(|x| restricted.max_violation(x) <= 1e-7);
        // Half of what is left for this round, so a later, wider round
        // still has time.
        let rparams = Params {
            time_limit: left2.mul_f64(0.5).max(Duration::from_millis(100)),
            ..params.clone()
        };
        let r =
            solve_mip(&restricted, opts.backend, &rparams, warm.as_deref()).map_err(solver_err)?;
        note.push_str(&format!(
            "; restricted MILP ({} binaries fixed) in {:.2} s",
            fixes.len(),
            r.seconds
        ));
        let found = r.x.is_some_and(|x| {
            fitting_seed(g, f.schedule(&x), budget, "restricted MILP".into()).is_some_and(|c| {
                shared.offer(&c);
                adopt(g, f, seed, &mut best, c, Some(x))
            })
        });
        if found {
            break;
        }
        keep *= RESTRICTED_GROWTH;
    }

    // Step 3: exact fixing against the incumbent.
    shared.enter("fixing");
    let mut warm = None;
    if let Some((ub, x)) = best {
        let fixes = db.fixable(&f.model, ub, FIX_TOL * ub.abs().max(1.0));
        let binaries = f.num_binaries();
        fixing::apply(&mut f.model, &fixes);
        note.push_str(&format!(
            "; fixed {} of {} binaries by reduced cost",
            fixes.len(),
            binaries
        ));
        warm = Some(x);
    }
    Ok(Prepared {
        note,
        bound: Some(lb * f.cost_scale),
        warm,
    })
}
