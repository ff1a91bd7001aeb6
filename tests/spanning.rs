//! Copies that span stages (leads, docs/format.md "Copies that span
//! stages"): what the plan generator makes of them, what the simulator
//! times, and what the schedule rules refuse. Every figure is derived by
//! hand next to it.

mod common;

use proptest::prelude::*;
use remat::device::Device;
use remat::graph::{Graph, GraphFile};
use remat::schedule::{generate_plan, simulate_on, Schedule, ScheduleError, Statement};
use remat::solver::step_cover::{self, Copies};
use remat::solver::Params;
use remat::units::{Bytes, Seconds};

/// A chain a → b → c → d → e → f → g where g also reads a: a (4 B) idles
/// from c to f, d is large (4 B), and every node costs 1 s. At a budget of
/// 6 B, a cannot stay beside d (c, d and a make 9 B in stage 3; d, e and a
/// in stage 4), so it must go to the slow tier and come back for g.
fn seven() -> Graph {
    seven_with(1)
}

/// [`seven`] with e taking `e` bytes.
fn seven_with(e: u64) -> Graph {
    let text = format!(
        "name: seven\ngraph: training\nnodes:\n\
        - {{name: a, cost: 1, memory: 4}}\n\
        - {{name: b, cost: 1, memory: 1, deps: [a]}}\n\
        - {{name: c, cost: 1, memory: 1, deps: [b]}}\n\
        - {{name: d, cost: 1, memory: 4, deps: [c]}}\n\
        - {{name: e, cost: 1, memory: {e}, deps: [d]}}\n\
        - {{name: f, cost: 1, memory: 1, deps: [e]}}\n\
        - {{name: g, cost: 1, memory: 1, deps: [f, a]}}\n"
    );
    Graph::from_file(&GraphFile::parse(&text).unwrap(), "seven.yaml").unwrap()
}

/// 2 B/s each way, no latency, duplex: a's copy takes 2 s either way.
fn device() -> Device {
    Device::parse(
        "name: test\ncompute: {cost_is_seconds: true}\nfast: {capacity: 100}\n\
         slow: {capacity: 100, to_slow: 2, to_fast: 2, latency: 0, engines: duplex, direct_read: none}\n",
    )
    .unwrap()
}

/// a kept through stage 2 (c's), copied out there, absent in stages 3 to
/// 5, fetched in stage 5 (f's), read by g in stage 6.
fn offloaded(g: &Graph) -> Schedule {
    let mut sch = Schedule::checkpoint_all(g);
    sch.offload(0, 2, 5);
    sch
}

fn run(g: &Graph, sch: &Schedule) -> (Seconds, Seconds, Bytes) {
    let plan = generate_plan(g, sch).unwrap();
    let r = simulate_on(g, &plan, Some(&device())).unwrap();
    let t = r.timing.unwrap();
    (t.step, t.stall, r.peak)
}

