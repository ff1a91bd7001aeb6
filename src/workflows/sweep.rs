//! Budget sweeps: every (strategy, budget) pair through [`solve::run`], one
//! CSV row per pair, written the moment it finishes.
//!
//! A sweep of a large model runs for hours, so it is built to be stopped:
//! rows are appended as whole lines (see [`crate::workflows::resultlog`]), a re-run
//! skips the pairs already in the CSV, and a completed run rewrites the CSV
//! in a canonical order, so an interrupted-then-resumed sweep ends with the
//! same file as an uninterrupted one (timings aside; see
//! [`SweepConfig::zero_timings`]).
//!
//! Budgets go from large to small and each solve is offered the cheapest
//! simulator-confirmed schedule found so far that fits its budget (from any
//! strategy) as a warm start: a plan that fits a larger budget's optimum
//! rarely fits a smaller one, but one found at a smaller budget always fits
//! a larger one, and large budgets are the easy solves that produce them.
//!
//! Strategies that do not apply to a graph (`NotApplicable`) get a row with
//! status `not-applicable` at every budget (and one warning), so the CSV
//! says why a strategy is missing and a re-run does not retry it. Solver
//! failures and internal errors get no row: they are reported, and the
//! next run retries them.

use crate::graph::{analysis, Fingerprint, Graph};
use crate::schedule::Schedule;
use crate::solve::{self, Outcome, SolveError};
use crate::strategies::{self, Solution, SolveOptions, Status, Strategy, StrategyError};
use crate::units::Bytes;
use crate::workflows::resultlog::{self, LogError, ResultLog};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The CSV columns, in order. The last eight are the device's: empty on
/// rows swept without `--device`, and on rows without a plan (all but the
/// device's name and fingerprint).
pub const HEADER: [&str; 19] = [
    "model",
    "strategy",
    "budget_bytes",
    "status",
    "cost",
    "overhead",
    "peak_bytes",
    "lp_bound",
    "gap",
    "solve_seconds",
    "graph_fingerprint",
    "device",
    "device_fingerprint",
    "step_seconds",
    "step_overhead",
    "stall_seconds",
    "bytes_to_slow",
    "bytes_to_fast",
    "slow_peak_bytes",
];

/// Status written for a strategy that does not apply to the graph.
pub const NOT_APPLICABLE: &str = "not-applicable";

/// The least share of a pair's limit worth starting a shared bound in: a
/// bound stopped at once is a weaker column for every later pair of its
/// budget, which may have more time for it.
const MIN_BOUND_SHARE: f64 = 0.1;

/// A lower bound on the optimal cost at a budget, independent of any
/// strategy (the LP relaxation). `Ok(None)`: no bound (e.g. the relaxation
/// is infeasible). The sweep calls it once per budget.
pub type LpBoundFn =
    dyn Fn(&Graph, Bytes, &SolveOptions) -> Result<Option<f64>, StrategyError> + Send + Sync;

/// One CSV row. Empty cells are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub model: String,
    pub strategy: String,
    pub budget: Bytes,
    /// A [`Status`] name or [`NOT_APPLICABLE`].
    pub status: String,
    /// Simulated cost of the plan.
    pub cost: Option<f64>,
    /// cost / checkpoint-all cost (every node computed once).
    pub overhead: Option<f64>,
    /// Simulated peak, fixed memory included.
    pub peak: Option<Bytes>,
    pub lp_bound: Option<f64>,
    /// (cost − lp_bound) / cost.
    pub gap: Option<f64>,
    pub solve_seconds: Option<f64>,
    /// The graph the row was solved on; a sweep resumes only rows of the
    /// same graph.
    pub graph: Option<Fingerprint>,
    /// The device the row was timed on (`--device`), by name, and its
    /// content hash ([`crate::device::Device::fingerprint`]): like the
    /// graph, a sweep resumes only rows of the same device.
    pub device: Option<String>,
    pub device_fingerprint: Option<Fingerprint>,
    /// The simulator's timing of the plan on that device.
    pub timing: Option<RowTiming>,
}

/// The time columns of a row with a plan and a device, all from the timed
/// simulator ([`crate::schedule::Timing`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RowTiming {
    /// Step time (makespan) in seconds.
    pub step_seconds: f64,
    /// Step time / the all-fast step (every node once, from fast memory):
    /// 1.25 is 25% slower than a machine whose fast tier held everything.
    pub step_overhead: f64,
    /// Seconds the compute stream stalled on copies.
    pub stall_seconds: f64,
    pub bytes_to_slow: Bytes,
    pub bytes_to_fast: Bytes,
    pub slow_peak: Bytes,
}

impl RowTiming {
    pub fn of(t: &crate::schedule::Timing, all_fast: crate::units::Seconds) -> RowTiming {
        RowTiming {
            step_seconds: t.step.get(),
            step_overhead: if all_fast.get() > 0.0 {
                t.step.get() / all_fast.get()
            } else {
                1.0
            },
            stall_seconds: t.stall.get(),
            bytes_to_slow: t.bytes_to_slow,
            bytes_to_fast: t.bytes_to_fast,
            slow_peak: t.slow_peak,
        }
    }
}

impl Row {
    /// What reports compare a row by: its step time (and step overhead)
    /// when the sweep was timed on a device, else its cost (and cost
    /// overhead). A plan that offloads computes no more than checkpoint-all,
    /// so its cost says nothing of its stalls.
    pub fn compared(&self, timed: bool) -> (Option<f64>, Option<f64>) {
        match (timed, &self.timing) {
            (false, _) => (self.cost, self.overhead),
            (true, Some(t)) => (Some(t.step_seconds), Some(t.step_overhead)),
            (true, None) => (None, None),
        }
    }

    /// The resume key.
    /// What rows are ranked by: the step time on a device, else the cost
    /// (as [`Outcome::measure`]).
    pub fn measure(&self) -> Option<f64> {
        self.timing.as_ref().map(|t| t.step_seconds).or(self.cost)
    }

