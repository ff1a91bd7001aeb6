use remat::schedule::{generate_plan, simulate};
use std::time::{Duration, Instant};
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let pct: f64 = std::env::args().nth(2).unwrap().parse().unwrap();
    let secs: u64 = std::env::args().nth(3).unwrap().parse().unwrap();
    let g = remat::Graph::load(std::path::Path::new(&path)).unwrap();
    let peak = simulate(
        &g,
        &generate_plan(&g, &remat::schedule::Schedule::checkpoint_all(&g)).unwrap(),
    )
    .unwrap()
    .peak;
    let limit = remat::Bytes((peak.0 as f64 * pct / 100.0).ceil() as u64);
    let t0 = Instant::now();
    let r = remat::strategies::local_search::search(
        &g,
        limit,
        if std::env::var("OLD").is_ok() {
            remat::strategies::local_search::Ranking::CostPerByte
        } else {
            remat::strategies::local_search::Ranking::Forecast
        },
        t0 + Duration::from_secs(secs),
    );
    match r {
        None => println!("none after {:?}", t0.elapsed()),
        Some(sch) => {
            let p = generate_plan(&g, &sch).unwrap();
            let r = simulate(&g, &p).unwrap();
            println!(
                "cost {} ({:.4}x) peak {} limit {} in {:?}",
                r.cost,
                r.cost / g.total_cost(),
                r.peak.0,
                limit.0,
                t0.elapsed()
            );
        }
    }
}
