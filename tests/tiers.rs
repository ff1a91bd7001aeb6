//! Tiered memory: device files, transfer statements, the timed simulator,
//! and the hint stream. Every figure below is derived by hand in the
//! comments next to it.

mod common;

use proptest::prelude::*;
use remat::device::{Device, Engines};
use remat::graph::{Graph, GraphFile};
use remat::schedule::{
    generate_plan, simulate, simulate_on, Plan, PlanFile, Register, Schedule, SimError, Statement,
};
use remat::units::{Bytes, Seconds};
use remat::zoo::synthetic;
use remat::NodeId;
use std::path::Path;

/// The five-node graph of the hand-made plans: a chain a → b → c → d → e
/// where e also reads a, so a idles from b to e: the value to offload.
/// Costs are seconds (the test device says `cost_is_seconds`).
fn five() -> Graph {
    let text = "name: five\ngraph: training\nnodes:\n\
        - {name: a, cost: 1, memory: 4}\n\
        - {name: b, cost: 2, memory: 2, deps: [a]}\n\
        - {name: c, cost: 3, memory: 2, deps: [b]}\n\
        - {name: d, cost: 2, memory: 1, deps: [c]}\n\
        - {name: e, cost: 1, memory: 1, deps: [d, a]}\n";
    Graph::from_file(&GraphFile::parse(text).unwrap(), "five.yaml").unwrap()
}

/// Copies out at 2 B/s, in at 4 B/s, 0.5 s latency each: a copy of a (4 B)
/// takes 2.5 s out and 1.5 s in; a copy of d (1 B) 1.0 s out.
fn device(engines: &str, slow_capacity: u64, direct_read: &str) -> Device {
    Device::parse(&format!(
        "name: test-{engines}\ncompute: {{cost_is_seconds: true}}\nfast: {{capacity: 100}}\n\
         slow: {{capacity: {slow_capacity}, to_slow: 2, to_fast: 4, latency: 0.5, engines: {engines}, direct_read: {direct_read}}}\n"
    ))
    .unwrap()
}

fn node(g: &Graph, name: &str) -> NodeId {
    g.find(name).unwrap()
}

fn alloc(g: &Graph, register: Register, name: &str) -> Statement {
    Statement::Allocate {
        register,
        node: node(g, name),
        bytes: g.memory(node(g, name)),
    }
}

fn compute(g: &Graph, name: &str, register: Register, args: &[Register]) -> Statement {
    Statement::Compute {
        node: node(g, name),
        register,
        args: args.to_vec(),
    }
}

use Statement::{CopyIn, CopyOut, Deallocate as Free, Drop, Wait};

/// Offload a after b reads it, copy it back while d runs, for e: exactly
/// what the plan generator makes of `Schedule::offload(a, 1, 3)` on
/// checkpoint-all.
fn offload_plan(g: &Graph) -> Plan {
    Plan {
        statements: vec![
            alloc(g, 0, "a"),        // 0  fast 4
            compute(g, "a", 0, &[]), // 1  c 0 → 1
            CopyOut {
                register: 1,
                src: 0,
            }, // 2  out 1 → 3.5; slow 4
            alloc(g, 2, "b"),        // 3  fast 6
            compute(g, "b", 2, &[0]), // 4  c 1 → 3
            Wait { register: 1 },    // 5  c 3 → 3.5 (stall 0.5)
            Free { register: 0 },    // 6  fast 2
            alloc(g, 3, "c"),        // 7  fast 4
            compute(g, "c", 3, &[2]), // 8  c 3.5 → 6.5
            Free { register: 2 },    // 9  fast 2
            CopyIn {
                register: 4,
                src: 1,
            }, // 10 fast 6; in 6.5 → 8
            alloc(g, 5, "d"),        // 11 fast 7 (peak)
            compute(g, "d", 5, &[3]), // 12 c 6.5 → 8.5
            Free { register: 3 },    // 13 fast 5
            Wait { register: 4 },    // 14 done at 8: no stall
            Drop { register: 1 },    // 15 slow 0
            alloc(g, 6, "e"),        // 16 fast 6
            compute(g, "e", 6, &[5, 4]), // 17 c 8.5 → 9.5
            Free { register: 5 },    // 18
            Free { register: 4 },    // 19
            Free { register: 6 },    // 20
        ],
    }
}

#[test]
fn one_offload_one_prefetch_duplex_and_shared() {
    let g = five();
    let plan = offload_plan(&g);
    // The copies never overlap (the prefetch reads the finished offload),
    // so one shared engine gives the same figures as two. The prefetch
    // (1.5 s) hides behind d (2 s); the offload (2.5 s) only half behind b.
    for engines in ["duplex", "shared"] {
        let d = device(engines, 100, "none");
        let r = simulate_on(&g, &plan, Some(&d)).unwrap();
        let t = r.timing.unwrap();
        assert_eq!(t.step, Seconds(9.5), "{engines}");
        assert_eq!(t.compute, Seconds(9.0)); // 1 + 2 + 3 + 2 + 1
        assert_eq!(t.stall, Seconds(0.5));
        assert_eq!((t.bytes_to_slow, t.bytes_to_fast), (Bytes(4), Bytes(4)));
        assert_eq!(t.copies, 2);
        assert_eq!(t.slow_peak, Bytes(4));
        // c + a's copy-in buffer + d while d runs.
        assert_eq!(r.peak, Bytes(7));
        assert_eq!(r.peak_statement, 11);
    }
    // Checkpoint-all keeps a throughout: a + b + c = 8 while c runs.
    let all = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
    assert_eq!(simulate(&g, &all).unwrap().peak, Bytes(8));
    // A synchronous device copies on the compute stream: a 0→1, copy out
    // 1→3.5, b →5.5, c →8.5, copy in →10, d →12, e →13.
    let t = simulate_on(&g, &plan, Some(&device("synchronous", 100, "none")))
        .unwrap()
        .timing
        .unwrap();
    assert_eq!(
        (t.step, t.compute, t.stall),
        (Seconds(13.0), Seconds(9.0), Seconds(4.0))
    );
}