    pub fn key(&self) -> (String, String, Bytes) {
        (self.model.clone(), self.strategy.clone(), self.budget)
    }

    /// A plan that fits was found (and simulated).
    pub fn feasible(&self) -> bool {
        self.cost.is_some()
    }

    /// The CSV fields. Floats use formats that re-parse to the same text,
    /// so reading and rewriting a CSV keeps it byte-identical.
    pub fn to_fields(&self) -> Vec<String> {
        fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
            v.map(f).unwrap_or_default()
        }
        vec![
            self.model.clone(),
            self.strategy.clone(),
            self.budget.to_string(),
            self.status.clone(),
            opt(self.cost, |c| format!("{c}")),
            opt(self.overhead, |o| format!("{o:.6}")),
            opt(self.peak, |p| p.to_string()),
            opt(self.lp_bound, |b| format!("{b}")),
            opt(self.gap, |g| format!("{g:.6}")),
            opt(self.solve_seconds, |s| format!("{s:.3}")),
            opt(self.graph, |g| g.to_string()),
            self.device.clone().unwrap_or_default(),
            opt(self.device_fingerprint, |f| f.to_string()),
            opt(self.timing.as_ref(), |t| format!("{}", t.step_seconds)),
            opt(self.timing.as_ref(), |t| format!("{:.6}", t.step_overhead)),
            opt(self.timing.as_ref(), |t| format!("{}", t.stall_seconds)),
            opt(self.timing.as_ref(), |t| t.bytes_to_slow.to_string()),
            opt(self.timing.as_ref(), |t| t.bytes_to_fast.to_string()),
            opt(self.timing.as_ref(), |t| t.slow_peak.to_string()),
        ]
    }

    /// Parses CSV fields; the error names the column. A row no sweep could
    /// have written (an unknown status, a negative figure, a plan without
    /// its cost) is refused rather than summarised: a report or plot built
    /// on it would look like a real result.
    pub fn from_fields(f: &[String]) -> Result<Row, String> {
        let row = Row::parse_fields(f)?;
        let status = Status::parse(&row.status);
        if status.is_none() && row.status != NOT_APPLICABLE {
            return Err(format!(
                "column status: '{}' is not a status a sweep writes",
                row.status
            ));
        }
        if status.is_some_and(Status::has_plan) && row.cost.is_none() {
            return Err(format!(
                "column cost: a '{}' row needs its plan's cost",
                row.status
            ));
        }
        let signed = [
            ("cost", row.cost),
            ("overhead", row.overhead),
            ("lp_bound", row.lp_bound),
            ("gap", row.gap),
            ("solve_seconds", row.solve_seconds),
            ("step_seconds", row.timing.as_ref().map(|t| t.step_seconds)),
            (
                "step_overhead",
                row.timing.as_ref().map(|t| t.step_overhead),
            ),
            (
                "stall_seconds",
                row.timing.as_ref().map(|t| t.stall_seconds),
            ),
        ];
        if let Some((col, v)) = signed.iter().find(|(_, v)| v.is_some_and(|v| v < 0.0)) {
            return Err(format!(
                "column {col}: {} is negative",
                v.unwrap_or_default()
            ));
        }
        Ok(row)
    }

    fn parse_fields(f: &[String]) -> Result<Row, String> {
        resultlog::expect_fields(f, &HEADER)?;
        use crate::workflows::resultlog::opt_num as num;
        Ok(Row {
            model: f[0].clone(),
            strategy: f[1].clone(),
            budget: Bytes(num(&f[2], "budget_bytes")?.ok_or("column budget_bytes is empty")?),
            status: f[3].clone(),
            cost: num(&f[4], "cost")?,
            overhead: num(&f[5], "overhead")?,
            peak: num(&f[6], "peak_bytes")?.map(Bytes),
            lp_bound: num(&f[7], "lp_bound")?,
            gap: num(&f[8], "gap")?,
            solve_seconds: num(&f[9], "solve_seconds")?,
            graph: fingerprint(&f[10], "graph_fingerprint")?,
            device: Some(f[11].clone()).filter(|d| !d.is_empty()),
            device_fingerprint: fingerprint(&f[12], "device_fingerprint")?,
            timing: {
                let cols = [
                    num::<f64>(&f[13], "step_seconds")?,
                    num(&f[14], "step_overhead")?,
                    num(&f[15], "stall_seconds")?,
                ];
                let bytes = [
                    num::<u64>(&f[16], "bytes_to_slow")?,
                    num(&f[17], "bytes_to_fast")?,
                    num(&f[18], "slow_peak_bytes")?,
                ];
                match (cols, bytes) {
                    ([Some(step), Some(over), Some(stall)], [Some(out), Some(inn), Some(slow)]) => {
                        Some(RowTiming {
                            step_seconds: step,
                            step_overhead: over,
                            stall_seconds: stall,
                            bytes_to_slow: Bytes(out),
                            bytes_to_fast: Bytes(inn),
                            slow_peak: Bytes(slow),
                        })
                    }
                    ([None, None, None], [None, None, None]) => None,
                    _ => return Err("the time columns must be all filled or all empty".into()),
                }
            },
        })
    }
}

pub(crate) fn fingerprint(s: &str, col: &str) -> Result<Option<Fingerprint>, String> {
    match s {
        "" => Ok(None),
        s => s
            .parse()
            .map(Some)
            .map_err(|e| format!("column {col}: {e}")),
    }
}

/// Reads a sweep CSV, in the current format or an older one.
pub fn read_csv(path: &Path) -> Result<Vec<Row>, SweepError> {
    match resultlog::read_rows(path, &HEADER) {
        Err(e @ LogError::OtherKind { .. }) => match older_format(path) {
            Some(fields) => rows_from_fields(path, fields),
            None => Err(e.into()),
        },
        r => rows_from_fields(path, r?),
    }
}

