//! The exact feasibility search (`schedule::feasible`): its "no schedule
//! fits" is a proof, checked against the plain Checkmate MILP on small
//! DAGs, and its schedules pass the simulator.

mod common;

use common::shared_at;
use remat::graph::analysis;
use remat::schedule::feasible::{decide, Feasibility};
use remat::schedule::{generate_plan, simulate};
use remat::solve;
use remat::solver::checkmate::Formulation;
use remat::solver::{solve_mip, Backend, MipStatus, Params};
use remat::strategies::{SolveOptions, Status};
use remat::zoo::synthetic::{self, Dist, RandomDag};
use remat::{Bytes, Graph};
use std::time::{Duration, Instant};

fn answer(g: &Graph, budget: Bytes) -> Feasibility {
    decide(g, budget, Instant::now() + Duration::from_secs(60))
}

/// The threshold below which nothing fits, on small random DAGs (plain and
/// training), against the plain Checkmate MILP, an independent formulation
/// of the same plan space: at the search's smallest budget the MILP has a
/// plan, one byte below it the MILP is infeasible as the search proves.
/// Feasibility only grows with the budget, so this is agreement at every
/// budget; at every budget the search's schedules fit in simulation.
#[test]
fn the_smallest_budget_is_the_milps() {
    let p = Params {
        // Only feasibility is compared: the first plan the MILP finds does.
        gap: 1.0,
        ..Params::default()
    };
    let milp_fits = |g: &Graph, b: u64| {
        let f = Formulation::build(g, Bytes(b), true, None);
        match solve_mip(&f.model, Backend::Highs, &p, None)
            .unwrap()
            .status
        {
            MipStatus::Optimal => true,
            MipStatus::Infeasible => false,
            s => panic!("{} at {b}: the MILP stopped with {s:?}", g.name),
        }
    };
    let mut raised = 0;
    for seed in 0..14u64 {
        // Training graphs double in size, and the MILP's proofs of
        // infeasibility take seconds from about 20 nodes on.
        let forward = seed % 3 == 0;
        let g = synthetic::random_layered(&RandomDag {
            nodes: if forward {
                6 + seed as usize % 3
            } else {
                7 + seed as usize % 5
            },
            seed,
            width: 3,
            cost: Dist::Uniform(1, 9),
            memory: Dist::Uniform(1, 12),
            forward,
            ..RandomDag::default()
        });
        let lo = analysis::min_feasible_budget(&g).get();
        let hi = analysis::checkpoint_all_peak(&g).get();
        let mut smallest = None;
        for b in lo..=hi {
            match answer(&g, Bytes(b)) {
                Feasibility::NoSchedule { .. } => assert!(smallest.is_none(), "{} at {b}", g.name),
                Feasibility::Fits(sch) => {
                    let sim = simulate(&g, &generate_plan(&g, &sch).unwrap()).unwrap();
                    assert!(sim.peak <= Bytes(b), "{} at {b}: peak {}", g.name, sim.peak);
                    smallest.get_or_insert(b);
                }
                Feasibility::Unknown { .. } => panic!("{} at {b}: undecided", g.name),
            }
        }
        let b = smallest.expect("checkpoint-all fits at the peak");
        assert!(milp_fits(&g, b), "{} at {b}", g.name);
        if b > lo {
            assert!(!milp_fits(&g, b - 1), "{} at {}", g.name, b - 1);
            raised += 1;
        }
    }
    // The threshold is above the largest node with its inputs often enough
    // for the comparison to mean something.
    assert!(raised >= 5, "{raised} graphs");
}

/// random-layered-n250 at 60% of its peak (88,104 bytes; the largest node
/// with its inputs needs 87,600): no strategy ever found a plan there, and
/// none exists. Every strategy now says so at once, as a proof, instead of
/// spending its limit on "no plan found".
#[test]
fn random_layered_n250_at_60_percent_is_proven_infeasible() {
    let Some((g, budget)) = shared_at("random-layered-n250.yaml", "60%") else {
        return;
    };
    assert_eq!(budget, Bytes(88_104));
    let Feasibility::NoSchedule { states } = answer(&g, budget) else {
        panic!("expected a proof");
    };
    assert!(states < 10_000, "{states} states");
    let opts = SolveOptions {
        time_limit: Duration::from_secs(30),
        ..SolveOptions::default()
    };
    // remat-fast and remat-exact go on to other node orders
    // (tests/free_order.rs); a strategy that keeps the file's order
    // answers with the proof at once.
    for name in ["checkmate-ilp", "dtr-greedy"] {
        let s = remat::strategies::by_name(name).unwrap();
        let out = solve::run(&g, s.as_ref(), budget, &opts).unwrap();
        assert_eq!(out.status, Status::Infeasible, "{:?}", out.detail);
        assert!(out.plan.is_none());
        assert!(out.detail.unwrap().contains("exhaustive search"));
    }
    // At 90% the search's own schedule fits, in simulation.
    let (g, budget) = shared_at("random-layered-n250.yaml", "90%").unwrap();
    let Feasibility::Fits(sch) = answer(&g, budget) else {
        panic!("expected a schedule");
    };
    let sim = simulate(&g, &generate_plan(&g, &sch).unwrap()).unwrap();
    assert!(sim.peak <= budget);
}