#[test]
fn leads_hide_copies_that_no_single_stage_can() {
    let g = seven();
    // Within their stages: a's copy out starts with stage 2 (c = 2) and runs
    // 2 → 4 while c computes 2 → 3: stall 1. d 4 → 5, e 5 → 6. The fetch
    // starts with stage 5 (c = 6) and runs 6 → 8 while f computes 6 → 7:
    // stall 1. g 8 → 9. Peak 6 B: a, b and c in stage 2; a's buffer, e and
    // f in stage 5; a, f and g in stage 6.
    let sch = offloaded(&g);
    assert_eq!(
        run(&g, &sch),
        (Seconds(9.0), Seconds(2.0), Bytes(6)),
        "stage-bounded"
    );

    // The copy out issued right after a is computed (lead 2: stage 0,
    // c = 1) runs 1 → 3, done when c ends at 3: no stall, and no memory,
    // since a is held through stage 2 either way. d 3 → 4, e 4 → 5; the
    // fetch runs 5 → 7 behind f (5 → 6): stall 1; g 7 → 8.
    let mut out_led = sch.clone();
    assert_eq!(out_led.max_out_lead(2, 0), 2);
    out_led.set_out_lead(2, 0, 2);
    assert_eq!(
        run(&g, &out_led),
        (Seconds(8.0), Seconds(1.0), Bytes(6)),
        "copy out led"
    );

    // The fetch issued with stage 4 as well (lead 1, c = 4) runs 4 → 6
    // behind e and f: no stall, the step is the compute alone. But its
    // buffer counts from stage 4, beside d and e: 9 B. Leads trade memory
    // for time; the simulator counts both.
    let mut both = out_led.clone();
    assert_eq!(both.max_fetch_lead(5, 0), 2);
    both.set_fetch_lead(5, 0, 1);
    assert_eq!(
        run(&g, &both),
        (Seconds(7.0), Seconds(0.0), Bytes(9)),
        "both led"
    );

    // The step cover program at 6 B without recomputation (no plan here
    // recomputes). Every plan must stall at least 1 s: the fetch can start
    // only once d is gone (after e), takes 2 s, and must end before g, with
    // only f (1 s) to hide behind. The copy-out led plan meets that, so 8 s
    // is the optimum. The stage-bounded form bounds only plans whose copies
    // end within their stage (9 s here); the spanning form holds for the
    // plan with leads and meets it.
    let params = Params {
        time_limit: std::time::Duration::from_secs(10),
        feasibility_tolerance: step_cover::FEASIBILITY_TOLERANCE,
        ..Params::default()
    };
    let cover = |copies| {
        step_cover::step_cover_bound(&g, Bytes(6), &device(), true, copies, &params)
            .unwrap()
            .unwrap()
            .bound
            .get()
    };
    let (within, spanning) = (cover(Copies::WithinStage), cover(Copies::Spanning));
    assert!((within - 9.0).abs() < 1e-6, "stage-bounded bound {within}");
    assert!((spanning - 8.0).abs() < 1e-6, "spanning bound {spanning}");

    // The statements: the copy out right after a's computation, its wait at
    // the end of stage 2 before a is freed; the copy in before e's
    // computation, its wait after f's.
    let plan = generate_plan(&g, &both).unwrap();
    let pos = |f: &dyn Fn(&Statement) -> bool| plan.statements.iter().position(f).unwrap();
    let computes = |name: &str| {
        let id = g.find(name).unwrap();
        move |s: &Statement| matches!(s, Statement::Compute { node, .. } if *node == id)
    };
    let out_at = pos(&|s| matches!(s, Statement::CopyOut { .. }));
    let in_at = pos(&|s| matches!(s, Statement::CopyIn { .. }));
    assert_eq!(out_at, pos(&computes("a")) + 1);
    assert!(pos(&computes("d")) < in_at && in_at < pos(&computes("e")));
    let Statement::CopyIn { register, .. } = plan.statements[in_at] else {
        unreachable!()
    };
    let wait_in = pos(&|s| *s == Statement::Wait { register });
    assert!(pos(&computes("f")) < wait_in && wait_in < pos(&computes("g")));

    // A longer lead would hold a's buffer in stages where a itself is
    // still resident (2 and before): refused, naming the first such stage.
    let mut too_far = both.clone();
    too_far.set_fetch_lead(5, 0, 4);
    assert_eq!(
        too_far.validate(&g),
        Err(ScheduleError::FetchLead { t: 5, i: 0, u: 1 })
    );
}

#[test]
fn leads_that_break_the_rules_are_refused() {
    let g = seven();
    let sch = offloaded(&g);
    // Issued before a exists.
    let mut before = sch.clone();
    before.set_out_lead(2, 0, 3);
    assert!(matches!(
        before.validate(&g),
        Err(ScheduleError::OutLead { t: 2, i: 0, .. })
    ));
    // A copy out of b by stage 2 issued in stage 0, where b does not exist.
    let mut absent = Schedule::checkpoint_all(&g);
    absent.set_o(2, 1, true);
    absent.set_h(3, 1, true);
    absent.set_out_lead(2, 1, 2);
    assert_eq!(
        absent.validate(&g),
        Err(ScheduleError::OutLead { t: 2, i: 1, u: 0 })
    );
    // a recomputed in stage 1 under a copy issued in stage 0.
    let mut recomputed = sch.clone();
    recomputed.set_out_lead(2, 0, 2);
    recomputed.set_r(1, 0, true);
    assert_eq!(
        recomputed.validate(&g),
        Err(ScheduleError::OutLead { t: 2, i: 0, u: 1 })
    );
    // A lead on a copy that does not exist.
    let mut ghost = sch.clone();
    ghost.set_fetch_lead(3, 0, 1);
    assert!(matches!(
        ghost.validate(&g),
        Err(ScheduleError::FetchLead { t: 3, i: 0, .. })
    ));
    // Removing the copy removes its lead.
    let mut removed = sch.clone();
    removed.set_out_lead(2, 0, 1);
    removed.set_o(2, 0, false);
    assert!(!removed.has_leads());
}