#[test]
fn the_plan_generator_makes_the_hand_plan_from_the_schedule() {
    let g = five();
    let mut sch = Schedule::checkpoint_all(&g);
    sch.offload(0, 1, 3);
    assert!(sch.has_transfers());
    let plan = generate_plan(&g, &sch).unwrap();
    assert_eq!(plan, offload_plan(&g), "{}", plan.to_text(&g));
    // And it round-trips through both file forms.
    let back = Plan::from_file_statements(&g, &plan.to_file_statements(&g)).unwrap();
    assert_eq!(back, plan);
    let text = plan.to_text(&g);
    assert!(text.contains("%1 = copy_out %0\n") && text.contains("%4 = copy_in %1\n"));
    assert!(text.contains("wait %4\n") && text.contains("drop %1\n"));
    let json = serde_json::to_string(&plan.to_file_statements(&g)).unwrap();
    assert!(
        json.contains(r#"{"op":"copy_out","register":1,"src":0}"#),
        "{json}"
    );
}

#[test]
fn duplex_engines_overlap_an_offload_with_a_prefetch_and_shared_ones_do_not() {
    let g = five();
    // As the hand plan, and c is also copied out while a comes back in,
    // during d's stage (c is kept into it): in 6.5 → 8 on both; out (2 B at
    // 2 B/s + 0.5 s = 1.5 s) 6.5 → 8 on its own engine, 8 → 9.5 behind the
    // copy in on a shared one. d runs 6.5 → 8.5.
    let mut sch = Schedule::checkpoint_all(&g);
    sch.offload(0, 1, 3);
    sch.set_o(3, 2, true);
    let plan = generate_plan(&g, &sch).unwrap();
    let run = |e: &str| {
        simulate_on(&g, &plan, Some(&device(e, 100, "none")))
            .unwrap()
            .timing
            .unwrap()
    };
    let (duplex, shared) = (run("duplex"), run("shared"));
    // Duplex: as without c's copy. Shared: wait until 9.5, e 9.5 → 10.5.
    assert_eq!((duplex.step, duplex.stall), (Seconds(9.5), Seconds(0.5)));
    assert_eq!((shared.step, shared.stall), (Seconds(10.5), Seconds(1.5)));
    // a's and c's slow copies coexist until the end of d's stage: 4 + 2.
    assert_eq!(duplex.slow_peak, Bytes(6));
    assert_eq!(duplex.bytes_to_slow, Bytes(6));
    // c's fast copy stays until its copy is waited for: c + a + d = 7 as
    // before, then c is freed at the end of the stage.
    let r = simulate_on(&g, &plan, Some(&device("duplex", 100, "none"))).unwrap();
    assert_eq!(r.peak, Bytes(7));
}

/// Runs `plan` with one statement replaced and expects the simulator to
/// reject it at `index` with a message containing `msg`.
fn rejects(g: &Graph, plan: &Plan, d: Option<&Device>, index: usize, msg: &str) {
    let e: SimError = simulate_on(g, plan, d).unwrap_err();
    assert_eq!(e.index, index, "{e}");
    assert!(e.msg.contains(msg), "{e}");
}

fn edited(g: &Graph, f: impl FnOnce(&mut Vec<Statement>)) -> Plan {
    let mut st = offload_plan(g).statements;
    f(&mut st);
    Plan { statements: st }
}

#[test]
fn reading_a_value_mid_copy_is_rejected() {
    let g = five();
    let d = device("duplex", 100, "none");
    // e reads a's copy-in buffer without waiting for it (the drop of the
    // slow copy moves to the end, after the copy is waited for).
    let plan = edited(&g, |st| {
        st.remove(14);
        let drop = st.remove(14);
        st.push(Wait { register: 4 });
        st.push(drop);
    });
    rejects(&g, &plan, Some(&d), 15, "mid-copy");
}

#[test]
fn freeing_a_buffer_still_being_copied_out_is_rejected() {
    let g = five();
    let d = device("duplex", 100, "none");
    // a's fast buffer freed before its copy out is waited for.
    let plan = edited(&g, |st| st.swap(5, 6));
    rejects(&g, &plan, Some(&d), 5, "still being copied out");
}

#[test]
fn prefetching_what_was_never_copied_out_is_rejected() {
    let g = five();
    let d = device("duplex", 100, "none");
    // From a fast register (d's), and from a register that never existed.
    let plan = edited(&g, |st| {
        st[10] = CopyIn {
            register: 4,
            src: 3,
        }
    });
    rejects(&g, &plan, Some(&d), 10, "never copied out");
    let plan = edited(&g, |st| {
        st[10] = CopyIn {
            register: 4,
            src: 42,
        }
    });
    rejects(&g, &plan, Some(&d), 10, "never copied out");
}

#[test]
fn exceeding_the_slow_tier_is_rejected() {
    let g = five();
    // a needs 4 bytes; the slow tier holds 3.
    rejects(
        &g,
        &offload_plan(&g),
        Some(&device("duplex", 3, "none")),
        2,
        "exceeds the slow tier: 0 bytes already held there, 4 with this copy, capacity 3",
    );
}

/// A copy's destination is a new register: copying a register onto itself
/// names the copy, not an allocation that never happened twice.
#[test]
fn a_copy_into_a_register_that_exists_is_rejected() {
    let g = five();
    let d = device("duplex", 100, "none");
    let plan = edited(&g, |st| {
        st[2] = CopyOut {
            register: 0,
            src: 0,
        }
    });
    rejects(
        &g,
        &plan,
        Some(&d),
        2,
        "%0 = copy_out %0: register %0 already exists; a copy makes a new register",
    );
}

#[test]
fn transfers_without_a_device_are_rejected() {
    let g = five();
    rejects(&g, &offload_plan(&g), None, 2, "needs a device");
    let mut sch = Schedule::checkpoint_all(&g);
    sch.offload(0, 1, 3);
    // The pipeline refuses a tiered schedule without a device too: a
    // strategy cannot report an untimed offload.
    struct Fixed(Schedule);
    impl remat::strategies::Strategy for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn describe(&self) -> &'static str {
            "a fixed schedule"
        }
        fn solve(
            &self,
            _: &Graph,
            _: Bytes,
            _: &remat::strategies::SolveOptions,
        ) -> Result<remat::strategies::Solution, remat::strategies::StrategyError> {
            Ok(remat::strategies::Solution::feasible(self.0.clone(), None))
        }
    }
    let opts = remat::strategies::SolveOptions::default();
    let e = remat::solve::run(&g, &Fixed(sch.clone()), Bytes(100), &opts).unwrap_err();
    assert!(e.to_string().contains("no device"), "{e}");
    let opts = remat::strategies::SolveOptions {
        device: Some(device("duplex", 100, "none").into()),
        ..Default::default()
    };
    let out = remat::solve::run(&g, &Fixed(sch.clone()), Bytes(7), &opts).unwrap();
    assert_eq!(out.timing().unwrap().step, Seconds(9.5));
    assert_eq!(out.peak(), Some(Bytes(7)));
    // The budget still binds the fast tier, copy-in buffers included.
    let e = remat::solve::run(&g, &Fixed(sch), Bytes(6), &opts).unwrap_err();
    assert!(e.to_string().contains("exceeds the budget"), "{e}");
}