/// Sweep CSVs written before the `graph_fingerprint` column had the first
/// ten columns alone. They stay readable (reports, plots); a sweep does not
/// resume them without `--fresh`, since their graph is unknown.
const LEGACY_COLUMNS: usize = 10;

/// Sweep CSVs written before `--device` stop after `graph_fingerprint`.
/// Their rows were solved without a device, so a sweep without one
/// resumes them (upgrading the header in place).
const UNTIMED_COLUMNS: usize = 11;

fn is_legacy(path: &Path) -> bool {
    resultlog::read_rows(path, &HEADER[..LEGACY_COLUMNS]).is_ok()
}

/// The rows of a CSV in one of the older formats, padded with empty cells
/// to the current columns; `None` if it is in neither.
fn older_format(path: &Path) -> Option<Vec<Vec<String>>> {
    [UNTIMED_COLUMNS, LEGACY_COLUMNS].iter().find_map(|&n| {
        let mut fields = resultlog::read_rows(path, &HEADER[..n]).ok()?;
        for f in &mut fields {
            f.resize(HEADER.len(), String::new());
        }
        Some(fields)
    })
}

fn rows_from_fields(path: &Path, fields: Vec<Vec<String>>) -> Result<Vec<Row>, SweepError> {
    Ok(resultlog::parse_records(path, &fields, Row::from_fields)?)
}

/// The canonical row order: model, then strategy in registry order
/// ([`strategies::all`]; unknown names after, alphabetically), then budget
/// descending (the order a sweep solves them in).
pub fn sort_rows(rows: &mut [Row]) {
    let order: HashMap<&'static str, usize> = strategies::names()
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    rows.sort_by(|a, b| {
        let rank = |r: &Row| {
            order
                .get(r.strategy.as_str())
                .copied()
                .unwrap_or(usize::MAX)
        };
        a.model
            .cmp(&b.model)
            .then(rank(a).cmp(&rank(b)))
            .then_with(|| a.strategy.cmp(&b.strategy))
            .then(b.budget.cmp(&a.budget))
    });
}

pub struct SweepConfig {
    /// Budgets in any order; the sweep solves them largest first.
    pub budgets: Vec<Bytes>,
    pub strategies: Vec<Box<dyn Strategy>>,
    /// The CSV (appended to; created if missing).
    pub output: PathBuf,
    /// Write each plan as `<dir>/<strategy>-<budget_bytes>.json`.
    pub plans_dir: Option<PathBuf>,
    /// Pairs solved at once.
    pub jobs: usize,
    /// Passed to every solve; `warm_start` is set per pair by the sweep.
    pub opts: SolveOptions,
    /// No progress bar and no notes (warnings still go to stderr).
    pub quiet: bool,
    /// Fills the `lp_bound` and `gap` columns; `None` leaves them empty
    /// (except on rows of bound-only strategies, which carry their own).
    pub lp_bound: Option<Arc<LpBoundFn>>,
    /// Write 0 for solve_seconds, making the whole CSV reproducible.
    pub zero_timings: bool,
    /// Stop after this many pairs without the final rewrite, as if killed
    /// (for testing resume).
    pub stop_after: Option<usize>,
    /// Drop the CSV's rows of this model before starting, instead of
    /// refusing to resume rows solved on a different graph.
    pub fresh: bool,
    /// A line saying what the sweep will do, printed unless quiet once the
    /// CSV has been checked: printed before, it made a refusal the second
    /// line of standard error instead of the only one.
    pub header: Option<String>,
}

impl SweepConfig {
    /// Every registered strategy, all cores, default solver options.
    pub fn new(budgets: Vec<Bytes>, output: PathBuf) -> SweepConfig {
        SweepConfig {
            budgets,
            strategies: strategies::all(),
            output,
            plans_dir: None,
            jobs: default_jobs(),
            opts: SolveOptions::default(),
            quiet: false,
            lp_bound: None,
            zero_timings: false,
            stop_after: None,
            header: None,
            fresh: false,
        }
    }
}

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Log(#[from] LogError),
    /// Rows of this model in the CSV were solved on other graph content:
    /// resuming would mix answers to two different problems.
    #[error("{csv} holds rows of '{model}' solved on another graph (fingerprint {theirs}, now {ours}); pass --fresh to start its rows over, or write to another -o")]
    GraphChanged {
        csv: PathBuf,
        model: String,
        theirs: String,
        ours: Fingerprint,
    },
    /// Rows of this model were timed on another device, or on none: their
    /// time columns answer another question.
    #[error("{csv} holds rows of '{model}' {theirs}, but this sweep {ours}; pass --fresh to start its rows over, or write to another -o")]
    DeviceChanged {
        csv: PathBuf,
        model: String,
        theirs: String,
        ours: String,
    },
}

/// What a sweep did.
#[derive(Debug, Clone)]
pub struct SweepSummary {
    /// Rows written in this run.
    pub solved: usize,
    /// Pairs skipped because the CSV already had them.
    pub resumed: usize,
    /// Rows that took a smaller budget's cheaper plan at the end
    /// ([`take_tighter_plans`]), resumed ones included.
    pub took_smaller: usize,
    /// Every row of the CSV after the run (all models), canonical order.
    pub rows: Vec<Row>,
    /// Pairs that failed (solver failure, internal error) and so have no
    /// row; a re-run retries them.
    pub failures: Vec<String>,
    /// Plans that were solved and have their row, but whose `--plans`
    /// file could not be written (each: the path and why).
    pub plan_failures: Vec<String>,
}

/// A schedule the simulator confirmed, kept as a warm start.
struct Known {
    cost: f64,
    peak: Bytes,
    origin: String,
    schedule: Arc<Schedule>,
}

/// The cheapest known schedule for each peak; dominated ones are dropped,
/// so the pool stays small (a Pareto front of cost against peak).
#[derive(Default)]
struct WarmPool(Vec<Known>);