/// A fetch deferred into its reader's stage gives up hiding its copy for
/// the memory of the stage before. With e at 2 B, fetching a (4 B) in stage
/// 5 holds its buffer beside e and f: 7 B. Deferred, the copy is issued in
/// stage 6 once e is freed and g waits for it: 6 B, at 2 s of stall.
#[test]
fn a_deferred_fetch_trades_its_stall_for_the_stage_before() {
    let g = seven_with(2);
    let sch = offloaded(&g);
    // As in the test above: stall 1 for the copy out, 1 for the fetch.
    assert_eq!(run(&g, &sch), (Seconds(9.0), Seconds(2.0), Bytes(7)));
    let mut late = sch.clone();
    late.defer_fetch(5, 0);
    assert_eq!(late.validate(&g), Ok(()));
    // Copy out 2 → 4 behind c (2 → 3): stall 1; d 4 → 5, e 5 → 6, f 6 → 7
    // with nothing to fetch; a's copy 7 → 9 while g waits: stall 2; g
    // 9 → 10. Peak 6 B: a, b, c in stage 2; a, f, g in stage 6.
    assert_eq!(run(&g, &late), (Seconds(10.0), Seconds(3.0), Bytes(6)));
    // The copy is issued after stage 5's last free (e's) and waited for
    // right before g's buffer is allocated.
    let plan = generate_plan(&g, &late).unwrap();
    let pos = |f: &dyn Fn(&Statement) -> bool| plan.statements.iter().position(f).unwrap();
    let copy_in = pos(&|s| matches!(s, Statement::CopyIn { .. }));
    let e_reg = plan
        .statements
        .iter()
        .find_map(|s| match s {
            Statement::Allocate { register, node, .. } if node.idx() == 4 => Some(*register),
            _ => None,
        })
        .unwrap();
    let e_freed = pos(&|s| matches!(s, Statement::Deallocate { register } if *register == e_reg));
    let g_alloc = pos(&|s| matches!(s, Statement::Allocate { node, .. } if node.idx() == 6));
    assert!(e_freed < copy_in);
    assert!(matches!(
        plan.statements[g_alloc - 1],
        Statement::Wait { .. }
    ));
    // Deferral is part of the schedule's content, and undone with its P.
    assert_ne!(late, sch);
    let mut undone = late.clone();
    undone.set_p(5, 0, false);
    assert!(!undone.has_deferrals());
}

#[test]
fn deferrals_that_break_the_rules_are_refused() {
    let g = seven();
    let sch = offloaded(&g);
    // The slow copy is dropped at the end of stage 5.
    let mut unheld = sch.clone();
    unheld.set_deferred(5, 0, true);
    assert_eq!(
        unheld.validate(&g),
        Err(ScheduleError::Deferred { t: 5, i: 0 })
    );
    // A deferred fetch with a lead.
    let mut led = sch.clone();
    led.defer_fetch(5, 0);
    led.set_fetch_lead(5, 0, 1);
    assert!(led.validate(&g).is_err());
    // Fetched in stage 4, kept through 5, read in 6: stage 5 does not read
    // it.
    let mut early = Schedule::checkpoint_all(&g);
    early.offload(0, 2, 4);
    early.set_s(6, 0, true);
    assert_eq!(early.validate(&g), Ok(()));
    early.defer_fetch(4, 0);
    assert_eq!(
        early.validate(&g),
        Err(ScheduleError::Deferred { t: 4, i: 0 })
    );
    // No fetch to defer.
    let mut ghost = Schedule::checkpoint_all(&g);
    ghost.set_deferred(3, 0, true);
    assert_eq!(
        ghost.validate(&g),
        Err(ScheduleError::Deferred { t: 3, i: 0 })
    );
}

/// The step cover program's spanning form at `budget`, in seconds, if it
/// is built.
fn spanning_bound(g: &Graph, budget: Bytes, d: &Device) -> Option<f64> {
    let params = Params {
        time_limit: std::time::Duration::from_secs(10),
        feasibility_tolerance: step_cover::FEASIBILITY_TOLERANCE,
        ..Params::default()
    };
    step_cover::step_cover_bound(g, budget, d, false, Copies::Spanning, &params)
        .unwrap()
        .map(|c| c.bound.get())
}