#[test]
fn other_misuses_are_rejected_with_their_index() {
    let g = five();
    let d = device("duplex", 100, "none");
    // Dropping a slow copy while it is being copied in.
    let plan = edited(&g, |st| st.swap(14, 15));
    rejects(&g, &plan, Some(&d), 14, "still being copied in");
    // Waiting twice.
    let plan = edited(&g, |st| st.insert(6, Wait { register: 1 }));
    rejects(&g, &plan, Some(&d), 6, "a second time");
    // Copying in from a slow copy whose copy out is still running.
    let plan = edited(&g, |st| {
        st.insert(
            3,
            CopyIn {
                register: 9,
                src: 1,
            },
        )
    });
    rejects(&g, &plan, Some(&d), 3, "mid-copy");
    // Reading the slow copy directly on a device that forbids it.
    rejects(
        &g,
        &direct_plan(&g),
        Some(&d),
        14,
        "does not let kernels read the slow tier",
    );
}

/// a is offloaded and never copied back: e reads it from the slow tier.
fn direct_schedule(g: &Graph) -> Schedule {
    let mut sch = Schedule::checkpoint_all(g);
    sch.set_o(1, 0, true);
    for t in 2..=4 {
        sch.set_h(t, 0, true);
        sch.set_s(t, 0, false);
    }
    sch
}

fn direct_plan(g: &Graph) -> Plan {
    let mut st = offload_plan(g).statements;
    st.truncate(10); // up to freeing b
    st.extend([
        alloc(g, 4, "d"),            // 10
        compute(g, "d", 4, &[3]),    // 11 c 6.5 → 8.5
        Free { register: 3 },        // 12
        alloc(g, 5, "e"),            // 13
        compute(g, "e", 5, &[4, 1]), // 14 c 8.5 → 8.5 + 1 + 4 B / 2 B/s
        Free { register: 4 },        // 15
        Free { register: 5 },        // 16
        Drop { register: 1 },        // 17
    ]);
    Plan { statements: st }
}

#[test]
fn a_direct_read_costs_its_bytes_over_the_read_bandwidth() {
    let g = five();
    let plan = direct_plan(&g);
    // The generator makes this plan from a schedule that holds a's slow
    // copy where e needs it, and no fast one.
    assert_eq!(generate_plan(&g, &direct_schedule(&g)).unwrap(), plan);
    // e reads a (4 B) from the slow tier at 2 B/s: 2 s more.
    let t = simulate_on(&g, &plan, Some(&device("duplex", 100, "2")))
        .unwrap()
        .timing
        .unwrap();
    assert_eq!(
        (t.step, t.compute, t.stall),
        (Seconds(11.5), Seconds(11.0), Seconds(0.5))
    );
    assert_eq!((t.bytes_to_fast, t.copies), (Bytes(0), 1));
}