impl WarmPool {
    fn best_within(&self, budget: Bytes) -> Option<(String, Arc<Schedule>)> {
        self.0
            .iter()
            .filter(|k| k.peak <= budget)
            .min_by(|a, b| a.cost.total_cmp(&b.cost).then(a.peak.cmp(&b.peak)))
            .map(|k| (k.origin.clone(), k.schedule.clone()))
    }

    fn insert(&mut self, k: Known) {
        if self.0.iter().any(|o| o.peak <= k.peak && o.cost <= k.cost) {
            return;
        }
        self.0.retain(|o| !(k.peak <= o.peak && k.cost <= o.cost));
        self.0.push(k);
    }
}

/// Wraps a strategy to keep the schedule it returns, which the pipeline's
/// [`Outcome`] does not carry, for the warm-start pool.
struct Recorder<'a> {
    inner: &'a dyn Strategy,
    schedule: Mutex<Option<Schedule>>,
}

impl Strategy for Recorder<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn describe(&self) -> &'static str {
        self.inner.describe()
    }
    fn handles_groups(&self) -> bool {
        true
    }
    fn may_reorder(&self) -> bool {
        self.inner.may_reorder()
    }
    fn solve(&self, g: &Graph, b: Bytes, o: &SolveOptions) -> Result<Solution, StrategyError> {
        let sol = crate::strategies::solve_groups(self.inner, g, b, o)?;
        if sol.status.has_plan() {
            *self.schedule.lock().unwrap_or_else(|e| e.into_inner()) = sol.schedule.clone();
        }
        Ok(sol)
    }
}

/// Strategies by a comma-separated list of names and groups: `all` (every
/// recompute strategy, as before tiers existed, so that old sweeps keep
/// their rows) and `tiered` (the seed systems' policies, which need a
/// device); `all,tiered` is both.
pub fn select_strategies(list: &str) -> Result<Vec<Box<dyn Strategy>>, String> {
    let mut out: Vec<Box<dyn Strategy>> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let group = match name {
            "all" => strategies::all(),
            "tiered" => strategies::tiered_policies(),
            _ => vec![strategies::by_name(name).ok_or_else(|| {
                format!(
                    "unknown strategy '{name}'; available: {} (or the groups all, tiered)",
                    strategies::names().join(", ")
                )
            })?],
        };
        for s in group {
            if !out.iter().any(|o| o.name() == s.name()) {
                out.push(s);
            }
        }
    }
    if out.is_empty() {
        return Err("no strategies given".into());
    }
    Ok(out)
}

/// Short name of a pair for the progress bar and messages.
fn pair_label(strategy: &str, budget: Bytes) -> String {
    format!("{strategy} @ {}", budget.human())
}

