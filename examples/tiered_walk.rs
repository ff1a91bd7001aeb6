//! The offload moves' descents and random walk as remat-tiered runs them
//! on a large graph, with a timeline: which start descends where, and
//! what each random stream of the walk finds over time.
//! `cargo run --release --example tiered_walk -- GRAPH DEVICE PCT DESCENT_SECS WALK_SECS [STREAMS]`
//! (each turn seed and checkpoint-all descend for DESCENT_SECS; the best
//! is walked from for WALK_SECS, a stalled stream followed by the next
//! from the best plan so far, at most STREAMS of them, default 100).
mod common;
use remat::schedule::Schedule;
use remat::strategies::{tiered_search, turn_seed};
use std::time::{Duration, Instant};

fn main() {
    let (a, g, dev, budget, descent) = common::graph_device_budget_secs(
        "tiered_walk GRAPH DEVICE PCT DESCENT_SECS WALK_SECS [STREAMS]",
    );
    let walk_secs: f64 = a.get(5).map_or(60.0, |s| s.parse().unwrap());
    let streams: u64 = a.get(6).map_or(100, |s| s.parse().unwrap());
    let t0 = Instant::now();
    let mut starts = turn_seed::seeds(&g, &dev, budget);
    starts.push(Schedule::checkpoint_all(&g));
    let mut best: Option<(Schedule, f64)> = None;
    for (k, s) in starts.into_iter().enumerate() {
        let until = Instant::now() + Duration::from_secs_f64(descent);
        let found = tiered_search::improve(&g, budget, &dev, s, until, true, &mut |_, _| {});
        if let Some((sch, step)) = found {
            println!(
                "{:7.1} s  start {k}: descends to {:.4} ms",
                t0.elapsed().as_secs_f64(),
                step.get() * 1e3
            );
            if best.as_ref().is_none_or(|b| step.get() < b.1) {
                best = Some((sch, step.get()));
            }
        }
    }
    let Some((from, step)) = best else {
        println!("no start fits");
        return;
    };
    println!("best start {:.4} ms", step * 1e3);
    // As remat-tiered runs them: a stream that stalls is followed by the
    // next, from the best plan so far, until the time is up.
    let (mut from, mut step) = (from, step);
    let w0 = Instant::now();
    let until = w0 + Duration::from_secs_f64(walk_secs);
    let mut stream = 0;
    while Instant::now() < until && stream < streams {
        let s0 = Instant::now();
        let r = tiered_search::walk(
            &g,
            budget,
            &dev,
            from.clone(),
            until,
            stream,
            &mut |_, s| {
                println!(
                    "{:7.1} s  stream {stream}: {:.4} ms",
                    w0.elapsed().as_secs_f64(),
                    s.get() * 1e3
                )
            },
        );
        if let Some((sch, s)) = r {
            (from, step) = (sch, s.get());
        }
        println!(
            "stream {stream} ends after {:.1} s; best {:.4} ms",
            s0.elapsed().as_secs_f64(),
            step * 1e3
        );
        stream += 1;
    }
}
