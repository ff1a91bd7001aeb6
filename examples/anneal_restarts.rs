//! Walks of polishing's annealing (`remat::schedule::anneal` over
//! schedules in any order) from one start, seed by seed: how often they
//! leave it. `cargo run --release --example anneal_restarts -- GRAPH
//! SEQFILE PCT TOTAL_MOVES SEED_FROM SEED_TO POLICY`, where SEQFILE holds
//! a plan's computations as node ids and POLICY is `one` (each seed one
//! walk of TOTAL_MOVES), `chain` (three walks, each from the best so far:
//! polishing's rounds without their kicks) or `probe:K:MOVES` (K walks of
//! MOVES from the start, then two from the best of them with the rest).
//!
//! Why: whether polishing leaves the strategy's first plan is settled by
//! each walk's seed (docs/scale.md, "Escaping the first plan").
mod common;

use remat::graph::{analysis, Graph, NodeId};
use remat::schedule::{anneal, sequence};
use remat::units::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};

fn walk(
    g: &Graph,
    seq: &[NodeId],
    budget: Bytes,
    moves: u64,
    seed: u64,
) -> Option<(Vec<NodeId>, f64)> {
    let far = Instant::now() + Duration::from_secs(3600);
    let form = anneal::Form::Schedules;
    anneal::anneal(
        g,
        seq,
        budget,
        form,
        (far, moves),
        seed,
        None,
        &mut |_, _, _| {},
    )
    .best
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 8 {
        eprintln!("usage: anneal_restarts GRAPH SEQFILE PCT TOTAL_MOVES SEED_FROM SEED_TO one|chain|probe:K:MOVES");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let seq = common::read_sequence(&a[2]);
    let pct: f64 = a[3].parse().unwrap();
    let total: u64 = a[4].parse().unwrap();
    let (from, to): (u64, u64) = (a[5].parse().unwrap(), a[6].parse().unwrap());
    let policy = a[7].as_str();
    let budget =
        Bytes((pct / 100.0 * analysis::checkpoint_all_peak(&g).get() as f64).ceil() as u64);
    let c0 = sequence::cost(&g, &seq);
    println!("start {c0} ({} computations), {policy}", seq.len());
    for seed in from..to {
        let t = Instant::now();
        let mut best = (seq.clone(), c0);
        let keep = |b: Option<(Vec<NodeId>, f64)>, best: &mut (Vec<NodeId>, f64)| {
            if let Some(b) = b.filter(|b| b.1 < best.1) {
                *best = b;
            }
        };
        let mut probed = None;
        match policy {
            "one" => keep(walk(&g, &seq, budget, total, seed), &mut best),
            "chain" => {
                for r in 0..3 {
                    let b = walk(&g, &best.0, budget, total / 3, seed * 3 + r);
                    keep(b, &mut best);
                }
            }
            p => {
                let k: Vec<u64> = p.split(':').skip(1).map(|x| x.parse().unwrap()).collect();
                for i in 0..k[0] {
                    keep(walk(&g, &seq, budget, k[1], seed * 1000 + i), &mut best);
                }
                probed = Some(best.1);
                let rest = total.saturating_sub(k[0] * k[1]);
                for r in 0..2 {
                    let b = walk(&g, &best.0, budget, rest / 2, seed * 3 + r);
                    keep(b, &mut best);
                }
            }
        }
        let probed = probed.map_or(String::new(), |c| format!(" (probes {c})"));
        let secs = t.elapsed().as_secs_f64();
        println!("seed {seed}: {}{probed}, {secs:.1} s", best.1);
    }
}
