//! Simulated annealing over sequences of computations, from a plan file
//! (docs/scale.md, "Annealing sequences"): a measurement, not a strategy.
//! `cargo run --release --example seq_anneal -- GRAPH PLAN BUDGET_BYTES SECS [SEED] [OUT]`
//! with `T0` in the environment (the starting temperature as a fraction of
//! one pass; default 0.002). Prints each cheaper sequence that fits; with
//! OUT, writes the graph in the best sequence's order of first
//! computations there, for `remat solve` (whose bound is for that order).
//! `KEEP_ORDER=1` keeps the plan's order of first computations.
//!
//! A state is any sequence of computations that reads only values computed
//! before; values are freed after their last read before their next
//! computation (`schedule::sequence`). Its energy is its cost plus a
//! penalty per byte over the budget, so the walk may cross plans that do
//! not fit; only fitting ones are kept. Moves: a recomputation inserted
//! just before a read of its value, a recomputation dropped, a computation
//! moved a few places, and a drop and an insertion at once.
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remat::graph::{Graph, NodeId};
use remat::schedule::plan::Statement;
use remat::schedule::{free_order, sequence};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: seq_anneal GRAPH PLAN BUDGET_BYTES SECS [SEED] [OUT]");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let (_, plan) =
        remat::cli::plan_file::load_plan(&g, Path::new(&a[1]), Path::new(&a[2])).unwrap();
    let budget: u64 = a[3].parse().unwrap();
    let cap = (budget - g.fixed_memory.get()) as f64;
    let secs: f64 = a[4].parse().unwrap();
    let seed: u64 = a.get(5).map_or(1, |s| s.parse().unwrap());
    let t0: f64 = std::env::var("T0").map_or(0.002, |s| s.parse().unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seq: Vec<NodeId> = plan
        .statements
        .iter()
        .filter_map(|s| match s {
            Statement::Compute { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    let n = g.len();
    // KEEP_ORDER=1: only sequences in the plan's order of first computations.
    let keep_order = std::env::var("KEEP_ORDER").is_ok_and(|v| v == "1");
    let order = free_order::order_of(&seq, n);
    let pass = g.total_cost();
    let per_byte = 4.0 * pass / cap;
    let energy = |s: &[NodeId]| -> Option<(f64, f64, bool)> {
        let p = sequence::peak(&g, s)?.get() as f64;
        let c = sequence::cost(&g, s);
        Some((c + per_byte * (p - cap).max(0.0), c, p <= cap))
    };
    let mut count = vec![0usize; n];
    for v in &seq {
        count[v.idx()] += 1;
    }
    let (mut e, c0, _) = energy(&seq).expect("the plan's sequence reads what it computed");
    let mut best = (c0, seq.clone());
    println!("start: {c0} ({} computations)", seq.len());
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut tries = 0u64;
    while Instant::now() < end {
        tries += 1;
        let frac = start.elapsed().as_secs_f64() / secs;
        let temp = pass * t0 * (1.0 - frac).powi(2) + 1e-9;
        let mut cand = seq.clone();
        let mut ccount = count.clone();
        let len = cand.len();
        let insert = |cand: &mut Vec<NodeId>, ccount: &mut [usize], rng: &mut ChaCha8Rng| {
            let v = NodeId(rng.random_range(0..n) as u32);
            let p = before_a_read(&g, cand, v, rng)?;
            cand.insert(p, v);
            ccount[v.idx()] += 1;
            Some(())
        };
        let drop = |cand: &mut Vec<NodeId>, ccount: &mut [usize], rng: &mut ChaCha8Rng| {
            let k = rng.random_range(0..cand.len());
            // A node's only computation stays.
            (ccount[cand[k].idx()] >= 2).then(|| {
                ccount[cand[k].idx()] -= 1;
                cand.remove(k);
            })
        };
        let moved = match rng.random_range(0..4) {
            0 => insert(&mut cand, &mut ccount, &mut rng),
            1 => drop(&mut cand, &mut ccount, &mut rng),
            2 => {
                let k = rng.random_range(0..len);
                let v = cand.remove(k);
                let p = (k as i64 + rng.random_range(-8..=8)).clamp(0, len as i64 - 1);
                cand.insert(p as usize, v);
                Some(())
            }
            _ => drop(&mut cand, &mut ccount, &mut rng)
                .and_then(|()| insert(&mut cand, &mut ccount, &mut rng)),
        };
        let Some(((ce, cc, fits), ())) = energy(&cand).zip(moved) else {
            continue;
        };
        if keep_order && free_order::order_of(&cand, n) != order {
            continue;
        }
        if ce <= e || rng.random::<f64>() < ((e - ce) / temp).exp() {
            seq = cand;
            count = ccount;
            e = ce;
            if fits && cc < best.0 - 1e-9 {
                best = (cc, seq.clone());
                println!(
                    "{:.1} s: {cc} ({} computations)",
                    start.elapsed().as_secs_f64(),
                    seq.len()
                );
            }
        }
    }
    println!("{tries} moves tried; best {}", best.0);
    if let Some(out) = a.get(6) {
        let order = free_order::order_of(&best.1, n);
        let gp = g
            .reordered(&order)
            .expect("a sequence's first computations are topological");
        std::fs::write(out, serde_yaml::to_string(&gp.to_file()).unwrap()).unwrap();
    }
}

/// A position just before a read of `v` that follows its first
/// computation: the only places where a recomputation can shorten what is
/// held.
fn before_a_read(g: &Graph, seq: &[NodeId], v: NodeId, rng: &mut ChaCha8Rng) -> Option<usize> {
    let first = seq.iter().position(|&x| x == v)?;
    let users = g.users(v);
    let reads: Vec<usize> = (first + 1..seq.len())
        .filter(|&k| users.contains(&seq[k]))
        .collect();
    if reads.is_empty() {
        return None;
    }
    let r = reads[rng.random_range(0..reads.len())];
    Some(r.saturating_sub(rng.random_range(0..3usize)).max(first + 1))
}
