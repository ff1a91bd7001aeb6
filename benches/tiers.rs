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

use plotters::prelude::*;
use remat::device::Device;
use remat::graph::analysis;
use remat::schedule::{generate_plan, simulate_on, SimReport};
use remat::solve::{self, SolveError};
use remat::strategies::{self, SolveOptions, Strategy};
use remat::units::{BudgetSpec, Bytes};
use remat::Graph;
use std::collections::{BTreeMap, HashSet};
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

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

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
            other => eprintln!("ignoring argument {other}"),
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
    let status = match e {
        SolveError::BelowMinimum { .. } => "below-minimum",
        SolveError::Strategy(remat::strategies::StrategyError::NotApplicable { .. }) => {
            "not-applicable"
        }
        _ => "error",
    };
    (status.to_string(), None, e.to_string())
}

fn read_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let Ok(mut r) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    let Ok(head) = r.headers().cloned() else {
        return Vec::new();
    };
    r.records()
        .filter_map(|rec| rec.ok())
        .map(|rec| {
            head.iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

const COLORS: [RGBColor; 7] = [
    RGBColor(0, 0, 0),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One panel per model: step time over the all-fast step (1 + overhead,
/// on a log axis, drawn as log10 on a linear one so that narrow ranges
/// still get labels: overheads span 0.1% to 60x) against the budget (% of the
/// checkpoint-all peak), a line per policy through the budgets where it has
/// a plan.
fn plot(rows: &[BTreeMap<String, String>], device: &str, path: &Path) -> Result<(), String> {
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let rows: Vec<_> = rows.iter().filter(|r| r["device"] == device).collect();
    let mut models: Vec<String> = rows.iter().map(|r| r["model"].clone()).collect();
    models.sort();
    models.dedup();
    if models.is_empty() {
        return Err("no rows".into());
    }
    let labels: Vec<&str> = std::iter::once(RECOMPUTE.0).chain(POLICIES).collect();
    let cols = 4;
    let nrows = models.len().div_ceil(cols);
    let tmp = path.with_extension("tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (1600, 420 * nrows as u32 + 110)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| x.to_string())?;
        let (top, body) = root.split_vertically(110);
        top.draw(&Text::new(
            format!(
                "{device}: step time over the all-fast step, by budget (% of checkpoint-all peak)"
            ),
            (20, 12),
            ("sans-serif", 26),
        ))
        .map_err(|x| x.to_string())?;
        for (k, label) in labels.iter().enumerate() {
            let x = 20 + 215 * k as i32;
            let c = COLORS[k];
            top.draw(&PathElement::new(
                vec![(x, 72), (x + 30, 72)],
                c.stroke_width(3),
            ))
            .map_err(|x| x.to_string())?;
            top.draw(&Text::new(
                label.to_string(),
                (x + 36, 62),
                ("sans-serif", 19),
            ))
            .map_err(|x| x.to_string())?;
        }
        let panels = body.split_evenly((nrows, cols));
        for (panel, model) in panels.iter().zip(&models) {
            let series: Vec<(usize, Vec<(f64, f64)>)> = labels
                .iter()
                .enumerate()
                .map(|(k, label)| {
                    let mut pts: Vec<(f64, f64)> = rows
                        .iter()
                        .filter(|r| &r["model"] == model && r["strategy"] == *label)
                        .filter_map(|r| {
                            let x: f64 = r["budget_pct"].parse().ok()?;
                            let y: f64 = r["overhead"].parse().ok()?;
                            Some((x, (1.0 + y).log10()))
                        })
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (k, pts)
                })
                .collect();
            let ymax = series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|q| q.1))
                .fold(1.1f64.log10(), f64::max)
                + 0.06;
            let mut chart = ChartBuilder::on(panel)
                .caption(model, ("sans-serif", 20))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(25.0..95.0, 0.98f64.log10()..ymax)
                .map_err(|x| x.to_string())?;
            chart
                .configure_mesh()
                .x_desc("budget (%)")
                .y_desc("step / all-fast step (log)")
                .y_labels(12)
                .y_label_formatter(&|v| {
                    let y = 10f64.powf(*v);
                    if y >= 10.0 {
                        format!("{y:.0}")
                    } else {
                        format!("{y:.2}")
                    }
                })
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 14))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|x| x.to_string())?;
            for (k, pts) in series {
                let c = COLORS[k];
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                    .map_err(|x| x.to_string())?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                    .map_err(|x| x.to_string())?;
            }
        }
        root.present().map_err(|x| x.to_string())?;
    }
    std::fs::rename(&tmp, path).map_err(|x| x.to_string())
}
