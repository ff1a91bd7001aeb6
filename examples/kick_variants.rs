//! A measurement kept for docs/scale.md: kicks that keep a random subset
//! (each value with probability P) of what one of the four costliest
//! stages recomputes, after remat-fast and its full kicks. On
//! random-layered-n100 at 60% they found nothing in 236 kicks:
//! `cargo run --release --example kick_variants -- GRAPH PCT START_SECS KICK_SECS [P]`
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::{Graph, NodeId};
use remat::schedule::solve_r::solve_r;
use remat::schedule::Schedule;
use remat::strategies::local_search::{kick_costliest_stages, search_from, Ranking};
use remat::strategies::{by_name, SolveOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let pct: u128 = a[2].parse().unwrap();
    let start_secs: f64 = a[3].parse().unwrap();
    let kick_secs: f64 = a[4].parse().unwrap();
    let p: f64 = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(0.5);
    let budget = checkpoint_all_peak(&g).scale_ceil(pct, 100);
    let opts = SolveOptions {
        time_limit: Duration::from_secs_f64(start_secs),
        ..SolveOptions::default()
    };
    let sol = by_name("remat-fast")
        .unwrap()
        .solve(&g, budget, &opts)
        .unwrap();
    let mut best = sol.schedule.unwrap();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(kick_secs);
    best = kick_costliest_stages(
        &g,
        best,
        budget,
        t0 + Duration::from_secs_f64(kick_secs / 4.0),
    );
    let mut best_cost = best.cost(&g);
    println!(
        "remat-fast + full kicks: {best_cost} at {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let n = g.len();
    let mut tries = 0;
    while Instant::now() < deadline {
        // Stages by recomputation cost; pick among the top few.
        let mut st: Vec<(f64, usize)> = (0..n)
            .map(|t| {
                (
                    best.recomputed(t)
                        .map(|i| g.cost(NodeId::from(i)))
                        .sum::<f64>(),
                    t,
                )
            })
            .filter(|x| x.0 > 0.0)
            .collect();
        st.sort_by(|a, b| b.0.total_cmp(&a.0));
        let k = rng.random_range(0..st.len().min(4));
        let t = st[k].1;
        let vs: Vec<usize> = best.recomputed(t).collect();
        let mut kicked: Schedule = best.clone();
        for &v in &vs {
            if !rng.random_bool(p) {
                continue;
            }
            let from = g.group_end(NodeId::from(v)) + 1;
            if from <= t {
                kicked.set_s_range(v, from..=t, true);
            }
        }
        let kicked = solve_r(&g, kicked);
        let end = deadline.min(Instant::now() + Duration::from_secs(2));
        tries += 1;
        if let Some(s) = search_from(&g, kicked, budget, Ranking::Forecast, end) {
            if s.cost(&g) < best_cost * (1.0 - 1e-12) {
                best_cost = s.cost(&g);
                best = s;
                println!(
                    "  {best_cost} at {:.1} s (try {tries}, stage {t})",
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    }
    println!("final {best_cost} after {tries} tries");
}
