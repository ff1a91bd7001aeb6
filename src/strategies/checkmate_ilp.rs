//! The optimal strategy: Checkmate's frontier-advancing MILP (eq. 9),
//! solved by HiGHS (default) or CBC, warm-started from the cheapest
//! heuristic plan. A time-limited run never returns a plan worse than its
//! seed, and always says which plan seeded it and how far from optimal the
//! answer may be.

use super::portfolio::{acceptable, best_heuristic_with, evaluate};
use super::{Solution, SolveOptions, Status, Strategy, StrategyError};
use crate::graph::Graph;
use crate::schedule::Schedule;
use crate::solver::checkmate::{self, drop_spurious, Formulation, FreeModel};
use crate::solver::{solve_mip, MipResult, MipStatus, OnProgress, Params, Progress};
use crate::units::Bytes;
use std::time::{Duration, Instant};

pub struct CheckmateIlp;

/// A heuristic plan the solve starts from and falls back on.
#[derive(Clone)]
pub(crate) struct Seed {
    pub name: String,
    pub schedule: Schedule,
    pub cost: f64,
}

/// What a preparation step (run on each built formulation, before the MILP)
/// changed: a note for the user, a valid lower bound on the optimum in cost
/// units, and a warm start vector replacing the seed's own.
#[derive(Default)]
pub(crate) struct Prepared {
    pub note: String,
    pub bound: Option<f64>,
    pub warm: Option<Vec<f64>>,
}

/// A step that may tighten the formulation (fix columns) and improve the
/// seed, given the time left. It must not cut off any plan cheaper than the
/// seed, so that the MILP's optimum stays the optimum.
pub(crate) type Prepare = fn(
    &Graph,
    Bytes,
    &mut Formulation,
    &mut Option<Seed>,
    Duration,
    &SolveOptions,
) -> Result<Prepared, StrategyError>;

/// Share of the time limit the seeding heuristics may use.
const SEED_TIME_SHARE: f64 = 0.25;

/// How often the memory cap is tightened when a solver's feasibility
/// tolerance let a plan through that the simulator finds over budget.
const MAX_TIGHTENINGS: usize = 3;

/// `improved` hears each better heuristic cost as soon as it is known.
pub(crate) fn find_seed(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    time_share: f64,
    good_enough: f64,
    improved: &mut dyn FnMut(f64),
) -> Option<Seed> {
    // A caller's warm start (a sweep's best plan so far) does not replace
    // the portfolio: the answer must never be worse than the best heuristic
    // at this budget, so both are tried and the cheaper one seeds.
    let seed_opts = SolveOptions {
        time_limit: opts.time_limit.mul_f64(time_share),
        warm_start: None,
        ..opts.clone()
    };
    let candidates = opts
        .warm_start
        .clone()
        .into_iter()
        .chain(best_heuristic_with(
            g,
            budget,
            &seed_opts,
            good_enough,
            improved,
        ));
    let mut best: Option<Seed> = None;
    for (name, mut schedule) in candidates {
        if schedule.stages() != g.len() || schedule.validate(g).is_err() {
            continue;
        }
        drop_spurious(g, &mut schedule);
        let Some(sim) = evaluate(g, &schedule) else {
            continue;
        };
        if acceptable(&sim, budget, opts.cost_bound)
            && best.as_ref().is_none_or(|b| sim.cost < b.cost)
        {
            best = Some(Seed {
                name,
                schedule,
                cost: sim.cost,
            });
        }
    }
    best
}

/// When the solver found its first plan of its own, for the detail line
/// (CBC does not say when, only whether).
fn first_plan(res: &MipResult) -> String {
    match (res.first_solution_secs, &res.x) {
        (Some(s), _) => format!(", first plan at {s:.2} s"),
        (None, None) => ", no plan of its own".into(),
        (None, Some(_)) => String::new(),
    }
}

impl Strategy for CheckmateIlp {
    fn name(&self) -> &'static str {
        "checkmate-ilp"
    }

    fn describe(&self) -> &'static str {
        "optimal: Checkmate's MILP (eq. 9) on HiGHS or CBC, warm-started from the best heuristic"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        solve_milp(g, budget, opts, FreeModel::Paper, None)
    }
}

