use remat::schedule::{generate_plan, simulate, Schedule};
use remat::strategies::local_search::{search_from, Ranking};
use std::time::{Duration, Instant};
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let pcts: Vec<f64> = std::env::args()
        .nth(2)
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let secs: u64 = std::env::args().nth(3).unwrap().parse().unwrap();
    let g = remat::Graph::load(std::path::Path::new(&path)).unwrap();
    let peak = simulate(
        &g,
        &generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap(),
    )
    .unwrap()
    .peak;
    let t0 = Instant::now();
    let mut s = Schedule::checkpoint_all(&g);
    for pct in pcts {
        let limit = remat::Bytes((peak.0 as f64 * pct / 100.0).ceil() as u64);
        match search_from(
            &g,
            s.clone(),
            limit,
            Ranking::Forecast,
            t0 + Duration::from_secs(secs),
        ) {
            None => {
                println!("{pct}: none after {:?}", t0.elapsed());
                return;
            }
            Some(sch) => {
                let p = generate_plan(&g, &sch).unwrap();
                let r = simulate(&g, &p).unwrap();
                println!(
                    "{pct}: cost {} ({:.4}x) peak {} limit {} at {:?}",
                    r.cost,
                    r.cost / g.total_cost(),
                    r.peak.0,
                    limit.0,
                    t0.elapsed()
                );
                s = sch;
            }
        }
    }
}
