//! Experiment: iterated local search from remat-fast's plan.
//! `cargo run --release --example ils -- GRAPH PCT START_SECS SECS [SEED]`
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::{Graph, NodeId};
use remat::schedule::solve_r::solve_r;
use remat::strategies::local_search::{search_from, Ranking};
use remat::strategies::{by_name, SolveOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let pct: u128 = a[2].parse().unwrap();
    let start_secs: f64 = a[3].parse().unwrap();
    let secs: f64 = a[4].parse().unwrap();
    let seed: u64 = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(1);
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
    let mut best_cost = best.cost(&g);
    let mut cur = best.clone();
    let mut cur_cost = best_cost;
    println!("start {best_cost}");
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(secs);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let slack: f64 = std::env::var("SLACK")
        .map(|s| s.parse().unwrap())
        .unwrap_or(1.02);
    let prob: f64 = std::env::var("PROB")
        .map(|s| s.parse().unwrap())
        .unwrap_or(0.05);
    let n = g.len();
    let mut tries = 0;
    let restart: usize = std::env::var("RESTART")
        .map(|s| s.parse().unwrap())
        .unwrap_or(usize::MAX);
    let mut since = 0usize;
    while Instant::now() < deadline {
        tries += 1;
        since += 1;
        if since % restart == 0 {
            cur = best.clone();
            cur_cost = best_cost;
        }
        let mut kicked = cur.clone();
        let kind = rng.random_range(0..3);
        // Stages that recompute, costliest first.
        let mut st: Vec<(f64, usize)> = (0..n)
            .map(|t| {
                (
                    cur.recomputed(t)
                        .map(|i| g.cost(NodeId::from(i)))
                        .sum::<f64>(),
                    t,
                )
            })
            .filter(|x| x.0 > 0.0)
            .collect();
        st.sort_by(|a, b| b.0.total_cmp(&a.0));
        if st.is_empty() {
            break;
        }
        match kind {
            0 | 1 => {
                // Keep a random part of what one or a few stages recompute.
                let span = if kind == 0 { 1 } else { rng.random_range(2..6) };
                let k = rng.random_range(0..st.len().min(8));
                let t0s = st[k].1;
                for t in t0s..(t0s + span).min(n) {
                    let vs: Vec<usize> = cur.recomputed(t).collect();
                    for v in vs {
                        if rng.random_bool(0.5) {
                            let from = g.group_end(NodeId::from(v)) + 1;
                            if from <= t {
                                kicked.set_s_range(v, from..=t, true);
                            }
                        }
                    }
                }
            }
            _ => {
                // Drop a few random kept values over random stretches.
                for _ in 0..rng.random_range(1..4) {
                    let t = rng.random_range(1..n);
                    let kept: Vec<usize> = cur.kept(t).map(|i| i.idx()).collect();
                    if kept.is_empty() {
                        continue;
                    }
                    let v = kept[rng.random_range(0..kept.len())];
                    let len = rng.random_range(1..20);
                    let b = (t + len).min(n - 1);
                    kicked.set_s_range(v, t..=b, false);
                }
            }
        }
        let kicked = solve_r(&g, kicked);
        let ranking = if rng.random_bool(0.5) {
            Ranking::Forecast
        } else {
            Ranking::CostPerByte
        };
        let end = deadline.min(Instant::now() + Duration::from_secs(2));
        if let Some(s) = search_from(&g, kicked, budget, ranking, end) {
            let c = s.cost(&g);
            if c < cur_cost || (c < best_cost * slack && rng.random_bool(prob)) {
                cur = s;
                cur_cost = c;
                if c < best_cost * (1.0 - 1e-12) {
                    best = cur.clone();
                    best_cost = c;
                    since = 0;
                    println!(
                        "  {best_cost} at {:.1} s (try {tries}, kind {kind})",
                        t0.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
    let _ = best;
    println!("final {best_cost} after {tries} tries");
}
