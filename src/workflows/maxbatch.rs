//! `remat max-batch`: the largest batch each strategy trains within a
//! memory size at bounded extra compute (the paper's Figure 6).
//!
//! A batch is allowed when the strategy's plan for the graph at that batch
//! ([`Graph::at_batch`]) fits the memory and costs at most the bound of
//! [`CostRule`] (by default one extra forward pass, the paper's eq. (10)).
//! The bound goes to the strategy as `SolveOptions::cost_bound` (the ILP
//! makes it a constraint) and is checked again here on the simulated cost,
//! since heuristics ignore it. The search per strategy grows the batch
//! exponentially until a batch fails, then bisects; it assumes that a
//! strategy that fits a batch also fits every smaller one.
//!
//! That holds for memory, and for the cost rules (costs and activations
//! grow together with the batch, the fixed memory does not), but not for a
//! step-time rule: a copy's latency does not shrink with the batch, so an
//! offloading plan can be too slow at batch 1 and within the rule at 272
//! (vgg16 on gh200 in 16 GB: +72% at batch 1, +17.7% at 272 against the
//! +33.4% allowed; the search said 0). So with a device, a batch whose plan
//! fits the memory but is too slow does not end the search: the batch
//! grows, and is bisected, up to the largest batch that fits the memory,
//! and the answer is the largest allowed batch seen. When that limit is
//! itself too slow, the search bisects down between the largest allowed
//! batch seen and the smallest too-slow one above it. It probes each power
//! of two and the memory limit, so it finds the largest allowed batch when
//! the allowed batches form one range (too slow below it from latency,
//! above it from copies that no longer overlap) that reaches a power of two
//! or the memory limit; an allowed range narrower than that is missed.
//!
//! With a device (`SolveOptions::device`) the question is about time, not
//! compute: a batch is allowed when its plan's simulated step time is
//! within the rule's bound of the all-fast step at that batch (every node
//! once, from fast memory), so a strategy that offloads to the slow tier
//! instead of recomputing is judged by what it actually costs, stalls
//! included. The cost bound is still passed to the strategy: a step never
//! takes less than its compute, so it only prunes plans that cannot pass.

use crate::graph::{Fingerprint, Graph};
use crate::solve::{self, SolveError};
use crate::strategies::{
    self, checkpoint_all::CheckpointAll, SolveOptions, Strategy, StrategyError,
};
use crate::units::Bytes;
use crate::workflows::resultlog::{self, LogError, ResultLog};
use crate::workflows::sweep::fingerprint;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What "bounded extra compute" means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CostRule {
    /// cost ≤ 2 × forward cost + backward cost: at most one extra forward
    /// pass (eq. (10) of the paper).
    OneExtraForward,
    /// cost ≤ F × checkpoint-all cost.
    MaxOverhead(f64),
    /// With a device: step time ≤ F × the all-fast step time.
    MaxSlowdown(f64),
}

impl CostRule {
    /// The cost bound for the graph at the batch being tried.
    pub fn bound(self, g: &Graph) -> f64 {
        match self {
            CostRule::OneExtraForward => 2.0 * g.forward_cost() + g.backward_cost(),
            CostRule::MaxOverhead(f) | CostRule::MaxSlowdown(f) => f * g.total_cost(),
        }
    }

    /// The step-time bound on a device: the cost bound's compute time, which
    /// for the overhead rules is F × the all-fast step.
    pub fn time_bound(self, g: &Graph, d: &crate::device::Device) -> crate::units::Seconds {
        d.compute_time(self.bound(g))
    }

    /// The rule as written in the CSV.
    pub fn label(self) -> String {
        match self {
            CostRule::OneExtraForward => "one-extra-forward".into(),
            CostRule::MaxOverhead(f) => format!("overhead<={}", factor(f)),
            CostRule::MaxSlowdown(f) => format!("slowdown<={}", factor(f)),
        }
    }
}

