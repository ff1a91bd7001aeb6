//! The node-order search alone (`schedule::free_order`), then the exact
//! schedule search in the order it found, and the local search from that
//! schedule: `cargo run --release --example free_order -- GRAPH PCT|BYTES SECS`
//! (a budget of at most 100 is a percent of the file order's
//! checkpoint-all peak). Each step gets SECS. A fourth argument writes
//! the graph in the order found, as a graph file, for `remat solve`.

mod common;

use remat::schedule::feasible::{decide, Feasibility};
use remat::schedule::free_order;
use remat::schedule::{generate_plan, simulate};
use std::time::Instant;

fn main() {
    let (a, g, budget, secs) = common::graph_budget_secs("free_order GRAPH PCT|BYTES SECS [OUT]");
    let start = Instant::now();
    let Some(order) = free_order::search(&g, budget, start + secs) else {
        println!(
            "{} at {budget}: no order found ({:.2} s)",
            a[1],
            start.elapsed().as_secs_f64()
        );
        return;
    };
    let moved = free_order::moved(&order);
    println!(
        "{} at {budget}: an order in {:.2} s ({moved} of {} nodes move)",
        a[1],
        start.elapsed().as_secs_f64(),
        g.len()
    );
    let gp = g.reordered(&order).expect("a topological order");
    if let Some(out) = a.get(4) {
        std::fs::write(out, serde_yaml::to_string(&gp.to_file()).unwrap()).unwrap();
    }
    let t = Instant::now();
    match decide(&gp, budget, t + secs) {
        Feasibility::Fits(sch) => {
            let sim = simulate(&gp, &generate_plan(&gp, &sch).unwrap()).unwrap();
            println!(
                "a schedule in it in {:.2} s: cost {} ({:.3}x one pass), peak {}",
                t.elapsed().as_secs_f64(),
                sim.cost,
                sim.cost / g.total_cost(),
                sim.peak
            );
            common::print_searched_from(&gp, sch, budget, secs);
        }
        Feasibility::NoSchedule { states } => {
            println!("no schedule in that order (proof: {states} states)")
        }
        Feasibility::Unknown { states } => {
            println!("undecided in that order ({states} states)")
        }
    }
}
