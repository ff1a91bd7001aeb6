//! The optimal strategy: Checkmate's frontier-advancing MILP (eq. 9),
//! solved by HiGHS (default) or CBC, warm-started from the cheapest
//! heuristic plan. A time-limited run never returns a plan worse than its
//! seed, and always says which plan seeded it and how far from optimal the
//! answer may be.

use super::local_search::{self, search_from, Ranking};
use super::portfolio::{acceptable, best_heuristic_with, evaluate};
use super::{Solution, SolveOptions, Status, Strategy, StrategyError};
use crate::graph::Graph;
use crate::schedule::feasible::{self, Feasibility};
use crate::schedule::groups::outside_kernel_stages;
use crate::schedule::Schedule;
use crate::solver::checkmate::{self, drop_spurious, Formulation, FreeModel};
use crate::solver::{solve_mip, MipResult, MipStatus, OnProgress, OnSolution, Params, Progress};
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
    &Shared,
) -> Result<Prepared, StrategyError>;

/// Share of the time limit the seeding heuristics may use.
const SEED_TIME_SHARE: f64 = 0.25;

/// ... and when the LP relaxation is not expected to finish in the rest:
/// the MILP phase then rarely answers anything, and the seed is the
/// answer, so the search gets most of the time. (The 12-layer
/// operator-level transformer, 599k columns: the LP had not finished
/// after 30 s, while remat-fast's search needs 4 s of a 10 s limit.)
const SEED_TIME_SHARE_LARGE: f64 = 0.75;

/// Seconds per model column below which the LP relaxation is expected to
/// take longer than the MILP phase's time. The LP's time varies by two
/// orders of magnitude with the budget: random-layered-n250 (192k columns)
/// took about 2 s at 90% and had not finished after 120 s at 60%;
/// MobileNet (77k) took 30 s at 60%, Checkmate's ResNet-50 (287k) over
/// 120 s; random-layered-n100 (26k, simplex) 1.5 s. So the estimate is
/// deliberately low, 0.1 ms per column: the MILP phase keeps its time on
/// every graph of the scale benchmark at 60 s, and only models past ~10⁵
/// columns under short limits (the transformer at 10 s and 30 s) seed
/// longer.
const LP_SECS_PER_COLUMN: f64 = 1e-4;

/// The seeding share of the time left for a model of `columns`.
/// Share of the time left after seeding that the merged graph's MILP gets
/// on a graph with multi-output kernels (see `solve_milp`).
const MERGED_SHARE: f64 = 0.4;

/// Share of the seeding time the cover program's solution may take to be
/// fitted and improved by the local search, before the portfolio runs.
const BOUND_PLAN_SHARE: f64 = 0.25;

fn seed_share(columns: usize, left: Duration) -> f64 {
    let lp_secs = columns as f64 * LP_SECS_PER_COLUMN;
    if lp_secs > left.as_secs_f64() * (1.0 - SEED_TIME_SHARE) {
        SEED_TIME_SHARE_LARGE
    } else {
        SEED_TIME_SHARE
    }
}

