//! remat-fast's plan, then the kicks, `refine` or the random walk for
//! longer than remat-fast gives them, printing each cheaper plan with its
//! time, and the last one as the simulator replays it (docs/scale.md):
//! `cargo run --release --example refine_trace -- GRAPH PCT START_SECS SECS MODE`
//! (MODE: kicks, refine, perturb, restarts: walks restarted on new random
//! streams, or kp: kicks, then the walk).
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::Graph;
use remat::schedule::{generate_plan, simulate, Schedule};
use remat::strategies::local_search::{kick_costliest_stages, perturb, perturb_restarts, refine};
use remat::strategies::{by_name, SolveOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 6 {
        eprintln!("usage: refine_trace GRAPH PCT START_SECS SECS MODE");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let pct: u128 = a[2].parse().unwrap();
    let start_secs: f64 = a[3].parse().unwrap();
    let secs: f64 = a[4].parse().unwrap();
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
    let end = t0 + Duration::from_secs_f64(secs);
    let mut heard = |s: &Schedule| {
        println!("{:8.1} s {}", t0.elapsed().as_secs_f64(), s.cost(&g));
    };
    let out = match a[5].as_str() {
        "refine" => refine(&g, start, budget, 0.0, end, &mut heard),
        "perturb" => perturb(&g, start, budget, end, &mut heard),
        "kp" => {
            let k = kick_costliest_stages(&g, start, budget, end);
            heard(&k);
            perturb(&g, k, budget, end, &mut heard)
        }
        "restarts" => perturb_restarts(&g, start, budget, end, &mut heard),
        _ => kick_costliest_stages(&g, start, budget, end),
    };
    let sim = simulate(&g, &generate_plan(&g, &out).unwrap()).unwrap();
    println!(
        "end {:.1} s: {} (peak {} of {budget})",
        t0.elapsed().as_secs_f64(),
        sim.cost,
        sim.peak
    );
}