/// A factor as the label shows it: as typed for any sensible value (the
/// label keys the CSV's rows, so `1.1` must stay `1.1`), in exponent form
/// past a million, where `--max-overhead 1e300` printed 301 digits.
fn factor(f: f64) -> String {
    if f.abs() >= 1e6 {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

pub struct MaxBatchConfig {
    /// Device memory (fixed memory included, like every budget).
    pub memory: Bytes,
    /// Strategies to search; checkpoint-all is always searched too, as the
    /// reference for the ratios.
    pub strategies: Vec<Box<dyn Strategy>>,
    pub rule: CostRule,
    /// Passed to every solve; `cost_bound` is set per probe.
    pub opts: SolveOptions,
    /// Largest batch tried; a strategy that fits it is reported as capped.
    pub max_batch: u32,
    /// Strategies searched at once.
    pub jobs: usize,
    pub quiet: bool,
    /// CSV written row by row (resumable); `None`: results only returned.
    pub output: Option<PathBuf>,
}

impl MaxBatchConfig {
    pub fn new(memory: Bytes) -> MaxBatchConfig {
        MaxBatchConfig {
            memory,
            strategies: strategies::all(),
            rule: CostRule::OneExtraForward,
            opts: SolveOptions::default(),
            max_batch: 1 << 24,
            jobs: crate::workflows::sweep::default_jobs(),
            quiet: false,
            output: None,
        }
    }
}

/// The CSV columns, in order. `device` and `slowdown` (step time over the
/// all-fast step, from the timed simulator) are empty without `--device`.
/// A row answers for one graph and one device, by content: a graph of the
/// same name at another resolution, or an edited device file, is another
/// row (they were resumed by name, and answered with the old batch).
pub const HEADER: [&str; 14] = [
    "model",
    "strategy",
    "memory_bytes",
    "cost_rule",
    "status",
    "max_batch",
    "ratio_to_checkpoint_all",
    "overhead",
    "peak_bytes",
    "solve_seconds",
    "device",
    "slowdown",
    "graph_fingerprint",
    "device_fingerprint",
];

/// Max-batch CSVs from before `--device` had the first ten columns alone,
/// and those from before the fingerprints the first twelve; their rows are
/// read with the rest empty, and are never resumed (their graph is
/// unknown), only kept.
const OLDER_COLUMNS: [usize; 2] = [12, 10];

/// Status of a search that ended on a batch whose solve ran out of time
/// without a plan: `max_batch` fits, and larger ones may too.
pub const TIMED_OUT: &str = "time-limit";

/// One strategy's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct MaxBatch {
    pub model: String,
    pub strategy: String,
    pub memory: Bytes,
    pub rule: String,
    /// `found`, `capped` (fits the largest batch tried), [`TIMED_OUT`] or
    /// `not-applicable`.
    pub status: String,
    /// 0 when not even batch 1 is allowed.
    pub max_batch: u32,
    /// max_batch / checkpoint-all's max batch.
    pub ratio: Option<f64>,
    /// Cost / checkpoint-all cost of the plan at max_batch.
    pub overhead: Option<f64>,
    pub peak: Option<Bytes>,
    pub seconds: f64,
    /// The device the batch was timed on, by name.
    pub device: Option<String>,
    /// Step time / all-fast step time of the plan at max_batch.
    pub slowdown: Option<f64>,
    pub graph: Option<Fingerprint>,
    pub device_fingerprint: Option<Fingerprint>,
}

impl MaxBatch {
    #[allow(clippy::type_complexity)]
    fn key(
        &self,
    ) -> (
        String,
        String,
        Bytes,
        String,
        Option<String>,
        Option<Fingerprint>,
        Option<Fingerprint>,
    ) {
        (
            self.model.clone(),
            self.strategy.clone(),
            self.memory,
            self.rule.clone(),
            self.device.clone(),
            self.graph,
            self.device_fingerprint,
        )
    }

    pub fn to_fields(&self) -> Vec<String> {
        vec![
            self.model.clone(),
            self.strategy.clone(),
            self.memory.to_string(),
            self.rule.clone(),
            self.status.clone(),
            self.max_batch.to_string(),
            self.ratio.map(|r| format!("{r:.4}")).unwrap_or_default(),
            self.overhead.map(|o| format!("{o:.6}")).unwrap_or_default(),
            self.peak.map(|p| p.to_string()).unwrap_or_default(),
            format!("{:.3}", self.seconds),
            self.device.clone().unwrap_or_default(),
            self.slowdown.map(|o| format!("{o:.6}")).unwrap_or_default(),
            self.graph.map(|f| f.to_string()).unwrap_or_default(),
            self.device_fingerprint
                .map(|f| f.to_string())
                .unwrap_or_default(),
        ]
    }

    pub fn from_fields(f: &[String]) -> Result<MaxBatch, String> {
        resultlog::expect_fields(f, &HEADER)?;
        use crate::workflows::resultlog::opt_num as num;
        Ok(MaxBatch {
            model: f[0].clone(),
            strategy: f[1].clone(),
            memory: Bytes(num(&f[2], "memory_bytes")?.ok_or("memory_bytes is empty")?),
            rule: f[3].clone(),
            status: f[4].clone(),
            max_batch: num(&f[5], "max_batch")?.ok_or("max_batch is empty")?,
            ratio: num(&f[6], "ratio_to_checkpoint_all")?,
            overhead: num(&f[7], "overhead")?,
            peak: num(&f[8], "peak_bytes")?.map(Bytes),
            seconds: num(&f[9], "solve_seconds")?.unwrap_or(0.0),
            device: Some(f[10].clone()).filter(|d| !d.is_empty()),
            slowdown: num(&f[11], "slowdown")?,
            graph: fingerprint(&f[12], "graph_fingerprint")?,
            device_fingerprint: fingerprint(&f[13], "device_fingerprint")?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MaxBatchError {
    #[error(transparent)]
    Log(#[from] LogError),
    /// The cause is part of the message, not a `source`, which anyhow's
    /// `{:#}` would print a second time.
    #[error("{strategy} at batch {batch}: {error}")]
    Solve {
        strategy: String,
        batch: u32,
        error: SolveError,
    },
}

/// A plan found at some batch.
#[derive(Debug, Clone, Copy)]
struct Fit {
    overhead: f64,
    peak: Bytes,
    slowdown: Option<f64>,
}

/// A probe's answer.
#[derive(Debug, Clone, Copy)]
enum Probe {
    Allowed(Fit),
    /// On a device, a plan fits the memory but its step is past the
    /// rule's bound: a larger batch may still pass (see the module doc).
    TooSlow,
    /// No plan fits (or the cost rule refuses it): neither does a larger
    /// batch.
    No,
}

/// Is `batch` allowed for `strat`?
/// `timed_out` is set when the answer is "no plan" only because the time
/// limit ran out first (`no-solution`): the batch may still fit.
fn probe(
    g: &Graph,
    strat: &dyn Strategy,
    batch: u32,
    cfg: &MaxBatchConfig,
    timed_out: &std::cell::Cell<bool>,
) -> Result<Probe, SolveError> {
    // `search` has checked that the scaled graph keeps the limits.
    let gb = g.at_batch(batch);
    // Cheap necessary condition; also what ends the exponential phase. It is
    // `solve`'s own: with direct reads from the slow tier, batches past the
    // recompute-only floor fit (it stopped every device search there).
    if solve::budget_floor(&gb, cfg.opts.device.as_deref()) > cfg.memory {
        return Ok(Probe::No);
    }
    let bound = cfg.rule.bound(&gb);
    let mut opts = cfg.opts.clone();
    opts.cost_bound = Some(bound);
    opts.warm_start = None;
    let out = match solve::run(&gb, strat, cfg.memory, &opts) {
        Ok(o) => o,
        Err(SolveError::BelowMinimum { .. }) => return Ok(Probe::No),
        Err(e) => return Err(e),
    };
    let (Some(cost), Some(peak)) = (out.cost(), out.peak()) else {
        // Only a solve that used its time ran out of it: one that stopped
        // early found nothing within the cost bound (a tester's batch 1 at
        // 74 B had a plan past the overhead rule and was reported "(time)").
        let used = out.seconds >= 0.9 * opts.time_limit.as_secs_f64();
        if out.status == crate::strategies::Status::NoSolution && used {
            timed_out.set(true);
        }
        return Ok(Probe::No);
    };
    // Tolerate float round-off in the bound, not real excess.
    let over = |v: f64, bound: f64| v > bound * (1.0 + 1e-9) + 1e-12;
    if over(cost, bound) {
        return Ok(Probe::No);
    }
    let slowdown = match (cfg.opts.device.as_deref(), out.timing()) {
        (Some(d), Some(t)) => {
            if over(t.step.get(), cfg.rule.time_bound(&gb, d).get()) {
                return Ok(Probe::TooSlow);
            }
            let fast = d.all_fast_step(&gb).get();
            Some(if fast > 0.0 { t.step.get() / fast } else { 1.0 })
        }
        (Some(_), None) => unreachable!("a plan solved with a device is timed"),
        (None, _) => None,
    };
    Ok(Probe::Allowed(Fit {
        overhead: gb.overhead(cost),
        peak,
        slowdown,
    }))
}

/// Exponential growth then bisection for one strategy (then, on a device,
/// a bisection below a memory limit that is too slow: see the module
/// doc). `on_probe` sees each batch before it is tried.
pub fn search(
    g: &Graph,
    strat: &dyn Strategy,
    cfg: &MaxBatchConfig,
    on_probe: &dyn Fn(u32),
) -> Result<MaxBatch, MaxBatchError> {
    let start = Instant::now();
    let mut result = MaxBatch {
        model: g.name.clone(),
        strategy: strategies::row_label(strat.name(), &cfg.opts),
        memory: cfg.memory,
        rule: cfg.rule.label(),
        status: "found".into(),
        max_batch: 0,
        ratio: None,
        overhead: None,
        peak: None,
        seconds: 0.0,
        device: cfg.opts.device.as_ref().map(|d| d.name.clone()),
        slowdown: None,
        graph: Some(g.fingerprint()),
        device_fingerprint: cfg.opts.device.as_ref().map(|d| d.fingerprint()),
    };
    let cap = cfg.max_batch.max(1);
    // Not-applicable is a property of the graph's shape, not of the batch:
    // the first probe that says so ends the search.
    let not_applicable = std::cell::Cell::new(false);
    // The smallest batch whose scaled graph passes what remat counts
    // exactly (bytes past 2^53 saturated at 2^64 - 1 and "fit" a memory of
    // that size): not tried; if the search ends below it, the answer is a
    // lower bound, reported as capped.
    let beyond_limits = std::cell::Cell::new(None::<u32>);
    // Batches whose solve ran out of time without a plan: if the search
    // ends on one, the answer is only a lower bound (it said "found, 0"
    // where checkpoint-all fits batch 178).
    let timed_out = std::cell::Cell::new(false);
    let unsure = std::cell::RefCell::new(std::collections::BTreeSet::<u32>::new());
    let try_batch = |b: u32| -> Result<Probe, MaxBatchError> {
        if not_applicable.get() {
            return Ok(Probe::No);
        }
        if g.at_batch_within_limits(b).is_none() {
            beyond_limits.set(Some(beyond_limits.get().map_or(b, |c| c.min(b))));
            return Ok(Probe::No);
        }
        on_probe(b);
        timed_out.set(false);
        let answer = probe(g, strat, b, cfg, &timed_out);
        if timed_out.get() {
            unsure.borrow_mut().insert(b);
        }
        match answer {
            Err(SolveError::Strategy(StrategyError::NotApplicable { .. })) => {
                not_applicable.set(true);
                Ok(Probe::No)
            }
            Err(error) => Err(MaxBatchError::Solve {
                strategy: strat.name().to_string(),
                batch: b,
                error,
            }),
            Ok(f) => Ok(f),
        }
    };
    // The largest allowed batch seen; the largest batch that fits the
    // memory (allowed or too slow), and the smallest that does not; the
    // batches too slow. Batches are probed in increasing order until the
    // memory limit is found, so an allowed batch is always the best yet.
    let mut best: Option<(u32, Fit)> = None;
    let mut fits: Option<u32> = None;
    let mut hi: Option<u32> = None;
    let mut slow = std::collections::BTreeSet::<u32>::new();
    let mut b = 1u32;
    loop {
        match try_batch(b)? {
            Probe::Allowed(f) => best = Some((b, f)),
            Probe::TooSlow => {
                slow.insert(b);
            }
            Probe::No => {
                hi = Some(b);
                break;
            }
        }
        fits = Some(b);
        if b >= cap {
            if best.is_some_and(|(a, _)| a == b) {
                result.status = "capped".into();
            }
            break;
        }
        b = b.saturating_mul(2).min(cap);
    }
    if let (Some(mut hi), Some(mut lo)) = (hi, fits) {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match try_batch(mid)? {
                Probe::Allowed(f) => {
                    lo = mid;
                    best = Some((mid, f));
                }
                Probe::TooSlow => {
                    lo = mid;
                    slow.insert(mid);
                }
                Probe::No => hi = mid,
            }
        }
        if beyond_limits.get() == Some(hi) {
            result.status = "capped".into();
        }
        if unsure.borrow().contains(&hi) {
            result.status = TIMED_OUT.into();
        }
    } else if fits.is_none() && unsure.borrow().contains(&1) {
        result.status = TIMED_OUT.into();
    }
    // The memory limit too slow: the largest allowed batch is between the
    // best seen and the next batch seen too slow.
    if let Some((mut lo, _)) = best {
        if let Some(mut hi) = slow.range(lo..).next().copied() {
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match try_batch(mid)? {
                    Probe::Allowed(f) => {
                        lo = mid;
                        best = Some((mid, f));
                    }
                    Probe::TooSlow | Probe::No => hi = mid,
                }
            }
        }
    }
    if not_applicable.get() {
        result.status = crate::workflows::sweep::NOT_APPLICABLE.into();
    } else if let Some((b, f)) = best {
        result.max_batch = b;
        result.overhead = Some(f.overhead);
        result.peak = Some(f.peak);
        result.slowdown = f.slowdown;
    }
    result.seconds = start.elapsed().as_secs_f64();
    Ok(result)
}

fn sort_results(rows: &mut [MaxBatch]) {
    let order: HashMap<&'static str, usize> = strategies::names()
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    rows.sort_by(|a, b| {
        let rank = |r: &MaxBatch| {
            order
                .get(r.strategy.as_str())
                .copied()
                .unwrap_or(usize::MAX)
        };
        (a.model.as_str(), a.memory, a.rule.as_str(), &a.device)
            .cmp(&(b.model.as_str(), b.memory, b.rule.as_str(), &b.device))
            .then(rank(a).cmp(&rank(b)))
            .then_with(|| a.strategy.cmp(&b.strategy))
    });
}

/// Searches every strategy (checkpoint-all first, as the reference), writing
/// each result to the CSV as it is found. Results already in the CSV for
/// the same model, memory and rule are reused. Returns this run's
/// strategies in registry order.
pub fn run(g: &Graph, cfg: &MaxBatchConfig) -> Result<Vec<MaxBatch>, MaxBatchError> {
    let mut strats: Vec<&dyn Strategy> = cfg
        .strategies
        .iter()
        .map(|s| s.as_ref())
        .filter(|s| s.makes_plans())
        .collect();
    let reference = CheckpointAll;
    if !strats.iter().any(|s| s.name() == reference.name()) {
        strats.insert(0, &reference);
    }
    let _lock = cfg
        .output
        .as_deref()
        .map(resultlog::RunLock::acquire)
        .transpose()?;
    let (log, existing) = match &cfg.output {
        Some(p) => {
            // A CSV in an older format: its rows stay (untimed, or of an
            // unknown graph), and the header gains the new columns in place.
            if let Some(mut rows) = OLDER_COLUMNS
                .iter()
                .find_map(|&n| resultlog::read_rows(p, &HEADER[..n]).ok())
            {
                for r in &mut rows {
                    r.resize(HEADER.len(), String::new());
                }
                resultlog::rewrite(p, &HEADER, &rows)?;
            }
            let whole = |f: &[String]| MaxBatch::from_fields(f).is_ok();
            let (log, rows) = ResultLog::open(p, &HEADER, &whole)?;
            if let Some(t) = log.torn().filter(|_| !cfg.quiet) {
                eprintln!(
                    "note: {}: cut a last line torn as it was written ('{t}'); its strategy is searched again",
                    p.display()
                );
            }
            (Some(log), parse_all(p, rows)?)
        }
        None => (None, Vec::new()),
    };
    let label = |name: &str| strategies::row_label(name, &cfg.opts);
    let want_key = |name: &str| {
        (
            g.name.clone(),
            name.to_string(),
            cfg.memory,
            cfg.rule.label(),
            cfg.opts.device.as_ref().map(|d| d.name.clone()),
            Some(g.fingerprint()),
            cfg.opts.device.as_ref().map(|d| d.fingerprint()),
        )
    };
    let mut done: Vec<MaxBatch> = existing
        .iter()
        .filter(|r| strats.iter().any(|s| r.key() == want_key(&label(s.name()))))
        // A row capped below this run's cap is searched again, further.
        .filter(|r| !(r.status == "capped" && r.max_batch < cfg.max_batch))
        .filter(|r| r.status != TIMED_OUT)
        .cloned()
        .collect();
    let pending: Vec<&dyn Strategy> = strats
        .iter()
        .copied()
        .filter(|s| !done.iter().any(|r| r.strategy == label(s.name())))
        .collect();

    let bar = resultlog::progress_bar(
        cfg.quiet,
        pending.len(),
        format!("max-batch {}", g.name),
        "[{bar:20}] {pos}/{len} strategies, {elapsed}  {wide_msg}",
    );
    let probing: Mutex<std::collections::BTreeMap<String, u32>> = Mutex::default();
    let show = |name: &str, b: Option<u32>| {
        let mut p = probing.lock().unwrap_or_else(|e| e.into_inner());
        match b {
            Some(b) => p.insert(name.to_string(), b),
            None => p.remove(name),
        };
        bar.set_message(
            p.iter()
                .map(|(n, b)| format!("{n}: batch {b}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    };
    let finish = |mut r: MaxBatch, reference: Option<u32>| -> Result<MaxBatch, MaxBatchError> {
        r.ratio = reference
            .filter(|&c| c > 0 && r.status != crate::workflows::sweep::NOT_APPLICABLE)
            .map(|c| r.max_batch as f64 / c as f64);
        if let Some(log) = &log {
            log.append(&r.to_fields())?;
        }
        bar.inc(1);
        Ok(r)
    };

    // The reference first: every other row's ratio needs it.
    let mut ref_batch = done
        .iter()
        .find(|r| r.strategy == reference.name())
        .map(|r| r.max_batch);
    let mut rest = pending.clone();
    if ref_batch.is_none() {
        let s = strats
            .iter()
            .copied()
            .find(|s| s.name() == reference.name())
            .unwrap_or(&reference);
        let r = search(g, s, cfg, &|b| show(s.name(), Some(b)))?;
        show(s.name(), None);
        ref_batch = Some(r.max_batch);
        rest.retain(|x| x.name() != reference.name());
        done.push(finish(r, ref_batch)?);
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<MaxBatch>> = Mutex::default();
    let error: Mutex<Option<MaxBatchError>> = Mutex::default();
    std::thread::scope(|sc| {
        for _ in 0..cfg.jobs.clamp(1, rest.len().max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= rest.len() {
                    break;
                }
                let s = rest[i];
                let r = search(g, s, cfg, &|b| show(s.name(), Some(b)))
                    .and_then(|r| finish(r, ref_batch));
                show(s.name(), None);
                match r {
                    Ok(r) => results.lock().unwrap_or_else(|e| e.into_inner()).push(r),
                    Err(e) => {
                        bar.suspend(|| eprintln!("error: {e}"));
                        error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    done.extend(results.into_inner().unwrap_or_else(|e| e.into_inner()));
    drop(log);
    if let Some(p) = &cfg.output {
        let mut all = parse_all(p, resultlog::read_rows(p, &HEADER)?)?;
        // A key searched again (a capped row, further) keeps its last row.
        let mut seen = std::collections::HashSet::new();
        all.reverse();
        all.retain(|r| seen.insert(r.key()));
        sort_results(&mut all);
        let fields: Vec<Vec<String>> = all.iter().map(MaxBatch::to_fields).collect();
        resultlog::rewrite(p, &HEADER, &fields)?;
    }
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    sort_results(&mut done);
    Ok(done)
}

fn parse_all(path: &Path, rows: Vec<Vec<String>>) -> Result<Vec<MaxBatch>, LogError> {
    resultlog::parse_records(path, &rows, MaxBatch::from_fields)
}

/// A table for the terminal; with a `slowdown` column when the rows were
/// timed on a device.
pub fn render(rows: &[MaxBatch]) -> String {
    let timed = rows.iter().any(|r| r.device.is_some());
    let mut s = format!(
        "{:<20} {:>10} {:>8} {:>10} {:>12}{}\n",
        "strategy",
        "max batch",
        "ratio",
        "overhead",
        "peak",
        if timed { "   slowdown" } else { "" }
    );
    for r in rows {
        let batch = match r.status.as_str() {
            "capped" => format!(">={}", r.max_batch),
            TIMED_OUT => format!(">={} (time)", r.max_batch),
            "not-applicable" => "n/a".into(),
            _ => r.max_batch.to_string(),
        };
        s.push_str(&format!(
            "{:<20} {:>10} {:>8} {:>10} {:>12}{}\n",
            r.strategy,
            batch,
            r.ratio
                .map(|x| format!("{x:.2}x"))
                .unwrap_or_else(|| "–".into()),
            r.overhead
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "–".into()),
            r.peak.map(|p| p.human()).unwrap_or_else(|| "–".into()),
            match (timed, r.slowdown) {
                (false, _) => String::new(),
                (true, Some(x)) => format!(" {:>10}", format!("{x:.3}x")),
                (true, None) => format!(" {:>10}", "–"),
            },
        ));
    }
    if rows.iter().any(|r| r.status == TIMED_OUT) {
        s.push_str("(time): the solve at the next batch ran out of time without a plan; a longer --time-limit may find a larger batch\n");
    }
    s
}
