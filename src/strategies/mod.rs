//! Strategies: each turns (graph, budget) into a schedule. They share one
//! plan generator and one simulator (see [`crate::solve`]), so a strategy
//! cannot report a figure that the simulator did not confirm.
//!
//! A strategy that moves values to a slow tier reads the machine from
//! [`SolveOptions::device`] and returns the same `Schedule`, with its
//! transfer decisions set (`Schedule::offload`, or `set_o` / `set_p` /
//! `set_h` directly; the rules are on [`crate::schedule::Transfers`]). It
//! never builds statements or times anything itself: the pipeline generates
//! the plan and the simulator reports its step time.

pub mod autotm_async;
pub mod autotm_static;
pub mod autotm_sync;
pub mod candidates;
pub mod checkmate_approx;
pub mod checkmate_ilp;
pub mod checkpoint_all;
pub mod chen;
pub mod dtr;
pub mod griewank;
pub mod knobs;
pub mod local_search;
pub mod lp_bound;
pub mod mc_dla;
pub mod offload_all;
pub mod portfolio;
pub mod remat_exact;
pub mod remat_tiered;
pub mod segments;
pub(crate) mod tiered;
pub mod tiered_search;
pub mod tiertrain;
pub mod turn_seed;
pub mod watch;

use crate::graph::Graph;
use crate::schedule::Schedule;
use crate::solver::cover::{self, GraphBound};
use crate::solver::Backend;
pub use crate::solver::Progress;
use crate::units::Bytes;
use std::fmt;
use std::time::{Duration, Instant};

/// How a strategy's answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Proven optimal (within the requested relative gap).
    Optimal,
    /// A plan that fits; not proven optimal (a heuristic, or a solver
    /// stopped by its limit with the gap reported alongside).
    Feasible,
    /// Proven: no plan at all fits the budget (below the smallest budget,
    /// or an exact program admits none).
    Infeasible,
    /// This strategy found no plan that fits; others may. Kept apart from
    /// [`Status::Infeasible`] because a user told "infeasible" stops
    /// looking, while a better strategy may well succeed.
    NoFit,
    /// The time limit ran out before any plan was found.
    NoSolution,
    /// No plan by design: only a lower bound on the optimal cost (lp-bound).
    Bound,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Optimal => "optimal",
            Status::Feasible => "feasible",
            Status::Infeasible => "infeasible",
            Status::NoFit => "no-fit",
            Status::NoSolution => "no-solution",
            Status::Bound => "bound",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "optimal" => Status::Optimal,
            "feasible" => Status::Feasible,
            "infeasible" => Status::Infeasible,
            "no-fit" => Status::NoFit,
            "no-solution" => Status::NoSolution,
            "bound" => Status::Bound,
            _ => return None,
        })
    }

    pub fn has_plan(self) -> bool {
        matches!(self, Status::Optimal | Status::Feasible)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Knobs shared by all strategies; heuristics ignore the solver ones.
#[derive(Debug, Clone)]
pub struct SolveOptions {
    pub time_limit: Duration,
    /// Relative MIP gap at which a solver may stop and call it optimal.
    pub gap: f64,
    pub threads: usize,
    pub backend: Backend,
    /// A known-good schedule to warm-start from, with its origin's name.
    pub warm_start: Option<(String, Schedule)>,
    /// Only plans costing at most this are acceptable (max-batch search).
    pub cost_bound: Option<f64>,
    /// A lower bound the caller has already proved for this graph and
    /// budget (the MILP pipeline passes its graph bound to the heuristics
    /// it seeds from), so it is not computed twice.
    pub known_bound: Option<f64>,
    /// Where strategies report plans and bounds as they find them, for a
    /// progress display and for answering on an interrupt.
    pub watch: Option<std::sync::Arc<watch::Watch>>,
    /// The machine, when the user gave one (`--device`): tiered strategies
    /// read its slow tier and copy engines, and the pipeline times every
    /// plan on it. Recompute-only strategies ignore it.
    pub device: Option<std::sync::Arc<crate::device::Device>>,
    /// Plans may not recompute (`--no-recompute`): the offload-only
    /// optimum, for `remat-tiered`. Other strategies ignore it.
    pub no_recompute: bool,
    /// Also plan in another node order than the file's, found by the
    /// node-order search, in half of the time (`--search-orders`); the
    /// cheaper plan wins. Only strategies that reorder
    /// ([`Strategy::may_reorder`]) take it.
    pub search_orders: bool,
    /// Set when the answer is wanted now (whoever waits stopped waiting):
    /// a strategy that checks it returns its best plan so far, and the
    /// solvers stop at their next poll. The time limit works without it.
    pub stop: Option<crate::solver::StopFlag>,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            time_limit: Duration::from_secs(600),
            gap: crate::solve::OPTIMAL_GAP,
            threads: 1,
            backend: Backend::default(),
            warm_start: None,
            cost_bound: None,
            known_bound: None,
            watch: None,
            device: None,
            no_recompute: false,
            search_orders: false,
            stop: None,
        }
    }
}

