//! remat-fast's plan, then kicks at its costliest stages for longer than
//! remat-fast gives them (`local_search::kick_costliest_stages`; docs/scale.md):
//! `cargo run --release --example kicks -- GRAPH PCT START_SECS KICK_SECS`
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::Graph;
use remat::schedule::{generate_plan, simulate};
use remat::strategies::local_search::kick_costliest_stages;
use remat::strategies::{by_name, SolveOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: kicks GRAPH PCT START_SECS KICK_SECS");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let pct: u128 = a[2].parse().unwrap();
    let start_secs: f64 = a[3].parse().unwrap();
    let kick_secs: f64 = a[4].parse().unwrap();
    let budget = checkpoint_all_peak(&g).scale_ceil(pct, 100);
    let opts = SolveOptions {
        time_limit: Duration::from_secs_f64(start_secs),
        ..SolveOptions::default()
    };
    let sol = by_name("remat-fast")
        .unwrap()
        .solve(&g, budget, &opts)
        .unwrap();
    let Some(start) = sol.schedule else {
        println!("remat-fast: no plan in {start_secs} s");
        return;
    };
    println!("remat-fast: {}", start.cost(&g));
    let t0 = Instant::now();
    let kicked = kick_costliest_stages(&g, start, budget, t0 + Duration::from_secs_f64(kick_secs));
    let sim = simulate(&g, &generate_plan(&g, &kicked).unwrap()).unwrap();
    println!(
        "kicked: {} (peak {} of {budget}) in {:.1} s",
        sim.cost,
        sim.peak,
        t0.elapsed().as_secs_f64()
    );
}
