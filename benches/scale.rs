//! Scale benchmark (issue 7): per graph and budget, each strategy's time to
//! its first plan, to a 1% gap and to its final answer, its simulated cost,
//! its status and the gap it proves, beside the peers' figures from
//! ../shared/benchmarks/README.md. The two times come from the strategy's
//! progress trace (incumbent and bound over time).
//!
//!     cargo bench --bench scale -- [--time-limit SECS] [--strategies a,b,...]
//!                                  [--only SUBSTRING]... [--out results/scale_bench.csv]
//!                                  [--solver highs|cbc] [--search-orders]
//!                                  [--budgets 90,80,60]
//!
//! With `--solver cbc` the rows are labelled `STRATEGY+cbc`, and with
//! `--search-orders` (also planning in another node order, and polishing
//! plans far from their bound in any order) `STRATEGY+orders`, so the
//! variants' rows live in one file and resume independently.
//!
//! Graphs: the public ones in ../shared/benchmarks/ (read in place) and the
//! zoo's resnet50 and gpt2, at 90%, 80% and 60% of the checkpoint-all peak
//! (`--budgets` picks some of them).
//! Every answer goes through the one pipeline (`solve::run`: plan
//! generator and simulator), so costs and peaks are the simulator's. Rows are
//! written as they finish (atomically) and a re-run skips rows already
//! there. The MILP-based strategies run on graphs of at most 400 nodes.

mod common;

const USAGE: &str = "cargo bench --bench scale -- [--time-limit SECS] [--strategies a,b,...] [--only SUBSTRING]... [--out results/scale_bench.csv] [--solver highs|cbc] [--search-orders] [--budgets 90,80,60]";

use remat::cli::write_atomic;
use remat::graph::analysis;
use remat::solve;
use remat::solver::Backend;
use remat::strategies::{self, SolveOptions};
use remat::units::BudgetSpec;
use remat::zoo;
use remat::Graph;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const HEADER: &str = "graph,nodes,edges,budget_pct,budget_bytes,strategy,status,cost,overhead,peak_bytes,bound,gap,seconds,first_plan_s,gap1_s,peer_note";

/// Graphs above this size run remat-fast only.
const MAX_MILP_NODES: usize = 400;

/// Graphs above this size run dtr-greedy only.
const MAX_SEARCH_NODES: usize = 2000;

fn peer_note(graph: &str, pct: u32) -> &'static str {
    match (graph, pct) {
        ("random-layered-n100", 90) => "optimum 48146; MOCCASIN 36.8 s; Checkmate-on-HiGHS 36.2 s",
        ("random-layered-n100", 80) => "optimum 48866; MOCCASIN 42.3 s; Checkmate-on-HiGHS 523 s",
        ("checkmate-fcn8vgg-b32", 80) => {
            "optimum 10289323652736; MOCCASIN 10.9 s; Checkmate-on-HiGHS 9.9 s"
        }
        ("random-layered-n250", 90) => {
            "MOCCASIN no plan in 400 s; Checkmate-on-HiGHS none in 900 s"
        }
        ("checkmate-resnet50-b256", 80 | 90) => {
            "MOCCASIN no plan in 300 s; Checkmate-on-HiGHS none in 927 s"
        }
        _ => "",
    }
}