/// Runs the sweep of `g` described by `cfg`.
pub fn run(g: &Graph, cfg: &SweepConfig) -> Result<SweepSummary, SweepError> {
    let _lock = resultlog::RunLock::acquire(&cfg.output)?;
    let fingerprint = g.fingerprint();
    if cfg.output.is_file() && is_legacy(&cfg.output) {
        let rows = read_csv(&cfg.output)?;
        match rows.iter().find(|r| r.model == g.name) {
            Some(_) if !cfg.fresh => {
                return Err(SweepError::GraphChanged {
                    csv: cfg.output.clone(),
                    model: g.name.clone(),
                    theirs: "none, written before fingerprints".into(),
                    ours: fingerprint,
                })
            }
            // Upgraded in place: the other models' rows keep an empty
            // fingerprint, and this model's are solved again.
            _ => {
                let fields: Vec<Vec<String>> = rows
                    .iter()
                    .filter(|r| r.model != g.name)
                    .map(Row::to_fields)
                    .collect();
                resultlog::rewrite(&cfg.output, &HEADER, &fields)?;
            }
        }
    }
    // A CSV from before the device columns: its rows are untimed and stay
    // valid, so the header is upgraded in place and resuming goes on.
    if cfg.output.is_file() && resultlog::read_rows(&cfg.output, &HEADER[..UNTIMED_COLUMNS]).is_ok()
    {
        let fields = older_format(&cfg.output).unwrap_or_default();
        resultlog::rewrite(&cfg.output, &HEADER, &fields)?;
    }
    let whole = |f: &[String]| Row::from_fields(f).is_ok();
    let (mut log, existing) = ResultLog::open(&cfg.output, &HEADER, &whole)?;
    if let Some(t) = log.torn().filter(|_| !cfg.quiet) {
        eprintln!(
            "note: {}: cut a last line torn as it was written ('{t}'); its pair is solved again",
            cfg.output.display()
        );
    }
    let mut existing = rows_from_fields(&cfg.output, existing)?;
    let ours = |r: &Row| r.model == g.name;
    if cfg.fresh && existing.iter().any(ours) {
        let before = existing.len();
        existing.retain(|r| !ours(r));
        // Every row of the model goes, not only this run's pairs: said, so
        // that rows of strategies and budgets not solved again are not lost
        // unawares.
        if !cfg.quiet {
            eprintln!(
                "note: {}: --fresh dropped {} earlier rows of '{}'",
                cfg.output.display(),
                before - existing.len(),
                g.name
            );
        }
        let fields: Vec<Vec<String>> = existing.iter().map(Row::to_fields).collect();
        drop(log);
        resultlog::rewrite(&cfg.output, &HEADER, &fields)?;
        log = ResultLog::open(&cfg.output, &HEADER, &whole)?.0;
    }
    if let Some(r) = existing
        .iter()
        .find(|r| ours(r) && r.graph != Some(fingerprint))
    {
        return Err(SweepError::GraphChanged {
            csv: cfg.output.clone(),
            model: g.name.clone(),
            theirs: r.graph.map_or("none".into(), |f| f.to_string()),
            ours: fingerprint,
        });
    }
    let device = cfg.opts.device.as_deref();
    let device_fp = device.map(|d| d.fingerprint());
    if let Some(r) = existing
        .iter()
        .find(|r| ours(r) && r.device_fingerprint != device_fp)
    {
        let on = |name: Option<&str>, fp: Option<Fingerprint>| match (name, fp) {
            (Some(n), Some(f)) => format!("device '{n}' (fingerprint {f})"),
            _ => "no device".to_string(),
        };
        return Err(SweepError::DeviceChanged {
            csv: cfg.output.clone(),
            model: g.name.clone(),
            theirs: format!("timed on {}", on(r.device.as_deref(), r.device_fingerprint)),
            ours: format!("is on {}", on(device.map(|d| d.name.as_str()), device_fp)),
        });
    }
    let all_fast = device.map(|d| d.all_fast_step(g));
    let done: HashSet<(String, String, Bytes)> = existing.iter().map(Row::key).collect();

    let mut budgets = cfg.budgets.clone();
    budgets.sort_unstable_by(|a, b| b.cmp(a));
    budgets.dedup();
    // Largest budget first; within a budget, strategies in the given order.
    let pending: Vec<(usize, Bytes)> = budgets
        .iter()
        .flat_map(|&b| (0..cfg.strategies.len()).map(move |s| (s, b)))
        .filter(|&(s, b)| {
            let label = strategies::row_label(cfg.strategies[s].name(), &cfg.opts);
            !done.contains(&(g.name.clone(), label, b))
        })
        .collect();
    let total_pairs = budgets.len() * cfg.strategies.len();
    let resumed = total_pairs - pending.len();

    if let Some(h) = cfg.header.as_ref().filter(|_| !cfg.quiet) {
        eprintln!("{h}");
    }
    let bar = resultlog::progress_bar(
        cfg.quiet,
        pending.len(),
        format!("sweep {}", g.name),
        "[{bar:30}] {pos}/{len} pairs, {elapsed} elapsed, ETA {eta}  {wide_msg}",
    );
    if !cfg.quiet && resumed > 0 {
        bar.suspend(|| {
            eprintln!(
                "{}: {resumed} of {total_pairs} pairs already done, {} to go",
                cfg.output.display(),
                pending.len()
            );
            // Plans are written as pairs are solved; the resumed rows' plans
            // were written (or not) by the run that solved them.
            if let Some(dir) = &cfg.plans_dir {
                eprintln!(
                    "note: --plans writes {} plans for the pairs solved now; the {resumed} resumed pairs get none in {} (--fresh solves them again)",
                    pending.len(),
                    dir.display()
                );
            }
        });
    }

    let min_budget = analysis::min_feasible_budget(g);
    let bounds: HashMap<Bytes, OnceLock<Option<f64>>> =
        pending.iter().map(|&(_, b)| (b, OnceLock::new())).collect();
    let floors: HashMap<Bytes, OnceLock<f64>> =
        pending.iter().map(|&(_, b)| (b, OnceLock::new())).collect();
    let next = AtomicUsize::new(0);
    let solved = AtomicUsize::new(0);
    let pool = Mutex::new(WarmPool::default());
    let running: Mutex<BTreeSet<(usize, String)>> = Mutex::new(BTreeSet::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let plan_failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let warned: Mutex<HashSet<&'static str>> = Mutex::new(HashSet::new());
    let write_failed: Mutex<Option<LogError>> = Mutex::new(None);
    let limit = cfg.stop_after.unwrap_or(usize::MAX).min(pending.len());

    let show_running = |running: &BTreeSet<(usize, String)>| {
        bar.set_message(
            running
                .iter()
                .map(|(_, l)| l.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )
    };

    let worker = || loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= limit {
            break;
        }
        if write_failed.lock().map(|w| w.is_some()).unwrap_or(true) {
            break;
        }
        let (si, budget) = pending[i];
        let strat = cfg.strategies[si].as_ref();
        let name = strategies::row_label(strat.name(), &cfg.opts);
        let label = pair_label(&name, budget);
        {
            let mut r = running.lock().unwrap_or_else(|e| e.into_inner());
            r.insert((i, label.clone()));
            show_running(&r);
        }

        let mut opts = cfg.opts.clone();
        opts.warm_start = pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .best_within(budget)
            .map(|(o, s)| (o, (*s).clone()));
        let rec = Recorder {
            inner: strat,
            schedule: Mutex::new(None),
        };
        let pair_start = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            solve::run(g, &rec, budget, &opts)
        }));
        // The shared bounds are the pair's work too, so they get what its
        // limit leaves: they used to run on a full limit of their own after
        // the solve (random-layered-n250 at 80% with 5 s: 11.2 s a pair).
        let left = || (pair_start + cfg.opts.time_limit).saturating_duration_since(Instant::now());
        let enough = |left: Duration| left >= cfg.opts.time_limit.mul_f64(MIN_BOUND_SHARE);
        let mut row = Row {
            model: g.name.clone(),
            strategy: name.clone(),
            budget,
            status: String::new(),
            cost: None,
            overhead: None,
            peak: None,
            lp_bound: None,
            gap: None,
            solve_seconds: None,
            graph: Some(fingerprint),
            device: device.map(|d| d.name.clone()),
            device_fingerprint: device_fp,
            timing: None,
        };
        let mut keep = true;
        match result {
            Ok(Ok(out)) => {
                fill_row(&mut row, &out, g, cfg.zero_timings);
                if let (Some(t), Some(base)) = (out.timing(), all_fast) {
                    row.timing = Some(RowTiming::of(t, base));
                }
                // A plan in another node order than the file's (no
                // schedule in the file's fits) is bounded in its own order
                // only: the shared bounds are the file order's.
                let own_order = out.order.is_some();
                // Where nothing fits (in the file's order) no bound says
                // anything: a plan in another order may cost less than the
                // file order's LP bound (72 B on tests/data/order/f2: 344
                // against a plan of 253).
                let infeasible = out.status == Status::Infeasible;
                if out.status == Status::Bound || !strat.makes_plans() || own_order || infeasible {
                    // A bound-only strategy's row carries its own bound, or
                    // none when it stopped before one: solving the same LP
                    // again would stop again.
                    row.lp_bound = out.lower_bound.filter(|_| !infeasible);
                } else if let (Some(f), true) = (&cfg.lp_bound, budget >= min_budget) {
                    // Once per budget, by the first of its pairs with time
                    // left for it; a pair without leaves the column to the
                    // graph's and its strategy's bounds.
                    let cell = &bounds[&budget];
                    row.lp_bound = match cell.get() {
                        Some(b) => *b,
                        None if enough(left()) => *cell.get_or_init(|| {
                            let mut o = cfg.opts.clone();
                            o.warm_start = None;
                            o.cost_bound = None;
                            o.time_limit = left();
                            match f(g, budget, &o) {
                                Ok(b) => b,
                                Err(e) => {
                                    if !cfg.quiet {
                                        bar.suspend(|| {
                                            eprintln!(
                                                "warning: no LP bound at {}: {e}",
                                                budget.human()
                                            )
                                        });
                                    }
                                    None
                                }
                            }
                        }),
                        None => None,
                    };
                }
                // The graph bound (eviction bound and cover program) is often
                // higher than the LP's, and is all there is with
                // --no-lp-bound. Once per budget, like the LP; without time
                // left, the eviction bound alone (milliseconds).
                if out.status != Status::Bound && budget >= min_budget && !own_order && !infeasible
                {
                    let cell = &floors[&budget];
                    let floor = match cell.get() {
                        Some(f) => *f,
                        None if enough(left()) => *cell.get_or_init(|| {
                            let o = SolveOptions {
                                time_limit: left(),
                                ..cfg.opts.clone()
                            };
                            crate::strategies::graph_floor(g, budget, &o)
                        }),
                        None => crate::solver::cover::eviction(g, budget).value,
                    };
                    if floor.is_finite() {
                        row.lp_bound = Some(row.lp_bound.map_or(floor, |b| b.max(floor)));
                    }
                }
                // The strategy's own bound holds for every plan at the budget
                // too, and may be higher than the shared one where that
                // stopped at its limit (ResNet-50 at 50% with 5 s: a gap of
                // 0.48% in the CSV, 0.35% from `solve`).
                if let (Some(own), None) = (out.lower_bound, cfg.opts.device.as_ref()) {
                    if out.status != Status::Bound && own.is_finite() && !infeasible {
                        row.lp_bound = Some(row.lp_bound.map_or(own, |b| b.max(own)));
                    }
                }
                // The bounds are on recompute-only plans: a plan that moves
                // values to the slow tier may cost less than them, and its
                // "gap" would only look like a proof of optimality.
                let moves = out.timing().is_some_and(|t| t.copies > 0);
                // A bound a hair above a plan the simulator checked is the
                // solver's noise (solve.rs refuses anything past 1e-6).
                row.lp_bound = row.lp_bound.map(|b| {
                    let b = g.tidy_bound(b);
                    match row.cost {
                        Some(c) if !moves && c < b => c,
                        _ => b,
                    }
                });
                if let (Some(c), Some(lb), false) = (row.cost, row.lp_bound, moves) {
                    row.gap = Some(if c > 0.0 {
                        ((c - lb) / c).max(0.0)
                    } else {
                        0.0
                    });
                }
                // A plan the row's bound proves optimal is `optimal`, as
                // `solve` would call it with that bound: a heuristic's plan
                // read `feasible` beside a gap of 0. Only without a device
                // (the bound is on cost, not on step time) and in the
                // file's order (the bound's).
                if row.status == Status::Feasible.as_str()
                    && row.gap.is_some_and(|gap| gap <= crate::solve::OPTIMAL_GAP)
                    && cfg.opts.device.is_none()
                    && !own_order
                {
                    row.status = Status::Optimal.as_str().to_string();
                }
                // A plan in another order was solved on the reordered
                // graph: its schedule is no warm start in the file's.
                if let (Some(sim), Some(sch), false) = (
                    &out.sim,
                    rec.schedule.into_inner().unwrap_or_else(|e| e.into_inner()),
                    own_order,
                ) {
                    pool.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(Known {
                            cost: sim.cost,
                            peak: sim.peak,
                            origin: strat.name().to_string(),
                            schedule: Arc::new(sch),
                        });
                }
                if let (Some(dir), Some(pf)) = (&cfg.plans_dir, out.plan_file(g)) {
                    let path = dir.join(format!("{name}-{budget}.json"));
                    let written = serde_json::to_vec_pretty(&pf)
                        .map_err(anyhow::Error::from)
                        .and_then(|bytes| crate::cli::write_atomic(&path, &bytes));
                    if let Err(e) = written {
                        // write_atomic's errors name the file already.
                        let msg = format!("{e:#}");
                        let shown = path.display().to_string();
                        let msg = if msg.contains(&shown) {
                            msg
                        } else {
                            format!("{shown}: {msg}")
                        };
                        bar.suspend(|| eprintln!("error: {msg}"));
                        plan_failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(msg);
                    }
                }
            }
            Ok(Err(SolveError::BelowMinimum { .. })) => {
                row.status = Status::Infeasible.as_str().to_string();
            }
            Ok(Err(SolveError::Strategy(StrategyError::NotApplicable { strategy, reason }))) => {
                row.status = NOT_APPLICABLE.to_string();
                if warned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(strategy)
                {
                    bar.suspend(|| {
                        eprintln!("warning: {strategy} does not apply to {}: {reason}", g.name)
                    });
                }
            }
            Ok(Err(e)) => {
                keep = false;
                let msg = format!("{label}: {e}");
                bar.suspend(|| eprintln!("error: {msg}"));
                failures.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
            }
            Err(panic) => {
                keep = false;
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                let msg = format!("{label}: panicked: {what}");
                bar.suspend(|| eprintln!("error: {msg}"));
                failures.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
            }
        }
        if keep {
            match log.append(&row.to_fields()) {
                Ok(()) => {
                    solved.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => *write_failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e),
            }
        }
        bar.inc(1);
        let mut r = running.lock().unwrap_or_else(|e| e.into_inner());
        r.remove(&(i, label));
        show_running(&r);
    };

    std::thread::scope(|s| {
        for _ in 0..cfg.jobs.clamp(1, pending.len().max(1)) {
            s.spawn(worker);
        }
    });
    bar.finish_and_clear();

    if let Some(e) = write_failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e.into());
    }
    drop(log);
    let mut rows = read_csv(&cfg.output)?;
    sort_rows(&mut rows);
    let mut took_smaller = 0;
    if cfg.stop_after.is_none_or(|n| n >= pending.len()) {
        let notes = take_tighter_plans(&mut rows, g, device_fp, cfg);
        took_smaller = notes.iter().filter(|n| n.ends_with(TAKES_IT)).count();
        if !cfg.quiet {
            for n in notes {
                eprintln!("note: {n}");
            }
        }
        let fields: Vec<Vec<String>> = rows.iter().map(Row::to_fields).collect();
        resultlog::rewrite(&cfg.output, &HEADER, &fields)?;
    }
    Ok(SweepSummary {
        solved: solved.into_inner(),
        resumed,
        took_smaller,
        rows,
        failures: failures.into_inner().unwrap_or_else(|e| e.into_inner()),
        plan_failures: plan_failures
            .into_inner()
            .unwrap_or_else(|e| e.into_inner()),
    })
}

