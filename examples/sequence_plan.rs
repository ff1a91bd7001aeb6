//! The node-order search's sequence as a plan (`schedule::sequence`):
//! `cargo run --release --example sequence_plan -- GRAPH PCT|BYTES SECS`.
//! Prints the sequence's cost before and after dropping recomputations,
//! and the plan's simulated cost and peak.

mod common;

use remat::schedule::{free_order, sequence, simulate};
use std::time::Instant;

fn main() {
    let (a, g, budget, secs) = common::graph_budget_secs("sequence_plan GRAPH PCT|BYTES SECS");
    let pass = g.total_cost();
    let cost = |s: &[remat::graph::NodeId]| sequence::cost(&g, s) / pass;
    for rule in 0..free_order::RULES {
        let t = Instant::now();
        let free_order::Sequences::Found(seq) = free_order::sequence_by(&g, budget, t + secs, rule)
        else {
            println!(
                "{} rule {rule}: none ({:.2} s)",
                a[1],
                t.elapsed().as_secs_f64()
            );
            continue;
        };
        let found = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let short = sequence::shortened(&g, &seq, budget, t + secs);
        let sim = simulate(&g, &sequence::plan_of(&g, &short).unwrap()).unwrap();
        println!(
            "{} rule {rule}: {} computations, {:.3}x one pass ({found:.2} s); shortened to {}, {:.3}x ({:.2} s); simulated cost {} peak {} (budget {budget})",
            a[1],
            seq.len(),
            cost(&seq),
            short.len(),
            cost(&short),
            t.elapsed().as_secs_f64(),
            sim.cost,
            sim.peak
        );
    }
}
