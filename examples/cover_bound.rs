//! The recompute cover program's bound alone, at one detail, for measuring
//! it against plans:
//! `cargo run --release --example cover_bound -- GRAPH PCT SECS [segments|inputs|moments] [lp]`
//! (PCT: percent of the checkpoint-all peak, or bytes as `170664B`;
//! default detail: inputs; `lp`:
//! the LP relaxation only). `ORDER=PLAN` in the environment bounds the
//! plans in the order of that plan file's first computations instead of
//! the file's (what `remat solve --search-orders` bounds an annealed plan
//! in). Prints the bound as a multiple of every node once, and the
//! program's solution as a plan: its simulated cost and peak, and the
//! local search's plan from it (docs/scale.md).

use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::Graph;
use remat::schedule::{generate_plan, simulate};
use remat::solver::cover::{cover_bound, cover_bound_relaxed, Detail};
use remat::solver::Params;
use remat::strategies::local_search::{search_from, Ranking};
use std::path::Path;
use std::time::Duration;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: cover_bound GRAPH PCT SECS [segments|inputs|moments]");
        std::process::exit(2);
    }
    let mut g = Graph::load(Path::new(&a[1])).unwrap();
    // A percent is of the file order's peak, as `remat solve` reads it.
    let file_peak = checkpoint_all_peak(&g);
    if let Ok(plan) = std::env::var("ORDER") {
        let (_, plan) =
            remat::cli::plan_file::load_plan(&g, Path::new(&a[1]), Path::new(&plan)).unwrap();
        let seq: Vec<_> = plan.computed().collect();
        let order = remat::schedule::free_order::order_of(&seq, g.len());
        g = g
            .reordered(&order)
            .expect("a plan's first computations are topological");
    }
    let bytes: Option<u64> = a[2].strip_suffix('B').map(|b| b.parse().unwrap());
    let pct: u128 = if bytes.is_some() {
        0
    } else {
        a[2].parse().unwrap()
    };
    let secs: f64 = a[3].parse().unwrap();
    let detail = match a.get(4).map(String::as_str) {
        Some("segments") => Detail::Segments,
        Some("moments") => Detail::Moments,
        _ => Detail::SegmentInputs,
    };
    let budget = bytes.map_or_else(|| file_peak.scale_ceil(pct, 100), remat::units::Bytes);
    let p = Params {
        time_limit: Duration::from_secs_f64(secs),
        gap: 1e-5,
        ..Params::default()
    };
    {
        let needs = remat::graph::analysis::stage_needs(&g, budget);
        let prog = remat::solver::cover::Program::build(&g, &needs, detail);
        println!(
            "program: {} columns, {} rows, {} nonzeros",
            prog.model.num_cols(),
            prog.model.num_rows(),
            prog.model.num_nonzeros()
        );
    }
    let c = if a.get(5).map(String::as_str) == Some("lp") {
        cover_bound_relaxed(&g, budget, detail, &p).unwrap()
    } else {
        cover_bound(&g, budget, detail, &p, None).unwrap()
    };
    println!(
        "{} {pct}% {detail:?}: bound {:.6e} ({:.5}x one pass) proven {} {:.2} s columns {}",
        a[1],
        c.bound,
        c.bound / g.total_cost(),
        c.proven,
        c.seconds,
        c.columns
    );
    if let Some(sch) = c.plan {
        let sim = simulate(&g, &generate_plan(&g, &sch).unwrap()).unwrap();
        println!(
            "its solution as a schedule: cost {} peak {} (budget {})",
            sim.cost, sim.peak, budget
        );
        let deadline = std::time::Instant::now() + Duration::from_secs_f64(secs);
        if let Some(s) = search_from(&g, sch, budget, Ranking::Forecast, deadline) {
            let sim = simulate(&g, &generate_plan(&g, &s).unwrap()).unwrap();
            println!("searched from it: cost {} peak {}", sim.cost, sim.peak);
        }
    }
}