fn shipped() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("devices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn recompute_only_plans_take_cost_over_throughput_without_stalls() {
    let g = synthetic::linear(8);
    let a100 =
        Device::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("devices/a100-40gb-pcie4.yaml"))
            .unwrap();
    for sch in [
        Schedule::checkpoint_all(&g),
        common::recompute_all_schedule(&g),
    ] {
        let plan = generate_plan(&g, &sch).unwrap();
        let plain = simulate(&g, &plan).unwrap();
        for path in shipped() {
            let d = Device::load(&path).unwrap();
            let r = simulate_on(&g, &plan, Some(&d)).unwrap();
            let t = r.timing.clone().unwrap();
            let remat::device::Throughput::PerSecond(thr) = d.throughput else {
                panic!()
            };
            // Exactly, bit for bit: the simulator keeps cost units until
            // the first stall.
            assert_eq!(t.step, Seconds(plain.cost / thr), "{}", d.name);
            assert_eq!(t.compute, t.step);
            assert_eq!(t.stall, Seconds::ZERO);
            assert_eq!((t.bytes_to_slow, t.copies), (Bytes::ZERO, 0));
            // Everything else is as without a device.
            assert_eq!(
                (r.cost, r.peak, r.computations),
                (plain.cost, plain.peak, plain.computations)
            );
        }
    }
    // The zoo's networks, checkpoint-all on the A100: the all-fast step.
    for m in ["vgg16", "resnet50", "unet"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{m}.yaml"));
        let g = Graph::load(&path).unwrap();
        let plan = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
        let t = simulate_on(&g, &plan, Some(&a100)).unwrap().timing.unwrap();
        let want = a100.all_fast_step(&g).get();
        assert!((t.step.get() - want).abs() <= 1e-12 * want, "{m}");
        assert_eq!(t.stall, Seconds::ZERO);
    }
    // ResNet-50 (batch 256) at the measured 2,470 images/s: 0.1036 s.
    let rn =
        Graph::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("models/resnet50.yaml")).unwrap();
    assert!((a100.all_fast_step(&rn).get() - 256.0 / 2470.0).abs() < 2e-4);
    // Through the pipeline, with a strategy: the outcome's step time is the
    // simulated cost over the A100's throughput.
    let opts = remat::strategies::SolveOptions {
        device: Some(a100.clone().into()),
        ..Default::default()
    };
    let out = remat::solve::run(&g, &common::RecomputeAll, Bytes(1000), &opts).unwrap();
    let t = out.timing().unwrap();
    assert_eq!(t.step, Seconds(out.cost().unwrap() / 6.05e13));
    assert!(out.cost().unwrap() > g.total_cost()); // it does recompute
}

#[test]
fn every_shipped_device_file_parses() {
    let names: Vec<String> = shipped()
        .iter()
        .map(|p| Device::load(p).unwrap().name)
        .collect();
    assert_eq!(
        names,
        ["a100-40gb-pcie4", "gh200", "h100-80gb-pcie5", "optane-pmm"]
    );
    let a100 = Device::load(&shipped()[0]).unwrap();
    assert_eq!(a100.fast_capacity, Bytes(40_000_000_000));
    assert_eq!(a100.slow.to_fast.get(), 25e9);
    assert_eq!(a100.slow.engines, Engines::Duplex);
    assert!(a100.slow.direct_read.is_none());
    let optane = Device::load(&shipped()[3]).unwrap();
    assert_eq!(
        (optane.slow.to_slow.get(), optane.slow.to_fast.get()),
        (12e9, 29e9)
    );
    assert_eq!(optane.slow.engines, Engines::Synchronous);
    assert_eq!(optane.slow.direct_read.unwrap().get(), 39.4e9);
    // A 1 GB copy on the A100: 10 us + 1e9 / 25e9 s.
    let t = a100.copy_time(Bytes(1_000_000_000), false);
    assert!((t.get() - 0.04001).abs() < 1e-12, "{t:?}");
}