fn main() {
    let mut time_limit = 120.0;
    let mut backend = Backend::Highs;
    let mut names: Vec<String> = ["remat-fast", "remat-exact", "checkmate-ilp"]
        .map(String::from)
        .to_vec();
    let mut only: Vec<String> = Vec::new();
    let mut search_orders = false;
    let mut pcts: Vec<u32> = vec![90, 80, 60];
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = root.join("results/scale_bench.csv");
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time-limit" => time_limit = it.next().and_then(|s| s.parse().ok()).unwrap_or(120.0),
            "--strategies" => {
                names = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(String::from)
                    .collect()
            }
            "--only" => only.extend(it.next()),
            "--solver" => {
                backend = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--solver highs|cbc")
            }
            "--search-orders" => search_orders = true,
            "--budgets" => {
                pcts = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|p| {
                        p.trim()
                            .trim_end_matches('%')
                            .parse()
                            .expect("--budgets 90,80,60")
                    })
                    .collect()
            }
            "--out" => out = it.next().map(|p| root.join(p)).unwrap_or(out),
            "--bench" => {}
            other => common::unknown_argument(other, USAGE),
        }
    }
    let shared = root.join("../shared/benchmarks");
    let mut graphs: Vec<(String, PathBuf)> = [
        "random-layered-n100",
        "checkmate-fcn8vgg-b32",
        "checkmate-mobilenet-b512",
        "random-layered-n250",
        "checkmate-resnet50-b256",
        "random-layered-n500",
        "random-layered-n1000",
    ]
    .iter()
    .map(|n| (n.to_string(), shared.join(format!("{n}.yaml"))))
    .collect();
    for z in ["resnet50", "gpt2"] {
        graphs.push((format!("zoo-{z}"), root.join(format!("models/{z}.yaml"))));
    }
    // 10^4-node training graphs, generated in memory: the greedy eviction's
    // "well under a second at this size" is measured here.
    let synthetic: Vec<(String, Graph)> = vec![
        ("synthetic-linear5000".into(), zoo::synthetic::linear(5000)),
        (
            "synthetic-residual1667x2".into(),
            zoo::synthetic::residual(&zoo::synthetic::ResidualChain {
                blocks: 1667,
                branch: 2,
                ..Default::default()
            }),
        ),
    ];
    let graphs = graphs
        .into_iter()
        .map(|(name, path)| {
            let g = Graph::load(&path).map_err(|e| format!("skipping {}: {e}", path.display()));
            (name, g)
        })
        .chain(synthetic.into_iter().map(|(n, g)| (n, Ok(g))));
    let (mut text, done) = common::resume(&out, HEADER);
    let opts = SolveOptions {
        time_limit: Duration::from_secs_f64(time_limit),
        backend,
        threads: 1,
        search_orders,
        ..SolveOptions::default()
    };
    for (name, g) in graphs {
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let g = match g {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{e}");
                continue;
            }
        };
        let peak = analysis::checkpoint_all_peak(&g);
        for &pct in &pcts {
            let budget = BudgetSpec::parse(&format!("{pct}%")).unwrap().resolve(peak);
            for sname in &names {
                let mut label = match backend {
                    Backend::Highs => sname.clone(),
                    Backend::Cbc => format!("{sname}+cbc"),
                };
                if search_orders {
                    label.push_str("+orders");
                }
                if done.contains(&(name.clone(), pct.to_string(), label.clone())) {
                    continue;
                }
                // The full MILP has O(n·E) columns: past a few hundred
                // nodes it does not fit the time limit or memory here.
                if g.len() > MAX_MILP_NODES && sname != "remat-fast" && sname != "dtr-greedy" {
                    continue;
                }
                // remat-fast's search re-simulates an n×n schedule per move.
                if g.len() > MAX_SEARCH_NODES && sname != "dtr-greedy" {
                    continue;
                }
                let Some(s) = strategies::by_name(sname) else {
                    eprintln!("unknown strategy {sname}");
                    continue;
                };
                eprintln!("{name} @ {pct}%: {label}");
                let t = Instant::now();
                let res = solve::run(&g, s.as_ref(), budget, &opts);
                let secs = t.elapsed().as_secs_f64();
                let total = g.total_cost();
                let row = match res {
                    Ok(o) => {
                        let cost = o.cost();
                        let gap = o.gap();
                        let opt_secs =
                            |s: Option<f64>| s.map_or(String::new(), |s| format!("{s:.3}"));
                        format!(
                            "{},{},{},{},{},{},{},{},{}",
                            o.status.as_str(),
                            cost.map_or(String::new(), |c| format!("{c}")),
                            cost.map_or(String::new(), |c| format!("{:.6}", c / total)),
                            o.peak().map_or(String::new(), |p| p.get().to_string()),
                            o.lower_bound.map_or(String::new(), |b| format!("{b}")),
                            gap.map_or(String::new(), |g| format!("{g:.3e}")),
                            format_args!("{secs:.3}"),
                            opt_secs(o.first_plan_secs()),
                            opt_secs(o.secs_to_gap(0.01)),
                        )
                    }
                    Err(e) => format!("{},,,,,,{secs:.3},,", e.to_string().replace(',', ";")),
                };
                text.push_str(&format!(
                    "{name},{},{},{pct},{},{label},{row},{}\n",
                    g.len(),
                    g.num_edges(),
                    budget.get(),
                    peer_note(&name, pct)
                ));
                write_atomic(&out, text.as_bytes()).expect("writing the bench CSV");
            }
        }
    }
    eprintln!("wrote {}", out.display());
}
