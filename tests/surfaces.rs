//! Item 6 of the tiered-memory issue, from the command line: what a user
//! with a device file sees from `solve`, `sweep`, `max-batch` and
//! `plot-plan`.

use std::path::{Path, PathBuf};
use std::process::Output;

fn remat(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A chain a → b → c → d → e where e also reads a (checkpoint-all peak 8
/// bytes), and a device whose fast tier is 7 bytes: too small to keep
/// everything, so the default budget actually binds.
fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    let g = dir.join("five.yaml");
    std::fs::write(
        &g,
        "name: five\ngraph: training\nnodes:\n\
        - {name: a, cost: 1, memory: 4}\n\
        - {name: b, cost: 2, memory: 2, deps: [a]}\n\
        - {name: c, cost: 3, memory: 2, deps: [b]}\n\
        - {name: d, cost: 2, memory: 1, deps: [c]}\n\
        - {name: e, cost: 1, memory: 1, deps: [d, a]}\n",
    )
    .unwrap();
    let d = dir.join("dev.yaml");
    std::fs::write(
        &d,
        "name: test\ncompute: {cost_is_seconds: true}\nfast: {capacity: 7}\n\
         slow: {capacity: 100, to_slow: 2, to_fast: 4, latency: 0.5, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    (g, d)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn solve_with_a_device_defaults_the_budget_to_its_fast_tier() {
    let dir = tempfile::tempdir().unwrap();
    let (g, d) = setup(dir.path());
    let o = remat(&["solve", s(&g), "--device", s(&d), "-s", "remat-fast"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("budget           7 B (7 bytes), the fast-tier capacity of device 'test'"),
        "{out}"
    );
    assert!(out.contains("step time"), "{out}");
    // An explicit budget still wins, and is not attributed to the device.
    let o = remat(&["solve", s(&g), "--device", s(&d), "-b", "100%"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("budget           8 B (8 bytes)\n"), "{out}");
    // Neither: one line, exit 2, naming both flags.
    let o = remat(&["solve", s(&g)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--budget") && err.contains("--device"),
        "{err}"
    );
    // --help says so.
    let help = text(&remat(&["solve", "--help"]));
    assert!(help.contains("fast-tier capacity"), "{help}");
}

/// The CSV's cells by column name, one map per row.
fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

#[test]
fn sweep_with_a_device_fills_the_time_columns_and_resumes_only_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let (g, d) = setup(dir.path());
    let csv = dir.path().join("five.csv");
    let sweep = |extra: &[&str]| {
        let mut a = vec![
            "sweep",
            s(&g),
            "-b",
            "8,7",
            "-s",
            "checkpoint-all,remat-fast",
            "-o",
            s(&csv),
            "--no-lp-bound",
            "--jobs",
            "1",
        ];
        a.extend_from_slice(extra);
        remat(&a)
    };
    let o = sweep(&["--device", s(&d)]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["device"], "test");
        assert_eq!(r["device_fingerprint"].len(), 16);
        if r["cost"].is_empty() {
            // checkpoint-all does not fit 7 bytes: no plan, no time.
            assert!(r["step_seconds"].is_empty(), "{r:?}");
            continue;
        }
        let step: f64 = r["step_seconds"].parse().unwrap();
        if r["strategy"] == "remat-fast" && r["budget_bytes"] == "7" {
            // remat-fast on a device searches offloads too. At 7 B stage 2
            // must lose a (4 B; b and c are read or computed there):
            // recomputing it costs 1 s (10 s in all), offloading it copies
            // it out in stage 1 (4 B at 2 B/s + 0.5 s = 2.5 s against the
            // stage's 2 s of compute: 0.5 s stall) and back in stage 3
            // (4 B at 4 B/s + 0.5 s = 1.5 s, hidden by its 2 s): 9.5 s,
            // the 9 s of compute once each.
            assert_eq!(step, 9.5, "{r:?}");
            assert_eq!(r["cost"], "9", "{r:?}");
            assert_eq!(r["stall_seconds"], "0.5", "{r:?}");
            assert_eq!(
                (&r["bytes_to_slow"][..], &r["bytes_to_fast"][..]),
                ("4", "4")
            );
            assert_eq!(r["slow_peak_bytes"], "4");
            continue;
        }
        // Costs are seconds on this device, and these plans recompute or
        // stay put: step time = cost, no stall, nothing moved.
        let cost: f64 = r["cost"].parse().unwrap();
        assert_eq!(step, cost, "{r:?}");
        let over: f64 = r["step_overhead"].parse().unwrap();
        assert!((over - cost / 9.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r["stall_seconds"], "0", "{r:?}");
        assert_eq!(r["bytes_to_slow"], "0");
        assert_eq!(r["bytes_to_fast"], "0");
        assert_eq!(r["slow_peak_bytes"], "0");
    }
    // Same device: everything resumes.
    let o = sweep(&["--device", s(&d)]);
    assert!(
        text(&o).contains("0 new rows, 4 already there"),
        "{}",
        text(&o)
    );
    // No device, or another device: refused like a graph change.
    let o = sweep(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("timed on device 'test'") && err.contains("--fresh"),
        "{err}"
    );
    let d2 = dir.path().join("dev2.yaml");
    std::fs::write(
        &d2,
        std::fs::read_to_string(&d)
            .unwrap()
            .replace("to_fast: 4", "to_fast: 8"),
    )
    .unwrap();
    let o = sweep(&["--device", s(&d2)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--fresh"));
    // --fresh starts over on the new device; without a device the time
    // columns are empty.
    let o = sweep(&["--fresh"]);
    assert!(o.status.success(), "{}", text(&o));
    for r in csv_rows(&csv) {
        assert!(
            r["device"].is_empty() && r["step_seconds"].is_empty(),
            "{r:?}"
        );
    }
}

#[test]
fn csvs_from_before_the_time_columns_are_read_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let (g, _) = setup(dir.path());
    let csv = dir.path().join("five.csv");
    let args = [
        "sweep",
        s(&g),
        "-b",
        "8,7",
        "-s",
        "checkpoint-all",
        "-o",
        s(&csv),
        "--no-lp-bound",
    ];
    assert!(remat(&args).status.success());
    // Cut the CSV back to the eleven columns it had before --device.
    let old: String = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .map(|l| l.split(',').take(11).collect::<Vec<_>>().join(",") + "\n")
        .collect();
    assert!(
        old.starts_with("model,") && old.lines().next().unwrap().ends_with(",graph_fingerprint")
    );
    std::fs::write(&csv, &old).unwrap();
    let o = remat(&["report", s(&csv)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = remat(&["plot", s(&csv), "-o", s(&dir.path().join("f.svg"))]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        old,
        "reading rewrote it"
    );
    // A sweep without a device resumes its rows and upgrades the header.
    let o = remat(&args);
    assert!(
        text(&o).contains("0 new rows, 2 already there"),
        "{}",
        text(&o)
    );
    assert!(std::fs::read_to_string(&csv)
        .unwrap()
        .starts_with("model,strategy,budget_bytes,status,cost,overhead,peak_bytes,lp_bound,gap,solve_seconds,graph_fingerprint,device,device_fingerprint,step_seconds,step_overhead,stall_seconds,bytes_to_slow,bytes_to_fast,slow_peak_bytes\n"));
}

/// remat-fast without the device (which, given one, also offloads): the
/// recompute-only answer.
struct RecomputeOnly;

impl remat::strategies::Strategy for RecomputeOnly {
    fn name(&self) -> &'static str {
        "recompute-only"
    }
    fn describe(&self) -> &'static str {
        "test: remat-fast without the device"
    }
    fn solve(
        &self,
        g: &remat::Graph,
        budget: remat::Bytes,
        o: &remat::strategies::SolveOptions,
    ) -> Result<remat::strategies::Solution, remat::strategies::StrategyError> {
        let o = remat::strategies::SolveOptions {
            device: None,
            ..o.clone()
        };
        remat::strategies::by_name("remat-fast")
            .unwrap()
            .solve(g, budget, &o)
    }
}

/// A tiered strategy for the test (the real ones live on another branch):
/// from checkpoint-all, offload values across their longest idle window,
/// largest first, until the plan fits; then answer with whichever of that
/// and remat-fast's plan is faster on the device. So its max batch can only
/// be at least remat-fast's, and is larger wherever offloading is cheap.
struct TestOffload;

impl remat::strategies::Strategy for TestOffload {
    fn name(&self) -> &'static str {
        "test-offload"
    }
    fn describe(&self) -> &'static str {
        "test: offload across idle windows, else remat-fast"
    }
    fn solve(
        &self,
        g: &remat::Graph,
        budget: remat::Bytes,
        o: &remat::strategies::SolveOptions,
    ) -> Result<remat::strategies::Solution, remat::strategies::StrategyError> {
        use remat::schedule::{generate_plan, simulate_on, Schedule};
        use remat::NodeId;
        let d = o.device.as_deref().expect("test-offload needs a device");
        let timed = |sch: &Schedule| {
            let r = simulate_on(g, &generate_plan(g, sch).unwrap(), Some(d)).unwrap();
            (r.peak, r.timing.unwrap().step.get())
        };
        let fast = remat::strategies::by_name("remat-fast")
            .unwrap()
            .solve(g, budget, o)?;
        let mut sch = Schedule::checkpoint_all(g);
        let mut windows: Vec<(u64, usize, usize, usize)> = (0..g.len())
            .filter_map(|i| {
                let mut at = vec![i];
                at.extend(
                    (i + 1..g.len())
                        .filter(|&t| g.deps(NodeId::from(t)).iter().any(|d| d.idx() == i)),
                );
                let j = (0..at.len() - 1).max_by_key(|&j| at[j + 1] - at[j])?;
                (at[j + 1] > at[j] + 1)
                    .then(|| (g.memory(NodeId::from(i)).get(), i, at[j], at[j + 1] - 1))
            })
            .collect();
        windows.sort_by(|a, b| b.cmp(a));
        let mut tiered = None;
        for (_, i, out, fetch) in windows {
            sch.offload(i, out, fetch);
            let (peak, step) = timed(&sch);
            if peak <= budget {
                tiered = Some((sch.clone(), step));
                break;
            }
        }
        let fast_step = fast.schedule.as_ref().map(|s| timed(s).1);
        match (tiered, fast_step) {
            (Some((sch, step)), f) if f.is_none_or(|f| step < f) => {
                Ok(remat::strategies::Solution {
                    status: remat::strategies::Status::Feasible,
                    schedule: Some(sch),
                    lower_bound: None,
                    detail: None,
                    solver_peak: None,
                    trace: Vec::new(),
                    step_bound: None,
                })
            }
            _ => Ok(fast),
        }
    }
}

#[test]
fn max_batch_with_a_slow_tier_is_at_least_the_recompute_only_answer() {
    use remat::graph::{analysis, GraphFile};
    use remat::workflows::maxbatch::{self, CostRule, MaxBatchConfig};
    use remat::zoo::synthetic::linear_file;
    // A 12-layer chain and its gradients: every activation idles from its
    // forward use to its gradient, the pattern offloading is made for.
    let mut f: GraphFile = linear_file(12);
    for n in &mut f.nodes {
        n.memory *= 1000.0;
    }
    let g = remat::Graph::from_file(&f, "<test>").unwrap();
    // The fast tier holds checkpoint-all at batch 4; the link is fast
    // enough that an offload hides behind a few nodes' compute.
    let memory = analysis::checkpoint_all_peak(&g.at_batch(4));
    let d = remat::device::Device::parse(&format!(
        "name: t\ncompute: {{throughput: 1000}}\nfast: {{capacity: {}}}\n\
         slow: {{capacity: 1TB, to_slow: 1GB/s, to_fast: 1GB/s, latency: 0, engines: duplex, direct_read: none}}\n",
        memory.get()
    ))
    .unwrap();
    let d = std::sync::Arc::new(d);
    let run = |strats: Vec<Box<dyn remat::strategies::Strategy>>| {
        let mut c = MaxBatchConfig::new(memory);
        c.strategies = strats;
        c.quiet = true;
        c.jobs = 1;
        c.max_batch = 256;
        c.rule = CostRule::MaxSlowdown(1.25);
        c.opts.device = Some(d.clone());
        c.opts.time_limit = std::time::Duration::from_secs(5);
        maxbatch::run(&g, &c).unwrap()
    };
    let rows = run(vec![
        Box::new(RecomputeOnly),
        remat::strategies::by_name("remat-fast").unwrap(),
        Box::new(TestOffload),
        remat::strategies::by_name("offload-all").unwrap(),
        remat::strategies::by_name("mc-dla").unwrap(),
        remat::strategies::by_name("tiertrain").unwrap(),
    ]);
    let get = |name: &str| rows.iter().find(|r| r.strategy == name).unwrap();
    let (recompute, tiered) = (get("recompute-only"), get("test-offload"));
    assert!(recompute.max_batch >= 4, "{rows:?}");
    assert!(tiered.max_batch >= recompute.max_batch, "{rows:?}");
    // remat-fast on the device is at least its recompute-only self.
    assert!(
        get("remat-fast").max_batch >= recompute.max_batch,
        "{rows:?}"
    );
    // Here offloading hides behind compute, so the slow tier buys batch,
    // with the seed systems' policies too.
    assert!(tiered.max_batch > recompute.max_batch, "{rows:?}");
    for policy in ["offload-all", "tiertrain"] {
        assert!(get(policy).max_batch > recompute.max_batch, "{rows:?}");
    }
    // Every row's plan passes the simulator on the device, within the
    // memory and the slowdown bound, at the batch it reports.
    for r in &rows {
        assert_eq!(r.device.as_deref(), Some("t"));
        if r.max_batch == 0 {
            assert!(r.slowdown.is_none() && r.peak.is_none(), "{r:?}");
            continue;
        }
        let s: Box<dyn remat::strategies::Strategy> = match r.strategy.as_str() {
            "test-offload" => Box::new(TestOffload),
            "recompute-only" => Box::new(RecomputeOnly),
            n => remat::strategies::by_name(n).unwrap(),
        };
        let gb = g.at_batch(r.max_batch);
        let o = remat::strategies::SolveOptions {
            device: Some(d.clone()),
            ..Default::default()
        };
        let out = remat::solve::run(&gb, s.as_ref(), memory, &o).unwrap();
        let t = out.timing().expect("timed by the simulator");
        assert!(out.peak().unwrap() <= memory, "{r:?}");
        let slowdown = t.step.get() / d.all_fast_step(&gb).get();
        assert!(slowdown <= 1.25 + 1e-9, "{r:?}: {slowdown}");
        assert!(
            (slowdown - r.slowdown.unwrap()).abs() < 1e-6,
            "{r:?}: {slowdown}"
        );
    }
    eprintln!("{}", maxbatch::render(&rows));
}

#[test]
fn max_batch_on_the_command_line_takes_a_device_and_a_slowdown() {
    let dir = tempfile::tempdir().unwrap();
    let (g, d) = setup(dir.path());
    let o = remat(&[
        "max-batch",
        s(&g),
        "--device",
        s(&d),
        "--max-slowdown",
        "25%",
        "-s",
        "remat-fast",
        "--max-batch",
        "4",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("cost rule slowdown<=1.25, on device 'test' (step time against all-fast; memory is its fast-tier capacity)"),
        "{out}"
    );
    assert!(out.contains("slowdown"), "{out}");
    // Without a device: --memory is required, and --max-slowdown refused.
    let o = remat(&["max-batch", s(&g)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--memory is required without --device"));
    let o = remat(&[
        "max-batch",
        s(&g),
        "--memory",
        "8",
        "--max-slowdown",
        "1.25",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A 12-layer chain with every activation offloaded across its idle window
/// (checkpoint-all otherwise): the plan file, its graph and a device on
/// which copies take about as long as a layer's compute.
fn tiered_chain(dir: &Path, engines: &str) -> (PathBuf, PathBuf, PathBuf) {
    use remat::schedule::{generate_plan, simulate_on, PlanFile, Schedule};
    use remat::NodeId;
    let mut f = remat::zoo::synthetic::linear_file(12);
    for n in &mut f.nodes {
        n.memory *= 1000.0;
    }
    let g = remat::Graph::from_file(&f, "<test>").unwrap();
    let mut sch = Schedule::checkpoint_all(&g);
    for i in 0..g.len() {
        let mut at = vec![i];
        at.extend(
            (i + 1..g.len()).filter(|&t| g.deps(NodeId::from(t)).iter().any(|d| d.idx() == i)),
        );
        if let Some(j) = (0..at.len() - 1).max_by_key(|&j| at[j + 1] - at[j]) {
            if at[j + 1] > at[j] + 2 {
                sch.offload(i, at[j], at[j + 1] - 1);
            }
        }
    }
    let plan = generate_plan(&g, &sch).unwrap();
    let dev = dir.join(format!("chain-{engines}.yaml"));
    std::fs::write(
        &dev,
        format!(
            "name: chain-{engines}\ncompute: {{throughput: 1000}}\nfast: {{capacity: 10KB}}\n\
             slow: {{capacity: 1MB, to_slow: 1MB/s, to_fast: 2MB/s, latency: 0.1ms, engines: {engines}, direct_read: none}}\n"
        ),
    )
    .unwrap();
    let d = remat::device::Device::load(&dev).unwrap();
    let sim = simulate_on(&g, &plan, Some(&d)).unwrap();
    assert!(sim.timing.unwrap().copies > 10);
    let pf = PlanFile {
        model: g.name.clone(),
        graph_fingerprint: Some(g.fingerprint().to_string()),
        strategy: "hand-offload".into(),
        budget: Some(sim.peak.get()),
        fixed_memory: 0,
        cost: sim.cost,
        peak_memory: sim.peak.get(),
        statements: plan.to_file_statements(&g),
    };
    let gp = dir.join("chain.yaml");
    std::fs::write(&gp, g.to_file().to_yaml(None)).unwrap();
    let pp = dir.join("chain-plan.json");
    std::fs::write(&pp, serde_json::to_vec(&pf).unwrap()).unwrap();
    (gp, pp, dev)
}

#[test]
fn plot_plan_draws_a_transfer_plan_on_a_device_and_refuses_it_without() {
    let dir = tempfile::tempdir().unwrap();
    for engines in ["duplex", "shared", "synchronous"] {
        let (g, p, d) = tiered_chain(dir.path(), engines);
        let png = dir.path().join(format!("chain-{engines}.png"));
        let o = remat(&["plot-plan", s(&g), s(&p), "--device", s(&d), "-o", s(&png)]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("copies on chain-"), "{}", text(&o));
        assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
        if let Ok(keep) = std::env::var("REMAT_KEEP_PLOTS") {
            std::fs::copy(&png, Path::new(&keep).join(png.file_name().unwrap())).unwrap();
        }
        let svg = dir.path().join("chain.svg");
        let o = remat(&["plot-plan", s(&g), s(&p), "--device", s(&d), "-o", s(&svg)]);
        assert!(o.status.success(), "{}", text(&o));
        let svg = std::fs::read_to_string(&svg).unwrap();
        for want in [
            "fast tier",
            "slow tier",
            "budget",
            "compute",
            "copy to slow",
            "copy to fast",
        ] {
            assert!(svg.contains(want), "{engines}: no '{want}'");
        }
        // Without the device: one line, exit 2, saying what to pass.
        let o = remat(&["plot-plan", s(&g), s(&p), "-o", s(&png)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("chain-plan.json") && err.contains("pass --device"),
            "{err}"
        );
    }
}

#[test]
fn the_timeline_is_the_simulators_own_replay() {
    use remat::cli::load_plan;
    let dir = tempfile::tempdir().unwrap();
    for engines in ["duplex", "shared", "synchronous"] {
        let (gp, pp, dp) = tiered_chain(dir.path(), engines);
        let g = remat::Graph::load(&gp).unwrap();
        let (_, plan) = load_plan(&g, &gp, &pp).unwrap();
        let d = remat::device::Device::load(&dp).unwrap();
        let plain = remat::schedule::simulate_on(&g, &plan, Some(&d)).unwrap();
        let (report, tl) = remat::schedule::simulate_timeline(&g, &plan, &d).unwrap();
        // Recording changes no figure.
        assert_eq!(report, plain);
        let t = report.timing.unwrap();
        assert_eq!(tl.memory.len(), plan.statements.len());
        assert_eq!(tl.memory.iter().map(|m| m.fast).max().unwrap(), report.peak);
        assert_eq!(tl.memory.iter().map(|m| m.slow).max().unwrap(), t.slow_peak);
        assert_eq!(tl.computes.len(), report.computations);
        assert_eq!(tl.copies.len(), t.copies);
        let last = tl
            .computes
            .iter()
            .map(|c| c.end)
            .chain(tl.copies.iter().map(|c| c.end))
            .fold(remat::units::Seconds::ZERO, remat::units::Seconds::max);
        assert_eq!(last, t.step, "{engines}");
        // Compute spans never overlap, nor do copies on one lane.
        for w in tl.computes.windows(2) {
            assert!(w[0].end <= w[1].start, "{engines}");
        }
        let busy: f64 = tl.computes.iter().map(|c| (c.end - c.start).get()).sum();
        assert!((busy - t.compute.get()).abs() < 1e-9, "{engines}");
        for a in &tl.copies {
            for b in tl
                .copies
                .iter()
                .filter(|b| b.lane == a.lane && b.start > a.start)
            {
                assert!(a.end <= b.start, "{engines}: {a:?} {b:?}");
            }
        }
    }
}

#[test]
fn a_sweep_row_that_offloads_carries_bytes_moved_and_no_recompute_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (g, _, d) = tiered_chain(dir.path(), "duplex");
    let csv = dir.path().join("chain.csv");
    let o = remat(&[
        "sweep",
        s(&g),
        "-b",
        "100%",
        "-s",
        "offload-all",
        "-o",
        s(&csv),
        "--device",
        s(&d),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = csv_rows(&csv);
    let r = &rows[0];
    assert!(!r["cost"].is_empty(), "{r:?}");
    let moved: u64 = r["bytes_to_slow"].parse().unwrap();
    assert!(moved > 0, "{r:?}");
    assert_eq!(r["bytes_to_fast"], r["bytes_to_slow"], "{r:?}");
    assert!(r["slow_peak_bytes"].parse::<u64>().unwrap() > 0, "{r:?}");
    // The bound is on recompute-only plans: no gap against it.
    assert!(r["gap"].is_empty(), "{r:?}");
    let over: f64 = r["step_overhead"].parse().unwrap();
    assert!(over >= 1.0, "{r:?}");
}

/// With a device whose kernels read the slow tier directly, the smallest
/// budget is no longer the largest node with all its inputs: VGG16 at 30%
/// of its peak has no recompute-only plan (the cover program proves it),
/// but AutoTM's placement fits, and a recompute strategy says no-fit
/// (exit 1, pointing at the tiered strategies), not infeasible; remat-fast,
/// which on a device searches offloads from the policies' plans too, fits.
#[test]
fn direct_reads_fit_below_the_recompute_floor() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/vgg16.yaml");
    let dev = concat!(env!("CARGO_MANIFEST_DIR"), "/devices/optane-pmm.yaml");
    let o = remat(&[
        "solve",
        model,
        "-b",
        "30%",
        "-s",
        "autotm-sync",
        "--device",
        dev,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    // Optimal within AutoTM's model, not against the step bound: feasible.
    assert!(out.contains("status           feasible"), "{out}");
    assert!(out.contains("optimal among this strategy's plans"), "{out}");
    assert!(out.contains("step time"), "{out}");
    let o = remat(&[
        "solve",
        model,
        "-b",
        "30%",
        "-s",
        "remat-exact",
        "--device",
        dev,
        "--time-limit",
        "10",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("no-fit") && out.contains("tiered strateg"),
        "{out}"
    );
    let o = remat(&[
        "solve",
        model,
        "-b",
        "30%",
        "-s",
        "remat-fast",
        "--device",
        dev,
        "--time-limit",
        "10",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("offload search from autotm"), "{out}");
    assert!(out.contains("step time"), "{out}");
    // Without the device the same budget is provably infeasible.
    let o = remat(&["solve", model, "-b", "30%", "-s", "remat-fast"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
