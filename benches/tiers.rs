//! Tiered-memory benchmark (issue 15, item 7): the seed systems' policies
//! against the best recompute-only plan, on every model in models/ at 90,
//! 70, 50 and 30% of its checkpoint-all peak, on the A100-PCIe4 and the
//! Optane device files.
//!
//!     cargo bench --bench tiers -- [--time-limit SECS] [--only SUBSTRING]...
//!                                  [--out results/tiers_bench.csv] [--plot-only]
//!
//! Per row: the simulated step time, its overhead against all-fast (every
//! node once from fast memory, no transfers: the device's compute time of
//! the graph), compute and stall time, bytes moved each way, the fast-tier
//! peak and the solve time. Recompute-only is `remat-fast` timed on the
//! device: its step time is its compute time. Every figure comes from the
//! one pipeline (`solve::run`: plan generator, then the timed simulator),
//! except where a budget lies below the largest node-with-inputs, which
//! the pipeline refuses outright (no plan can compute there from fast
//! memory alone): there a tiered policy is run directly and its plan
//! simulated and checked the same way, since direct reads of the slow tier
//! can still fit.
//!
//! Rows are appended as they finish; a re-run skips rows already in the
//! file. Then one PNG per device, results/tiers_<device>.png: overhead
//! against budget, a panel per model, a line per policy.

mod common;

const USAGE: &str = "cargo bench --bench tiers -- [--time-limit SECS] [--only SUBSTRING]... [--out results/tiers_bench.csv] [--plot-only]";

use common::{read_rows, Row};
use remat::device::Device;
use remat::graph::analysis;
use remat::schedule::{generate_plan, simulate_on, SimReport};
use remat::solve::{self, SolveError};
use remat::strategies::{self, SolveOptions, Strategy};
use remat::units::{BudgetSpec, Bytes};
use remat::Graph;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HEADER: [&str; 17] = [
    "model",
    "nodes",
    "device",
    "budget_pct",
    "budget_bytes",
    "strategy",
    "status",
    "step_s",
    "all_fast_s",
    "overhead",
    "compute_s",
    "stall_s",
    "bytes_to_slow",
    "bytes_to_fast",
    "peak_bytes",
    "solve_s",
    "detail",
];

const DEVICES: [&str; 2] = ["a100-40gb-pcie4", "optane-pmm"];
const PCTS: [u32; 4] = [90, 70, 50, 30];
/// The label of the recompute-only reference and the strategy behind it.
const RECOMPUTE: (&str, &str) = ("recompute-only", "remat-fast");
const POLICIES: [&str; 6] = [
    "offload-all",
    "mc-dla",
    "tiertrain",
    "autotm-static",
    "autotm-sync",
    "autotm-async",
];

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut time_limit = 10.0;
    let mut only: Vec<String> = Vec::new();
    let mut out = root.join("results/tiers_bench.csv");
    let mut plot_only = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time-limit" => time_limit = it.next().and_then(|s| s.parse().ok()).unwrap_or(10.0),
            "--only" => only.extend(it.next()),
            "--out" => out = it.next().map(|p| root.join(p)).unwrap_or(out),
            "--plot-only" => plot_only = true,
            "--bench" => {}
            other => common::unknown_argument(other, USAGE),
        }
    }
    if !plot_only {
        measure(&root, &out, time_limit, &only);
    }
    let rows = read_rows(&out);
    for dev in DEVICES {
        let path = root.join(format!("results/tiers_{dev}.png"));
        match plot(&rows, dev, &path) {
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(e) => eprintln!("plot {}: {e}", path.display()),
        }
    }
}

