//! Max-batch search: analytic answers on graphs where everything is linear
//! in the batch size.

mod common;

use common::{recompute_all_sim, Counting, NeverApplies, RecomputeAll};
use remat::graph::{analysis, Graph, GraphFile};
use remat::strategies::checkpoint_all::CheckpointAll;
use remat::units::Bytes;
use remat::workflows::maxbatch::{self, CostRule, MaxBatchConfig};
use remat::zoo::synthetic::{random_layered_file, RandomDag};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A random DAG whose file batch size is `batch` and whose memories are
/// multiples of it, so that `at_batch` scales every size exactly.
fn graph(batch: u32, fixed: u64) -> Graph {
    let mut f: GraphFile = random_layered_file(&RandomDag {
        nodes: 24,
        seed: 7,
        ..RandomDag::default()
    });
    f.batch_size = batch;
    f.fixed_memory = fixed as f64;
    for n in &mut f.nodes {
        n.memory *= batch as f64 * 1000.0;
    }
    Graph::from_file(&f, "<test>").unwrap()
}

fn config(memory: Bytes) -> MaxBatchConfig {
    let mut c = MaxBatchConfig::new(memory);
    c.strategies = vec![Box::new(CheckpointAll)];
    c.quiet = true;
    c.jobs = 2;
    c
}

#[test]
fn checkpoint_all_matches_the_closed_form() {
    for (file_batch, fixed, k) in [(1u32, 1_000_000u64, 37u64), (8, 5_000_000, 100), (4, 0, 1)] {
        let g = graph(file_batch, fixed);
        // Per-sample checkpoint-all activation peak.
        let act = analysis::checkpoint_all_peak(&g).get() - fixed;
        assert_eq!(act % file_batch as u64, 0);
        let per_sample = act / file_batch as u64;
        // Memory for k samples plus a bit less than one more.
        let memory = Bytes(fixed + k * per_sample + per_sample - 1);
        let expected = (memory.get() - fixed) / per_sample;
        assert_eq!(expected, k);
        let r = maxbatch::run(&g, &config(memory)).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].strategy, "checkpoint-all");
        assert_eq!(r[0].status, "found");
        assert_eq!(r[0].max_batch as u64, expected, "file batch {file_batch}");
        assert_eq!(r[0].peak, Some(Bytes(fixed + k * per_sample)));
        assert_eq!(r[0].overhead, Some(1.0));
        assert_eq!(r[0].ratio, Some(1.0));
    }
}

#[test]
fn too_little_memory_gives_zero_and_cost_rule_is_enforced() {
    let g = common::fan(3, 1000);
    let one = analysis::checkpoint_all_peak(&g);
    let r = maxbatch::run(&g, &config(Bytes(one.get() - 1))).unwrap();
    assert_eq!(r[0].max_batch, 0);
    assert_eq!((r[0].ratio, r[0].peak), (None, None));

    // Recompute-all costs far more than one extra forward pass, so the
    // default rule rejects it at every batch; a loose rule admits it and
    // its smaller peak fits more samples.
    let rc = recompute_all_sim(&g);
    let per_ckpt = one.get() - 1000;
    let per_rc = rc.peak.get() - 1000;
    assert_eq!((per_ckpt, per_rc), (301, 101));
    let bound = 2.0 * g.forward_cost() + g.backward_cost();
    assert!(rc.cost > bound, "{} <= {bound}", rc.cost);
    let memory = Bytes(1000 + 50 * per_ckpt);
    let mut cfg = config(memory);
    cfg.strategies = vec![
        Box::new(CheckpointAll),
        Box::new(RecomputeAll),
        Box::new(NeverApplies),
    ];
    let r = maxbatch::run(&g, &cfg).unwrap();
    let get = |s: &str| r.iter().find(|x| x.strategy == s).unwrap();
    assert_eq!(get("checkpoint-all").max_batch, 50);
    assert_eq!(get("test-recompute-all").max_batch, 0);
    assert_eq!(get("test-recompute-all").ratio, Some(0.0));
    assert_eq!(get("test-never-applies").status, "not-applicable");
    assert_eq!(get("test-never-applies").ratio, None);

    let overhead = rc.cost / g.total_cost();
    cfg.rule = CostRule::MaxOverhead(overhead * 1.0001);
    let r = maxbatch::run(&g, &cfg).unwrap();
    let get = |s: &str| r.iter().find(|x| x.strategy == s).unwrap();
    let want = (50 * per_ckpt) / per_rc;
    assert_eq!(want, 149);
    assert_eq!(get("test-recompute-all").max_batch as u64, want);
    assert!((get("test-recompute-all").ratio.unwrap() - want as f64 / 50.0).abs() < 1e-12);
    // Just below its overhead, it never qualifies.
    cfg.rule = CostRule::MaxOverhead(overhead * 0.9999);
    let r = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!(
        r.iter()
            .find(|x| x.strategy == "test-recompute-all")
            .unwrap()
            .max_batch,
        0
    );
}