/// What a strategy hands back before simulation.
#[derive(Debug, Clone)]
pub struct Solution {
    pub status: Status,
    pub schedule: Option<Schedule>,
    /// A proven lower bound on the cost of any plan within this budget.
    pub lower_bound: Option<f64>,
    /// Human-readable detail: the knob setting chosen, the seed plan, ...
    pub detail: Option<String>,
    /// The solver's own peak estimate in bytes (fixed memory included),
    /// when it has one; the pipeline checks the simulator never exceeds it.
    pub solver_peak: Option<f64>,
    /// Incumbent cost and bound over time, seconds from the strategy's
    /// start (for benchmarks: time to the first plan, time to a 1% gap).
    pub trace: Vec<Progress>,
    /// A proven lower bound on the step time of any plan within this
    /// budget on the device, from strategies that optimise time.
    pub step_bound: Option<crate::units::Seconds>,
}

impl Solution {
    pub fn infeasible(detail: impl Into<String>) -> Solution {
        Solution {
            status: Status::Infeasible,
            schedule: None,
            lower_bound: None,
            detail: Some(detail.into()),
            solver_peak: None,
            trace: Vec::new(),
            step_bound: None,
        }
    }

    /// A heuristic that found nothing fitting: not a proof that nothing fits.
    pub fn no_fit(detail: impl Into<String>) -> Solution {
        Solution {
            status: Status::NoFit,
            ..Solution::infeasible(detail)
        }
    }

