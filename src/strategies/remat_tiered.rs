//! `remat-tiered`: the fastest step that fits, recomputing or offloading
//! each value, on the whole DAG ([`crate::solver::tiered`]'s joint MILP).
//!
//! The run: a step-time bound from the graph alone; a portfolio of plans
//! (checkpoint-all, the best recompute-only plan, every seed policy of
//! docs/tiers.md, each improved by the offload moves of remat-fast), each
//! simulated on the device; then the MILP, warm-started from the best
//! plan it admits, for the rest of the time. The answer is the plan of
//! least simulated step time among all of them, so it is never slower
//! than the recompute-only plan or any seed policy it ran, and it carries
//! the best bound known: the graph's, raised by the step cover program's
//! ([`crate::solver::step_cover`]) and the MILP's.
//!
//! Where the device has no slow tier to use (zero capacity), the problem
//! is recompute-only and time is cost over throughput: remat-exact answers
//! it. With `--no-recompute`, only plans without recomputation compete.

use super::{
    remat_exact, seed_policies, within_gap, Progress, Solution, SolveOptions, Status, Strategy,
    StrategyError,
};
use super::{tiered, tiered_search, turn_seed};
use crate::device::Device;
use crate::graph::Graph;
use crate::schedule::{generate_plan, simulate_on, Schedule};
use crate::solver::fixing::{self, DualBound};
use crate::solver::highs::{LpMethod, LpSession};
use crate::solver::tiered::{self as model, Options, TieredFormulation};
use crate::solver::{moment_bound, solve_mip, step_cover, LpStatus, MipStatus, Params};
use crate::units::{Bytes, Seconds};
use std::time::{Duration, Instant};

pub struct RematTiered;

/// Share of the time limit the offload moves may take after the portfolio.
const SEARCH_TIME_SHARE: f64 = 0.15;

/// The offload moves also start from each policy's plan at most this much
/// slower than the best plan so far.
const START_SPREAD: f64 = 0.1;

/// Share of the time limit kept after the MILP for the offload moves from
/// its plan.
const FINAL_SEARCH_SHARE: f64 = 0.1;

/// Share of the time limit kept at the end for choosing the best plan's
/// copy leads by simulation ([`tiered::descend_leads`]).
const LEAD_SHARE: f64 = 0.02;

/// Until this share of the time limit the step cover program's thread is
/// waited for (its solver stops at its own share; building it on a large
/// graph may take longer, and a stopped program still gives a bound).
const COVER_ABANDON_SHARE: f64 = 0.5;
/// Share of the time limit the step cover program may take first.
const COVER_TIME_SHARE: f64 = 0.15;
/// Share of the time limit the moment bound may take after it.
const MOMENT_TIME_SHARE: f64 = 0.1;
/// Share of the time limit the moment bound has on the bound thread, before
/// the step cover program, where the offload moves have the MILP's time.
/// There it used to stop the search for its 10%, and at 60 s of a 600 s
/// limit on ResNet-50 at 30% on the A100 it ended at 107.702 or 107.841 ms
/// as the third moment's solve did or did not finish; the step cover
/// program, which then had that core for the whole limit, stopped at
/// 105.204 ms.
const MOMENT_BESIDE_SHARE: f64 = 0.25;

/// Share of the time limit the portfolio may take before the MILP.
/// Measured (results/joint.md): with 15% of the limit for the recompute
/// plan, remat-exact inside a 20 s run ended 7% above a 10 s remat-exact
/// run on GPT-2 at 70%; the recompute-only plan is the one to beat on a
/// PCIe device, so it gets most of the portfolio's time (0.8 of it).
const SEED_TIME_SHARE: f64 = 0.6;
const RECOMPUTE_SHARE: f64 = 0.8;

/// On a graph whose joint MILP is not built (past
/// [`SEARCH_INSTEAD_COLUMNS`], or multi-output kernels) the portfolio gets
/// at most this much, and the offload moves the rest: there remat-exact
/// spends a long share on an LP relaxation and a MILP that stop unproven
/// (ResNet-50 at 30%: 88 s of LP in a 120 s solve, no better than its
/// seed from the first 30 s), while the moves' random walk keeps finding
/// faster plans given the time.
const SEARCH_PORTFOLIO_CAP: Duration = Duration::from_secs(90);

/// The least time each seed policy gets, whatever the limit: the AutoTM
/// ILPs need about this much on the models in `models/`.
const MIN_POLICY_TIME: Duration = Duration::from_secs(2);

/// The most columns the joint model may have before the strategy answers
/// with its portfolio alone (about 2.3 KB a column in HiGHS, as measured
/// for the Checkmate model: about 7 GB here).
pub const MAX_COLUMNS: usize = 3_000_000;

/// Past this many columns the joint MILP's time goes to the offload moves
/// instead, from checkpoint-all and then from the best plan. In
/// results/joint.csv no instance with more than 50,000 columns (GPT-2,
/// MobileNet, ResNet-50, the public ResNet-50 and random-layered-n250:
/// 89,000 to 418,000) was answered by the MILP: it stopped at its limit,
/// or its setup was abandoned, having improved on nothing. And the moves
/// from checkpoint-all are what remat-fast runs: on ResNet-50 at 30% they
/// beat every start remat-tiered had (34.50 against 34.74 ms on the GH200,
/// 110.41 against 110.72 ms on the A100, 120 s).
pub const SEARCH_INSTEAD_COLUMNS: usize = 80_000;

/// The random walk ([`tiered_search::walk`]) runs only for a plan further
/// than this from its bound: the joint benchmark's instances nearer than
/// that finish within seconds, and would otherwise walk to the limit.
const WALK_MIN_GAP: f64 = 0.01;

/// The solver settings of the two bound programs run on their own thread:
/// one thread, a tight gap, and the stop flag an abandonment sets.
fn bound_params(
    limit: Duration,
    stop: crate::solver::StopFlag,
    feasibility_tolerance: f64,
) -> Params {
    Params {
        time_limit: limit,
        gap: 1e-4,
        threads: 1,
        verbose: crate::solver::verbose_from_env(),
        on_progress: None,
        on_solution: None,
        stop: Some(stop),
        feasibility_tolerance,
    }
}