/// Where the MILP phase's time went, by step, shared with whoever waits
/// for it: the answer's detail accounts for it even when the phase is
/// abandoned in the middle of a step.
#[derive(Default)]
pub(crate) struct Phases {
    done: Vec<(&'static str, f64)>,
    current: Option<(&'static str, Instant)>,
}

pub(crate) type PhaseLog = std::sync::Arc<std::sync::Mutex<Phases>>;

/// What the MILP worker shares with whoever waits for it: its steps, its
/// best plan, and the watch (until it is abandoned).
#[derive(Clone)]
pub(crate) struct Shared {
    pub phases: PhaseLog,
    incumbent: std::sync::Arc<std::sync::Mutex<Option<Seed>>>,
    watch: Option<std::sync::Arc<super::watch::Watch>>,
    abandoned: crate::solver::StopFlag,
    /// The best lower bound proved so far (cost units): the LP's, the
    /// MILP's dual bound.
    bound: std::sync::Arc<std::sync::Mutex<Option<f64>>>,
}

impl Shared {
    /// A proven lower bound (cost units); the highest is kept.
    fn bound(&self, b: f64) {
        if let Ok(mut cur) = self.bound.lock() {
            if b.is_finite() && cur.is_none_or(|c| b > c) {
                *cur = Some(b);
            }
        }
    }

    /// Starts the step `name` (see [`enter`]).
    pub fn enter(&self, name: &'static str) {
        enter(&self.phases, name)
    }

    /// A plan that fits the budget (simulated): the worker's incumbent if
    /// it is the cheapest so far. Returns whether it was.
    pub fn offer(&self, cand: &Seed) -> bool {
        let Ok(mut inc) = self.incumbent.lock() else {
            return false;
        };
        if inc.as_ref().is_some_and(|i| i.cost <= cand.cost) {
            return false;
        }
        if let Some(w) = self.watch.as_deref() {
            if !self.abandoned.load(std::sync::atomic::Ordering::SeqCst) {
                w.plan(cand.cost, &cand.schedule, &cand.name);
            }
        }
        *inc = Some(cand.clone());
        true
    }
}

/// Ends the step under way (if any) and starts `name`.
pub(crate) fn enter(log: &PhaseLog, name: &'static str) {
    let mut p = log.lock().unwrap_or_else(|e| e.into_inner());
    p.close();
    p.current = Some((name, Instant::now()));
}

impl Phases {
    fn close(&mut self) {
        if let Some((name, at)) = self.current.take() {
            let secs = at.elapsed().as_secs_f64();
            match self.done.iter_mut().find(|(n, _)| *n == name) {
                Some(d) => d.1 += secs,
                None => self.done.push((name, secs)),
            }
        }
    }

    /// "model build 1.20 s, LP relaxation 3.05 s, ...", steps of one name
    /// summed; the step under way last, marked as cut off when `cut`.
    fn summary(&self, cut: bool) -> String {
        let mut parts: Vec<String> = Vec::new();
        let running = self.current.map(|(n, at)| (n, at.elapsed().as_secs_f64()));
        for &(name, secs) in &self.done {
            let extra = running.filter(|r| r.0 == name).map_or(0.0, |r| r.1);
            parts.push(format!("{name} {:.2} s", secs + extra));
        }
        if let Some((name, secs)) = running {
            let marker = if cut { " (cut off here)" } else { "" };
            match parts.iter_mut().zip(&self.done).find(|(_, d)| d.0 == name) {
                Some((p, _)) => p.push_str(marker),
                None => parts.push(format!("{name} {secs:.2} s{marker}")),
            }
        }
        parts.join(", ")
    }
}

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
    // The heuristics see it too: remat-fast searches from it where nothing
    // else fits (the node-order search's schedule, which is 3.6× one pass
    // on random-layered-n250 at 60%, and 1.5× searched from).
    let seed_opts = SolveOptions {
        time_limit: opts.time_limit.mul_f64(time_share),
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

    fn handles_groups(&self) -> bool {
        true
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        solve_milp(g, budget, opts, FreeModel::Paper, None)
            .map(|s| kernel_stage_scope(g, budget, opts, s))
    }
}

/// On a graph with groups the MILP has a stage per kernel, and its bound
/// and proof cover only plans of that form. A seed from `remat-fast` may
/// compute in the stages before a kernel's last output
/// ([`outside_kernel_stages`]); such a plan gets the graph's eviction bound,
/// which holds for every plan, and is called optimal only against that.
pub(crate) fn kernel_stage_scope(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    mut sol: Solution,
) -> Solution {
    let Some(sch) = sol
        .schedule
        .as_ref()
        .filter(|s| g.has_groups() && outside_kernel_stages(g, s))
    else {
        return sol;
    };
    let cost = sch.cost(g);
    let lb = crate::graph::analysis::eviction_bound(g, budget).min(cost);
    sol.lower_bound = Some(lb);
    if sol.status == Status::Optimal && cost > super::within_gap(lb, opts.gap) {
        sol.status = Status::Feasible;
    }
    let note = "; the plan computes in the stages before a kernel's last output, outside the MILP's stage-per-kernel model, so its bound is the graph's eviction bound";
    sol.detail = Some(format!("{}{note}", sol.detail.unwrap_or_default()));
    sol
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
    // Without DTR's plan, the local search's first plan, for an interrupt
    // during the bound (see `quick_plan`); it seeds where nothing else does.
    let early = quick
        .is_none()
        .then(|| super::quick_plan(g, budget, start + opts.time_limit / 20))
        .flatten()
        .and_then(|(sch, name)| {
            let sim = evaluate(g, &sch)?;
            acceptable(&sim, budget, opts.cost_bound).then_some(Seed {
                name,
                schedule: sch,
                cost: sim.cost,
            })
        });
    if let (Some(w), Some(s)) = (watch, &early) {
        w.plan(s.cost, &s.schedule, &s.name);
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
            "DTR eviction ({how}, cost {}) is within the requested gap of the {} ({}), no seeding or MILP needed; bound {:.2} s",
            crate::units::short_float(*cost),
            bound.note,
            crate::units::short_float(g.tidy_bound(floor)),
            start.elapsed().as_secs_f64()
        );
        return Ok(Solution {
            status: Status::Optimal,
            lower_bound: Some(floor.min(*cost)),
            trace,
            ..Solution::feasible(sch.clone(), Some(note))
        });
    }
    // The shares are of the time the bound left, not of the limit (the
    // bound may take a quarter of it).
    let left = opts.time_limit.saturating_sub(start.elapsed());
    let seed_opts = SolveOptions {
        known_bound: Some(floor),
        time_limit: left,
        ..opts.clone()
    };
    // Too large a model is not built at all (see `checkmate::MAX_COLUMNS`):
    // the heuristics then get the whole time left.
    let too_large = checkmate::check_size(g).err();
    let share = if too_large.is_some() {
        1.0
    } else {
        seed_share(checkmate::columns(g), left)
    };
    // The bound's own solution, as a plan: where the program is tight it
    // is the optimum (then no seeding or MILP), else one more seed.
    let from_bound =
        super::plan_from_bound(g, budget, &bound, left.mul_f64(share * BOUND_PLAN_SHARE)).and_then(
            |sch| {
                let sim = evaluate(g, &sch)?;
                acceptable(&sim, budget, opts.cost_bound).then(|| Seed {
                    name: "the cover program's solution".into(),
                    schedule: sch,
                    cost: sim.cost,
                })
            },
        );
    if let Some(s) = from_bound.as_ref().filter(|s| s.cost <= good_enough) {
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: Some(s.cost),
            bound: Some(floor),
        });
        let note = format!(
            "a plan read off the solution of the {}, within the requested gap of it ({}): no seeding, no MILP needed; bound {bound_secs:.2} s, total {:.2} s",
            bound.note,
            crate::units::short_float(g.tidy_bound(floor)),
            start.elapsed().as_secs_f64()
        );
        return Ok(Solution {
            status: Status::Optimal,
            lower_bound: Some(floor.min(s.cost)),
            trace,
            ..Solution::feasible(s.schedule.clone(), Some(note))
        });
    }
    let seed = find_seed(g, budget, &seed_opts, share, good_enough, &mut |c| {
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: Some(c),
            bound: Some(floor),
        })
    });
    let seed = match (seed, from_bound) {
        (Some(s), Some(b)) if b.cost < s.cost => Some(b),
        (None, b) => b,
        (s, _) => s,
    };
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
    let seed = seed.or(early);
    // Still nothing: the exact feasibility search's schedule, searched
    // from, in two thirds of what is left (remat-fast's fallback; a MILP
    // with no incumbent rarely finds one on such budgets).
    let seed = seed.or_else(|| {
        let third = opts.time_limit.saturating_sub(start.elapsed()) / 3;
        let Feasibility::Fits(sch) = feasible::decide(g, budget, Instant::now() + third) else {
            return None;
        };
        let end = Instant::now() + third;
        let sch = search_from(g, sch.clone(), budget, Ranking::Forecast, end).unwrap_or(sch);
        let sim = evaluate(g, &sch)?;
        acceptable(&sim, budget, opts.cost_bound).then(|| Seed {
            name: "the exact feasibility search's schedule, searched from".into(),
            schedule: sch,
            cost: sim.cost,
        })
    });
    // With multi-output kernels the model keeps S and FREE per output
    // (ResNet-18: 303 outputs for 162 kernels, 38k binaries against the
    // merged graph's 26k), and its MILP converges more slowly than the
    // merged graph's. So the merged graph's MILP runs first on part of the
    // time; its plan, lifted, is a plan here at the same cost, and seeds
    // the exact model: never worse than solving the merged graph alone.
    // (Measured at PyTorch's 0.4 peak on ResNet-18, 60 s: 156.02 µs with
    // this seed, 157.14 µs without.)
    let seed = match (g.has_groups() && too_large.is_none(), seed) {
        (true, seed) => {
            let merged = crate::schedule::groups::Merged::of(g);
            let o = SolveOptions {
                time_limit: opts
                    .time_limit
                    .saturating_sub(start.elapsed())
                    .mul_f64(MERGED_SHARE),
                watch: None,
                warm_start: None,
                known_bound: None,
                ..opts.clone()
            };
            let lifted = solve_milp(&merged.graph, budget, &o, free_model, prepare)
                .ok()
                .and_then(|sol| sol.schedule.filter(|_| sol.status.has_plan()))
                .map(|s| merged.lift(g, &s))
                .and_then(|sch| {
                    let sim = evaluate(g, &sch)?;
                    acceptable(&sim, budget, opts.cost_bound).then(|| Seed {
                        name: format!("the merged graph's MILP ({} nodes)", merged.graph.len()),
                        schedule: sch,
                        cost: sim.cost,
                    })
                });
            match (seed, lifted) {
                (Some(s), Some(l)) if l.cost < s.cost => Some(l),
                (None, l) => l,
                (s, _) => s,
            }
        }
        (false, seed) => seed,
    };
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
        Some(s) => format!("seeded by {} (cost {})", s.name, s.cost),
        None => "no heuristic plan fits to seed from".into(),
    };
    let timing = format!(
        "bound {bound_secs:.2} s, seeding {seed_secs:.2} s ({:.0}% of the time left)",
        share * 100.0
    );
    // The seed already within the requested gap of the graph bound is
    // optimal by the same rule a MIP solver stops by; on ResNet-50 this
    // skips minutes of building and solving the model.
    if let Some(s) = seed.as_ref().filter(|s| s.cost <= good_enough) {
        let note = format!(
            "{seed_note}; within the requested gap of the {} ({floor}), no MILP needed; time: {timing}",
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
        let (seed, refined) = match seed {
            Some(s) => {
                let (s, note) = refine_seed(g, budget, opts, floor, start, s, &mut trace);
                (Some(s), note)
            }
            None => (None, String::new()),
        };
        let note = format!(
            "{seed_note}; {why}, so the {} is the bound{refined}; time: {timing}",
            bound.note
        );
        return Ok(answer_without_milp(seed, floor, trace, note));
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
        seed_note,
        timing,
        abandoned: Default::default(),
        incumbent: Default::default(),
        phases: Default::default(),
        bound: Default::default(),
        deadline: start + opts.time_limit,
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
    /// Seconds of the bound and the seeding, for the detail line.
    timing: String,
    /// Set when the caller stopped waiting: the worker then reports no
    /// more progress to the shared watch, its solvers stop at their next
    /// poll, and it returns at its next check.
    abandoned: crate::solver::StopFlag,
    /// The best plan the worker has so far (the preparation's repaired LP
    /// rounding or restricted MILP, the MILP's improving solutions), for
    /// the answer if it is abandoned.
    incumbent: std::sync::Arc<std::sync::Mutex<Option<Seed>>>,
    /// Where the worker's time went.
    phases: PhaseLog,
    /// The best bound the worker proved so far.
    bound: std::sync::Arc<std::sync::Mutex<Option<f64>>>,
    /// When the worker's solvers must be done: a little before the
    /// watchdog stops waiting, so that a solver stopped by its own time
    /// limit still hands back its plan and bound.
    deadline: Instant,
}

/// Time kept back from the limit for what follows the strategy: the
/// pipeline generates and simulates the returned plan once more.
const WATCHDOG_SLACK: Duration = Duration::from_millis(250);

/// How long before the watchdog stops waiting the worker's solvers are
/// asked to stop by their own time limits: a MILP stopped by its limit
/// returns within milliseconds, and the rest is for checking its plan.
const WORKER_MARGIN: Duration = Duration::from_millis(300);

/// Runs the MILP phase (model build, preparation, solve) on a worker thread
/// and waits for it only until the time limit (or the caller's stop).
/// HiGHS checks its time limit inside the solve, but not during presolve
/// setup of a large model, and building the model is ours: either can
/// overrun by minutes on large graphs. When the deadline passes first, the
/// answer is the best plan the worker reported (the MILP's incumbent, the
/// preparation's plan) or the seed, and the worker is told to stop: its
/// solvers are interrupted at their next poll and it returns at its next
/// check (see [`super::abandonable`]). It owns copies of the graph, the
/// options and the seed, and shares only the watch (behind the `abandoned`
/// flag), its incumbent and its phase log.
fn watchdog(g: &Graph, mut ctx: MilpPhase, seed: Option<Seed>) -> Result<Solution, StrategyError> {
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
    ctx.deadline = wait_until
        .checked_sub(WORKER_MARGIN)
        .unwrap_or(wait_until)
        .max(Instant::now());
    let worker_bound = ctx.bound.clone();
    let abandoned = ctx.abandoned.clone();
    let incumbent = ctx.incumbent.clone();
    let phases = ctx.phases.clone();
    let seed_note = ctx.seed_note.clone();
    let timing = ctx.timing.clone();
    let caller_stop = ctx.opts.stop.clone();
    let trace_head = ctx.trace.clone();
    let floor = ctx.floor;
    let fallback = seed.clone();
    let waited = super::abandonable(wait_until, &abandoned, caller_stop.as_ref(), move || {
        milp_phase(ctx, seed)
    });
    if let Some(r) = waited {
        return r;
    }
    // A poisoned lock means the worker panicked: its plan is not
    // trusted, the seed still is.
    let better = incumbent.lock().ok().and_then(|mut i| i.take());
    let (fallback, found_note) = match (better, fallback) {
        (Some(b), f) if f.as_ref().is_none_or(|f| b.cost < f.cost) => {
            let n = format!("; the worker's {} (cost {}) is the answer", b.name, b.cost);
            (Some(b), n)
        }
        (_, f) => (f, String::new()),
    };
    let steps = phases.lock().map(|p| p.summary(true)).unwrap_or_default();
    let why = if crate::solver::stop_requested(&caller_stop) {
        "stopped on request"
    } else {
        "abandoned at the time limit"
    };
    let steps = if steps.is_empty() {
        "MILP phase not started".into()
    } else {
        steps
    };
    let note = format!(
        "{seed_note}; MILP phase {why}{found_note}; time: {timing}, {steps}, total {:.2} s",
        start.elapsed().as_secs_f64()
    );
    // The LP's or the MILP's bound, if the worker got that far.
    let floor = worker_bound
        .lock()
        .ok()
        .and_then(|b| *b)
        .map_or(floor, |b| b.max(floor));
    let mut trace = trace_head;
    trace.push(Progress {
        secs: start.elapsed().as_secs_f64(),
        cost: fallback.as_ref().map(|s| s.cost),
        bound: Some(floor),
    });
    Ok(answer_without_milp(fallback, floor, trace, note))
}

/// The worker's answer once it has been abandoned: nobody reads it.
fn gone() -> StrategyError {
    StrategyError::Other("the MILP phase was abandoned".into())
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
        timing,
        abandoned,
        incumbent,
        phases,
        bound: worker_bound,
        deadline,
    } = ctx;
    let graph = g.clone();
    let g: &Graph = &g;
    let shared = Shared {
        phases: phases.clone(),
        incumbent: incumbent.clone(),
        watch: opts.watch.clone(),
        abandoned: abandoned.clone(),
        bound: worker_bound,
    };
    // The worker's solvers and steps stop when it is abandoned.
    let opts = &SolveOptions {
        stop: Some(abandoned.clone()),
        ..opts
    };
    let stopped = || crate::solver::stop_requested(&opts.stop);
    let mut cap = budget;
    for _ in 0..=MAX_TIGHTENINGS {
        enter(&phases, "model build");
        let mut f = Formulation::build_as(g, cap, true, opts.cost_bound, free_model);
        if stopped() {
            return Err(gone());
        }
        let prepared = match prepare {
            Some(p) => p(
                g,
                budget,
                &mut f,
                &mut seed,
                deadline.saturating_duration_since(Instant::now()),
                opts,
                &shared,
            )?,
            None => Prepared::default(),
        };
        if stopped() {
            return Err(gone());
        }
        let prep_bound = prepared.bound.map_or(floor, |b| b.max(floor));
        shared.bound(prep_bound);
        if let Some(s) = &seed {
            shared.offer(s);
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
        let on_progress = {
            let (scale, shared) = (f.cost_scale, shared.clone());
            Some(OnProgress(std::sync::Arc::new(move |p: Progress| {
                if let Some(b) = p.bound {
                    shared.bound((b * scale).max(prep_bound));
                }
                if shared.abandoned.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                if let Some(w) = shared.watch.as_deref() {
                    if let Some(c) = p.cost {
                        w.cost(c * scale);
                    }
                    if let Some(b) = p.bound {
                        w.bound((b * scale).max(prep_bound));
                    }
                }
            })))
        };
        // Each improving solution that the simulator finds within the
        // budget becomes the worker's incumbent (and the watch's plan), so
        // that an abandoned solve still answers with it.
        let on_solution = {
            let (g, decoder, shared) = (graph.clone(), f.decoder(), shared.clone());
            let cost_bound = opts.cost_bound;
            let solver_start = Instant::now();
            OnSolution(std::sync::Arc::new(move |x: &[f64]| {
                let mut sch = decoder.schedule(x);
                drop_spurious(&g, &mut sch);
                let Some(sim) = evaluate(&g, &sch) else {
                    return;
                };
                if acceptable(&sim, budget, cost_bound) {
                    shared.offer(&Seed {
                        name: format!(
                            "MILP incumbent at {:.2} s of the solve",
                            solver_start.elapsed().as_secs_f64()
                        ),
                        schedule: sch,
                        cost: sim.cost,
                    });
                }
            }))
        };
        let params = Params {
            time_limit: deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10)),
            gap: opts.gap,
            threads: opts.threads,
            on_progress,
            on_solution: Some(on_solution),
            stop: opts.stop.clone(),
            ..Params::default()
        };
        let offset = start.elapsed().as_secs_f64();
        enter(&phases, "MILP");
        let res = solve_mip(&f.model, opts.backend, &params, warm.as_deref())
            .map_err(|e| StrategyError::Solver(e.to_string()))?;
        if stopped() {
            return Err(gone());
        }
        enter(&phases, "check");
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
            "{seed_note}{}{}; {} in {:.2} s{}",
            prepared.note,
            if seed.is_some() && warm.is_none() {
                " (over the MILP's memory model, not passed to the solver)"
            } else {
                ""
            },
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
        // The solver's own answer is its last incumbent; one the callback
        // kept is the same plan or, if the solver's final answer failed
        // the budget check, a cheaper one that passed it.
        let seed = match incumbent.lock().ok().and_then(|mut i| i.take()) {
            Some(i) if seed.as_ref().is_none_or(|s| i.cost < s.cost) => Some(i),
            _ => seed,
        };
        let mut sol = decide(found, seed, Some(bound), &res, note);
        if g.has_groups() && sol.status == Status::Infeasible {
            // A proof for a stage per kernel only: a plan that recomputes in
            // the stages before a kernel's last output may still fit (a
            // 25-node graph at 114 bytes has one).
            sol.status = Status::NoSolution;
            if let Some(d) = sol.detail.as_mut() {
                d.push_str(
                    "; the MILP has a stage per kernel, so plans with a stage per output may still fit",
                );
            }
        }
        if let Some(d) = sol.detail.as_mut() {
            let steps = phases.lock().map(|p| p.summary(false)).unwrap_or_default();
            d.push_str(&format!(
                "; time: {timing}, {steps}, total {:.2} s",
                start.elapsed().as_secs_f64()
            ));
        }
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
    // Tightening did not converge; the seed (if any) is still correct, and
    // so is a plan the solver's callback checked in the simulator.
    let seed = match incumbent.lock().ok().and_then(|mut i| i.take()) {
        Some(i) if seed.as_ref().is_none_or(|s| i.cost < s.cost) => Some(i),
        _ => seed,
    };
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

/// The answer when the MILP gives none (too large a model, or abandoned at
/// the time limit): the best plan in hand with the bound, or no solution.
/// No MILP: the time it would have had goes to kicks and loosening rounds
/// from the seed ([`local_search::refine`]), short of what the pipeline's
/// plan generation and simulation of the answer take after it. Answers the
/// cheaper of the two and what the detail line says of it.
fn refine_seed(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    floor: f64,
    start: Instant,
    seed: Seed,
    trace: &mut Vec<Progress>,
) -> (Seed, String) {
    let sim_start = Instant::now();
    let _ = evaluate(g, &seed.schedule);
    let keep = sim_start.elapsed() + Duration::from_millis(200);
    let end = (start + opts.time_limit).checked_sub(keep).unwrap_or(start);
    let refine_start = Instant::now();
    let name = format!("{}, then kicked and loosened", seed.name);
    let mut heard = |sch: &Schedule| {
        if let Some(w) = opts.watch.as_deref() {
            w.plan(sch.cost(g), sch, &name);
        }
    };
    let sch = local_search::refine(g, seed.schedule.clone(), budget, floor, end, &mut heard);
    let secs = refine_start.elapsed().as_secs_f64();
    let better = evaluate(g, &sch)
        .filter(|sim| sim.cost < seed.cost && acceptable(sim, budget, opts.cost_bound));
    match better {
        Some(sim) => {
            trace.push(Progress {
                secs: start.elapsed().as_secs_f64(),
                cost: Some(sim.cost),
                bound: Some(floor),
            });
            let note = format!(
                "; kicks and loosening from the seed: {} in {secs:.2} s",
                sim.cost
            );
            let refined = Seed {
                name,
                schedule: sch,
                cost: sim.cost,
            };
            (refined, note)
        }
        None if secs >= 0.01 => (
            seed,
            format!("; kicks and loosening from the seed: nothing cheaper in {secs:.2} s"),
        ),
        None => (seed, String::new()),
    }
}

fn answer_without_milp(
    plan: Option<Seed>,
    floor: f64,
    trace: Vec<Progress>,
    note: String,
) -> Solution {
    match plan {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategies::checkmate_approx::two_phase_round;
    use std::sync::atomic::{AtomicBool, Ordering};

    static PREPARE_RETURNED: AtomicBool = AtomicBool::new(false);

    /// Offers keep-everything (the cheapest plan at an ample budget), then
    /// works on until told to stop: a worker that cannot finish in time.
    fn offer_then_spin(
        g: &Graph,
        _budget: Bytes,
        _f: &mut Formulation,
        _seed: &mut Option<Seed>,
        _left: Duration,
        opts: &SolveOptions,
        shared: &Shared,
    ) -> Result<Prepared, StrategyError> {
        let keep = two_phase_round(g, |_, _| true);
        shared.offer(&Seed {
            name: "test plan".into(),
            cost: keep.cost(g),
            schedule: keep,
        });
        let start = Instant::now();
        while !super::super::stop_requested(opts) && start.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(5));
        }
        PREPARE_RETURNED.store(true, Ordering::SeqCst);
        Ok(Prepared::default())
    }

    /// The regression of issue #19: an abandoned worker's better plan is
    /// the answer, not the seed; and the worker stops once abandoned.
    #[test]
    fn an_abandoned_worker_answers_with_its_plan_and_stops() {
        let g = crate::zoo::synthetic::linear(8);
        let budget = crate::graph::analysis::checkpoint_all_peak(&g);
        let dear = two_phase_round(&g, |_, _| false);
        let seed = Seed {
            name: "recompute everything".into(),
            cost: dear.cost(&g),
            schedule: dear,
        };
        let cheap = two_phase_round(&g, |_, _| true).cost(&g);
        assert!(cheap < seed.cost, "the test needs a dearer seed");
        let opts = SolveOptions {
            time_limit: Duration::from_secs(1),
            ..SolveOptions::default()
        };
        let ctx = MilpPhase {
            g: std::sync::Arc::new(g.clone()),
            budget,
            opts: opts.clone(),
            free_model: FreeModel::Tight,
            prepare: Some(offer_then_spin),
            trace: Vec::new(),
            start: Instant::now(),
            floor: 0.0,
            seed_note: "seeded by the test".into(),
            timing: String::new(),
            abandoned: Default::default(),
            incumbent: Default::default(),
            phases: Default::default(),
            bound: Default::default(),
            deadline: Instant::now(),
        };
        let sol = watchdog(&g, ctx, Some(seed)).unwrap();
        let detail = sol.detail.clone().unwrap_or_default();
        assert_eq!(sol.schedule.unwrap().cost(&g), cheap, "{detail}");
        assert!(detail.contains("test plan"), "{detail}");
        assert!(detail.contains("(cut off here)"), "{detail}");
        // The worker hears the stop: wait generously, never by a timed
        // assertion on how soon.
        let waited = Instant::now();
        while !PREPARE_RETURNED.load(Ordering::SeqCst)
            && waited.elapsed() < Duration::from_secs(120)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            PREPARE_RETURNED.load(Ordering::SeqCst),
            "the abandoned worker did not stop"
        );
    }
}