    pub fn feasible(schedule: Schedule, detail: Option<String>) -> Solution {
        Solution {
            status: Status::Feasible,
            schedule: Some(schedule),
            lower_bound: None,
            detail,
            solver_peak: None,
            trace: Vec::new(),
            step_bound: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    /// The strategy does not apply to this graph (e.g. Chen's heuristics on
    /// a non-linear graph).
    #[error("{strategy} does not apply: {reason}")]
    NotApplicable {
        strategy: &'static str,
        reason: String,
    },
    #[error("solver failure: {0}")]
    Solver(String),
    #[error("{0}")]
    Other(String),
}

pub trait Strategy: Send + Sync {
    fn name(&self) -> &'static str;
    /// One line for `--help` and the README.
    fn describe(&self) -> &'static str;
    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError>;
    /// False for bound-only strategies: searches that need a plan (the max
    /// batch) skip them.
    fn makes_plans(&self) -> bool {
        true
    }
    /// True for strategies whose model computes a multi-output kernel's
    /// members together and frees them one by one (see `Graph::group`).
    /// The others are given the graph with each kernel merged into one
    /// node, and their schedule is lifted back ([`solve_groups`]).
    fn handles_groups(&self) -> bool {
        false
    }
    /// True for strategies that may answer in another node order than the
    /// file's where no schedule in the file's order fits
    /// ([`crate::schedule::free_order`]). The prior-work baselines keep
    /// the order their papers fix.
    fn may_reorder(&self) -> bool {
        false
    }
}

/// A seed policy's answer, for at most its time limit (`None`: it did not
/// answer in time): it runs on a worker thread that is abandoned (and told
/// to stop) at the limit. Why: a
/// policy can take time quadratic in the graph (AutoTM's model lists
/// every live value in every stage's memory row; offload-all once held its
/// slow copies stage by stage: 29.6 s on a 22,000-node chain where it had
/// 0.6 s), and the searches that run the policies as seeds promise their
/// own time limit.
pub(crate) fn policy_within_limit(
    policy: Box<dyn Strategy>,
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
) -> Option<Result<Solution, StrategyError>> {
    let stop: crate::solver::StopFlag = Default::default();
    let o = SolveOptions {
        stop: Some(stop.clone()),
        watch: None,
        ..opts.clone()
    };
    let deadline = std::time::Instant::now() + opts.time_limit + Duration::from_millis(100);
    let g = std::sync::Arc::new(g.clone());
    abandonable(deadline, &stop, opts.stop.as_ref(), move || {
        solve_groups(policy.as_ref(), &g, budget, &o)
    })
}

/// Runs `strategy` on `g` as the pipeline does: a strategy that does not
/// model multi-output kernels solves the merged graph, and its answer is
/// lifted back to `g`. The merged graph's optimum may lie above `g`'s
/// (merging forbids freeing one output before another), so its bounds and
/// its claims of optimality or infeasibility are dropped, never passed on.
pub fn solve_groups(
    strategy: &dyn Strategy,
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Solution, StrategyError> {
    if !g.has_groups() || strategy.handles_groups() {
        return strategy.solve(g, budget, opts);
    }
    let merged = crate::schedule::groups::Merged::of(g);
    let mut o = opts.clone();
    o.warm_start = None;
    if let Some(w) = &o.watch {
        w.merged_kernels();
    }
    let mut sol = strategy.solve(&merged.graph, budget, &o)?;
    sol.schedule = sol.schedule.map(|s| merged.lift(g, &s));
    sol.lower_bound = None;
    sol.step_bound = None;
    let note = "each multi-output kernel solved as one node, then its outputs freed one by one";
    sol.status = match sol.status {
        Status::Optimal => Status::Feasible,
        Status::Infeasible => Status::NoFit,
        s => s,
    };
    sol.detail = Some(match sol.detail {
        Some(d) => format!("{d}; {note}"),
        None => note.to_string(),
    });
    Ok(sol)
}

/// Every strategy the tool offers, in the order reports list them.
pub fn all() -> Vec<Box<dyn Strategy>> {
    let mut v: Vec<Box<dyn Strategy>> = vec![
        Box::new(checkpoint_all::CheckpointAll),
        Box::new(checkmate_ilp::CheckmateIlp),
        Box::new(remat_exact::RematExact),
        Box::new(local_search::RematFast),
        Box::new(checkmate_approx::CheckmateApprox),
        Box::new(checkmate_approx::CheckmateApproxRandomized),
        Box::new(lp_bound::LpBound),
    ];
    v.extend(baselines().into_iter().map(|b| b as Box<dyn Strategy>));
    v.push(Box::new(dtr::DtrGreedy));
    v
}

/// The seed systems' tiered policies (docs/tiers.md), in the order reports
/// list them. Each needs a device; without one it does not apply. Kept out
/// of [`all`], so that the recompute sweeps already on disk keep their
/// rows; sweeps name them as the group `tiered`, and [`by_name`] finds them.
pub fn tiered_policies() -> Vec<Box<dyn Strategy>> {
    let mut v = seed_policies();
    v.push(Box::new(remat_tiered::RematTiered));
    v
}

/// The seed systems' policies alone: what `remat-tiered` runs as its
/// portfolio and must never be slower than.
pub fn seed_policies() -> Vec<Box<dyn Strategy>> {
    vec![
        Box::new(offload_all::OffloadAll),
        Box::new(mc_dla::McDla),
        Box::new(tiertrain::TierTrain),
        Box::new(autotm_static::AutotmStatic),
        Box::new(autotm_sync::AutotmSync),
        Box::new(autotm_async::AutotmAsync),
    ]
}

/// The prior-work heuristics with a knob, in the order reports list them
/// (Checkmate Table 1). Each traces a trade-off curve (`remat baselines`).
pub fn baselines() -> Vec<Box<dyn knobs::TradeOff>> {
    let mut v: Vec<Box<dyn knobs::TradeOff>> = chen::Chen::ALL
        .into_iter()
        .map(|c| Box::new(c) as Box<dyn knobs::TradeOff>)
        .collect();
    v.push(Box::new(griewank::Griewank));
    v
}

/// A plan in a small slice of the time, before anything slow starts: DTR,
/// else (tight budgets on random DAGs, where DTR has none) the local search
/// from checkpoint-all in half of what is left, else the exact feasibility
/// search's schedule, searched from. An interrupt during a long bound then
/// still has a plan to keep (random-layered-n250 at 80% interrupted 5 s
/// into a 60 s limit had none, where `--time-limit 5` gives 130,919; n100
/// at 60%, where the search from checkpoint-all finds none, had none for
/// the first 5 s of a 20 s limit).
pub(crate) fn quick_plan(
    g: &Graph,
    budget: Bytes,
    deadline: Instant,
) -> Option<(Schedule, String)> {
    if let Some((_, sch, how)) = dtr::best_until(g, budget, deadline) {
        return Some((sch, format!("DTR eviction ({how})")));
    }
    if g.has_groups() {
        return None;
    }
    let fits = |sch: Schedule| {
        let sim = portfolio::evaluate(g, &sch)?;
        (sim.peak <= budget).then_some(sch)
    };
    let half = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;
    let from_all = local_search::search_from(
        g,
        Schedule::checkpoint_all(g),
        budget,
        local_search::Ranking::Forecast,
        half,
    );
    if let Some(sch) = from_all.and_then(fits) {
        return Some((sch, "local search from checkpoint-all".into()));
    }
    let crate::schedule::feasible::Feasibility::Fits(sch) =
        crate::schedule::feasible::decide(g, budget, deadline)
    else {
        return None;
    };
    let searched = local_search::search_from(
        g,
        sch.clone(),
        budget,
        local_search::Ranking::Forecast,
        deadline,
    )
    .unwrap_or(sch);
    fits(searched).map(|sch| {
        (
            sch,
            "the exact feasibility search's schedule, searched from".into(),
        )
    })
}

/// A strategy's name as rows of a sweep or max-batch CSV carry it: with
/// `--no-recompute` it answers another question (offload only), so its rows
/// are told apart from the joint ones, and resuming does not mix the two.
/// checkpoint-all recomputes nothing either way.
pub fn row_label(name: &str, opts: &SolveOptions) -> String {
    if opts.no_recompute && name != "checkpoint-all" {
        format!("{name}+no-recompute")
    } else {
        name.to_string()
    }
}

/// Every strategy reachable by name: [`all`], then the tiered policies.
pub fn every() -> impl Iterator<Item = Box<dyn Strategy>> {
    all().into_iter().chain(tiered_policies())
}

pub fn by_name(name: &str) -> Option<Box<dyn Strategy>> {
    every().find(|s| s.name() == name)
}

pub fn names() -> Vec<&'static str> {
    every().map(|s| s.name()).collect()
}

/// Worker threads started by [`abandonable`] that have not ended yet.
static LIVE_WORKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many solver worker threads are still running, abandoned ones
/// included: 0 some moments after the last solve returned, unless a
/// solver setup that cannot be interrupted is still finishing. For tests
/// and diagnostics.
pub fn live_workers() -> usize {
    LIVE_WORKERS.load(std::sync::atomic::Ordering::SeqCst)
}

struct LiveWorker;

impl LiveWorker {
    fn start() -> LiveWorker {
        LIVE_WORKERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        LiveWorker
    }
}

impl Drop for LiveWorker {
    fn drop(&mut self) {
        LIVE_WORKERS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether the caller asked for the answer now.
pub(crate) fn stop_requested(opts: &SolveOptions) -> bool {
    crate::solver::stop_requested(&opts.stop)
}

/// Runs `work` on a thread of its own and waits for it until `deadline`,
/// or until `caller` (the caller's stop flag) is set. What does not stop
/// in time (a model build, a solver's presolve) is abandoned: `stop` is
/// set, which `work` must pass to its solvers and check between its steps,
/// so that the thread ends at its next check instead of eating the CPU of
/// later solves; its result is dropped, and `None` is returned.
pub(crate) fn abandonable<T: Send + 'static>(
    deadline: std::time::Instant,
    stop: &crate::solver::StopFlag,
    caller: Option<&crate::solver::StopFlag>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    // The work polls the caller's `stop`, set here only when it is
    // abandoned: one that answered in time may share its flag with more.
    let mut thread = Background::start(Default::default(), move |tx| {
        let _ = tx.send(work());
    })?;
    // A last look: the answer may have arrived with the deadline.
    let r = thread
        .next_until(deadline, caller)
        .or_else(|| thread.drain().pop());
    if r.is_none() {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    r
}

/// A solver thread that hands back what it finds as it finds it, for work
/// that runs beside the caller's instead of being waited for (a bound that
/// tightens while the plans are searched). Dropping it sets `stop`, which
/// `work` must pass to its solvers, so that an answer given early does not
/// leave the thread eating a core.
pub(crate) struct Background<T> {
    rx: std::sync::mpsc::Receiver<T>,
    stop: crate::solver::StopFlag,
    ended: bool,
}

impl<T: Send + 'static> Background<T> {
    /// `None` when no thread could be started.
    pub(crate) fn start(
        stop: crate::solver::StopFlag,
        work: impl FnOnce(&std::sync::mpsc::Sender<T>) + Send + 'static,
    ) -> Option<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let live = LiveWorker::start();
        std::thread::Builder::new()
            .name("solver".into())
            .spawn(move || {
                let _live = live;
                work(&tx);
            })
            .ok()?;
        Some(Background {
            rx,
            stop,
            ended: false,
        })
    }

    /// The next message, waiting for it until `deadline` or until `caller`
    /// is set; `None` then, or once the thread has ended.
    pub(crate) fn next_until(
        &mut self,
        deadline: std::time::Instant,
        caller: Option<&crate::solver::StopFlag>,
    ) -> Option<T> {
        use std::sync::mpsc::RecvTimeoutError;
        while !self.ended {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if caller.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
                return None;
            }
            // In slices, so that a caller's stop is heard within 50 ms.
            match self.rx.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(m) => return Some(m),
                Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Err(RecvTimeoutError::Timeout) if left.is_zero() => return None,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        None
    }

    /// The messages sent so far, without waiting.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        loop {
            match self.rx.try_recv() {
                Ok(m) => out.push(m),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.ended = true;
                    break;
                }
            }
        }
        out
    }

    /// Whether the thread has ended and every message has been taken.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Most of a strategy's time the graph bound may take, and its share.