/// How a note of [`take_tighter_plans`] ends when the row took the plan.
const TAKES_IT: &str = ", and the row takes it";

/// A plan that fits a budget fits every larger one, so where a smaller
/// budget's row has a cheaper plan than a larger one's (or the larger has
/// none), the larger row takes it: a sweep's cost (its step time, with a
/// device) never rises with the budget. It can: budgets are solved from
/// large to small, and a plan in another node order (searched where the
/// file's order has none) or a heuristic's luck at a small budget comes
/// after the larger budget's row was written (tests/data/order/f2: 251 at
/// 73 B, 323 at 74 B, where the file's order is optimal at 323).
///
/// The row keeps its own solve time; it loses its bound, which was for
/// the plans the strategy searched at that budget (the file's node order)
/// and may be above the plan it takes. With `--plans`, the row takes the
/// plan only if the smaller budget's plan file is there and replays, on
/// this graph and device, to that row's numbers (a file left by another
/// run is not trusted); it is then written under the row's name with its
/// budget. Rows of this graph and device only, resumed ones included, so
/// a resumed sweep ends as an uninterrupted one. Returns a note per row.
fn take_tighter_plans(
    rows: &mut [Row],
    g: &Graph,
    device: Option<Fingerprint>,
    cfg: &SweepConfig,
) -> Vec<String> {
    let graph = g.fingerprint();
    let mut ours: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            let r = &rows[i];
            r.model == g.name && r.graph == Some(graph) && r.device_fingerprint == device
        })
        .collect();
    ours.sort_by(|&a, &b| {
        (&rows[a].strategy, rows[a].budget).cmp(&(&rows[b].strategy, rows[b].budget))
    });
    let mut notes = Vec::new();
    // The smaller budgets' rows with a plan whose file (with `--plans`)
    // did not replay: never offered again.
    let mut refused: HashSet<usize> = HashSet::new();
    // The rows with a plan at smaller budgets of the same strategy, as
    // (measure, row), cheapest first.
    let mut below: Vec<(f64, usize)> = Vec::new();
    for k in 0..ours.len() {
        let i = ours[k];
        if k > 0 && rows[ours[k - 1]].strategy != rows[i].strategy {
            below.clear();
        }
        let here = rows[i].measure();
        // A heuristic's `no-fit` says only that it found no plan; one of
        // its plans at a smaller budget fits. `infeasible` is a proof, and
        // `not-applicable` no attempt.
        let replaceable = [
            Status::Feasible,
            Status::Optimal,
            Status::NoSolution,
            Status::NoFit,
        ]
        .iter()
        .any(|s| s.as_str() == rows[i].status);
        let to = rows[i].budget;
        let was = match here {
            Some(_) => fmt_measure(&rows[i]),
            None => format!("no plan ({})", rows[i].status),
        };
        let cheaper = |m: f64| here.is_none_or(|h| m < h / (1.0 + 1e-9));
        let mut taken = None;
        let offered = if replaceable { &below[..] } else { &[] };
        for &(m, b) in offered {
            if !cheaper(m) {
                break;
            }
            if refused.contains(&b) {
                continue;
            }
            let from = &rows[b];
            let what = format!(
                "{}: {} at {} found {was}; its plan at {} ({}) fits {} too",
                g.name,
                rows[i].strategy,
                to.human(),
                from.budget.human(),
                fmt_measure(from),
                to.human(),
            );
            if let Some(dir) = &cfg.plans_dir {
                if let Err(e) = copy_plan(dir, g, cfg.opts.device.as_deref(), from, to) {
                    notes.push(format!("{what}, but its plan file is not taken: {e:#}"));
                    refused.insert(b);
                    continue;
                }
            }
            notes.push(format!("{what}{TAKES_IT}"));
            taken = Some(b);
            break;
        }
        if let Some(b) = taken {
            let from = rows[b].clone();
            let row = &mut rows[i];
            row.status = Status::Feasible.as_str().to_string();
            row.cost = from.cost;
            row.overhead = from.overhead;
            row.peak = from.peak;
            row.timing = from.timing;
            row.lp_bound = None;
            row.gap = None;
            // The row now repeats `b`'s plan: offering it again is `b`.
        } else if let Some(m) = here {
            if rows[i].cost.is_some() {
                below.push((m, i));
                below.sort_by(|x, y| x.0.total_cmp(&y.0));
            }
        }
    }
    if !refused.is_empty() {
        notes.push(format!(
            "{}: run the sweep with --fresh for plans and rows that agree",
            g.name
        ));
    }
    notes
}

