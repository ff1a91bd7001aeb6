//! MILP benchmark: per model and budget, the Checkmate MILP's size and
//! build time, the LP bound, two-phase rounding, and each backend's time to
//! its first plan and to proven optimality (or its gap at the limit).
//!
//!     cargo bench --bench milp -- [--time-limit SECS] [--backends highs,cbc]
//!                                 [--only SUBSTRING]... [--out results/milp_bench.csv]
//!
//! Models: every graph in models/ and the public graphs in
//! ../shared/benchmarks/ (read in place, never copied). Budgets: 90%, 70%
//! and 50% of the checkpoint-all peak, plus 80% for the public graphs.
//! Rows are appended as they finish and the file is rewritten atomically;
//! a re-run skips the (model, budget, backend) rows already present.
//! The MILP runs are unseeded so the solver's own time to a first plan is
//! measured; every plan is checked by the simulator.

mod common;

const USAGE: &str = "cargo bench --bench milp -- [--time-limit SECS] [--backends highs,cbc] [--only SUBSTRING]... [--out results/milp_bench.csv]";

use remat::cli::write_atomic;
use remat::graph::analysis;
use remat::schedule::{generate_plan, simulate};
use remat::solver::checkmate::Formulation;
use remat::solver::{solve_mip, Backend, MipStatus, Params};
use remat::strategies::checkmate_approx::CheckmateApprox;
use remat::strategies::lp_bound::lp_lower_bound;
use remat::strategies::{SolveOptions, Strategy};
use remat::units::BudgetSpec;
use remat::{Bytes, Graph};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const HEADER: &str = "model,nodes,edges,budget_pct,budget_bytes,backend,build_s,variables,binaries,constraints,nonzeros,\
lp_bound,lp_s,approx_cost,approx_s,status,cost,bound,gap,first_plan_s,solve_s,approx_ratio,reference_cost,reference_note";

/// Optima and peer timings from ../shared/benchmarks/README.md.
fn reference(model: &str, pct: u32) -> (&'static str, &'static str) {
    match (model, pct) {
        ("random-layered-n100", 90) => ("48146", "MOCCASIN 36.8 s; Checkmate-on-HiGHS 36.2 s"),
        ("random-layered-n100", 80) => ("48866", "MOCCASIN 42.3 s; Checkmate-on-HiGHS 523 s"),
        ("checkmate-fcn8vgg-b32", 80) => (
            "10289323652736",
            "MOCCASIN 10.9 s; Checkmate-on-HiGHS 9.9 s",
        ),
        _ => ("", ""),
    }
}

struct Args {
    time_limit: f64,
    backends: Vec<Backend>,
    only: Vec<String>,
    out: PathBuf,
}

fn parse_args() -> Args {
    let mut a = Args {
        time_limit: std::env::var("MILP_BENCH_TIME_LIMIT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60.0),
        backends: Backend::ALL.to_vec(),
        only: std::env::var("MILP_BENCH_ONLY")
            .map(|s| s.split(',').map(String::from).collect())
            .unwrap_or_default(),
        out: PathBuf::from("results/milp_bench.csv"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--time-limit" => a.time_limit = it.next().and_then(|s| s.parse().ok()).unwrap_or(60.0),
            "--backends" => {
                a.backends = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|s| s.parse().ok())
                    .collect()
            }
            "--only" => a.only.extend(it.next()),
            "--out" => a.out = it.next().map(PathBuf::from).unwrap_or(a.out),
            "--bench" => {}
            other => common::unknown_argument(other, USAGE),
        }
    }
    a
}

fn instances(root: &Path) -> Vec<(String, PathBuf, Vec<u32>)> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.join("models")) {
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
            .collect();
        files.sort();
        for p in files {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            v.push((stem, p, vec![90, 70, 50]));
        }
    }
    let shared = root.join("../shared/benchmarks");
    for name in [
        "checkmate-vgg16-b256",
        "checkmate-vgg19-b256",
        "checkmate-fcn8vgg-b32",
        "checkmate-segnet-b32",
        "checkmate-vggunet-b32",
        "random-layered-n100",
        "checkmate-mobilenet-b512",
    ] {
        let p = shared.join(format!("{name}.yaml"));
        if p.exists() {
            v.push((name.to_string(), p, vec![90, 80, 70, 50]));
        }
    }
    v
}

fn fmt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v}"))
}