const GRAPH_BOUND_TIME_MAX: Duration = Duration::from_secs(20);
const GRAPH_BOUND_TIME_SHARE: f64 = 0.25;

/// The lower bound a strategy starts from: the caller's, if it passed one,
/// else the graph's own ([`cover::graph_bound`]: the eviction bound raised by the
/// cover program, warm-started from `known`, a plan in hand), within a
/// quarter of the time limit and at most 20 s.
/// Computed first because a plan within the gap of it is optimal, so the
/// search can stop the moment it finds one.
pub(crate) fn starting_bound(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    known: Option<&Schedule>,
) -> GraphBound {
    if let Some(value) = opts.known_bound {
        return GraphBound {
            value,
            proven: false,
            note: "bound from the caller".into(),
            plan: None,
        };
    }
    let start = std::time::Instant::now();
    let stop: crate::solver::StopFlag = Default::default();
    let params = crate::solver::Params {
        time_limit: opts
            .time_limit
            .mul_f64(GRAPH_BOUND_TIME_SHARE)
            .min(GRAPH_BOUND_TIME_MAX),
        threads: opts.threads,
        // The bound is the cover program's dual bound: solve it a decade
        // tighter than the plan is asked to be, so it certifies that plan.
        gap: opts.gap * 0.1,
        stop: Some(stop.clone()),
        ..crate::solver::Params::default()
    };
    // A bound within the requested gap of the plan in hand proves it.
    let enough = known.map(|sch| sch.cost(g) * (1.0 - opts.gap));
    let eviction = cover::eviction(g, budget);
    // The cover program's argument is per node; a multi-output kernel
    // breaks it, while the eviction bound allows for groups.
    let details = if g.has_groups() {
        Vec::new()
    } else {
        cover::cover_programs(g, budget)
    };
    if details.is_empty() || enough.is_some_and(|e| eviction.value >= e) {
        return eviction;
    }
    // HiGHS does not poll its interrupt or clock in presolve and the setup
    // before the root (65 s past a 20 s limit was measured), so the
    // program runs where it can be abandoned, with a little slack past its
    // own limit for the answer to come back.
    let deadline = start + params.time_limit.mul_f64(1.0 + BOUND_SLACK_SHARE) + BOUND_SLACK;
    let fallback = eviction.clone();
    let (owned, known) = (std::sync::Arc::new(g.clone()), known.cloned());
    let progress = std::sync::Arc::new(std::sync::Mutex::new(eviction.clone()));
    let written = progress.clone();
    let waited = abandonable(deadline, &stop, opts.stop.as_ref(), move || {
        cover::raise_bound(
            &owned,
            budget,
            &params,
            known.as_ref(),
            enough,
            eviction,
            &details,
            Some(&written),
        )
    });
    waited.unwrap_or_else(|| {
        // The programs that finished before the one abandoned still count.
        let done = progress.lock().map(|b| b.clone()).unwrap_or(fallback);
        GraphBound {
            note: format!(
                "{}; the next cover program was abandoned after {:.2} s",
                done.note,
                start.elapsed().as_secs_f64()
            ),
            ..done
        }
    })
}