#[test]
fn cap_is_reported() {
    let g = graph(1, 0);
    let mut cfg = config(Bytes(u64::MAX / 4));
    cfg.max_batch = 1000;
    let r = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!((r[0].max_batch, r[0].status.as_str()), (1000, "capped"));
}

#[test]
fn csv_rows_are_kept_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mb.csv");
    let g = graph(1, 1000);
    let per = analysis::checkpoint_all_peak(&g).get() - 1000;
    let calls = Arc::new(AtomicUsize::new(0));
    let mut cfg = config(Bytes(1000 + 20 * per));
    cfg.strategies = vec![Box::new(Counting {
        inner: CheckpointAll,
        calls: calls.clone(),
    })];
    cfg.output = Some(out.clone());
    let r = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!(r[0].max_batch, 20);
    let probes = calls.load(Ordering::SeqCst);
    // 1, 2, 4, 8, 16 fit; 32 fails; bisection tries 24, 20, 22, 21.
    // Batches whose smallest feasible budget exceeds the memory are
    // rejected without a solve, so at most 10 solves.
    assert!((6..=10).contains(&probes), "{probes} probes");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("model,strategy,memory_bytes,cost_rule,status,max_batch,ratio_to_checkpoint_all,overhead,peak_bytes,solve_seconds,device,slowdown,graph_fingerprint,device_fingerprint\n"));
    assert!(
        text.contains(&format!(
            ",checkpoint-all,{},one-extra-forward,found,20,1.0000,1.000000,{},",
            1000 + 20 * per,
            1000 + 20 * per
        )),
        "{text}"
    );
    // Re-running reuses the row: no solves.
    let r2 = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!(r2[0].max_batch, 20);
    assert_eq!(calls.load(Ordering::SeqCst), probes);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
    // The last row without its newline (an editor's save) is still a
    // whole row: reused, not cut as torn and searched again.
    std::fs::write(&out, text.trim_end_matches('\n')).unwrap();
    let r3 = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!(r3[0].max_batch, 20);
    assert_eq!(calls.load(Ordering::SeqCst), probes);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

#[test]
fn cli_max_batch() {
    let dir = tempfile::tempdir().unwrap();
    let g = graph(1, 1000);
    let model = dir.path().join("g.yaml");
    std::fs::write(&model, g.to_file().to_yaml(None)).unwrap();
    let per = analysis::checkpoint_all_peak(&g).get() - 1000;
    let mem = (1000 + 13 * per).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["max-batch", model.to_str().unwrap(), "--memory", &mem])
        .args(["--strategies", "checkpoint-all", "--quiet", "-o"])
        .arg(dir.path().join("mb.csv"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("checkpoint-all") && l.contains(" 13 ")),
        "{text}"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["max-batch", model.to_str().unwrap(), "--memory", "90%"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// Rows answer for the graph they were searched on, by content: a graph of
/// the same name with other sizes was answered with the old batch. A row
/// capped below a new, larger cap is searched again, further, and replaced.
#[test]
fn rows_are_reused_only_for_the_same_graph_and_a_cap_as_large() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mb.csv");
    let g = graph(1, 1000);
    let per = analysis::checkpoint_all_peak(&g).get() - 1000;
    let mut cfg = config(Bytes(1000 + 20 * per));
    cfg.output = Some(out.clone());
    assert_eq!(maxbatch::run(&g, &cfg).unwrap()[0].max_batch, 20);
    // The same name, every size doubled: half the batch fits.
    let g2 = graph(1, 1000);
    let mut f = g2.to_file();
    for n in &mut f.nodes {
        n.memory *= 2.0;
    }
    let g2 = Graph::from_file(&f, "<test>").unwrap();
    assert_eq!(g2.name, g.name);
    assert_eq!(maxbatch::run(&g2, &cfg).unwrap()[0].max_batch, 10);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.contains(&g.fingerprint().to_string()) && text.contains(&g2.fingerprint().to_string())
    );
    // Capped at 8, then searched again with room for more.
    let capped = dir.path().join("cap.csv");
    cfg.output = Some(capped.clone());
    cfg.max_batch = 8;
    let r = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!((r[0].status.as_str(), r[0].max_batch), ("capped", 8));
    cfg.max_batch = 64;
    let r = maxbatch::run(&g, &cfg).unwrap();
    assert_eq!((r[0].status.as_str(), r[0].max_batch), ("found", 20));
    let text = std::fs::read_to_string(&capped).unwrap();
    assert_eq!(
        text.lines().count(),
        2,
        "the capped row is replaced: {text}"
    );
}