/// The MILP pipeline shared by the exact strategies: seed, build, optional
/// preparation, solve, check in the simulator, and re-solve under a lower
/// memory cap if the solver's tolerance let a plan over the budget.
pub(crate) fn solve_milp(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    free_model: FreeModel,
    prepare: Option<Prepare>,
) -> Result<Solution, StrategyError> {
    let start = Instant::now();
    if budget < g.fixed_memory {
        return Ok(Solution::infeasible("the budget is below the fixed memory"));
    }
    // The bound before the Checkmate model is built: the graph's own
    // (eviction bound and cover program, see `starting_bound`).
    // A DTR plan first, in milliseconds: the time to a first plan should
    // not wait for the bound's solve.
    // DTR within a quarter of the limit (its first pass always finishes):
    // a plan in hand before anything slow starts.
    let quick = super::dtr::best_until(g, budget, start + opts.time_limit / 4);
    let watch = opts.watch.as_deref();
    if let (Some(w), Some((cost, sch, _))) = (watch, &quick) {
        w.plan(*cost, sch, "DTR eviction");
    }
    let mut trace = vec![Progress {
        secs: start.elapsed().as_secs_f64(),
        cost: quick.as_ref().map(|q| q.0),
        bound: Some(crate::graph::analysis::eviction_bound(g, budget)),
    }];
    let bound = super::starting_bound(g, budget, opts, quick.as_ref().map(|q| &q.1));
    let floor = bound.value;
    let bound_secs = start.elapsed().as_secs_f64();
    if let Some(w) = watch {
        w.bound(floor);
    }
    if floor.is_infinite() && quick.is_none() {
        return Ok(Solution::infeasible(format!(
            "no plan fits: the {} proves it",
            bound.note
        )));
    }
    trace.push(Progress {
        secs: start.elapsed().as_secs_f64(),
        cost: quick.as_ref().map(|q| q.0),
        bound: Some(floor),
    });
    let good_enough = super::within_gap(floor, opts.gap);
    // DTR's plan within the gap of the bound needs no seeding and no MILP
    // (long chains: seeding alone took 14 s of a 10 s limit on 20,001 nodes).
    // A caller's warm start goes through seeding as before, which weighs it
    // against the heuristics (a sweep keeps its plans that way).
    if let Some((cost, sch, how)) = quick
        .as_ref()
        .filter(|q| q.0 <= good_enough && opts.warm_start.is_none())
    {
        let note = format!(
            "DTR eviction ({how}, cost {cost}) is within the requested gap of the {} ({floor}), no seeding or MILP needed; bound {:.2} s",
            bound.note,
            start.elapsed().as_secs_f64()
        );
        return Ok(Solution {
            status: Status::Optimal,
            lower_bound: Some(floor.min(*cost)),
            trace,
            ..Solution::feasible(sch.clone(), Some(note))
        });
    }
    let seed_opts = SolveOptions {
        known_bound: Some(floor),
        ..opts.clone()
    };
    // Too large a model is not built at all (see `checkmate::MAX_COLUMNS`):
    // the heuristics then get the whole time left.
    let too_large = checkmate::check_size(g).err();
    let share = if too_large.is_some() {
        1.0
    } else {
        SEED_TIME_SHARE
    };
    let seed = find_seed(g, budget, &seed_opts, share, good_enough, &mut |c| {
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: Some(c),
            bound: Some(floor),
        })
    });
    // No heuristic answered in time: DTR's plan, if it fits, still seeds.
    let seed = seed.or_else(|| {
        let (cost, sch, how) = quick.clone()?;
        opts.cost_bound
            .is_none_or(|b| cost <= b * (1.0 + 1e-9))
            .then(|| Seed {
                name: format!("DTR eviction ({how})"),
                schedule: sch,
                cost,
            })
    });
    trace.push(Progress {
        secs: start.elapsed().as_secs_f64(),
        cost: seed.as_ref().map(|s| s.cost),
        bound: Some(floor),
    });
    if let (Some(w), Some(s)) = (watch, &seed) {
        w.plan(s.cost, &s.schedule, &s.name);
    }
    let seed_secs = start.elapsed().as_secs_f64() - bound_secs;
    let seed_note = match &seed {
        Some(s) => format!(
            "seeded by {} (cost {}); bound {:.2} s, seeding {:.2} s",
            s.name, s.cost, bound_secs, seed_secs
        ),
        None => format!(
            "no heuristic plan fits to seed from; bound {bound_secs:.2} s, seeding {seed_secs:.2} s"
        ),
    };
    // The seed already within the requested gap of the graph bound is
    // optimal by the same rule a MIP solver stops by; on ResNet-50 this
    // skips minutes of building and solving the model.
    if let Some(s) = seed.as_ref().filter(|s| s.cost <= good_enough) {
        let note = format!(
            "{seed_note}; within the requested gap of the {} ({floor}), no MILP needed",
            bound.note
        );
        return Ok(Solution {
            status: Status::Optimal,
            lower_bound: Some(floor.min(s.cost)),
            trace,
            ..Solution::feasible(s.schedule.clone(), Some(note))
        });
    }
    if let Some(why) = too_large {
        let note = format!("{seed_note}; {why}, so the {} is the bound", bound.note);
        return Ok(match seed {
            Some(s) => Solution {
                lower_bound: Some(floor.min(s.cost)),
                trace,
                ..Solution::feasible(s.schedule, Some(note))
            },
            None => Solution {
                status: Status::NoSolution,
                lower_bound: Some(floor),
                trace,
                ..Solution::infeasible(note)
            },
        });
    }
    let ctx = MilpPhase {
        g: std::sync::Arc::new(g.clone()),
        budget,
        opts: opts.clone(),
        free_model,
        prepare,
        trace,
        start,
        floor,
        seed_note: seed_note.clone(),
        abandoned: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        incumbent: std::sync::Arc::new(std::sync::Mutex::new(None)),
    };
    watchdog(g, ctx, seed)
}

