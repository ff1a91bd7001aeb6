//! The moment bound alone, beside the closed form, for measuring it:
//! `cargo run --release --example moment_bound -- GRAPH DEVICE PCT SECS [norec]`
//! (PCT: percent of the checkpoint-all peak). With `MOMENTS=a,b,c` (node
//! indices) it solves that one model instead of choosing moments.
mod common;
use remat::graph::NodeId;
use remat::solver::moment_bound::{moment_bound, solve_moments};
use remat::solver::Params;
use std::time::{Duration, Instant};

fn main() {
    let (a, g, dev, budget, secs) =
        common::graph_device_budget_secs("moment_bound GRAPH DEVICE PCT SECS [norec]");
    let norec = a.len() > 5;
    let p = Params {
        time_limit: Duration::from_secs_f64(secs),
        verbose: remat::solver::verbose_from_env(),
        ..Params::default()
    };
    let closed = remat::solver::tiered::step_bound(&g, budget, &dev, norec);
    println!("all-fast {}, closed form {closed}", dev.all_fast_step(&g));
    let start = Instant::now();
    if let Ok(list) = std::env::var("MOMENTS") {
        let moments: Vec<NodeId> = list
            .split(',')
            .map(|x| NodeId::from(x.parse::<usize>().unwrap()))
            .collect();
        let b = solve_moments(&g, budget, &dev, norec, &moments, &p).unwrap();
        println!(
            "moments {list}: {:?} s in {:.1} s",
            b,
            start.elapsed().as_secs_f64()
        );
        return;
    }
    match moment_bound(&g, budget, &dev, norec, &p).unwrap() {
        Some(b) => println!(
            "moment bound {} ({:.9e} s; moments {:?}, {} solves, {:.1} s)",
            b.bound,
            b.bound.get(),
            b.moments.iter().map(|m| m.idx()).collect::<Vec<_>>(),
            b.solves,
            b.seconds
        ),
        None => println!("not built"),
    }
}