/// A random graph with random offloads on checkpoint-all (as in
/// tests/tiers.rs, copied out one stage into the gap so that a lead has
/// room), each copy given a random share of its longest lead.
fn case(seed: u64, nodes: usize, picks: &[(usize, usize)], shares: &[u8]) -> (Graph, Schedule) {
    let (g, mut sch) = common::offloaded_case(seed, nodes, picks, false, 1);
    let mut k = 0;
    for t in 0..sch.stages() {
        for i in sch.o_row(t).to_vec() {
            let m = sch.max_out_lead(t, i as usize);
            sch.set_out_lead(t, i as usize, m * shares[k % shares.len()] as usize / 4);
            k += 1;
        }
        for i in sch.p_row(t).to_vec() {
            let m = sch.max_fetch_lead(t, i as usize);
            sch.set_fetch_lead(t, i as usize, m * shares[k % shares.len()] as usize / 4);
            k += 1;
        }
    }
    (g, sch)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any lead within its longest makes a valid plan that the simulator
    /// accepts; leads on copies out never change the peak, leads on fetches
    /// never lower it, and no lead changes what is computed or moved.
    #[test]
    fn any_lead_within_its_longest_makes_a_valid_plan(
        seed in 0u64..1000,
        nodes in 6usize..30,
        picks in prop::collection::vec((0usize..200, 0usize..10), 1..8),
        shares in prop::collection::vec(0u8..=4, 1..8),
    ) {
        let (g, sch) = case(seed, nodes, &picks, &shares);
        prop_assert_eq!(sch.validate(&g), Ok(()));
        let d = Device::parse(
            "name: big\ncompute: {cost_is_seconds: true}\nfast: {capacity: 1GB}\n\
             slow: {capacity: 1GB, to_slow: 2, to_fast: 3, latency: 0.5, engines: duplex, direct_read: none}\n",
        )
        .unwrap();
        let sim = |s: &Schedule| simulate_on(&g, &generate_plan(&g, s).unwrap(), Some(&d)).unwrap();
        let led = sim(&sch);
        let mut plain = sch.clone();
        plain.clear_leads();
        let base = sim(&plain);
        let mut outs_only = sch.clone();
        for (t, i, _, fetch) in sch.leads() {
            if fetch {
                outs_only.set_fetch_lead(t, i, 0);
            }
        }
        prop_assert_eq!(sim(&outs_only).peak, base.peak);
        prop_assert!(led.peak >= base.peak);
        prop_assert_eq!(led.cost, base.cost);
        let (lt, bt) = (led.timing.unwrap(), base.timing.unwrap());
        prop_assert_eq!((lt.bytes_to_slow, lt.bytes_to_fast), (bt.bytes_to_slow, bt.bytes_to_fast));
        prop_assert_eq!(lt.slow_peak >= bt.slow_peak, true);
        // The step cover program's spanning form holds for the plan with
        // leads, at the plan's own peak as the budget.
        if let Some(bound) = spanning_bound(&g, led.peak, &d) {
            prop_assert!(bound <= lt.step.get() * (1.0 + 1e-6), "bound {bound} above the plan's step {}", lt.step.get());
        }
    }

    /// Any fetch deferred into its reader's stage makes a valid plan that
    /// the simulator accepts, on every kind of engine; deferral never
    /// raises the peak and changes nothing computed or moved; and the step
    /// cover program's bound stays at or below the plan's step.
    #[test]
    fn any_deferral_makes_a_valid_plan_under_the_bound(
        seed in 0u64..1000,
        nodes in 6usize..30,
        picks in prop::collection::vec((0usize..200, 0usize..10), 1..8),
        which in prop::collection::vec(any::<bool>(), 1..8),
        engines in prop::sample::select(vec!["duplex", "shared", "synchronous"]),
    ) {
        let (g, sch) = common::offloaded_case(seed, nodes, &picks, false, 1);
        let mut late = sch.clone();
        let mut k = 0;
        for t in 0..sch.stages() {
            for &i in sch.p_row(t) {
                if which[k % which.len()] {
                    late.defer_fetch(t, i as usize);
                }
                k += 1;
            }
        }
        prop_assert_eq!(late.validate(&g), Ok(()));
        let d = Device::parse(&format!(
            "name: big\ncompute: {{cost_is_seconds: true}}\nfast: {{capacity: 1GB}}\n\
             slow: {{capacity: 1GB, to_slow: 2, to_fast: 3, latency: 0.5, engines: {engines}, direct_read: none}}\n",
        ))
        .unwrap();
        let sim = |s: &Schedule| simulate_on(&g, &generate_plan(&g, s).unwrap(), Some(&d)).unwrap();
        let (base, lsim) = (sim(&sch), sim(&late));
        prop_assert!(lsim.peak <= base.peak);
        prop_assert_eq!(lsim.cost, base.cost);
        prop_assert_eq!(lsim.computations, base.computations);
        let (lt, bt) = (lsim.timing.unwrap(), base.timing.unwrap());
        prop_assert_eq!((lt.bytes_to_slow, lt.bytes_to_fast), (bt.bytes_to_slow, bt.bytes_to_fast));
        if let Some(bound) = spanning_bound(&g, lsim.peak, &d) {
            prop_assert!(bound <= lt.step.get() * (1.0 + 1e-6), "bound {bound} above the plan's step {}", lt.step.get());
        }
    }
}