/// Everything the MILP phase needs, owned, so that it can run on a worker
/// thread that may outlive the call (see [`watchdog`]).
struct MilpPhase {
    g: std::sync::Arc<Graph>,
    budget: Bytes,
    opts: SolveOptions,
    free_model: FreeModel,
    prepare: Option<Prepare>,
    trace: Vec<Progress>,
    start: Instant,
    floor: f64,
    seed_note: String,
    /// Set when the caller stopped waiting: the worker then reports no
    /// more progress to the shared watch.
    abandoned: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The best plan the worker has so far (the preparation's repaired LP
    /// rounding or restricted MILP), for the answer if it is abandoned.
    incumbent: std::sync::Arc<std::sync::Mutex<Option<Seed>>>,
}

/// Time kept back from the limit for what follows the strategy: the
/// pipeline generates and simulates the returned plan once more.
const WATCHDOG_SLACK: Duration = Duration::from_millis(250);

/// Runs the MILP phase (model build, preparation, solve) on a worker thread
/// and waits for it only until the time limit. HiGHS checks its time limit
/// inside the solve, but not during presolve setup of a large model, and
/// building the model is ours and unchecked: either can overrun by minutes
/// on large graphs. When the deadline passes first, the seed is the answer
/// and the worker is left to finish on its own; it owns copies of the graph,
/// the options and the seed, shares only the watch (a mutex) behind the
/// `abandoned` flag, and its result goes to a channel nobody reads.
fn watchdog(g: &Graph, ctx: MilpPhase, seed: Option<Seed>) -> Result<Solution, StrategyError> {
    let start = ctx.start;
    let limit = ctx.opts.time_limit;
    // The seed's own evaluation time stands in for the pipeline's final
    // plan generation and simulation, which also count against the limit.
    let finish = seed.as_ref().map_or(Duration::ZERO, |s| {
        let t = Instant::now();
        let _ = evaluate(g, &s.schedule);
        t.elapsed()
    });
    let wait_until = start + limit.saturating_sub(finish + WATCHDOG_SLACK);
    let abandoned = ctx.abandoned.clone();
    let incumbent = ctx.incumbent.clone();
    let seed_note = ctx.seed_note.clone();
    let floor = ctx.floor;
    let fallback = seed.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("milp".into())
        .spawn(move || {
            let r = milp_phase(ctx, seed);
            let _ = tx.send(r);
        });
    if spawned.is_err() {
        return Err(StrategyError::Solver("cannot start the MILP thread".into()));
    }
    let wait = wait_until.saturating_duration_since(Instant::now());
    match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(_) => {
            abandoned.store(true, std::sync::atomic::Ordering::SeqCst);
            // A poisoned lock means the worker panicked: its plan is not
            // trusted, the seed still is.
            let better = incumbent.lock().ok().and_then(|mut i| i.take());
            let (fallback, found_note) = match (better, fallback) {
                (Some(b), f) if f.as_ref().is_none_or(|f| b.cost < f.cost) => {
                    let n = format!(
                        "; the preparation's {} (cost {}) is the answer",
                        b.name, b.cost
                    );
                    (Some(b), n)
                }
                (_, f) => (f, String::new()),
            };
            let note = format!(
                "{seed_note}; MILP abandoned at the time limit after {:.2} s (model build, preparation or solver setup did not stop in time){found_note}",
                start.elapsed().as_secs_f64()
            );
            Ok(match fallback {
                Some(s) => Solution {
                    lower_bound: Some(floor.min(s.cost)),
                    ..Solution::feasible(s.schedule, Some(note))
                },
                None => Solution {
                    status: Status::NoSolution,
                    lower_bound: Some(floor),
                    ..Solution::infeasible(note)
                },
            })
        }
    }
}

