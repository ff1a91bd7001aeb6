//! The exact feasibility search alone (`schedule::feasible`):
//! `cargo run --release --example feasible -- GRAPH PCT|BYTES SECS`
//! (a budget of at most 100 is a percent of the checkpoint-all peak).
//! Prints the answer, its size in states and its time; for a schedule
//! that fits, its simulated cost and peak, and those of the local search
//! from it (`search_from`, given SECS again).

mod common;

use remat::schedule::feasible::{decide, Feasibility};
use remat::schedule::{generate_plan, simulate};
use std::time::Instant;

fn main() {
    let (a, g, budget, secs) = common::graph_budget_secs("feasible GRAPH PCT|BYTES SECS");
    let start = Instant::now();
    let answer = decide(&g, budget, start + secs);
    let took = start.elapsed().as_secs_f64();
    match answer {
        Feasibility::Fits(sch) => {
            let sim = simulate(&g, &generate_plan(&g, &sch).unwrap()).unwrap();
            println!(
                "{} at {budget}: fits ({took:.2} s): cost {} ({:.3}x one pass), peak {}",
                a[1],
                sim.cost,
                sim.cost / g.total_cost(),
                sim.peak
            );
            // The local search from it, for as long again.
            common::print_searched_from(&g, sch, budget, secs);
        }
        Feasibility::NoSchedule { states } => {
            println!(
                "{} at {budget}: no schedule fits (proof: {states} states, {took:.2} s)",
                a[1]
            )
        }
        Feasibility::Unknown { states } => {
            println!(
                "{} at {budget}: unknown after {states} states, {took:.2} s",
                a[1]
            )
        }
    }
}