/// A row's cost as a note prints it: the step time with a device.
fn fmt_measure(r: &Row) -> String {
    match (&r.timing, r.cost) {
        (Some(t), _) => format!("a step of {}", crate::units::Seconds(t.step_seconds)),
        (None, Some(c)) => format!("cost {}", crate::units::short_float(c)),
        (None, None) => "no plan".into(),
    }
}

/// `--plans`: the plan written for `from`'s row, written again under the
/// name of the row at `to` with `to` as its budget, once it replays on `g`
/// (and the device) to `from`'s cost, peak and step time.
fn copy_plan(
    dir: &Path,
    g: &Graph,
    device: Option<&crate::device::Device>,
    from: &Row,
    to: Bytes,
) -> anyhow::Result<()> {
    use anyhow::{bail, Context};
    let src = dir.join(format!("{}-{}.json", from.strategy, from.budget));
    let shown = src.display();
    let text = std::fs::read(&src).with_context(|| format!("reading {shown}"))?;
    let mut pf: crate::schedule::PlanFile =
        serde_json::from_slice(&text).with_context(|| format!("reading {shown}"))?;
    if pf
        .graph_fingerprint
        .as_ref()
        .is_some_and(|f| *f != g.fingerprint().to_string())
    {
        bail!("{shown} is a plan for another graph");
    }
    let plan = crate::schedule::Plan::from_file_statements(g, &pf.statements)
        .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let sim = crate::schedule::simulate_on(g, &plan, device)
        .map_err(|e| anyhow::anyhow!("{shown} does not replay: {e}"))?;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300);
    let step = sim.timing.as_ref().map(|t| t.step.get());
    let agrees = from.cost.is_some_and(|c| close(c, sim.cost))
        && from.peak == Some(sim.peak)
        && match (&from.timing, step) {
            (Some(t), Some(s)) => close(t.step_seconds, s),
            (None, None) => true,
            _ => false,
        };
    if !agrees {
        bail!("{shown} replays to other figures than its row's (left by another run?)");
    }
    pf.budget = Some(to.get());
    let bytes = serde_json::to_vec_pretty(&pf)?;
    crate::cli::write_atomic(&dir.join(format!("{}-{to}.json", from.strategy)), &bytes)
}

