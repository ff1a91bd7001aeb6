//! Simulated annealing over sequences of computations from a plan file
//! (`remat::schedule::anneal`; docs/scale.md, "Annealing sequences").
//! `cargo run --release --example seq_anneal -- GRAPH PLAN BUDGET_BYTES SECS [OUT] [--schedules]`
//! (`SEED=k` in the environment for another seed)
//! prints the best sequence's cost; with OUT, writes the graph in the best
//! sequence's order of first computations there, for `remat solve` (whose
//! bound is for that order).
use remat::graph::{Graph, NodeId};
use remat::schedule::{anneal, free_order};
use remat::units::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let mut a: Vec<String> = std::env::args().collect();
    let form = if a.iter().any(|x| x == "--schedules") {
        anneal::Form::Schedules
    } else {
        anneal::Form::Sequences
    };
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    a.retain(|x| x != "--schedules");
    if a.len() < 5 {
        eprintln!("usage: seq_anneal GRAPH PLAN BUDGET_BYTES SECS [OUT]");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let (_, plan) =
        remat::cli::plan_file::load_plan(&g, Path::new(&a[1]), Path::new(&a[2])).unwrap();
    let budget = Bytes(a[3].parse().unwrap());
    let secs: f64 = a[4].parse().unwrap();
    let seq: Vec<NodeId> = plan.computed().collect();
    println!(
        "start: {} ({} computations)",
        remat::schedule::sequence::cost(&g, &seq),
        seq.len()
    );
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let found = anneal::anneal(
        &g,
        &seq,
        budget,
        form,
        (deadline, u64::MAX),
        seed,
        None,
        &mut |_, _, _| {},
    );
    // Nothing cheaper: the start itself, so that OUT still writes its order.
    let (best, cost) = found.best.unwrap_or_else(|| {
        println!("nothing cheaper in {} moves", found.moves);
        (seq.clone(), remat::schedule::sequence::cost(&g, &seq))
    });
    println!(
        "best {cost} ({} computations, {} moves, {} nodes move)",
        best.len(),
        found.moves,
        free_order::moved(&free_order::order_of(&best, g.len()))
    );
    let order = free_order::order_of(&best, g.len());
    let gp = g
        .reordered(&order)
        .expect("a sequence's first computations are topological");
    match remat::schedule::sequence::schedule_in(&g, &gp, &best, &order) {
        Some(sch) => {
            let peak = remat::strategies::portfolio::evaluate(&gp, &sch).map(|s| s.peak);
            println!(
                "as a schedule in its order: cost {}, peak {:?} (budget {budget:?})",
                sch.cost(&gp),
                peak
            );
        }
        None => println!("not a schedule in its order"),
    }
    if let Some(out) = a.get(5) {
        std::fs::write(out, serde_yaml::to_string(&gp.to_file()).unwrap()).unwrap();
    }
}
