//! Large-neighbourhood search with the Checkmate MILP on windows of
//! stages, from remat-fast's plan: a measurement, not a strategy
//! (docs/scale.md, "Tight budgets"). Each round fixes R and S outside a
//! window of `WINDOW` stages to the incumbent's, lets U exceed the budget
//! where the incumbent's own MILP accounting does (the simulator judges
//! every candidate), and solves for `SUB_SECS`, warm-started; windows slide
//! by half their width (`LO` sets the first). An optional last argument
//! runs remat-exact for that many seconds from the result. With
//! `VALUES=1` the window is one of consecutive *values* instead: their R
//! and S are free in every stage and every other value's are fixed, so a
//! value may be kept over a long interval that no window of stages spans.
//!
//! `cargo run --release --example window_milp -- GRAPH PERMILLE START_SECS TOTAL_SECS WINDOW SUB_SECS [EXACT_SECS]`
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::Graph;
use remat::schedule::{generate_plan, simulate};
use remat::solver::checkmate::{Formulation, FreeModel};
use remat::solver::{solve_mip, Backend, Params};
use remat::strategies::{by_name, SolveOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let pct: u128 = a[2].parse().unwrap();
    let start_secs: f64 = a[3].parse().unwrap();
    let total: f64 = a[4].parse().unwrap();
    let w: usize = a[5].parse().unwrap();
    let sub: f64 = a[6].parse().unwrap();
    let budget = checkpoint_all_peak(&g).scale_ceil(pct, 1000);
    let t0 = Instant::now();
    let opts = SolveOptions {
        time_limit: Duration::from_secs_f64(start_secs),
        ..SolveOptions::default()
    };
    let s = by_name("remat-fast")
        .unwrap()
        .solve(&g, budget, &opts)
        .unwrap();
    let mut sch = s.schedule.unwrap();
    let cost = |sch: &remat::schedule::Schedule| {
        let sim = simulate(&g, &generate_plan(&g, sch).unwrap()).unwrap();
        (sim.cost, sim.peak <= budget)
    };
    let (mut best, fits) = cost(&sch);
    println!(
        "start {best} fits {fits} at {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let f = Formulation::build_as(&g, budget, true, None, FreeModel::Tight);
    println!(
        "model {} cols {} rows in {:.1} s",
        f.model.num_cols(),
        f.model.num_rows(),
        t0.elapsed().as_secs_f64()
    );
    let n = g.len();
    let deadline = t0 + Duration::from_secs_f64(total);
    let mut lo: usize = std::env::var("LO")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let by_values = std::env::var("VALUES").is_ok_and(|v| v == "1");
    let mut rounds_without = 0usize;
    while Instant::now() < deadline && rounds_without < 2 * n / w.max(1) + 2 {
        let hi = (lo + w).min(n);
        let (x0, _) = f.vector_for(&g, &sch);
        let mut m = f.model.clone();
        let outside = |x: usize| x < lo || x >= hi;
        for t in 0..n {
            for i in 0..=t {
                if outside(if by_values { i } else { t }) {
                    let c = f.r(t, i);
                    m.col_lower[c] = x0[c];
                    m.col_upper[c] = x0[c];
                    if i < t {
                        let c = f.s(t, i);
                        m.col_lower[c] = x0[c];
                        m.col_upper[c] = x0[c];
                    }
                }
            }
        }
        for c in f.u_cols() {
            m.col_upper[c] = m.col_upper[c].max(x0[c]);
        }
        let viol = m.max_violation(&x0);
        if viol > 1e-7 {
            println!("x0 violation {viol}");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let p = Params {
            time_limit: Duration::from_secs_f64(sub).min(left),
            ..Params::default()
        };
        let r = solve_mip(&m, Backend::Highs, &p, Some(&x0)).unwrap();
        let mut improved = false;
        if let Some(x) = r.x.as_ref() {
            let cand = f.schedule(x);
            let (c, fits) = cost(&cand);
            if fits && c < best - 1e-9 * best.abs() {
                best = c;
                sch = cand;
                improved = true;
            }
        }
        println!(
            "window {lo}..{hi}: {:?} {:.2} s -> best {best} {} at {:.1} s",
            r.status,
            r.seconds,
            if improved { "IMPROVED" } else { "" },
            t0.elapsed().as_secs_f64()
        );
        rounds_without = if improved { 0 } else { rounds_without + 1 };
        lo = if hi >= n { 0 } else { lo + w / 2 };
    }
    println!("final {best} at {:.1} s", t0.elapsed().as_secs_f64());
    if let Some(x) = a.get(7) {
        let t1 = Instant::now();
        let opts = SolveOptions {
            time_limit: Duration::from_secs_f64(x.parse().unwrap()),
            warm_start: Some(("window".into(), sch.clone())),
            ..SolveOptions::default()
        };
        let s = by_name("remat-exact")
            .unwrap()
            .solve(&g, budget, &opts)
            .unwrap();
        println!(
            "exact: {:?} bound {:?} in {:.1} s: {}",
            s.status,
            s.lower_bound,
            t1.elapsed().as_secs_f64(),
            s.detail.unwrap_or_default()
        );
    }
}