fn milp_phase(ctx: MilpPhase, mut seed: Option<Seed>) -> Result<Solution, StrategyError> {
    let MilpPhase {
        g,
        budget,
        opts,
        free_model,
        prepare,
        mut trace,
        start,
        floor,
        seed_note,
        abandoned,
        incumbent,
    } = ctx;
    let g: &Graph = &g;
    let opts = &opts;
    let milp_start = Instant::now();
    let mut cap = budget;
    for _ in 0..=MAX_TIGHTENINGS {
        let mut f = Formulation::build_as(g, cap, true, opts.cost_bound, free_model);
        let prepared = match prepare {
            Some(p) => p(
                g,
                budget,
                &mut f,
                &mut seed,
                opts.time_limit.saturating_sub(start.elapsed()),
                opts,
            )?,
            None => Prepared::default(),
        };
        let prep_bound = prepared.bound.map_or(floor, |b| b.max(floor));
        if let (Some(s), Ok(mut i)) = (&seed, incumbent.lock()) {
            *i = Some(s.clone());
        }
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: seed.as_ref().map(|s| s.cost),
            bound: Some(prep_bound),
        });
        let warm = prepared.warm.or_else(|| {
            seed.as_ref().and_then(|s| {
                let (x, peak) = f.vector_for(g, &s.schedule);
                (peak <= cap).then_some(x)
            })
        });
        let on_progress = opts.watch.clone().map(|w| {
            let scale = f.cost_scale;
            let abandoned = abandoned.clone();
            OnProgress(std::sync::Arc::new(move |p: Progress| {
                if abandoned.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                if let Some(c) = p.cost {
                    w.cost(c * scale);
                }
                if let Some(b) = p.bound {
                    w.bound((b * scale).max(prep_bound));
                }
            }))
        });
        let params = Params {
            time_limit: opts
                .time_limit
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(10)),
            gap: opts.gap,
            threads: opts.threads,
            on_progress,
            ..Params::default()
        };
        let offset = start.elapsed().as_secs_f64();
        let res = solve_mip(&f.model, opts.backend, &params, warm.as_deref())
            .map_err(|e| StrategyError::Solver(e.to_string()))?;
        let seed_cost = seed.as_ref().map(|s| s.cost);
        trace.extend(res.trace.iter().map(|p| {
            Progress {
                secs: offset + p.secs,
                cost: match (p.cost.map(|c| c * f.cost_scale), seed_cost) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
                bound: Some(
                    p.bound
                        .map_or(prep_bound, |b| (b * f.cost_scale).max(prep_bound)),
                ),
            }
        }));
        let bound = [res.bound.map(|b| b * f.cost_scale), prepared.bound]
            .into_iter()
            .flatten()
            .fold(floor, f64::max);
        let note = format!(
            "{seed_note}{}{}; MILP phase {:.2} s: {} in {:.2} s{}",
            prepared.note,
            if seed.is_some() && warm.is_none() {
                " (over the MILP's memory model, not passed to the solver)"
            } else {
                ""
            },
            milp_start.elapsed().as_secs_f64(),
            opts.backend,
            res.seconds,
            first_plan(&res)
        );
        let found = match &res.x {
            Some(x) => {
                let mut sch = f.schedule(x);
                drop_spurious(g, &mut sch);
                let sim = evaluate(g, &sch).ok_or_else(|| {
                    StrategyError::Solver(format!("{} returned an invalid schedule", opts.backend))
                })?;
                if sim.peak > budget {
                    // The solver's feasibility tolerance admitted a few
                    // bytes too many: cap the MILP lower and re-solve.
                    let over = sim.peak.get() - budget.get();
                    cap = Bytes(cap.get().saturating_sub(over.max(1)));
                    continue;
                }
                Some((sch, sim.cost, f.peak_of(x)))
            }
            None => None,
        };
        let mut sol = decide(found, seed, Some(bound), &res, note);
        // The solver's bound and the graph's together may prove what
        // neither does alone.
        if let (Some(sch), Some(lb)) = (&sol.schedule, sol.lower_bound) {
            if sol.status == Status::Feasible && sch.cost(g) <= super::within_gap(lb, opts.gap) {
                sol.status = Status::Optimal;
            }
        }
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: sol.schedule.as_ref().map(|s| s.cost(g)),
            bound: Some(sol.lower_bound.map_or(prep_bound, |b| b.max(prep_bound))),
        });
        sol.trace = trace;
        return Ok(sol);
    }
    // Tightening did not converge; the seed (if any) is still correct.
    Ok(match seed {
        Some(s) => Solution::feasible(
            s.schedule,
            Some(format!(
                "{seed_note}; the solver's plans kept exceeding the budget in simulation"
            )),
        ),
        None => Solution {
            status: Status::NoSolution,
            ..Solution::infeasible("the solver's plans kept exceeding the budget in simulation")
        },
    })
}

