//! A ladder of budgets (`remat::schedule::anneal::descend`) from a plan
//! file's sequence down to a budget, then annealing there
//! (docs/scale.md, "A ladder of budgets").
//! `cargo run --release --example descent_anneal -- GRAPH PLAN PCT DESCENT_SECS ANNEAL_SECS`
//! (`SEED=k` in the environment for another seed; `SAVE=FILE` writes the
//! sequence reached, and `LOAD=FILE` anneals from such a file instead of
//! walking down).
mod common;

use remat::graph::{analysis, Graph, NodeId};
use remat::schedule::{anneal, sequence};
use remat::units::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 6 {
        eprintln!("usage: descent_anneal GRAPH PLAN PCT DESCENT_SECS ANNEAL_SECS");
        std::process::exit(2);
    }
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let (_, plan) =
        remat::cli::plan_file::load_plan(&g, Path::new(&a[1]), Path::new(&a[2])).unwrap();
    let pct: f64 = a[3].parse().unwrap();
    let secs = |k: usize| Duration::from_secs_f64(a[k].parse().unwrap());
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let budget =
        Bytes((pct / 100.0 * analysis::checkpoint_all_peak(&g).get() as f64).ceil() as u64);
    let mut seq: Vec<NodeId> = plan.computed().collect();
    if std::env::var("ORDER").is_ok() {
        seq = remat::schedule::free_order::order_of(&seq, g.len());
    }
    println!(
        "start {} peaking at {:?}; budget {budget:?}",
        sequence::cost(&g, &seq),
        sequence::peak(&g, &seq)
    );
    let began = Instant::now();
    let down = match std::env::var("LOAD") {
        Ok(f) => {
            let s = common::read_sequence(&f);
            let c = sequence::cost(&g, &s);
            anneal::Annealed {
                best: Some((s, c)),
                ..Default::default()
            }
        }
        Err(_) => anneal::descend(&g, &[&seq], budget, began + secs(4), seed, None),
    };
    let Some((seq, cost)) = down.best else {
        println!(
            "not reached in {:.1} s ({} walks, {} moves)",
            began.elapsed().as_secs_f64(),
            down.walks,
            down.moves
        );
        return;
    };
    println!(
        "reached: {cost} in {:.1} s (walk {}, {} moves)",
        began.elapsed().as_secs_f64(),
        down.walks,
        down.moves
    );
    if let Ok(f) = std::env::var("SAVE") {
        let text: Vec<String> = seq.iter().map(|v| v.0.to_string()).collect();
        std::fs::write(f, text.join(" ")).unwrap();
    }
    let end = Instant::now() + secs(5);
    let form = anneal::Form::Schedules;
    let found = anneal::anneal(
        &g,
        &seq,
        budget,
        form,
        (end, u64::MAX),
        seed,
        None,
        &mut |_, _, _| {},
    );
    match found.best {
        Some((_, c)) => println!("annealed ({:?}): {c} ({} moves)", found.form, found.moves),
        None => println!("annealing found nothing cheaper ({} moves)", found.moves),
    }
}