#[test]
fn bad_device_files_get_one_line_errors_naming_the_file() {
    let good = std::fs::read_to_string(&shipped()[0]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            good.replace("engines: duplex", "engines: duplex\n  enginez: 2"),
            "enginez",
        ),
        (
            good.replace("  latency: 10us              # per copy\n", ""),
            "latency",
        ),
        (
            good.replace("to_fast: 25GB/s", "to_fast: 0GB/s"),
            "slow.to_fast",
        ),
        (
            good.replace("to_fast: 25GB/s", "to_fast: fast"),
            "slow.to_fast",
        ),
        (
            good.replace("capacity: 512GB", "capacity: 50%"),
            "percentage",
        ),
        (
            good.replace("engines: duplex", "engines: triplex"),
            "triplex",
        ),
        (
            good.replace(
                "throughput: 6.05e13",
                "throughput: 6.05e13\n  cost_is_seconds: true",
            ),
            "not both",
        ),
        (
            good.replace("throughput: 6.05e13", "throughput: -1"),
            "positive",
        ),
        (
            good.replace("latency: 10us", "latency: 10 fortnights"),
            "slow.latency",
        ),
        ("name: x\n: : :\n".to_string(), ""),
        // Sweep rows are keyed by the name, read back trimmed.
        (
            good.replace("name: a100-40gb-pcie4", "name: ' a100 '"),
            "white space",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.yaml"));
        std::fs::write(&p, text).unwrap();
        let e = Device::load(&p).unwrap_err().to_string();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(e.contains(want), "case {i}: {e}");
        assert!(!e.contains('\n'), "case {i}: {e}");
    }
    // The command line: exit code 2 and one line on stderr.
    let g = dir.path().join("g.yaml");
    std::fs::write(
        &g,
        "name: g\ngraph: training\nnodes:\n- {name: a, cost: 1, memory: 1}\n",
    )
    .unwrap();
    let plan = dir.path().join("p.json");
    std::fs::write(&plan, r#"{"model":"g","strategy":"x","budget":null,"fixed_memory":0,"cost":1,"peak_memory":1,"statements":[{"op":"allocate","register":0,"node":"a","bytes":1},{"op":"compute","node":"a","register":0,"args":[]}]}"#).unwrap();
    let bad = dir.path().join("bad0.yaml");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args([
            "simulate",
            g.to_str().unwrap(),
            plan.to_str().unwrap(),
            "--device",
            bad.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad0.yaml") && err.contains("enginez"),
        "{err}"
    );
}

#[test]
fn hints_follow_the_plan() {
    let g = five();
    let plan = offload_plan(&g);
    let file = PlanFile {
        model: "five".into(),
        graph_fingerprint: None,
        strategy: "hand".into(),
        budget: None,
        fixed_memory: 0,
        cost: 9.0,
        peak_memory: 6,
        statements: plan.to_file_statements(&g),
    };
    let h = remat::hints::hints(&file).unwrap();
    // Objects: a (0), b (1), c (2), d (3), e (4); a's copies are a.
    let nodes: Vec<&str> = h.objects.iter().map(|o| o.node.as_str()).collect();
    assert_eq!(nodes, ["a", "b", "c", "d", "e"]);
    assert_eq!(h.steps.len(), 6);
    let s = |k: usize| &h.steps[k];
    assert_eq!(
        (s(0).will_write.as_slice(), s(0).node.as_deref()),
        (&[0][..], Some("a"))
    );
    // Before b: a is archived (its copy out), and b reads it.
    assert_eq!(
        (s(1).archive.as_slice(), s(1).will_read.as_slice()),
        (&[0][..], &[0][..])
    );
    // Before c: a's fast copy is freed, but its slow copy lives: no retire.
    assert!(s(2).retire.is_empty());
    assert_eq!(s(2).will_read, [1]);
    // Before d: b retires; a is prefetched, then d reads c.
    assert_eq!(s(3).retire, [1]);
    assert_eq!(s(3).will_read, [0, 2]);
    // Before e: c retires; e reads d and a.
    assert_eq!(s(4).retire, [2]);
    assert_eq!(s(4).will_read, [3, 0]);
    // After the last kernel: d, then a (its last copy), then e.
    assert_eq!(s(5).node, None);
    assert_eq!(s(5).retire, [3, 0, 4]);
    // Unknown registers are an error naming the statement.
    let mut bad = file.clone();
    bad.statements.truncate(3);
    bad.statements
        .push(remat::schedule::plan::FileStatement::Wait { register: 77 });
    assert_eq!(remat::hints::hints(&bad).unwrap_err().index, 3);
}

// ---- property: the simulator against a plain replay of docs/format.md ----

/// A direct transcription of the timing rules in docs/format.md, written
/// without the simulator's bookkeeping: registers map to (bytes, copy end).
fn replay(g: &Graph, plan: &Plan, d: &Device) -> (f64, f64, f64, u64, u64, u64, u64) {
    use std::collections::HashMap;
    let rate = match d.throughput {
        remat::device::Throughput::PerSecond(r) => r,
        remat::device::Throughput::CostIsSeconds => 1.0,
    };
    let mut bytes: HashMap<Register, u64> = HashMap::new();
    let mut end: HashMap<Register, f64> = HashMap::new();
    let (mut c, mut compute, mut stall) = (0.0f64, 0.0f64, 0.0f64);
    let mut engine = [0.0f64; 2];
    let mut last = 0.0f64;
    let (mut fast, mut fast_peak, mut slow, mut slow_peak) = (0u64, 0u64, 0u64, 0u64);
    let (mut out_b, mut in_b) = (0u64, 0u64);
    for st in &plan.statements {
        match st {
            Statement::Allocate {
                register, bytes: b, ..
            } => {
                bytes.insert(*register, b.get());
                fast += b.get();
                fast_peak = fast_peak.max(fast);
            }
            Statement::Compute { node, .. } => {
                let t = g.cost(*node) / rate;
                c += t;
                compute += t;
            }
            Statement::Deallocate { register } => fast -= bytes[register],
            Statement::Drop { register } => slow -= bytes[register],
            Statement::CopyOut { register, src } | Statement::CopyIn { register, src } => {
                let out = matches!(st, Statement::CopyOut { .. });
                let b = bytes[src];
                bytes.insert(*register, b);
                let bw = if out {
                    d.slow.to_slow.get()
                } else {
                    d.slow.to_fast.get()
                };
                let dur = d.slow.latency.get() + b as f64 / bw;
                let e = match d.slow.engines {
                    Engines::Duplex => usize::from(!out),
                    _ => 0,
                };
                let done = if d.slow.engines == Engines::Synchronous {
                    c += dur;
                    stall += dur;
                    c
                } else {
                    engine[e] = c.max(engine[e]) + dur;
                    engine[e]
                };
                end.insert(*register, done);
                last = last.max(done);
                if out {
                    out_b += b;
                    slow += b;
                    slow_peak = slow_peak.max(slow);
                } else {
                    in_b += b;
                    fast += b;
                    fast_peak = fast_peak.max(fast);
                }
            }
            Statement::Wait { register } => {
                if end[register] > c {
                    stall += end[register] - c;
                    c = end[register];
                }
            }
        }
    }
    (
        c.max(last),
        compute,
        stall,
        fast_peak,
        slow_peak,
        out_b,
        in_b,
    )
}

/// A random graph and, on its checkpoint-all schedule, random offloads:
/// each picked value is copied out at one of its reads (or right after it
/// is computed) and back in during the stage before its next read.
fn tiered_case(seed: u64, nodes: usize, picks: &[(usize, usize)]) -> (Graph, Schedule) {
    tiered_case_with(seed, nodes, picks, false)
}

/// As [`tiered_case`]; with `kept_only`, values are copied out only in a
/// stage they are kept into, never right after being computed.
fn tiered_case_with(
    seed: u64,
    nodes: usize,
    picks: &[(usize, usize)],
    kept_only: bool,
) -> (Graph, Schedule) {
    common::offloaded_case(seed, nodes, picks, kept_only, 0)
}

fn device_strategy() -> impl Strategy<Value = Device> {
    (0usize..3, 1u64..200, 1u64..200, 0u64..5, prop::bool::ANY).prop_map(|(e, out, inn, lat, secs)| {
        let engines = ["duplex", "shared", "synchronous"][e];
        let compute = if secs { "{cost_is_seconds: true}".to_string() } else { "{throughput: 3}".to_string() };
        Device::parse(&format!(
            "name: random\ncompute: {compute}\nfast: {{capacity: 1GB}}\n\
             slow: {{capacity: 1GB, to_slow: {out}, to_fast: {inn}, latency: {lat}, engines: {engines}, direct_read: none}}\n"
        ))
        .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_simulator_agrees_with_a_plain_replay(
        seed in 0u64..1000,
        nodes in 4usize..30,
        picks in prop::collection::vec((0usize..200, 0usize..10), 0..8),
        d in device_strategy(),
        eager in prop::collection::vec(prop::bool::ANY, 16),
    ) {
        let (g, sch) = tiered_case(seed, nodes, &picks);
        let mut plan = generate_plan(&g, &sch).unwrap();
        // Some copies are waited for at once (AutoTM's synchronous moves):
        // a wait moved earlier, right after its copy, keeps a plan valid.
        let mut k = 0;
        let mut i = 0;
        while i < plan.statements.len() {
            if let Statement::CopyOut { register, .. } | Statement::CopyIn { register, .. } =
                plan.statements[i]
            {
                if eager[k % eager.len()] {
                    let w = plan.statements.iter().position(|s| *s == Wait { register }).unwrap();
                    let wait = plan.statements.remove(w);
                    plan.statements.insert(i + 1, wait);
                }
                k += 1;
            }
            i += 1;
        }
        let r = simulate_on(&g, &plan, Some(&d)).unwrap();
        let t = r.timing.clone().unwrap();
        let (step, compute, stall, fast_peak, slow_peak, out_b, in_b) = replay(&g, &plan, &d);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        prop_assert!(close(t.step.get(), step), "step {} vs {}", t.step.get(), step);
        prop_assert!(close(t.compute.get(), compute));
        prop_assert!(close(t.stall.get(), stall), "stall {} vs {}", t.stall.get(), stall);
        prop_assert_eq!(r.peak, Bytes(fast_peak) + g.fixed_memory);
        prop_assert_eq!(t.slow_peak, Bytes(slow_peak));
        prop_assert_eq!((t.bytes_to_slow, t.bytes_to_fast), (Bytes(out_b), Bytes(in_b)));
        // Transfers never change what is computed.
        let plain = generate_plan(&g, &Schedule::checkpoint_all(&g)).unwrap();
        prop_assert_eq!(r.cost, simulate(&g, &plain).unwrap().cost);
        // Offloading never raises the fast peak above checkpoint-all's.
        prop_assert!(r.peak <= simulate(&g, &plain).unwrap().peak);
    }
}

fn remat_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_command_line_times_plans_and_writes_hints() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    let g = five();
    std::fs::write(p("five.yaml"), g.to_file().to_yaml(None)).unwrap();
    std::fs::write(
        p("dev.yaml"),
        "name: test\ncompute: {cost_is_seconds: true}\nfast: {capacity: 100}\n\
         slow: {capacity: 100, to_slow: 2, to_fast: 4, latency: 0.5, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    // A recompute-only plan from `solve --device`: step time = all-fast.
    let o = remat_cli(&[
        "solve",
        &p("five.yaml"),
        "-b",
        "100%",
        "-s",
        "checkpoint-all",
        "--device",
        &p("dev.yaml"),
        "--plan",
        &p("all.json"),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("step time        9.000 s (+0.00% vs all-fast 9.000 s)"),
        "{out}"
    );
    assert!(out.contains("compute / stall  9.000 s / 0.000 ms"), "{out}");
    // The hand-made tiered plan: simulate needs the device, and times it.
    let file = PlanFile {
        model: "five".into(),
        graph_fingerprint: None,
        strategy: "hand".into(),
        budget: Some(7),
        fixed_memory: 0,
        cost: 9.0,
        peak_memory: 7,
        statements: offload_plan(&g).to_file_statements(&g),
    };
    std::fs::write(p("tiered.json"), serde_json::to_vec(&file).unwrap()).unwrap();
    let o = remat_cli(&["simulate", &p("five.yaml"), &p("tiered.json")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("statement 2: copy_out is a transfer statement"));
    let o = remat_cli(&[
        "simulate",
        &p("five.yaml"),
        &p("tiered.json"),
        "--device",
        &p("dev.yaml"),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("step time        9.500 s (+5.56% vs all-fast 9.000 s)"),
        "{out}"
    );
    assert!(
        out.contains("bytes moved      4 B to slow, 4 B to fast (2 copies)"),
        "{out}"
    );
    assert!(out.contains("slow-tier peak   4 B (4 bytes)"), "{out}");
    // Hints, once the plan is checked against its graph and device.
    let o = remat_cli(&[
        "hints",
        &p("five.yaml"),
        &p("tiered.json"),
        "--device",
        &p("dev.yaml"),
        "-o",
        &p("hints.json"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h: remat::hints::Hints =
        serde_json::from_slice(&std::fs::read(p("hints.json")).unwrap()).unwrap();
    assert_eq!(h.steps.len(), 6);
    assert_eq!(h.steps[1].archive, [0]);
}

/// The tiered MILP's stage time, from the schedule alone: the larger of
/// the stage's compute and each copy engine's load (both directions on a
/// shared engine; everything in sequence on a synchronous device).
fn model_step(g: &Graph, sch: &Schedule, d: &Device) -> f64 {
    let rate = match d.throughput {
        remat::device::Throughput::PerSecond(r) => r,
        remat::device::Throughput::CostIsSeconds => 1.0,
    };
    let load = |row: &[u32], to_slow: bool| -> f64 {
        row.iter()
            .map(|&i| {
                d.copy_time(g.memory(NodeId::from(i as usize)), to_slow)
                    .get()
            })
            .sum()
    };
    (0..g.len())
        .map(|t| {
            let compute: f64 = sch.computed(t).map(|k| g.cost(k)).sum::<f64>() / rate;
            let (out, inn) = (load(sch.o_row(t), true), load(sch.p_row(t), false));
            match d.slow.engines {
                Engines::Duplex => compute.max(out).max(inn),
                Engines::Shared => compute.max(out + inn),
                Engines::Synchronous => compute + out + inn,
            }
        })
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The contract the tiered MILP builds on: when every copy out is of a
    /// kept value, the simulated step time is the sum over stages of the
    /// model's stage time.
    #[test]
    fn step_time_is_the_sum_of_stage_times(
        seed in 0u64..1000,
        nodes in 4usize..30,
        picks in prop::collection::vec((0usize..200, 0usize..10), 0..8),
        d in device_strategy(),
    ) {
        let (g, sch) = tiered_case_with(seed, nodes, &picks, true);
        let plan = generate_plan(&g, &sch).unwrap();
        let t = simulate_on(&g, &plan, Some(&d)).unwrap().timing.unwrap();
        let want = model_step(&g, &sch, &d);
        let lib: f64 = sch.stage_times(&g, &d).iter().map(|s| s.get()).sum();
        prop_assert!((lib - want).abs() <= 1e-9 * want.max(1.0));
        prop_assert!((t.step.get() - want).abs() <= 1e-9 * want.max(1.0), "{} vs {}", t.step.get(), want);
    }
}

/// A link fast enough that offloading `a` of [`five`] hides behind compute,
/// at a budget only offloading or recomputing `a` meets.
///
/// Checkpoint-all's stages hold: 0: a (4 B); 1: a, b (6); 2: a, b, c (8);
/// 3: a, c, d (7); 4: a, d, e (6). At 7 B stage 2 must lose `a` (b and c
/// are read or computed there). Recomputing it in stage 4 costs 1 s more
/// than the all-fast step of 1+2+3+2+1 = 9 s: 10 s. Offloading it instead:
/// copy out in stage 1 (4 B at 4 B/s, no latency: 1 s, within the stage's
/// 2 s of compute), absent in stage 2 (b, c: 4 B), fetched in stage 3 (1 s
/// within its 2 s; the buffer counts from the stage's start: a, c, d = 7 B),
/// read in stage 4 (a, d, e: 6 B). Peak 7 B, nothing stalls: 9 s exactly,
/// the all-fast step.
#[test]
fn remat_fast_offloads_where_the_copy_hides_and_recomputing_costs_time() {
    let g = five();
    let dev = Device::parse(
        "name: fast-link\ncompute: {cost_is_seconds: true}\nfast: {capacity: 100}\n\
         slow: {capacity: 100, to_slow: 4, to_fast: 4, latency: 0, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    assert_eq!(dev.all_fast_step(&g), Seconds(9.0));
    let budget = Bytes(7);
    let fast = remat::strategies::local_search::RematFast;
    // Without the device: the recomputation, 10 s of compute.
    let plain = remat::strategies::SolveOptions {
        time_limit: std::time::Duration::from_secs(4),
        ..Default::default()
    };
    let rec = remat::solve::run(&g, &fast, budget, &plain).unwrap();
    assert_eq!(rec.cost(), Some(10.0));
    let rec_sch = remat::strategies::Strategy::solve(&fast, &g, budget, &plain)
        .unwrap()
        .schedule
        .unwrap();
    assert!(!rec_sch.has_transfers());
    // improve, from that plan: the offload, at the all-fast step.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let (sch, step) = remat::strategies::tiered_search::improve(
        &g,
        budget,
        &dev,
        rec_sch,
        deadline,
        true,
        &mut |_, _| {},
    )
    .unwrap();
    assert!(sch.has_transfers());
    assert_eq!(sch.recomputations(), 0);
    assert_eq!(step, Seconds(9.0));
    // remat-fast with the device, through the pipeline.
    let opts = remat::strategies::SolveOptions {
        device: Some(std::sync::Arc::new(dev.clone())),
        ..plain
    };
    let out = remat::solve::run(&g, &fast, budget, &opts).unwrap();
    let sim = out.sim.unwrap();
    let timing = sim.timing.unwrap();
    assert!(sim.peak <= budget);
    assert_eq!(timing.step, Seconds(9.0));
    assert_eq!(timing.stall, Seconds(0.0));
    assert_eq!(
        (timing.bytes_to_slow, timing.bytes_to_fast),
        (Bytes(4), Bytes(4))
    );
    assert_eq!(out.status, remat::strategies::Status::Optimal);
}

/// Without a device remat-fast is the recompute search it always was: the
/// same plans, to the flop, as before the offload moves existed (figures
/// from the main branch's binary), and on GPT-2 the very schedule of the
/// forecast-ranked search.
#[test]
fn remat_fast_without_a_device_is_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fast = remat::strategies::local_search::RematFast;
    let opts = remat::strategies::SolveOptions {
        time_limit: std::time::Duration::from_secs(20),
        ..Default::default()
    };
    for (model, cost, how) in [
        (
            "gpt2",
            7181303873536.0,
            // The batched drops find the forecast ranking's plan first.
            "local search on S (",
        ),
        (
            "mobilenet",
            1804818996224.0,
            "DTR eviction (CostPerByte eviction score)",
        ),
    ] {
        let g = Graph::load(&root.join(format!("models/{model}.yaml"))).unwrap();
        let peak = remat::graph::analysis::checkpoint_all_peak(&g);
        let budget = remat::units::BudgetSpec::parse("50%")
            .unwrap()
            .resolve(peak);
        let sol = remat::strategies::Strategy::solve(&fast, &g, budget, &opts).unwrap();
        let sch = sol.schedule.unwrap();
        assert!(!sch.has_transfers(), "{model}");
        assert_eq!(sch.cost(&g), cost, "{model}");
        let detail = sol.detail.unwrap();
        assert!(detail.starts_with(how), "{model}: {detail}");
        assert!(!detail.contains("offload"), "{model}: {detail}");
        if model == "gpt2" {
            let far = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let searched = remat::strategies::local_search::search(
                &g,
                budget,
                remat::strategies::local_search::Ranking::Forecast,
                far,
            )
            .unwrap();
            assert_eq!(sch, searched);
        }
    }
}

/// remat-fast's moves on a device replace a direct read that a
/// recomputation beats: e reads a (4 B at 2 B/s: 2 s) from the slow tier,
/// where computing a again costs 1 s and fits the budget of 6 B. The
/// closure alone always reads a held value, so without the move the
/// search stays at 11.5 s.
#[test]
fn a_direct_read_gives_way_to_a_cheaper_recomputation() {
    let g = five();
    let dev = device("duplex", 100, "2");
    let seed = direct_schedule(&g);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (sch, step) = remat::strategies::tiered_search::improve(
        &g,
        Bytes(6),
        &dev,
        seed,
        deadline,
        true,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(step, Seconds(10.0));
    assert_eq!(sch.recomputations(), 1);
    let t = simulate_on(&g, &generate_plan(&g, &sch).unwrap(), Some(&dev))
        .unwrap()
        .timing
        .unwrap();
    assert_eq!(
        (t.step, t.copies, t.stall),
        (Seconds(10.0), 0, Seconds(0.0))
    );
}

/// A device counts flop per second; a graph whose costs are in another
/// unit (or unlabelled) gets a one-line note saying its step times assume
/// flop, and a flop graph gets none. `-q` silences it. The answer itself
/// is the same either way.
#[test]
fn a_device_notes_costs_not_in_flop() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    std::fs::write(
        p("dev.yaml"),
        "name: dev\ncompute: {throughput: 1e9}\nfast: {capacity: 100}\n\
         slow: {capacity: 100, to_slow: 10, to_fast: 10, latency: 0, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    let graph = |unit: &str| {
        format!(
            "name: g\ngraph: forward\n{unit}nodes:\n- {{name: a, cost: 1e9, memory: 2}}\n- {{name: b, cost: 1e9, memory: 2, deps: [a]}}\n"
        )
    };
    let mut outs = Vec::new();
    for (file, unit, quiet, noted) in [
        ("ms.yaml", "cost_unit: ms\n", false, true),
        ("none.yaml", "", false, true),
        ("flop.yaml", "cost_unit: flop\n", false, false),
        ("ms.yaml", "cost_unit: ms\n", true, false),
    ] {
        std::fs::write(p(file), graph(unit)).unwrap();
        let mut args = vec![
            "solve".to_string(),
            p(file),
            "-s".into(),
            "checkpoint-all".into(),
            "--device".into(),
            p("dev.yaml"),
        ];
        if quiet {
            args.push("-q".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = remat_cli(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let notes: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("cost units per second"))
            .collect();
        assert_eq!(notes.len(), noted as usize, "{file} quiet={quiet}: {err}");
        if noted {
            assert!(
                notes[0].starts_with("note: g ") && notes[0].contains("dev"),
                "{err}"
            );
        }
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let step = out
            .lines()
            .find(|l| l.starts_with("step time"))
            .map(str::to_string);
        outs.push(step.expect("a step time"));
    }
    // 2e9 cost units forward and twice that in the generated backward, at
    // 1e9 per second, whatever the label.
    assert!(outs.iter().all(|s| s.contains(" 4.000 s")), "{outs:?}");
}
