//! The arguments the measuring examples share: `GRAPH PCT|BYTES SECS`,
//! where a budget of at most 100 is a percent of the file order's
//! checkpoint-all peak.
#![allow(dead_code)]

use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::Graph;
use remat::schedule::{generate_plan, simulate, Schedule};
use remat::strategies::local_search::{search_from, Ranking};
use remat::units::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};

/// The command line, the graph, the budget and the time; exits 2 with
/// `usage` when fewer than three arguments are given.
pub fn graph_budget_secs(usage: &str) -> (Vec<String>, Graph, Bytes, Duration) {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: {usage}");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let b: u64 = a[2].parse().unwrap();
    let budget = if b <= 100 {
        checkpoint_all_peak(&g).scale_ceil(b as u128, 100)
    } else {
        Bytes(b)
    };
    let secs = Duration::from_secs_f64(a[3].parse().unwrap());
    (a, g, budget, secs)
}

/// The local search from `sch` for `secs`, and its plan's cost and peak.
pub fn print_searched_from(g: &Graph, sch: Schedule, budget: Bytes, secs: Duration) {
    if let Some(s) = search_from(g, sch, budget, Ranking::Forecast, Instant::now() + secs) {
        let sim = simulate(g, &generate_plan(g, &s).unwrap()).unwrap();
        println!(
            "searched from: cost {} ({:.3}x one pass), peak {}",
            sim.cost,
            sim.cost / g.total_cost(),
            sim.peak
        );
    }
}

/// A sequence of computations saved as whitespace-separated node ids (what
/// `descent_anneal`'s `SAVE` writes), as a start for the annealing.
pub fn read_sequence(path: &str) -> Vec<remat::graph::NodeId> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .split_whitespace()
        .map(|t| remat::graph::NodeId(t.parse().expect("a node id")))
        .collect()
}

/// The command line of the device examples, `GRAPH DEVICE PCT SECS ...`:
/// the graph, the device, the budget at PCT percent of the checkpoint-all
/// peak and SECS; exits 2 with `usage` when fewer than four arguments are
/// given.
pub fn graph_device_budget_secs(
    usage: &str,
) -> (Vec<String>, Graph, remat::device::Device, Bytes, f64) {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: {usage}");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let dev = remat::device::Device::load(Path::new(&a[2])).unwrap();
    let pct: u128 = a[3].parse().unwrap();
    let secs: f64 = a[4].parse().unwrap();
    let budget = checkpoint_all_peak(&g).scale_ceil(pct, 100);
    (a, g, dev, budget, secs)
}