/// The cover program's solution as a plan ([`cover::Program::schedule_of`]),
/// fitted and improved by the local search within `window`. Where the
/// program is tight its solution often is the optimum itself, or a few
/// moves from it: on random-layered-n250 at 90% it is a plan at the
/// program's bound, 126,704, which neither the search nor the MILP had
/// found, and on checkmate-resnet50 at 60% the search takes it to the
/// bound. A solution over the budget (tight budgets on random DAGs: the
/// program leaves out when a ρ runs) gets a tenth of the window, so that a
/// hopeless start does not eat the time of what follows.
pub(crate) fn plan_from_bound(
    g: &Graph,
    budget: Bytes,
    bound: &GraphBound,
    window: Duration,
) -> Option<Schedule> {
    let start = bound.plan.clone()?;
    let fits = crate::schedule::generate_plan(g, &start)
        .ok()
        .and_then(|p| crate::schedule::simulate(g, &p).ok())
        .is_some_and(|sim| sim.peak <= budget);
    let window = if fits { window } else { window / 10 };
    let deadline = std::time::Instant::now() + window;
    local_search::search_from(g, start, budget, local_search::Ranking::Forecast, deadline)
}

/// Slack past the graph bound's own time limit before it is abandoned: a
/// quarter more and half a second. What follows the bound takes its share
/// of the time left, so an overrun within the slack does not move the end
/// of the solve; and a cover program stopped late still beats the
/// eviction bound by far (random-layered-n250 at 90%: 17.2 s for a 15 s
/// limit, 126,309 against 126,123).
const BOUND_SLACK_SHARE: f64 = 0.25;
const BOUND_SLACK: Duration = Duration::from_millis(500);

