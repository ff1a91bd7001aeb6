//! `remat-exact`: the Checkmate MILP made small by reduced-cost fixing, with
//! the same optimum.
//!
//! The LP relaxation of the Checkmate MILP is tight, but branch-and-bound on
//! the full model spends its time on O(n²) binaries that the LP already
//! prices out. So:
//!
//! 1. solve the LP relaxation and take its row duals: a Lagrangian bound L
//!    and, per binary, the cost of flipping it ([`fixing`]);
//! 2. find a good plan quickly: the MILP restricted to the binaries whose
//!    flip costs at most a fraction of the seed's gap to L (a heuristic
//!    neighbourhood of the LP optimum, time-limited);
//! 3. with the best plan's cost U, fix every binary whose flip costs more
//!    than U − L. No plan cheaper than U is lost, so the fixed MILP's
//!    optimum is the full MILP's optimum, and its bound stays valid;
//! 4. solve the fixed MILP, warm-started, through the shared pipeline.
//!
//! The closer U is to L, the more is fixed; on the public graphs almost all
//! of R and most of FREE go, which is what turns minutes into seconds.

use super::checkmate_approx::lp_method;
use super::checkmate_ilp::{solve_milp, Prepared, Seed};
use super::portfolio::evaluate;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::solver::checkmate::{drop_spurious, Formulation};
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

/// Relative slack on the bound when fixing, for floating-point error in the
/// duals and the summation.
const FIX_TOL: f64 = 1e-7;

impl Strategy for RematExact {
    fn name(&self) -> &'static str {
        "remat-exact"
    }

    fn describe(&self) -> &'static str {
        "optimal: the Checkmate MILP shrunk by LP reduced-cost fixing (same optimum, much faster)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let mut prep =
            |g: &Graph,
             budget: Bytes,
             f: &mut Formulation,
             seed: &mut Option<Seed>,
             left: Duration| { prepare(g, budget, f, seed, left, opts) };
        solve_milp(g, budget, opts, Some(&mut prep))
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

fn prepare(
    g: &Graph,
    budget: Bytes,
    f: &mut Formulation,
    seed: &mut Option<Seed>,
    left: Duration,
    opts: &SolveOptions,
) -> Result<Prepared, StrategyError> {
    let start = Instant::now();
    let params = Params {
        time_limit: left,
        threads: opts.threads,
        gap: opts.gap,
        ..Params::default()
    };
    let mut lp = LpSession::new(&f.model, &params, lp_method(f)).map_err(solver_err)?;
    let lp_res = lp.solve().map_err(solver_err)?;
    drop(lp);
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

    // Step 2: a restricted MILP around the LP optimum.
    let room = best.as_ref().map_or(lb.abs() * 0.01, |(ub, _)| ub - lb);
    if room > FIX_TOL * lb.abs().max(1.0) {
        let mut restricted: Model = f.model.clone();
        let keep = room * RESTRICTED_GAP_SHARE;
        let fixes = db.fixable(&restricted, lb + keep, 0.0);
        fixing::apply(&mut restricted, &fixes);
        let warm = best
            .as_ref()
            .map(|(_, x)| x.clone())
            .filter(|x| restricted.max_violation(x) <= 1e-7);
        let rparams = Params {
            time_limit: left
                .saturating_sub(start.elapsed())
                .mul_f64(RESTRICTED_TIME_SHARE),
            ..params.clone()
        };
        let r =
            solve_mip(&restricted, opts.backend, &rparams, warm.as_deref()).map_err(solver_err)?;
        note.push_str(&format!(
            "; restricted MILP ({} binaries fixed) in {:.2} s",
            fixes.len(),
            r.seconds
        ));
        if let Some(x) = r.x {
            let mut sch = f.schedule(&x);
            drop_spurious(g, &mut sch);
            if let Some(sim) = evaluate(g, &sch) {
                let better = seed.as_ref().is_none_or(|s| sim.cost < s.cost);
                if sim.peak <= budget && better {
                    let cand = Seed {
                        name: "restricted MILP".into(),
                        schedule: sch,
                        cost: sim.cost,
                    };
                    let v = feasible_vector(g, f, &cand).unwrap_or(x);
                    let obj = f.model.objective(&v);
                    if f.model.max_violation(&v) <= 1e-7
                        && best.as_ref().is_none_or(|(b, _)| obj < *b)
                    {
                        best = Some((obj, v));
                    }
                    *seed = Some(cand);
                }
            }
        }
    }

    // Step 3: exact fixing against the incumbent.
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