fn main() {
    let args = parse_args();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = if args.out.is_absolute() {
        args.out.clone()
    } else {
        root.join(&args.out)
    };
    let (mut text, done) = common::resume(&out, HEADER);
    let insts: Vec<_> = instances(&root)
        .into_iter()
        .filter(|(n, _, _)| {
            args.only.is_empty() || args.only.iter().any(|o| n.contains(o.as_str()))
        })
        .collect();
    let total: usize = insts.iter().map(|i| i.2.len() * args.backends.len()).sum();
    let bar = indicatif::ProgressBar::new(total as u64);
    for (name, path, pcts) in insts {
        let g = match Graph::load(&path) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping {}: {e}", path.display());
                continue;
            }
        };
        let peak = analysis::checkpoint_all_peak(&g);
        for pct in pcts {
            let todo: Vec<Backend> = args
                .backends
                .iter()
                .copied()
                .filter(|b| !done.contains(&(name.clone(), pct.to_string(), b.to_string())))
                .collect();
            bar.inc((args.backends.len() - todo.len()) as u64);
            if todo.is_empty() {
                continue;
            }
            let budget = BudgetSpec::parse(&format!("{pct}%")).unwrap().resolve(peak);
            bar.set_message(format!("{name} @ {pct}%"));
            let rows = run_budget(&g, &name, pct, budget, &todo, args.time_limit, &bar);
            for r in rows {
                text.push_str(&r);
                text.push('\n');
                write_atomic(&out, text.as_bytes()).expect("writing the bench CSV");
            }
        }
    }
    bar.finish();
    eprintln!("wrote {}", out.display());
}

fn run_budget(
    g: &Graph,
    name: &str,
    pct: u32,
    budget: Bytes,
    backends: &[Backend],
    time_limit: f64,
    bar: &indicatif::ProgressBar,
) -> Vec<String> {
    let opts = SolveOptions {
        time_limit: Duration::from_secs_f64(time_limit),
        threads: 1,
        ..SolveOptions::default()
    };
    let t = Instant::now();
    let f = Formulation::build(g, budget, true, None);
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let lp = lp_lower_bound(g, budget, &opts).ok().flatten();
    let lp_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let approx = CheckmateApprox
        .solve(g, budget, &opts)
        .ok()
        .and_then(|s| s.schedule)
        .and_then(|s| simulated(g, &s, budget));
    let approx_s = t.elapsed().as_secs_f64();
    let (ref_cost, ref_note) = reference(name, pct);
    let mut rows = Vec::new();
    for &backend in backends {
        let p = Params {
            time_limit: opts.time_limit,
            gap: 1e-4,
            threads: 1,
            ..Params::default()
        };
        let r = solve_mip(&f.model, backend, &p, None);
        let (status, cost, bound, first, solve_s) = match r {
            Ok(r) => {
                let cost =
                    r.x.as_ref()
                        .and_then(|x| simulated(g, &f.schedule(x), budget));
                let status = match (r.status, cost) {
                    (MipStatus::Optimal, Some(_)) => "optimal",
                    (MipStatus::Feasible, Some(_)) => "feasible",
                    (MipStatus::Infeasible, _) => "infeasible",
                    (MipStatus::NoSolution, _) => "no-solution",
                    (_, None) => "over-budget-in-simulation",
                };
                (
                    status.to_string(),
                    cost,
                    r.bound.map(|b| b * f.cost_scale),
                    r.first_solution_secs,
                    r.seconds,
                )
            }
            Err(e) => (
                format!("error: {e}").replace(',', ";"),
                None,
                None,
                None,
                0.0,
            ),
        };
        let gap = match (cost, bound) {
            (Some(c), Some(b)) if c > 0.0 => Some(((c - b) / c).max(0.0)),
            _ => None,
        };
        let ratio = match (approx, cost) {
            (Some(a), Some(c)) if status == "optimal" && c > 0.0 => Some(a / c),
            _ => None,
        };
        rows.push(format!(
            "{name},{},{},{pct},{},{backend},{build_s:.4},{},{},{},{},{},{lp_s:.3},{},{approx_s:.3},{status},{},{},{},{},{solve_s:.3},{},{ref_cost},{ref_note}",
            g.len(),
            g.num_edges(),
            budget.get(),
            f.model.num_cols(),
            f.num_binaries(),
            f.model.num_rows(),
            f.model.num_nonzeros(),
            fmt(lp),
            fmt(approx),
            fmt(cost),
            fmt(bound),
            gap.map_or(String::new(), |g| format!("{g:.2e}")),
            first.map_or(String::new(), |s| format!("{s:.3}")),
            ratio.map_or(String::new(), |r| format!("{r:.5}")),
        ));
        bar.inc(1);
    }
    rows
}

/// The simulated cost of a schedule, if it is valid and fits.
fn simulated(g: &Graph, s: &remat::schedule::Schedule, budget: Bytes) -> Option<f64> {
    let plan = generate_plan(g, s).ok()?;
    let sim = simulate(g, &plan).ok()?;
    (sim.peak <= budget).then_some(sim.cost)
}