/// Two runs into one CSV: the second is refused while the first holds it
/// (each rewrites the file whole at its end, so the last one's rows won).
#[test]
fn a_csv_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mb.csv");
    let g = graph(1, 1000);
    let mut cfg = config(Bytes(1_000_000));
    cfg.output = Some(out.clone());
    let held = remat::workflows::resultlog::RunLock::acquire(&out).unwrap();
    let e = maxbatch::run(&g, &cfg).unwrap_err();
    assert!(
        e.to_string().contains("another run is writing to it"),
        "{e}"
    );
    drop(held);
    assert!(maxbatch::run(&g, &cfg).is_ok());
    // The lock file goes with the run.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["mb.csv".to_string()]);
}

/// On a device, a step-time rule is not monotone in the batch: a copy's
/// latency does not grow with it, so offload-all is too slow at batch 1
/// and within the rule at larger batches (vgg16 on gh200 in 16 GB: the
/// search said 0 where batch 272 passes). The answer is the largest
/// allowed batch, checked here against every batch up to the memory limit.
#[test]
fn a_device_search_goes_past_small_batches_that_are_too_slow() {
    use remat::device::Device;
    use remat::solve;
    use remat::strategies::{self, SolveOptions};
    // Costs are seconds; copies of a value of b x 4 bytes take b/2 s plus
    // 10 s of latency, so they stall small batches and hide in large ones.
    let dev = Device::parse(
        "name: laggy\ncompute: {cost_is_seconds: true}\nfast: {capacity: 1000000}\n\
         slow: {capacity: 1000000, to_slow: 8, to_fast: 8, latency: 10, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    let g = Graph::from_file(
        &GraphFile::parse(
            "name: chain3\ngraph: forward\nnodes:\n\
             - {name: f0, cost: 1, memory: 4, saves: [self]}\n\
             - {name: f1, cost: 1, memory: 2, deps: [f0], saves: [self]}\n\
             - {name: f2, cost: 1, memory: 2, deps: [f1], saves: [self]}\n\
             - {name: loss, cost: 1, memory: 1, deps: [f2]}\n",
        )
        .unwrap(),
        "chain3.yaml",
    )
    .unwrap();
    let memory = Bytes(1000);
    let rule = CostRule::MaxSlowdown(1.25);
    let opts = SolveOptions {
        device: Some(Arc::new(dev.clone())),
        ..SolveOptions::default()
    };
    let offload = strategies::by_name("offload-all").unwrap();
    // Every batch, by brute force, up to the first whose plan does not fit.
    let mut allowed = Vec::new();
    for b in 1u32.. {
        let gb = g.at_batch(b);
        let Ok(out) = solve::run(&gb, offload.as_ref(), memory, &opts) else {
            break;
        };
        let Some(t) = out.timing() else { break };
        if t.step.get() <= rule.time_bound(&gb, &dev).get() * (1.0 + 1e-9) {
            allowed.push(b);
        }
    }
    assert!(
        !allowed.contains(&1),
        "batch 1 must be too slow: {allowed:?}"
    );
    let want = *allowed.last().expect("some batch is allowed");
    assert!(want > 1);

    let mut cfg = config(memory);
    cfg.strategies = vec![offload];
    cfg.rule = rule;
    cfg.opts = opts;
    let r = maxbatch::run(&g, &cfg).unwrap();
    let got = r.iter().find(|x| x.strategy == "offload-all").unwrap();
    assert_eq!((got.status.as_str(), got.max_batch), ("found", want));
    assert!(got.slowdown.unwrap() <= 1.25 + 1e-9, "{:?}", got.slowdown);
}

/// Finds nothing and says so at once, as a strategy does when no plan is
/// within its reach whatever the time.
struct GivesUp;

impl remat::strategies::Strategy for GivesUp {
    fn name(&self) -> &'static str {
        "test-gives-up"
    }
    fn describe(&self) -> &'static str {
        "test: no plan, at once"
    }
    fn solve(
        &self,
        _: &Graph,
        _: Bytes,
        _: &remat::strategies::SolveOptions,
    ) -> Result<remat::strategies::Solution, remat::strategies::StrategyError> {
        Ok(remat::strategies::Solution {
            status: remat::strategies::Status::NoSolution,
            ..remat::strategies::Solution::infeasible("test: no plan")
        })
    }
}

/// A solve that ends with no plan long before its limit did not run out
/// of time: the answer is 0, not "at least 0, a longer --time-limit may
/// find more" (a tester's f2 at 74 B, whose plan was past the cost rule).
#[test]
fn a_solve_that_gives_up_early_is_not_a_time_limit() {
    let g = graph(1, 0);
    // Below batch 1's checkpoint-all peak, so that the strategy decides.
    let memory = Bytes(analysis::checkpoint_all_peak(&g).get() - 1);
    let mut c = config(memory);
    c.strategies = vec![Box::new(GivesUp)];
    let r = maxbatch::run(&g, &c).unwrap();
    let r = r.iter().find(|r| r.strategy == "test-gives-up").unwrap();
    assert_eq!(r.status, "found");
    assert_eq!(r.max_batch, 0);
}