fn fill_row(row: &mut Row, out: &Outcome, g: &Graph, zero_timings: bool) {
    row.status = out.status.as_str().to_string();
    row.cost = out.cost();
    row.overhead = out.cost().map(|c| g.overhead(c));
    row.peak = out.peak();
    row.solve_seconds = Some(if zero_timings { 0.0 } else { out.seconds });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_fields_round_trip() {
        let r = Row {
            model: "m, with comma".into(),
            strategy: "s".into(),
            budget: Bytes(123),
            status: "feasible".into(),
            cost: Some(1.0 / 3.0),
            overhead: Some(1.2),
            peak: Some(Bytes(99)),
            lp_bound: None,
            gap: Some(0.1),
            solve_seconds: Some(0.25),
            graph: Some(Fingerprint(0xabc)),
            device: Some("dev".into()),
            device_fingerprint: Some(Fingerprint(0xdef)),
            timing: Some(RowTiming {
                step_seconds: 0.1 + 0.2,
                step_overhead: 1.25,
                stall_seconds: 1e-7,
                bytes_to_slow: Bytes(5),
                bytes_to_fast: Bytes(6),
                slow_peak: Bytes(7),
            }),
        };
        let f = r.to_fields();
        let back = Row::from_fields(&f).unwrap();
        assert_eq!(back.to_fields(), f);
        assert_eq!(back.cost, r.cost);
    }

    #[test]
    fn warm_pool_keeps_the_pareto_front() {
        let s = Arc::new(Schedule::identity(1));
        let k = |cost, peak| Known {
            cost,
            peak: Bytes(peak),
            origin: format!("{cost}/{peak}"),
            schedule: s.clone(),
        };
        let mut p = WarmPool::default();
        p.insert(k(10.0, 100));
        p.insert(k(12.0, 80));
        p.insert(k(13.0, 90)); // dominated by 12/80
        p.insert(k(9.0, 100)); // replaces 10/100
        assert_eq!(p.0.len(), 2);
        assert_eq!(p.best_within(Bytes(100)).unwrap().0, "9/100");
        assert_eq!(p.best_within(Bytes(99)).unwrap().0, "12/80");
        assert!(p.best_within(Bytes(79)).is_none());
    }

    #[test]
    fn strategy_groups_expand_and_deduplicate() {
        let names = |l: &str| -> Vec<&'static str> {
            select_strategies(l)
                .unwrap()
                .iter()
                .map(|s| s.name())
                .collect()
        };
        let all = names("all");
        assert_eq!(all.len(), strategies::all().len());
        assert!(!all.contains(&"offload-all"));
        // The six seed policies and remat-tiered.
        let tiered = names("tiered");
        assert_eq!(tiered.len(), 7);
        assert!(tiered.contains(&"remat-tiered"));
        assert_eq!(names("all,tiered").len(), all.len() + 7);
        assert_eq!(names("remat-fast,all").len(), all.len());
        assert_eq!(names("offload-all, tiered"), tiered);
        let Err(err) = select_strategies("remat-fats") else {
            panic!("a misspelt name must be refused");
        };
        assert!(
            err.contains("offload-all") && err.contains("groups"),
            "{err}"
        );
    }
}