/// The graph bound's value alone, for reports (the sweep's bound column).
pub fn graph_floor(g: &Graph, budget: Bytes, opts: &SolveOptions) -> f64 {
    let opts = SolveOptions {
        known_bound: None,
        ..opts.clone()
    };
    starting_bound(g, budget, &opts, None).value
}

/// Cost at or below which a plan is within the relative `gap` of `bound`
/// (cost − bound ≤ gap × cost): optimal by the rule a MIP solver stops by.
pub(crate) fn within_gap(bound: f64, gap: f64) -> f64 {
    bound / (1.0 - gap.clamp(0.0, 0.5))
}

/// Too large a Checkmate model is a property of the graph, not a failure
/// to retry: the LP strategies answer that they do not apply, which a sweep
/// records as a row.
pub(crate) fn model_fits(g: &Graph, strategy: &'static str) -> Result<(), StrategyError> {
    crate::solver::checkmate::check_size(g)
        .map_err(|reason| StrategyError::NotApplicable { strategy, reason })
}

#[cfg(test)]
mod quick_plan_tests {
    use super::*;
    use std::time::Duration;

    /// random-layered-n100 at 60%: DTR has no plan and the local search
    /// from checkpoint-all none either, so an interrupt during remat-exact's
    /// bound (5 s of a 20 s limit) had nothing to keep. The exact
    /// feasibility search's schedule is the plan there.
    #[test]
    fn a_tight_budget_gets_a_quick_plan_where_the_search_from_checkpoint_all_has_none() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/benchmarks/random-layered-n100.yaml");
        if !p.exists() {
            eprintln!("skipping: {} not found", p.display());
            return;
        }
        let g = Graph::load(&p).unwrap();
        let budget = crate::graph::analysis::checkpoint_all_peak(&g).scale_ceil(60, 100);
        let far = Instant::now() + Duration::from_secs(20);
        assert!(dtr::best_until(&g, budget, far).is_none());
        let from_all = local_search::search_from(
            &g,
            Schedule::checkpoint_all(&g),
            budget,
            local_search::Ranking::Forecast,
            far,
        );
        assert!(from_all
            .and_then(|s| portfolio::evaluate(&g, &s))
            .is_none_or(|sim| sim.peak > budget));
        let (sch, how) = quick_plan(&g, budget, far).expect("a plan");
        assert_eq!(
            how,
            "the exact feasibility search's schedule, searched from"
        );
        let sim = portfolio::evaluate(&g, &sch).unwrap();
        assert!(sim.peak <= budget, "{} > {budget}", sim.peak);
    }
}
