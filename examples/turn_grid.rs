//! The turn seeds (`strategies::turn_seed`) at a grid of recompute shares
//! and link shares, each followed by the offload moves for SECS seconds,
//! as remat-tiered runs them on graphs past the joint MILP (docs/tiers.md):
//! `cargo run --release --example turn_grid -- GRAPH DEVICE PCT SECS`.
mod common;
use remat::schedule::{generate_plan, simulate_on};
use remat::strategies::{tiered_search, turn_seed};
use std::time::{Duration, Instant};

fn main() {
    let (_, g, dev, budget, secs) =
        common::graph_device_budget_secs("turn_grid GRAPH DEVICE PCT SECS");
    for link in [0.8, 0.9, 1.0] {
        for share in [0.5, 0.6, 0.7, 0.8] {
            for s in turn_seed::turn_seeds(&g, &dev, budget, &[share], link) {
                let r = simulate_on(&g, &generate_plan(&g, &s).unwrap(), Some(&dev)).unwrap();
                let t0 = Instant::now();
                let got = tiered_search::improve(
                    &g,
                    budget,
                    &dev,
                    s,
                    t0 + Duration::from_secs_f64(secs),
                    true,
                    &mut |_, _| {},
                );
                println!(
                    "link {link} share {share}: seed {:.3} ms at {:.3} GB -> {} in {:.1} s",
                    r.timing.unwrap().step.get() * 1e3,
                    r.peak.get() as f64 / 1e9,
                    got.map_or("nothing fits".into(), |x| format!(
                        "{:.3} ms",
                        x.1.get() * 1e3
                    )),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    }
}
