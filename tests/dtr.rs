//! The greedy eviction heuristic: always simulator-confirmed, never below
//! the proven optimum, and able to fit tight budgets.

mod common;

use proptest::prelude::*;
use remat::graph::analysis;
use remat::solve;
use remat::strategies::{by_name, SolveOptions, Status};
use remat::zoo::synthetic::{self, Dist, RandomDag};
use remat::Bytes;

#[test]
fn linear8_never_beats_the_optimum() {
    let optimum = common::LINEAR8_OPTIMA;
    let g = synthetic::linear(8);
    let s = by_name("dtr-greedy").unwrap();
    let mut fitted = 0;
    for (b, opt) in optimum {
        let out = solve::run(&g, s.as_ref(), Bytes(b), &SolveOptions::default()).unwrap();
        if let Some(c) = out.cost() {
            assert!(c >= opt, "budget {b}: greedy {c} below optimum {opt}");
            assert!(out.peak().unwrap() <= Bytes(b));
            fitted += 1;
        }
    }
    // Greedy eviction needs one spare slot beyond the minimum to make progress.
    assert!(fitted >= 7, "fitted only {fitted} of 8 budgets");
    let out = solve::run(&g, s.as_ref(), Bytes(10), &SolveOptions::default()).unwrap();
    assert_eq!(out.cost(), Some(17.0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn plans_fit_and_cost_at_least_one_pass(seed in 0u64..5000, n in 2usize..80, frac in 0.3f64..1.0) {
        let g = synthetic::random_layered(&RandomDag { nodes: n, width: 4, skip_prob: 0.25, cost: Dist::Uniform(1, 20), memory: Dist::Uniform(1, 30), seed, ..RandomDag::default() });
        let lo = analysis::min_feasible_budget(&g).get();
        let hi = analysis::checkpoint_all_peak(&g).get();
        let b = Bytes(lo + ((hi - lo) as f64 * frac) as u64);
        let s = by_name("dtr-greedy").unwrap();
        let out = solve::run(&g, s.as_ref(), b, &SolveOptions::default()).unwrap();
        if out.status == Status::Feasible {
            prop_assert!(out.peak().unwrap() <= b);
            prop_assert!(out.cost().unwrap() >= g.total_cost() - 1e-9);
        }
        // At the checkpoint-all peak nothing needs evicting.
        let full = solve::run(&g, s.as_ref(), Bytes(hi), &SolveOptions::default()).unwrap();
        prop_assert_eq!(full.cost(), Some(g.total_cost()));
    }
}