/// Picks between the solver's plan and the seed, and states the status.
fn decide(
    found: Option<(Schedule, f64, f64)>,
    seed: Option<Seed>,
    bound: Option<f64>,
    res: &MipResult,
    note: String,
) -> Solution {
    let bound_for = |cost: f64| bound.map(|b| b.min(cost));
    let found_wins = match (&found, &seed) {
        (Some((_, cost, _)), Some(s)) => *cost <= s.cost,
        (Some(_), None) => true,
        (None, _) => false,
    };
    match (found, seed) {
        (Some((sch, cost, peak)), _) if found_wins => Solution {
            status: if res.status == MipStatus::Optimal {
                Status::Optimal
            } else {
                Status::Feasible
            },
            schedule: Some(sch),
            lower_bound: bound_for(cost),
            detail: Some(note),
            solver_peak: Some(peak),
            trace: Vec::new(),
            step_bound: None,
        },
        (_, Some(s)) => {
            let why = match res.status {
                MipStatus::Infeasible => {
                    "; the MILP's memory model admits no plan, but this one fits in simulation"
                }
                MipStatus::NoSolution => "; the solver found no plan within the time limit",
                _ => "; the solver found nothing cheaper",
            };
            Solution {
                status: Status::Feasible,
                lower_bound: bound.filter(|&b| b <= s.cost),
                ..Solution::feasible(s.schedule, Some(format!("{note}{why}; returning the seed")))
            }
        }
        (_, None) => Solution {
            status: match res.status {
                MipStatus::Infeasible => Status::Infeasible,
                _ => Status::NoSolution,
            },
            schedule: None,
            lower_bound: bound,
            detail: Some(note),
            solver_peak: None,
            trace: Vec::new(),
            step_bound: None,
        },
    }
}