impl Strategy for RematTiered {
    fn name(&self) -> &'static str {
        "remat-tiered"
    }

    fn describe(&self) -> &'static str {
        "joint optimum: recompute or offload each value, copies overlapping compute; the MILP on the whole DAG, seeded by every policy, with a step-time bound (needs --device)"
    }

    /// Where no recompute schedule in the file's order fits, recomputing in
    /// another order may beat every plan that copies (solve.rs,
    /// `slow_tier_in_another_order`).
    fn may_reorder(&self) -> bool {
        true
    }

    /// Multi-output kernels: remat-exact, checkpoint-all and the offload
    /// moves model them; the seed policies run on the merged graph and are
    /// lifted back (`solve_groups`); the joint MILP and the step cover
    /// program, which assume one output per stage, are left out. Merging
    /// every kernel for the whole strategy instead made it slower than
    /// remat-fast on a captured transformer (8.6% against 6.5% over
    /// all-fast at 80%) and found no plan at all for a captured CNN at a
    /// budget where remat-exact has one.
    fn handles_groups(&self) -> bool {
        true
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        let grouped = g.has_groups();
        let start = Instant::now();
        let deadline = start + opts.time_limit;
        let no_rec = opts.no_recompute;
        if dev.slow.capacity == Bytes::ZERO && !no_rec {
            return recompute_only(g, budget, dev, opts);
        }
        let mut bound = model::step_bound(g, budget, dev, no_rec);
        let mut notes: Vec<String> = Vec::new();
        let mut best: Option<Candidate> = None;
        let mut trace: Vec<Progress> = Vec::new();
        // The offload moves' plans as they find them, for an interrupt.
        let mut report = |sch: &Schedule, step: Seconds| {
            if let Some(w) = opts
                .watch
                .as_ref()
                .filter(|_| !no_rec || sch.recomputations() == 0)
            {
                w.step(dev, step, sch, "remat-fast's offload moves");
            }
        };
        let consider = |best: &mut Option<Candidate>, name: String, sch: Schedule| {
            if no_rec && sch.recomputations() > 0 {
                return;
            }
            if let Some((sch, step)) = fastest_form(g, sch, budget, dev) {
                if let Some(w) = &opts.watch {
                    w.step(dev, step, &sch, &name);
                }
                if best.as_ref().is_none_or(|b| step < b.step) {
                    *best = Some(Candidate { name, sch, step });
                }
            }
        };

        // Whether the joint MILP's time goes to the offload moves instead,
        // known from the graph alone.
        let direct = dev.slow.direct_read.is_some();
        let cols = model::columns(g, direct);
        let moves_instead = grouped || (SEARCH_INSTEAD_COLUMNS < cols && cols <= MAX_COLUMNS);

        // The portfolio.
        let seed_share = opts.time_limit.mul_f64(SEED_TIME_SHARE);
        let seed_end = start
            + if moves_instead {
                seed_share.min(SEARCH_PORTFOLIO_CAP)
            } else {
                seed_share
            };
        consider(
            &mut best,
            "checkpoint-all".into(),
            Schedule::checkpoint_all(g),
        );
        // A recompute plan at once, before the step cover program's share:
        // an interrupt then still has a plan to keep (ResNet-50 at 30% on
        // the GH200 had none for the first 35 s of a 60 s limit).
        if !no_rec {
            if let Some((sch, how)) = super::quick_plan(g, budget, start + opts.time_limit / 20) {
                consider(&mut best, how, sch);
            }
        }
        // The step cover program, on a thread of its own. Where the machine
        // has a core to spare, it runs beside the plan search for the whole
        // limit and its bound is taken whenever it is looked at: FCN8 at 50%
        // on the GH200 needs about 65 s of its staged form to prove the
        // optimum, where its share gave it 9 s of a 60 s limit. On one
        // core it has its share, and is abandoned at half the limit:
        // building the program on a large graph (844,345 columns on
        // random-layered-n1000) took 6.6 s of a 1 s limit, and the build
        // does not poll a stop flag.
        let cover_share = opts.time_limit.mul_f64(COVER_TIME_SHARE);
        let beside = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        // Where the moves have the MILP's time, the moment bound goes first
        // on that thread, and the search does not wait for it.
        let moment_beside = beside && moves_instead && !grouped;
        let mut cover = if grouped {
            notes.push("no step cover program: it assumes one output per kernel".into());
            CoverRun::idle()
        } else {
            let limit = if beside {
                opts.time_limit.mul_f64(1.0 - LEAD_SHARE)
            } else {
                cover_share
            };
            let moment = moment_beside.then(|| opts.time_limit.mul_f64(MOMENT_BESIDE_SHARE));
            CoverRun::start(g, budget, dev, no_rec, limit, cover_share / 3, moment)
        };
        // Beside the search, the program is waited for first where a
        // proof may end the solve early; where the moves have the MILP's
        // time the graph is large and the program has never proven in its
        // share (ResNet-50 at 30%: stopped after 592 s of 600), so that wait
        // would leave a core idle for 15% of the limit.
        let first_wait = if beside && moves_instead {
            Instant::now()
        } else if beside {
            Instant::now() + cover_share
        } else {
            (start + opts.time_limit.mul_f64(COVER_ABANDON_SHARE)).max(Instant::now() + cover_share)
        };
        cover.wait(first_wait, opts.stop.as_ref());
        if !beside {
            cover.stop();
        }
        // A program silent until now is one too large to build in time:
        // what depends on the graph's size below takes it as such.
        // Where the program was not waited for, its silence means nothing.
        let cover_abandoned = !(grouped || cover.heard() || (beside && moves_instead));
        bound = bound.max(cover.bound());
        // The moment bound, on its own thread for the same reason. It
        // sees what a recomputation needs and several stages at once, which
        // the two above do not (ResNet-50 at 30% on the GH200: 32.953 ms
        // from the closed form, 33.20 ms from it).
        if !cover_abandoned && !grouped && !moment_beside {
            let (g2, dev2) = (g.clone(), dev.clone());
            let stop: crate::solver::StopFlag = Default::default();
            let stop2 = stop.clone();
            let share_m = opts.time_limit.mul_f64(MOMENT_TIME_SHARE);
            let found = super::abandonable(
                Instant::now() + share_m.mul_f64(2.0),
                &stop,
                opts.stop.as_ref(),
                move || {
                    let params = bound_params(share_m, stop2, 1e-6);
                    moment_bound::moment_bound(&g2, budget, &dev2, no_rec, &params)
                },
            );
            match found {
                Some(r) => {
                    if let Some(n) = moment_note(g, &r) {
                        notes.push(n);
                    }
                    if let Ok(Some(m)) = r {
                        bound = bound.max(m.bound);
                    }
                }
                None => notes.push("the moment bound was abandoned at its share".into()),
            }
        }
        let done = |best: &Option<Candidate>, bound: Seconds| {
            best.as_ref()
                .is_some_and(|b| b.step.get() <= within_gap(bound.get(), opts.gap))
        };
        let share = |frac: f64| {
            seed_end
                .saturating_duration_since(Instant::now())
                .mul_f64(frac)
                .max(Duration::from_millis(200))
        };
        let mut recompute_plan: Option<Schedule> = None;
        // remat-exact's bound and baselines take about a second whatever its
        // limit on a graph this large for the limit (one whose step cover
        // program was abandoned): random-layered-n1000 with 1 s took 1.2 s
        // of a 0.2 s share, and the solve 2.3 s of its 2.05 s allowance.
        let exact_left_out = cover_abandoned
            && deadline.saturating_duration_since(Instant::now()) < Duration::from_secs(1);
        if exact_left_out && !no_rec {
            notes.push("remat-exact left out: under a second left".into());
        }
        if !no_rec && !done(&best, cover.raise(&mut bound)) && !exact_left_out {
            let ropts = SolveOptions {
                device: None,
                time_limit: share(RECOMPUTE_SHARE),
                watch: None,
                ..opts.clone()
            };
            match remat_exact::RematExact.solve(g, budget, &ropts) {
                Ok(sol) if sol.status.has_plan() => {
                    if let Some(sch) = sol.schedule {
                        recompute_plan = Some(sch.clone());
                        consider(&mut best, "remat-exact".into(), sch);
                    }
                }
                // The tiered strategies plan in the file's node order; a
                // recompute-only plan in another may still fit (f2 at 72 B).
                Ok(sol) if sol.status == Status::Infeasible => notes.push(
                    if crate::graph::analysis::order_is_forced(g) {
                        "no recompute-only plan fits"
                    } else {
                        "no recompute-only plan in the file's node order fits"
                    }
                    .into(),
                ),
                _ => notes.push("remat-exact found no recompute-only plan in its share".into()),
            }
        }
        let policies = seed_policies();
        // Every policy runs, even past the portfolio's share (the answer is
        // promised never to be slower than any of them), but not past the
        // time limit, which is the firmer promise: a policy left out is
        // named in the detail.
        let mut skipped: Vec<&str> = Vec::new();
        let mut policy_plans: Vec<(Schedule, Seconds)> = Vec::new();
        let n_pol = policies.len();
        let mut abandoned = false;
        for (k, p) in policies.into_iter().enumerate() {
            if done(&best, cover.raise(&mut bound)) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            // A policy abandoned at its limit still runs to its next check:
            // starting more beside it would pile up their memory.
            if left < MIN_POLICY_TIME / 4 || abandoned {
                skipped.push(p.name());
                continue;
            }
            let popts = SolveOptions {
                time_limit: share(1.0 / (n_pol - k) as f64)
                    .max(MIN_POLICY_TIME)
                    .min(left),
                watch: None,
                ..opts.clone()
            };
            let name = p.name();
            match super::policy_within_limit(p, g, budget, &popts) {
                Some(Ok(sol)) => {
                    if let (true, Some(sch)) = (sol.status.has_plan(), sol.schedule) {
                        if let Some((_, step)) = fastest_form(g, sch.clone(), budget, dev) {
                            policy_plans.push((sch.clone(), step));
                        }
                        consider(&mut best, name.into(), sch);
                    }
                }
                Some(Err(_)) => {}
                None => {
                    abandoned = true;
                    skipped.push(name);
                }
            }
        }
        // The offload and recompute moves of remat-fast, from the fastest
        // plan so far and from the recompute-only one: they often find
        // the mixed plans the MILP would need long to reach.
        let mut starts: Vec<Schedule> = best.iter().map(|b| b.sch.clone()).collect();
        if let Some(r) = &recompute_plan {
            if starts.first() != Some(r) {
                starts.push(r.clone());
            }
        }
        // And from every other policy's plan, as remat-fast does: the
        // fastest start is not always the best one. FCN8 at 50% on the
        // GH200: from autotm-async's plan the moves stopped at 124.354 ms
        // in a 60 s solve, while remat-fast, from autotm-sync's, found the
        // optimum (121.699 ms) in 0.6 s. Only from plans near the best
        // (within START_SPREAD), so that the slices of the starts that
        // matter do not go to plans several times slower.
        let near = best.as_ref().map_or(Seconds(f64::INFINITY), |b| {
            Seconds(b.step.get() * (1.0 + START_SPREAD))
        });
        for (sch, step) in policy_plans {
            if step <= near && !starts.contains(&sch) {
                starts.push(sch);
            }
        }
        // Below the recompute-only minimum (or with recomputation
        // forbidden), memory is what is short: the plan of least memory is
        // a candidate, and where nothing else fits, the search starts from
        // it. Where a policy's plan fits, the search from that one keeps
        // the whole share.
        if recompute_plan.is_none() {
            let least = tiered::least_memory(g);
            consider(&mut best, tiered::LEAST_MEMORY.into(), least.clone());
            if starts.is_empty() {
                starts.push(least);
            }
        }
        let n_starts = starts.len();
        for sch in starts {
            if done(&best, cover.raise(&mut bound)) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = opts
                .time_limit
                .mul_f64(SEARCH_TIME_SHARE / n_starts as f64)
                .min(left.mul_f64(0.5));
            if let Some((found, _)) = tiered_search::improve(
                g,
                budget,
                dev,
                sch,
                Instant::now() + slice,
                !no_rec,
                &mut report,
            ) {
                consider(&mut best, "remat-fast's offload moves".into(), found);
            }
        }
        if let Some(b) = &best {
            trace.push(Progress {
                secs: start.elapsed().as_secs_f64(),
                cost: Some(b.step.get()),
                bound: Some(bound.get()),
            });
        }

        // The MILP.
        // The MILP stops early enough for the offload moves to run once
        // more from its plan, which it may find outside the moves' reach
        // but short of moves outside its own family.
        let milp_deadline = deadline
            .checked_sub(opts.time_limit.mul_f64(FINAL_SEARCH_SHARE))
            .unwrap_or(deadline);
        let left = milp_deadline.saturating_duration_since(Instant::now());
        let milp_note: String;
        let mut milp_plan: Option<Schedule> = None;
        let mut search_instead = false;
        if done(&best, cover.raise(&mut bound)) {
            milp_note = "the best plan meets the graph's bound: no MILP needed".into();
        } else if moves_instead {
            // Its time goes to the offload moves from the turn seeds and
            // checkpoint-all, as remat-fast's does: left idle on
            // multi-output kernels, remat-tiered answered slower than
            // remat-fast there, and past SEARCH_INSTEAD_COLUMNS the MILP
            // never improved on the portfolio in its time.
            milp_note = if grouped {
                "no joint MILP on multi-output kernels: the offload moves had its time".into()
            } else {
                format!(
                    "no joint MILP at about {cols} columns (past {SEARCH_INSTEAD_COLUMNS} it never improved on the portfolio in its time): the offload moves had its time"
                )
            };
            search_instead = true;
        } else if cols > MAX_COLUMNS {
            milp_note = format!(
                "the joint MILP would have about {cols} columns, over the limit of {MAX_COLUMNS}: portfolio only"
            );
        } else if left.is_zero() {
            milp_note = "no time left for the MILP".into();
        } else {
            // On a worker thread: HiGHS's setup does not poll the time
            // limit, so at the deadline the answer is the portfolio's and
            // the worker is left to finish by itself.
            let (tx, rx) = std::sync::mpsc::channel();
            let (g2, dev2) = (g.clone(), dev.clone());
            let warm_sch = best.as_ref().map(|b| b.sch.clone());
            // Stops the worker's solver at its next poll once abandoned.
            let stop: crate::solver::StopFlag = Default::default();
            let mopts = SolveOptions {
                stop: Some(stop.clone()),
                ..opts.clone()
            };
            let spawned = std::thread::Builder::new()
                .name("remat-tiered-milp".into())
                .spawn(move || {
                    let early = tx.clone();
                    let offload_only = move |sch: Schedule| {
                        let _ = early.send(MilpMsg::OffloadOnly(sch));
                    };
                    let _ = tx.send(MilpMsg::Done(milp_phase(
                        &g2,
                        budget,
                        &dev2,
                        warm_sch.as_ref(),
                        milp_deadline,
                        &mopts,
                        &offload_only,
                    )));
                });
            // The offload-only MILP's plan arrives first and is kept even
            // if the joint MILP after it is abandoned: it is finished work,
            // and with it lost, VGG19 at 70% on the GH200 had answered 1.0%
            // slower than the standalone offload-only solve.
            let mut got = None;
            if spawned.is_ok() {
                // Past the deadline, a little grace for the solver's own
                // return and the simulation of its plan.
                let until = milp_deadline + MILP_GRACE;
                while let Ok(msg) = rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                {
                    match msg {
                        MilpMsg::OffloadOnly(sch) => {
                            consider(&mut best, "the offload-only MILP".into(), sch)
                        }
                        MilpMsg::Done(r) => {
                            got = Some(r);
                            break;
                        }
                    }
                }
            }
            if got.is_none() {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            match got {
                None => {
                    milp_note = format!(
                        "the joint MILP was abandoned at the time limit (model build, LP or solver setup did not stop in time); {}",
                        "the answer is the portfolio's"
                    );
                }
                Some(r) => {
                    let r = r?;
                    // The MILP bounds plans whose copies end within their
                    // stage; leads can beat it, so it is reported, not
                    // taken as the answer's bound.
                    milp_note = match r.bound {
                        Some(b) if b.get() > 0.0 && b.get().is_finite() => {
                            format!("{}; its bound for copies within their stage {b}", r.note)
                        }
                        _ => r.note,
                    };
                    if let Some(sch) = r.schedule {
                        milp_plan = Some(sch.clone());
                        match step_time(g, &sch, budget, dev) {
                            Some(step) => {
                                // The model's objective is the simulated step
                                // time; a difference is a modelling bug,
                                // reported.
                                let m = r.model_step.get();
                                if (step.get() - m).abs() > 1e-6 * m.max(1e-12) {
                                    notes.push(format!(
                                        "the MILP's step {} differs from the simulated {step}",
                                        r.model_step
                                    ));
                                }
                                consider(&mut best, "the joint MILP".into(), sch);
                            }
                            None => notes.push("the MILP's plan does not fit in simulation".into()),
                        }
                    }
                }
            }
        }
        notes.insert(0, milp_note);
        // The last share of the limit goes to the leads of the best plan.
        let moves_end = deadline
            .checked_sub(opts.time_limit.mul_f64(LEAD_SHARE))
            .unwrap_or(deadline);
        // Local optima other than the best, whose leads may still be worth
        // a descent.
        let mut finalists: Vec<(Schedule, Seconds)> = Vec::new();
        if search_instead {
            // From the turn seeds and checkpoint-all for half of what is
            // left, in equal shares, then from the best plan so far for
            // the rest.
            let half = Instant::now() + moves_end.saturating_duration_since(Instant::now()) / 2;
            let mut froms: Vec<(String, Schedule)> = Vec::new();
            if !no_rec {
                for s in turn_seed::seeds(g, dev, budget) {
                    let name = format!("remat-fast's offload moves from {}", turn_seed::NAME);
                    froms.push((name, s));
                }
            }
            froms.push((
                "remat-fast's offload moves".into(),
                Schedule::checkpoint_all(g),
            ));
            let k = froms.len();
            for (j, (name, from)) in froms.into_iter().enumerate() {
                let left = half.saturating_duration_since(Instant::now());
                let until = Instant::now() + left / (k - j) as u32;
                if let Some((found, step)) =
                    tiered_search::improve(g, budget, dev, from, until, !no_rec, &mut report)
                {
                    finalists.push((found.clone(), step));
                    consider(&mut best, name, found);
                }
            }
            if let Some(b) = best.as_ref().map(|b| b.sch.clone()) {
                if !done(&best, cover.raise(&mut bound)) {
                    if let Some((found, _)) =
                        tiered_search::improve(g, budget, dev, b, moves_end, !no_rec, &mut report)
                    {
                        consider(&mut best, "remat-fast's offload moves".into(), found);
                    }
                }
            }
        }
        if let Some(sch) = milp_plan {
            if !done(&best, cover.raise(&mut bound)) && Instant::now() < moves_end {
                if let Some((found, _)) =
                    tiered_search::improve(g, budget, dev, sch, moves_end, !no_rec, &mut report)
                {
                    consider(
                        &mut best,
                        "remat-fast's offload moves from the MILP's plan".into(),
                        found,
                    );
                }
            }
        }
        // What the descents leave of the moves' time goes to a random walk
        // from the best plan, when it is far enough from its bound for one
        // to be worth the time (walks may recompute: not for offload only).
        let far = |step: Seconds| step.get() > bound.get() * (1.0 + WALK_MIN_GAP);
        // A walk that stalls before the time is up is followed by another
        // random stream from the best plan, on each of `--threads` threads:
        // on ResNet-50 at 30% on the A100, two streams of 150 s from one
        // plan ended at 108.973 and 108.943 ms.
        if let Some(b) = best.as_ref().filter(|b| !no_rec && far(b.step)) {
            let (found, streams) = tiered_search::walks(
                g,
                budget,
                dev,
                b.sch.clone(),
                moves_end,
                opts.threads,
                &far,
                &report,
            );
            if let Some((found, _)) = found {
                consider(
                    &mut best,
                    "a random walk of remat-fast's offload moves".into(),
                    found,
                );
            }
            if streams > 0 {
                notes.push(format!("{streams} random walks from the best plan"));
            }
        }
        if let Some(b) = best.as_mut() {
            // The best plan's leads first, then those of the descent from
            // checkpoint-all when it ended elsewhere, each in its share of
            // what is left: a plan a little slower may lead to a faster
            // one (ResNet-50 at 30% on the GH200: that descent's 34.500 ms
            // led to 34.317, where the best plan, 34.450, gained nothing).
            let mut cands = vec![(b.sch.clone(), b.step)];
            cands.extend(
                finalists
                    .into_iter()
                    .filter(|(s, step)| *s != b.sch && *step != b.step),
            );
            let k = cands.len();
            for (j, (sch, from)) in cands.into_iter().enumerate() {
                if b.step.get() <= within_gap(bound.get(), opts.gap) {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let until = Instant::now() + left / (k - j) as u32;
                let Some(led) = tiered::descend_leads(g, dev, budget, &sch, until) else {
                    continue;
                };
                if led.step < b.step.get() {
                    notes.push(format!(
                        "the leads of its copies chosen by simulation: {} → {}",
                        from,
                        Seconds(led.step)
                    ));
                    if let Some(w) = &opts.watch {
                        w.step(dev, Seconds(led.step), &led.sch, &b.name);
                    }
                    b.sch = led.sch;
                    b.step = Seconds(led.step);
                }
            }
        }
        if !skipped.is_empty() {
            notes.push(format!(
                "left out for want of time (not run, or stopped at its share): {}",
                skipped.join(", ")
            ));
        }
        // What is left of the limit goes to the step cover program, if it
        // is still running and there is a plan not yet proven. Without a
        // plan a bound proves nothing, and the answer says how soon the
        // searches ended, which waiting would hide.
        let unproven = |best: &Option<Candidate>, bound: Seconds| {
            best.as_ref()
                .is_some_and(|b| b.step.get() > within_gap(bound.get(), opts.gap))
        };
        if unproven(&best, cover.raise(&mut bound)) {
            cover.wait(deadline, opts.stop.as_ref());
        }
        bound = bound.max(cover.bound());
        notes.extend(cover.moment_note(g));
        if let Some(n) = cover.note(start) {
            notes.push(n);
        }
        let floor = crate::graph::analysis::min_feasible_budget(g);
        if budget < floor {
            notes.push(format!(
                "the budget is below the recompute-only minimum of {}: only the slow tier makes a plan possible here",
                floor.human()
            ));
        }

        let Some(b) = best else {
            let mut sol = Solution::no_fit(format!(
                "no plan fits {} on {}: {}",
                budget.human(),
                dev.name,
                notes.join("; ")
            ));
            sol.step_bound = Some(bound);
            return Ok(sol);
        };
        // Every bound taken holds for every plan, so none lies above the
        // plan in hand; the clip guards against solver tolerance only. One
        // further above is wrong (a program's numbers at extreme device
        // ratios), and passing it off as the plan's own step would call the
        // plan optimal: the all-fast step stands instead.
        let bound = if bound.get() > b.step.get() * (1.0 + 1e-6) {
            notes.push(format!("a bound of {bound} above the plan was dropped"));
            dev.all_fast_step(g)
        } else {
            bound.min(b.step)
        };
        trace.push(Progress {
            secs: start.elapsed().as_secs_f64(),
            cost: Some(b.step.get()),
            bound: Some(bound.get()),
        });
        let detail = format!(
            "best plan from {} ({} copies out, {} recomputations); {}",
            b.name,
            (0..b.sch.stages())
                .map(|t| b.sch.o_row(t).len())
                .sum::<usize>(),
            b.sch.recomputations(),
            notes.join("; ")
        );
        // The MILP's proof covers copies within their stage only; the
        // answer is optimal when it meets a bound that holds for all plans.
        let optimal = b.step.get() <= within_gap(bound.get(), opts.gap);
        let mut sol = Solution::feasible(b.sch, Some(detail));
        sol.status = if optimal {
            Status::Optimal
        } else {
            Status::Feasible
        };
        sol.step_bound = Some(bound);
        sol.trace = trace;
        Ok(sol)
    }
}

/// What the step cover program's thread sends: each form's bound as it is
/// found, then the program's answer.
enum CoverMsg {
    Moment(MomentResult),
    Found(step_cover::StepCover),
    Done(Result<Option<step_cover::StepCover>, crate::solver::SolverError>),
}

/// The step cover program's run, and the best bound it has given so far.
struct CoverRun {
    worker: Option<super::Background<CoverMsg>>,
    stop: crate::solver::StopFlag,
    best: Option<step_cover::StepCover>,
    /// The moment bound's answer, where it ran first on this thread.
    moment: Option<MomentResult>,
    /// How it ended, for the answer's detail; `None` while it runs.
    ended: Option<String>,
    heard: bool,
}

impl CoverRun {
    /// No program (multi-output kernels): nothing to wait for.
    fn idle() -> CoverRun {
        CoverRun {
            worker: None,
            stop: Default::default(),
            best: None,
            moment: None,
            ended: None,
            heard: true,
        }
    }

    /// Starts the program with `limit` for its solves, `whole_step` of it
    /// for the whole-step form; with `moment`, the moment bound first, for
    /// that much of the limit.
    fn start(
        g: &Graph,
        budget: Bytes,
        dev: &Device,
        no_rec: bool,
        limit: Duration,
        whole_step: Duration,
        moment: Option<Duration>,
    ) -> CoverRun {
        let stop: crate::solver::StopFlag = Default::default();
        let (g2, dev2, stop2) = (g.clone(), dev.clone(), stop.clone());
        let worker = super::Background::start(stop.clone(), move |tx| {
            let began = Instant::now();
            if let Some(share) = moment {
                let params = bound_params(share, stop2.clone(), 1e-6);
                let r = moment_bound::moment_bound(&g2, budget, &dev2, no_rec, &params);
                let _ = tx.send(CoverMsg::Moment(r));
            }
            let limit = limit.saturating_sub(began.elapsed());
            let params = bound_params(limit, stop2, step_cover::FEASIBILITY_TOLERANCE);
            let r = step_cover::step_cover_bounds(
                &g2,
                budget,
                &dev2,
                no_rec,
                step_cover::Copies::Spanning,
                &params,
                whole_step,
                &mut |c| {
                    let _ = tx.send(CoverMsg::Found(c.clone()));
                },
            );
            let _ = tx.send(CoverMsg::Done(r));
        });
        CoverRun {
            ended: worker
                .is_none()
                .then(|| "the step cover program's thread did not start".into()),
            worker,
            stop,
            best: None,
            moment: None,
            heard: false,
        }
    }

    fn take(&mut self, m: CoverMsg) {
        let c = match m {
            CoverMsg::Moment(r) => {
                self.moment = Some(r);
                return;
            }
            CoverMsg::Found(c) => {
                self.heard = true;
                c
            }
            CoverMsg::Done(r) => {
                self.heard = true;
                self.ended = Some(match r {
                    Ok(Some(c)) => {
                        let note = format!(
                            "step cover program {} in {:.2} s ({} columns): {}",
                            if c.proven { "solved" } else { "stopped" },
                            c.seconds,
                            c.columns,
                            c.bound
                        );
                        if self.best.as_ref().is_none_or(|b| c.bound >= b.bound) {
                            self.best = Some(c);
                        }
                        note
                    }
                    Ok(None) => "the step cover program is too big to build".into(),
                    Err(e) => format!("the step cover program failed: {e}"),
                });
                return;
            }
        };
        if self.best.as_ref().is_none_or(|b| c.bound >= b.bound) {
            self.best = Some(c);
        }
    }

    /// Waits until the program has ended, `until`, or the caller's stop.
    fn wait(&mut self, until: Instant, caller: Option<&crate::solver::StopFlag>) {
        while self.ended.is_none() {
            let Some(m) = self
                .worker
                .as_mut()
                .and_then(|w| w.next_until(until, caller))
            else {
                break;
            };
            self.take(m);
        }
    }

    /// `bound` raised by what the program has sent since it was last
    /// looked at.
    fn raise(&mut self, bound: &mut Seconds) -> Seconds {
        for m in self.worker.as_mut().map(|w| w.drain()).unwrap_or_default() {
            self.take(m);
        }
        *bound = (*bound).max(self.bound());
        *bound
    }

    fn bound(&self) -> Seconds {
        let moment = match &self.moment {
            Some(Ok(Some(m))) => m.bound,
            _ => Seconds::ZERO,
        };
        self.best
            .as_ref()
            .map_or(Seconds::ZERO, |c| c.bound)
            .max(moment)
    }

    /// What the moment bound gave on this thread, for the answer's detail.
    fn moment_note(&self, g: &Graph) -> Option<String> {
        self.moment.as_ref().and_then(|r| moment_note(g, r))
    }

    fn heard(&self) -> bool {
        self.heard
    }

    /// Stops the program's solver at its next poll.
    fn stop(&mut self) {
        if self.ended.is_none() {
            self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// How the program ended, for the answer's detail; one still running
    /// is stopped, its best bound so far kept.
    fn note(&mut self, start: Instant) -> Option<String> {
        if self.worker.as_ref().is_some_and(|w| w.ended()) && self.ended.is_none() {
            self.ended = Some("the step cover program's thread ended without an answer".into());
        }
        if self.worker.is_none() && self.ended.is_none() {
            return None;
        }
        self.stop();
        Some(self.ended.clone().unwrap_or_else(|| {
            format!(
                "the step cover program was stopped at {:.2} s{}",
                start.elapsed().as_secs_f64(),
                self.best
                    .as_ref()
                    .map(|c| format!(", its bound so far {}", c.bound))
                    .unwrap_or_default()
            )
        }))
    }
}

/// The moment bound's answer (`None`: not built for this graph).
type MomentResult = Result<Option<moment_bound::MomentBound>, crate::solver::SolverError>;

/// The answer's note on the moment bound: its moments and bound, or why
/// it failed.
fn moment_note(g: &Graph, r: &MomentResult) -> Option<String> {
    match r {
        Ok(Some(m)) => Some(format!(
            "moment bound at nodes {} ({} solves, {:.2} s): {}",
            m.moments
                .iter()
                .map(|&t| g.node(t).name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            m.solves,
            m.seconds,
            m.bound
        )),
        Ok(None) => None,
        Err(e) => Some(format!("the moment bound failed: {e}")),
    }
}

struct Candidate {
    name: String,
    sch: Schedule,
    step: Seconds,
}

/// What the MILP worker reports: the offload-only MILP's plan as soon as
/// it has one, then the joint MILP's outcome.
enum MilpMsg {
    OffloadOnly(Schedule),
    Done(Result<MilpOut, StrategyError>),
}

/// What the MILP phase found.
struct MilpOut {
    schedule: Option<Schedule>,
    model_step: Seconds,
    bound: Option<Seconds>,
    note: String,
}

/// How long past the deadline the strategy waits for the MILP's answer.
const MILP_GRACE: Duration = Duration::from_millis(500);

/// Builds the joint model, bounds it by its LP relaxation, fixes what the
/// reduced costs allow against the warm start, and solves it.
fn milp_phase(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    warm_sch: Option<&Schedule>,
    deadline: Instant,
    opts: &SolveOptions,
    offload_only: &dyn Fn(Schedule),
) -> Result<MilpOut, StrategyError> {
    let mstart = Instant::now();
    let opt = Options {
        no_recompute: opts.no_recompute,
        transfers: true,
    };
    let mut f = TieredFormulation::build(g, budget, dev, opt);
    let mut warm = warm_sch
        .and_then(|sch| f.vector_for(g, sch))
        .filter(|x| f.model.max_violation(x) <= 1e-7);
    let mut bound: Option<Seconds> = None;
    let mut fixed = 0;
    let mut first = String::new();
    if !opt.no_recompute {
        // The offload-only MILP first (R fixed at the identity): much
        // smaller to search, and its best plan is one the joint model
        // admits, so it warm-starts the joint search. Measured on FCN8 at
        // 70% on the GH200: without it, 30 s of the joint MILP ended at
        // autotm-async's plan, 2.3% slower than the offload-only optimum.
        let mut off = f.model.clone();
        for t in 0..f.n {
            for i in 0..t {
                off.col_upper[f.r(t, i)] = 0.0;
            }
        }
        let off_warm = warm.clone().filter(|x| off.max_violation(x) <= 1e-7);
        let params = Params {
            time_limit: deadline
                .saturating_duration_since(Instant::now())
                .mul_f64(OFFLOAD_FIRST_SHARE),
            gap: opts.gap,
            threads: opts.threads,
            stop: opts.stop.clone(),
            ..Params::default()
        };
        let r = solve_mip(&off, opts.backend, &params, off_warm.as_deref())
            .map_err(|e| StrategyError::Solver(e.to_string()))?;
        if let Some(x) = r.x {
            if off.max_violation(&x) <= 1e-7 {
                offload_only(f.schedule(&x));
            }
            let better = warm
                .as_ref()
                .is_none_or(|w| f.model.objective(&x) < f.model.objective(w));
            if better && f.model.max_violation(&x) <= 1e-7 {
                warm = Some(x);
            }
        }
        first = format!(
            "offload-only MILP {} in {:.1} s, then ",
            if r.status == MipStatus::Optimal {
                "optimal"
            } else {
                "stopped"
            },
            r.seconds
        );
    }
    // The LP relaxation: its duals bound the model's optimum, and every
    // binary whose reduced cost alone would take a plan past the incumbent
    // is fixed (exact: no better plan is removed).
    let lp_left = deadline
        .saturating_duration_since(Instant::now())
        .mul_f64(LP_TIME_SHARE);
    if let Some(db) = lp_duals(&f.model, lp_left, opts)? {
        bound = Some(Seconds(db.bound * f.time_scale));
        if let Some(x) = &warm {
            let ub = f.model.objective(x);
            let fixes = db.fixable(&f.model, ub, 1e-7 * ub.abs().max(1.0));
            fixed = fixes.len();
            fixing::apply(&mut f.model, &fixes);
        }
    }
    let params = Params {
        time_limit: deadline.saturating_duration_since(Instant::now()),
        gap: opts.gap,
        threads: opts.threads,
        stop: opts.stop.clone(),
        ..Params::default()
    };
    let res = solve_mip(&f.model, opts.backend, &params, warm.as_deref())
        .map_err(|e| StrategyError::Solver(e.to_string()))?;
    let size = format!(
        "{} columns, {} rows",
        f.model.num_cols(),
        f.model.num_rows()
    );
    if let Some(b) = res.bound {
        let b = Seconds(b * f.time_scale);
        bound = Some(bound.map_or(b, |x| x.max(b)));
    }
    let note = match res.status {
        // Only the model's plan family is empty: a portfolio plan that
        // fits (none, or the MILP would have had a warm start) still
        // answers.
        MipStatus::Infeasible => format!("the joint MILP admits no plan ({size})"),
        s => format!(
            "{first}joint MILP {} in {:.1} s ({size}, {fixed} binaries fixed by reduced cost{})",
            if s == MipStatus::Optimal {
                "optimal".to_string()
            } else {
                res.stopped_by()
            },
            mstart.elapsed().as_secs_f64(),
            if warm.is_some() { ", warm-started" } else { "" }
        ),
    };
    Ok(MilpOut {
        model_step: res.x.as_ref().map_or(Seconds::ZERO, |x| f.step_of(x)),
        schedule: res.x.as_ref().map(|x| f.schedule(x)),
        bound,
        note,
    })
}

/// Share of the MILP phase the offload-only MILP may take.
const OFFLOAD_FIRST_SHARE: f64 = 0.3;

/// Share of the MILP's time its LP relaxation may take.
const LP_TIME_SHARE: f64 = 0.3;

/// The LP relaxation's duals as a Lagrangian bound, if the LP gives any
/// within `limit`.
fn lp_duals(
    m: &crate::solver::Model,
    limit: Duration,
    opts: &SolveOptions,
) -> Result<Option<DualBound>, StrategyError> {
    let params = Params {
        time_limit: limit,
        threads: opts.threads,
        stop: opts.stop.clone(),
        ..Params::default()
    };
    let err = |e: crate::solver::SolverError| StrategyError::Solver(e.to_string());
    let method = if m.num_cols() > 60_000 {
        LpMethod::Ipm
    } else {
        LpMethod::Choose
    };
    let r = LpSession::new(m, &params, method)
        .map_err(err)?
        .solve()
        .map_err(err)?;
    Ok(match r.status {
        LpStatus::Optimal | LpStatus::Stopped if !r.row_dual.is_empty() => {
            Some(DualBound::from_duals(m, &r.row_dual))
        }
        _ => None,
    })
}

/// The simulated step time of a schedule on the device, if its plan fits.
fn step_time(g: &Graph, sch: &Schedule, budget: Bytes, dev: &Device) -> Option<Seconds> {
    let plan = generate_plan(g, sch).ok()?;
    let sim = simulate_on(g, &plan, Some(dev)).ok()?;
    (sim.peak <= budget).then(|| sim.timing.map(|t| t.step))?
}

/// `sch` or, if faster, the same schedule with its copies spanning stages
/// ([`tiered::faster_with_leads`]), with its simulated step; `None` when
/// it does not fit, even with fetches deferred where it is over budget.
fn fastest_form(
    g: &Graph,
    sch: Schedule,
    budget: Bytes,
    dev: &Device,
) -> Option<(Schedule, Seconds)> {
    // The MILP's and the policies' plans fetch within a stage; over budget,
    // the same plan may fit with fetches deferred.
    let (sch, plan, sim) = tiered::fitting_form(g, dev, budget, sch)?;
    match tiered::faster_with_leads(g, dev, budget, &sch, &plan, &sim) {
        Some(led) => Some((led.sch, Seconds(led.step))),
        None => Some((sch, sim.timing?.step)),
    }
}

/// No slow tier: remat-exact's recompute-only optimum is the fastest step.
fn recompute_only(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    opts: &SolveOptions,
) -> Result<Solution, StrategyError> {
    let ropts = SolveOptions {
        device: None,
        ..opts.clone()
    };
    let mut sol = remat_exact::RematExact.solve(g, budget, &ropts)?;
    sol.step_bound = sol
        .lower_bound
        .map(|lb| dev.compute_time(lb))
        .or(Some(dev.all_fast_step(g)));
    sol.detail = Some(format!(
        "{} has no slow tier (capacity 0): the recompute-only optimum; {}",
        dev.name,
        sol.detail.unwrap_or_default()
    ));
    Ok(sol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analysis::checkpoint_all_peak;
    use crate::graph::GraphFile;
    use std::sync::Mutex;

    /// The worker hands back the offload-only MILP's plan before the joint
    /// MILP runs, so an abandoned joint MILP cannot lose it: on Checkmate's
    /// four-layer training chain, at every budget between the largest node
    /// with its inputs and the peak, on a slow link (a copy costs as much
    /// as the layer it hides behind), the reported plan recomputes
    /// nothing, fits in simulation, and is priced by the offload-only
    /// model at its simulated step; and the joint answer, warm-started
    /// from it, is never slower.
    #[test]
    fn the_offload_only_plan_is_reported_before_the_joint_milp() {
        let text = "name: chain4\ngraph: forward\nnodes:\n\
             - {name: f0, cost: 1, memory: 4, saves: [self]}\n\
             - {name: f1, cost: 3, memory: 4, deps: [f0], saves: [self]}\n\
             - {name: f2, cost: 1, memory: 2, deps: [f1], saves: [self]}\n\
             - {name: f3, cost: 2, memory: 3, deps: [f2], saves: [self]}\n\
             - {name: loss, cost: 1, memory: 1, deps: [f3]}\n";
        let g = Graph::from_file(&GraphFile::parse(text).unwrap(), "chain4.yaml").unwrap();
        let dev = Device::parse(
            "name: link\ncompute: {cost_is_seconds: true}\nfast: {capacity: 1000}\n\
             slow: {capacity: 1000, to_slow: 2, to_fast: 2, latency: 0, engines: duplex, direct_read: none}\n",
        )
        .unwrap();
        let opts = SolveOptions::default();
        let floor = crate::graph::analysis::min_feasible_budget(&g).get();
        let mut reported = 0;
        for b in floor..checkpoint_all_peak(&g).get() {
            let budget = Bytes(b);
            let seen: Mutex<Vec<Schedule>> = Mutex::new(Vec::new());
            let report = |s: Schedule| seen.lock().unwrap().push(s);
            let deadline = Instant::now() + Duration::from_secs(20);
            let out = milp_phase(&g, budget, &dev, None, deadline, &opts, &report).unwrap();
            let seen = seen.into_inner().unwrap();
            assert!(seen.len() <= 1, "budget {b}: {} reports", seen.len());
            let Some(off) = seen.first() else { continue };
            reported += 1;
            assert_eq!(off.recomputations(), 0, "budget {b}");
            let sim = simulate_on(&g, &generate_plan(&g, off).unwrap(), Some(&dev)).unwrap();
            assert!(sim.peak <= budget, "budget {b}: peak {:?}", sim.peak);
            let off_step = sim.timing.unwrap().step.get();
            let joint = out
                .schedule
                .expect("the joint MILP has the warm start at least");
            let jsim = simulate_on(&g, &generate_plan(&g, &joint).unwrap(), Some(&dev)).unwrap();
            let joint_step = jsim.timing.unwrap().step.get();
            assert!(
                joint_step <= off_step * (1.0 + 1e-9),
                "budget {b}: joint {joint_step} s, offload-only {off_step} s"
            );
            assert!(jsim.peak <= budget);
        }
        assert!(
            reported >= 2,
            "only {reported} budgets had an offload-only plan"
        );
    }
}