fn measure(root: &Path, out: &Path, time_limit: f64, only: &[String]) {
    let done: HashSet<(String, String, String, String)> = read_rows(out)
        .iter()
        .map(|r| {
            (
                r["model"].clone(),
                r["device"].clone(),
                r["budget_pct"].clone(),
                r["strategy"].clone(),
            )
        })
        .collect();
    let fresh = !out.exists();
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .unwrap();
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(file);
    if fresh {
        w.write_record(HEADER).unwrap();
        w.flush().unwrap();
    }
    let mut models: Vec<PathBuf> = std::fs::read_dir(root.join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    models.sort();
    for path in models {
        let g = Graph::load(&path).unwrap();
        if !only.is_empty() && !only.iter().any(|o| g.name.contains(o.as_str())) {
            continue;
        }
        let peak = analysis::checkpoint_all_peak(&g);
        for dname in DEVICES {
            let dev = Device::load(&root.join(format!("devices/{dname}.yaml"))).unwrap();
            let all_fast = dev.all_fast_step(&g).get();
            let opts = SolveOptions {
                time_limit: Duration::from_secs_f64(time_limit),
                threads: 1,
                device: Some(Arc::new(dev.clone())),
                ..SolveOptions::default()
            };
            for pct in PCTS {
                let budget = BudgetSpec::parse(&format!("{pct}%")).unwrap().resolve(peak);
                let runs = std::iter::once(RECOMPUTE).chain(POLICIES.iter().map(|&p| (p, p)));
                for (label, sname) in runs {
                    let key = (
                        g.name.clone(),
                        dname.to_string(),
                        pct.to_string(),
                        label.to_string(),
                    );
                    if done.contains(&key) {
                        continue;
                    }
                    let s = strategies::by_name(sname).expect("registered");
                    eprintln!("{} on {dname} @ {pct}%: {label}", g.name);
                    let t = Instant::now();
                    let (status, sim, detail) = run_one(&g, s.as_ref(), budget, &opts, &dev);
                    let secs = t.elapsed().as_secs_f64();
                    let timing = sim.as_ref().and_then(|s| s.timing.clone());
                    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6e}"));
                    let step = timing.as_ref().map(|t| t.step.get());
                    let record = [
                        g.name.clone(),
                        g.len().to_string(),
                        dname.to_string(),
                        pct.to_string(),
                        budget.get().to_string(),
                        label.to_string(),
                        status,
                        f(step),
                        format!("{all_fast:.6e}"),
                        step.map_or(String::new(), |s| format!("{:.6}", s / all_fast - 1.0)),
                        f(timing.as_ref().map(|t| t.compute.get())),
                        f(timing.as_ref().map(|t| t.stall.get())),
                        timing
                            .as_ref()
                            .map_or(String::new(), |t| t.bytes_to_slow.get().to_string()),
                        timing
                            .as_ref()
                            .map_or(String::new(), |t| t.bytes_to_fast.get().to_string()),
                        sim.as_ref()
                            .map_or(String::new(), |s| s.peak.get().to_string()),
                        format!("{secs:.3}"),
                        detail,
                    ];
                    w.write_record(&record).unwrap();
                    w.flush().unwrap();
                }
            }
        }
    }
}

/// One answer: status, the simulator's report when there is a plan, and
/// the strategy's own words.
fn run_one(
    g: &Graph,
    s: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    dev: &Device,
) -> (String, Option<SimReport>, String) {
    match solve::run(g, s, budget, opts) {
        Ok(o) => (
            o.status.as_str().to_string(),
            o.sim,
            o.detail.unwrap_or_default(),
        ),
        Err(SolveError::BelowMinimum { .. }) if s.name() != RECOMPUTE.1 => {
            // The pipeline's own checks, for a plan it would not ask for.
            match s.solve(g, budget, opts) {
                Ok(sol) => match (sol.status.has_plan(), sol.schedule) {
                    (true, Some(sch)) => {
                        let plan = generate_plan(g, &sch).expect("valid schedule");
                        let sim = simulate_on(g, &plan, Some(dev)).expect("plan runs");
                        assert!(sim.peak <= budget, "{} over budget", s.name());
                        (
                            sol.status.as_str().to_string(),
                            Some(sim),
                            format!(
                                "below the largest node-with-inputs; {}",
                                sol.detail.unwrap_or_default()
                            ),
                        )
                    }
                    _ => (
                        sol.status.as_str().to_string(),
                        None,
                        sol.detail.unwrap_or_default(),
                    ),
                },
                Err(e) => status_of_error(&e.into()),
            }
        }
        Err(e) => status_of_error(&e),
    }
}

fn status_of_error(e: &SolveError) -> (String, Option<SimReport>, String) {
    (common::status_of_error(e).to_string(), None, e.to_string())
}

/// One panel per model, a line per policy through the budgets where it
/// has a plan.
fn plot(rows: &[Row], device: &str, path: &Path) -> Result<(), String> {
    let labels: Vec<&str> = std::iter::once(RECOMPUTE.0).chain(POLICIES).collect();
    let point = |r: &Row, k: usize| {
        (r["strategy"] == labels[k])
            .then(|| Some((r["budget_pct"].parse().ok()?, r["overhead"].parse().ok()?)))?
    };
    common::plot_device(rows, device, path, "model", &labels, (25.0, 95.0), point)
}
