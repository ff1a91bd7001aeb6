//! Sweeps: rows, resume after a kill, warm starts, plans, plots, the CLI.

mod common;

use common::{fan, recompute_all_sim, HalfBound, NeverApplies, RecomputeAll, WarmEcho};
use remat::graph::{analysis, Graph};
use remat::schedule::{simulate, Plan, PlanFile};
use remat::strategies::checkpoint_all::CheckpointAll;
use remat::strategies::{SolveOptions, StrategyError};
use remat::units::Bytes;
use remat::workflows::budgets::BudgetList;
use remat::workflows::sweep::{self, Row, SweepConfig};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// The shape of the hook the LP relaxation plugs into: a plain function.
fn three_quarters_bound(
    g: &Graph,
    _: Bytes,
    _: &SolveOptions,
) -> Result<Option<f64>, StrategyError> {
    Ok(Some(g.total_cost() * 0.75))
}

fn budgets(g: &Graph) -> Vec<Bytes> {
    // Five budgets from the smallest feasible to the checkpoint-all peak,
    // plus one below the smallest feasible.
    let mut b = BudgetList::parse("budgets: [{from: min, to: 100%, steps: 5}, 2]", "t")
        .unwrap()
        .resolve(g);
    b.sort();
    b
}

fn config(path: &Path, g: &Graph) -> SweepConfig {
    let mut c = SweepConfig::new(budgets(g), path.to_path_buf());
    c.strategies = vec![
        Box::new(CheckpointAll),
        Box::new(RecomputeAll),
        Box::new(NeverApplies),
        Box::new(HalfBound),
    ];
    c.jobs = 2;
    c.quiet = true;
    c.zero_timings = true;
    c.lp_bound = Some(Arc::new(three_quarters_bound));
    c
}

fn field<'a>(rows: &'a [Vec<String>], strategy: &str, budget: Bytes, col: &str) -> &'a str {
    let c = sweep::HEADER.iter().position(|h| *h == col).unwrap();
    let r = rows
        .iter()
        .find(|r| r[1] == strategy && r[2] == budget.to_string())
        .unwrap_or_else(|| panic!("no row {strategy} @ {budget}"));
    &r[c]
}

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn rows_have_simulated_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let peak = analysis::checkpoint_all_peak(&g);
    let min = analysis::min_feasible_budget(&g);
    assert_eq!((peak, min), (Bytes(301), Bytes(101)));
    let b = budgets(&g);
    let want: Vec<Bytes> = [2, 101, 151, 201, 251, 301]
        .into_iter()
        .map(Bytes)
        .collect();
    assert_eq!(b, want);
    let cfg = config(&dir.path().join("a.csv"), &g);
    let s = sweep::run(&g, &cfg).unwrap();
    assert!(s.failures.is_empty());
    assert_eq!((s.solved, s.resumed, s.rows.len()), (24, 0, 24));

    let text = std::fs::read_to_string(&cfg.output).unwrap();
    let rows = csv_rows(&text);
    // Canonical order: strategies in registry order, then as named;
    // budgets descending.
    let order: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[1].as_str(), r[2].as_str()))
        .collect();
    let mut expect = Vec::new();
    for st in [
        "checkpoint-all",
        "test-half-bound",
        "test-never-applies",
        "test-recompute-all",
    ] {
        for bb in ["301", "251", "201", "151", "101", "2"] {
            expect.push((st, bb));
        }
    }
    assert_eq!(order, expect);
    // The bound column is the higher of the hook's (5.25 here) and the
    // graph bound: one pass (7) at the full peak; at 251 one of the three
    // 100-byte values must be computed twice, so 8, which is the optimum
    // (the fractional eviction bound alone gave 7.5).
    // Every row carries the fingerprint of the graph it was solved on.
    let fp = g.fingerprint();
    assert!(text.starts_with(&format!(
        "model,strategy,budget_bytes,status,cost,overhead,peak_bytes,lp_bound,gap,solve_seconds,graph_fingerprint,\
         device,device_fingerprint,step_seconds,step_overhead,stall_seconds,bytes_to_slow,bytes_to_fast,slow_peak_bytes\n\
         fan3,checkpoint-all,301,optimal,7,1.000000,301,7,0.000000,0.000,{fp},,,,,,,,\n\
         fan3,checkpoint-all,251,no-fit,,,,8,,0.000,{fp},,,,,,,,\n"
    )), "{text}");
    // Below the smallest feasible budget, no strategy is asked.
    for st in [
        "checkpoint-all",
        "test-recompute-all",
        "test-never-applies",
        "test-half-bound",
    ] {
        assert_eq!(field(&rows, st, Bytes(2), "status"), "infeasible");
        assert_eq!(field(&rows, st, Bytes(2), "lp_bound"), "");
        assert_eq!(field(&rows, st, Bytes(2), "solve_seconds"), "");
    }
    // Recompute-all: each output's stage recomputes x and its branch.
    let rc = recompute_all_sim(&g);
    assert_eq!((rc.cost, rc.peak), (16.0, Bytes(101)));
    // Its gap is to the graph bound, which rises as the budget falls: the
    // optima (remat-exact) are 8, 9, 10 and 12 at 251, 201, 151 and 101;
    // the bound meets the first three and is 11 at 101.
    for &bb in &b[1..] {
        let gap = match bb.get() {
            301 => "0.562500",
            251 => "0.500000",
            201 => "0.437500",
            151 => "0.375000",
            101 => "0.312500",
            other => panic!("unexpected budget {other}"),
        };
        let row = |c| field(&rows, "test-recompute-all", bb, c);
        assert_eq!(
            [
                row("status"),
                row("cost"),
                row("overhead"),
                row("peak_bytes"),
                row("gap")
            ],
            ["feasible", "16", "2.285714", "101", gap]
        );
        assert_eq!(
            field(&rows, "test-never-applies", bb, "status"),
            "not-applicable"
        );
        assert_eq!(field(&rows, "test-half-bound", bb, "status"), "bound");
        // Its 3.5 holds for plans that cost whole units: so does 4.
        assert_eq!(field(&rows, "test-half-bound", bb, "lp_bound"), "4");
        assert_eq!(field(&rows, "test-half-bound", bb, "cost"), "");
    }
}

#[test]
fn killed_and_resumed_sweep_matches_uninterrupted() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let full = dir.path().join("full.csv");
    sweep::run(&g, &config(&full, &g)).unwrap();
    let expected = std::fs::read(&full).unwrap();

    // Killed after 7 pairs, mid-way through writing an 8th row.
    let part = dir.path().join("part.csv");
    let mut cfg = config(&part, &g);
    cfg.stop_after = Some(7);
    let s = sweep::run(&g, &cfg).unwrap();
    assert_eq!(s.solved, 7);
    let mut text = std::fs::read_to_string(&part).unwrap();
    assert_eq!(text.lines().count(), 8);
    text.push_str("fan3,test-recompute-all,25");
    std::fs::write(&part, &text).unwrap();
    let s = sweep::run(&g, &config(&part, &g)).unwrap();
    assert_eq!((s.solved, s.resumed), (17, 7));
    assert_eq!(
        String::from_utf8(std::fs::read(&part).unwrap()).unwrap(),
        String::from_utf8(expected.clone()).unwrap()
    );

    // Rows in any order, some missing, a torn tail: the same file again.
    let full_text = String::from_utf8(expected.clone()).unwrap();
    let lines: Vec<&str> = full_text.lines().collect();
    let mut shuffled = vec![lines[0].to_string()];
    shuffled.extend(lines[1..].iter().rev().step_by(2).map(|l| l.to_string()));
    let mut text = shuffled.join("\n");
    text.push('\n');
    text.push_str(&lines[2][..10]);
    let third = dir.path().join("third.csv");
    std::fs::write(&third, text).unwrap();
    let s = sweep::run(&g, &config(&third, &g)).unwrap();
    assert_eq!((s.solved, s.resumed), (12, 12));
    assert_eq!(std::fs::read(&third).unwrap(), expected);

    // A finished sweep re-run solves nothing and changes nothing.
    let s = sweep::run(&g, &config(&full, &g)).unwrap();
    assert_eq!((s.solved, s.resumed), (0, 24));
    assert_eq!(std::fs::read(&full).unwrap(), expected);
}

/// A CSV whose last row is whole but has no newline (saved by an editor,
/// written by a script) keeps that row on resume: it was cut as torn, and
/// its pair solved again.
#[test]
fn a_whole_last_row_without_its_newline_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let full = dir.path().join("full.csv");
    sweep::run(&g, &config(&full, &g)).unwrap();
    let expected = std::fs::read_to_string(&full).unwrap();
    let lines: Vec<&str> = expected.lines().collect();
    // The first nine lines, the last of them without its newline.
    let part = dir.path().join("part.csv");
    std::fs::write(&part, lines[..9].join("\n")).unwrap();
    let s = sweep::run(&g, &config(&part, &g)).unwrap();
    assert_eq!((s.solved, s.resumed), (16, 8));
    assert_eq!(std::fs::read_to_string(&part).unwrap(), expected);
    // A tail with every field but a value no sweep writes is torn.
    let mut fields: Vec<&str> = lines[8].split(',').collect();
    assert_eq!(fields.len(), sweep::HEADER.len());
    fields[3] = "optim";
    let torn = fields.join(",");
    std::fs::write(&part, format!("{}\n{torn}", lines[..8].join("\n"))).unwrap();
    let s = sweep::run(&g, &config(&part, &g)).unwrap();
    assert_eq!((s.solved, s.resumed), (17, 7));
    assert_eq!(std::fs::read_to_string(&part).unwrap(), expected);
}

#[test]
fn warm_start_is_the_cheapest_known_plan_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let b = budgets(&g);
    let mut cfg = config(&dir.path().join("w.csv"), &g);
    cfg.strategies = vec![
        Box::new(CheckpointAll),
        Box::new(RecomputeAll),
        Box::new(WarmEcho),
    ];
    cfg.jobs = 1;
    let s = sweep::run(&g, &cfg).unwrap();
    let get = |st: &str, bb: Bytes| -> &Row {
        s.rows
            .iter()
            .find(|r| r.strategy == st && r.budget == bb)
            .unwrap()
    };
    let rc = recompute_all_sim(&g);
    // At the checkpoint-all peak the cheapest plan that fits is
    // checkpoint-all's; below it, only recompute-all's fits.
    assert_eq!(get("test-warm-echo", b[5]).cost, Some(7.0));
    // ... and meets the every-node-once bound: optimal, as a heuristic's
    // plan within 0.01% of its bound is.
    assert_eq!(get("test-warm-echo", b[5]).status, "optimal");
    for &bb in &b[1..5] {
        assert_eq!(get("test-warm-echo", bb).cost, Some(rc.cost));
    }
    assert_eq!(get("test-warm-echo", Bytes(2)).status, "infeasible");
}

#[test]
fn plans_dir_holds_simulated_plans() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let mut cfg = config(&dir.path().join("p.csv"), &g);
    cfg.plans_dir = Some(dir.path().join("plans"));
    let s = sweep::run(&g, &cfg).unwrap();
    let with_plan: Vec<&Row> = s.rows.iter().filter(|r| r.feasible()).collect();
    assert_eq!(with_plan.len(), 1 + 5);
    for r in with_plan {
        let p = dir
            .path()
            .join("plans")
            .join(format!("{}-{}.json", r.strategy, r.budget));
        let f: PlanFile = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let plan = Plan::from_file_statements(&g, &f.statements).unwrap();
        let sim = simulate(&g, &plan).unwrap();
        assert_eq!(Some(sim.cost), r.cost);
        assert_eq!(Some(sim.peak), r.peak);
        assert_eq!(f.budget, Some(r.budget.get()));
    }
}

#[test]
fn plots_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    // Set REMAT_TEST_PLOT_DIR to keep the plots for a look.
    let keep = std::env::var_os("REMAT_TEST_PLOT_DIR").map(std::path::PathBuf::from);
    let dir = keep.as_deref().unwrap_or(tmp.path());
    let g = fan(3, 0);
    let cfg = config(&tmp.path().join("p.csv"), &g);
    let s = sweep::run(&g, &cfg).unwrap();
    let svg = dir.join("p.svg");
    remat::reports::plot::plot_sweep(&s.rows, "fan3", &svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    for needle in [
        "fan3: compute overhead vs memory budget",
        "memory budget (bytes)",
        "checkpoint-all",
        "test-recompute-all",
        "lower bound: no plan below",
        "not applicable:",
        "test-never-applies",
    ] {
        assert!(text.contains(needle), "missing '{needle}'");
    }
    let png = dir.join("p.png");
    remat::reports::plot::plot_sweep(&s.rows, "fan3", &png).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    assert!(remat::reports::plot::plot_sweep(&s.rows, "other", &png).is_err());
    assert!(remat::reports::plot::plot_sweep(&s.rows, "fan3", &dir.join("p.gif")).is_err());

    // Figure 1: the recompute-all plan recomputes; the trace ends at the
    // fixed memory and peaks at the simulated peak.
    let sch = common::recompute_all_schedule(&g);
    let plan = remat::schedule::generate_plan(&g, &sch).unwrap();
    let out = dir.join("mem.svg");
    let budget = analysis::min_feasible_budget(&g);
    let trace = remat::reports::plot::plot_plan(&g, &plan, Some(budget), "test", &out).unwrap();
    remat::reports::plot::plot_plan(&g, &plan, Some(budget), "test", &dir.join("mem.png")).unwrap();
    let sim = simulate(&g, &plan).unwrap();
    assert_eq!(trace.live.iter().copied().max(), Some(sim.peak));
    assert_eq!(trace.recomputations.len(), sim.computations - g.len());
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains(&format!("recomputation ({})", sim.computations - g.len())));
}

fn remat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_remat"))
}

#[test]
fn cli_sweep_uses_the_budget_file_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("models")).unwrap();
    std::fs::create_dir_all(root.join("budgets")).unwrap();
    let yaml = remat::zoo::synthetic::linear_file(4).to_yaml(None);
    std::fs::write(root.join("models/lin.yaml"), yaml).unwrap();
    std::fs::write(
        root.join("budgets/lin.yaml"),
        "model: linear4\nbudgets: [100%, 90%, {from: min, to: 100%, steps: 3}]\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut c = remat();
        c.current_dir(root).args([
            "sweep",
            "models/lin.yaml",
            "--strategies",
            "checkpoint-all",
            "-o",
            "results/lin.csv",
            "--jobs",
            "1",
            "--quiet",
        ]);
        c.args(extra);
        c.output().unwrap()
    };
    let out = run(&["--plot", "results/lin.svg"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(root.join("results/lin.csv")).unwrap();
    // linear(4): checkpoint-all peak 6, min budget 3: budgets 6, 5.4→6, 3, 4.5→5.
    let budgets: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    assert_eq!(budgets, ["6", "5", "3"]);
    assert!(root.join("results/lin.svg").is_file());
    let again = run(&[]);
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(root.join("results/lin.csv")).unwrap(),
        text
    );

    // Bad input: exit code 2 and a message naming the file.
    std::fs::write(root.join("bad.yaml"), "budgets: [90%, 12XB]\n").unwrap();
    let out = run(&["--budgets", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml: budgets entry 2"), "{err}");
    let out = remat()
        .current_dir(root)
        .args([
            "sweep",
            "models/lin.yaml",
            "--strategies",
            "nope",
            "-o",
            "x.csv",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A CSV of another kind is not appended to.
    std::fs::write(root.join("other.csv"), "a,b\n1,2\n").unwrap();
    let out = remat()
        .current_dir(root)
        .args(["sweep", "models/lin.yaml", "--quiet", "-o", "other.csv"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(root.join("other.csv")).unwrap(),
        "a,b\n1,2\n"
    );

    // Report and re-plot from the CSV.
    let out = remat()
        .current_dir(root)
        .args(["report", "results/lin.csv"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let rep = String::from_utf8_lossy(&out.stdout);
    assert!(rep.contains("## linear4 (3 budgets)"), "{rep}");
    assert!(rep.contains("| checkpoint-all | 1/3 | 6 B |"), "{rep}");
    let out = remat()
        .current_dir(root)
        .args(["plot", "results/lin.csv", "-o", "results/lin.png"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(root.join("results/lin.png").is_file());
}

#[test]
fn csvs_from_before_fingerprints_are_read_but_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let csv = dir.path().join("old.csv");
    std::fs::write(
        &csv,
        "model,strategy,budget_bytes,status,cost,overhead,peak_bytes,lp_bound,gap,solve_seconds\n\
         fan3,checkpoint-all,301,optimal,7,1.000000,301,7,0.000000,0.000\n\
         other,checkpoint-all,5,optimal,7,1.000000,5,7,0.000000,0.000\n",
    )
    .unwrap();
    let rows = sweep::read_csv(&csv).unwrap();
    assert_eq!((rows.len(), rows[0].graph), (2, None));
    let mut cfg = config(&csv, &g);
    let e = sweep::run(&g, &cfg).err().unwrap();
    assert!(e.to_string().contains("pass --fresh"), "{e}");
    cfg.fresh = true;
    let s = sweep::run(&g, &cfg).unwrap();
    assert!(s
        .rows
        .iter()
        .any(|r| r.model == "other" && r.graph.is_none()));
    assert!(s
        .rows
        .iter()
        .filter(|r| r.model == "fan3")
        .all(|r| r.graph == Some(g.fingerprint())));
}

/// Rows solved with `--no-recompute` answer another question (offload
/// only): they carry their own label, so a re-run with or without the flag
/// does not resume the other's rows (it said "1 of 1 pairs already done"
/// and kept the joint row).
#[test]
fn rows_without_recomputation_are_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.csv");
    let g = fan(4, 0);
    let dev = remat::device::Device::parse(
        "name: d\ncompute: {cost_is_seconds: true}\nfast: {capacity: 1000}\n\
         slow: {capacity: 1000, to_slow: 100, to_fast: 100, latency: 0, engines: duplex, direct_read: none}\n",
    )
    .unwrap();
    let mut cfg = SweepConfig::new(vec![analysis::checkpoint_all_peak(&g)], out.clone());
    cfg.strategies = vec![remat::strategies::by_name("remat-tiered").unwrap()];
    cfg.quiet = true;
    cfg.opts.device = Some(Arc::new(dev));
    cfg.opts.time_limit = std::time::Duration::from_secs(2);
    sweep::run(&g, &cfg).unwrap();
    cfg.opts.no_recompute = true;
    let s = sweep::run(&g, &cfg).unwrap();
    assert!(
        s.rows
            .iter()
            .any(|r| r.strategy == "remat-tiered+no-recompute"),
        "{:?}",
        s.rows
    );
    let rows = sweep::read_csv(&out).unwrap();
    let mut names: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
    names.sort();
    assert_eq!(names, ["remat-tiered", "remat-tiered+no-recompute"]);
}

/// Takes its whole limit, as an exact strategy that cannot prove its plan.
struct UsesItsLimit;

impl remat::strategies::Strategy for UsesItsLimit {
    fn name(&self) -> &'static str {
        "test-uses-its-limit"
    }
    fn describe(&self) -> &'static str {
        "test: checkpoint-all after the whole time limit"
    }
    fn solve(
        &self,
        g: &Graph,
        b: Bytes,
        o: &SolveOptions,
    ) -> Result<remat::strategies::Solution, StrategyError> {
        std::thread::sleep(o.time_limit);
        remat::strategies::Strategy::solve(&CheckpointAll, g, b, o)
    }
}

/// The shared bounds are part of a pair's time: the LP used to get a full
/// limit of its own after the solve, so a pair took up to twice its limit
/// (random-layered-n250 at 80% with 5 s: 11.2 s). Now it gets what the
/// pair's limit leaves, and nothing after a strategy that took it all;
/// the budget's other pair, which leaves time, computes it.
#[test]
fn the_bounds_run_within_the_pairs_limit() {
    let dir = tempfile::tempdir().unwrap();
    let g = fan(3, 0);
    let limit = std::time::Duration::from_millis(400);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut cfg = SweepConfig::new(vec![Bytes(251)], dir.path().join("t.csv"));
    cfg.strategies = vec![Box::new(UsesItsLimit), Box::new(CheckpointAll)];
    cfg.jobs = 1;
    cfg.quiet = true;
    cfg.opts.time_limit = limit;
    cfg.lp_bound = Some(Arc::new(move |g: &Graph, _: Bytes, o: &SolveOptions| {
        log.lock().unwrap().push(o.time_limit);
        Ok(Some(g.total_cost() * 0.75))
    }));
    let s = sweep::run(&g, &cfg).unwrap();
    assert_eq!(s.solved, 2);
    let seen = seen.lock().unwrap().clone();
    // Once for the budget, by checkpoint-all's pair, within its limit.
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0] < limit, "{seen:?}");
    // The pair that used its limit still has the graph's bound (here the
    // cover program's, above the hook's) in the column.
    let rows = csv_rows(&std::fs::read_to_string(dir.path().join("t.csv")).unwrap());
    for s in ["checkpoint-all", "test-uses-its-limit"] {
        assert_eq!(field(&rows, s, Bytes(251), "lp_bound"), "8", "{s}");
    }
}

/// A plan that fits a budget fits every larger one, so a sweep's cost
/// never rises with the budget: at 74 B the file's order is optimal at 323
/// on tests/data/order/f2, and the plan found at 73 B (in another order,
/// 251) is cheaper; the 74 B row and its plan file take it, without the
/// file order's bound, which lies above it.
#[test]
fn a_larger_budget_takes_a_cheaper_plan_found_at_a_smaller_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let g = Graph::load(&root.join("tests/data/order/f2.yaml")).unwrap();
    let mut cfg = SweepConfig::new(vec![Bytes(73), Bytes(74)], dir.path().join("f2.csv"));
    cfg.strategies = sweep::select_strategies("remat-fast").unwrap();
    cfg.quiet = true;
    cfg.plans_dir = Some(dir.path().join("plans"));
    let summary = sweep::run(&g, &cfg).unwrap();
    assert_eq!(summary.took_smaller, 1);
    let rows = summary.rows;
    let at = |b: u64| rows.iter().find(|r| r.budget == Bytes(b)).unwrap();
    let (small, large) = (at(73), at(74));
    let cheaper = small.cost.unwrap();
    assert!(cheaper < 323.0, "{small:?}");
    assert_eq!(large.cost, Some(cheaper));
    assert_eq!(large.status, "feasible");
    assert_eq!(large.lp_bound, None);
    assert!(large.peak.unwrap() <= Bytes(73));
    let p = dir.path().join("plans/remat-fast-74.json");
    let f: PlanFile = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(f.budget, Some(74));
    let sim = simulate(&g, &Plan::from_file_statements(&g, &f.statements).unwrap()).unwrap();
    assert_eq!(Some(sim.cost), large.cost);
    assert_eq!(Some(sim.peak), large.peak);
    // A second run finds every pair done and changes nothing.
    let again = sweep::run(&g, &cfg).unwrap().rows;
    assert_eq!(again, rows);
}

/// A heuristic's `no-fit` at a budget where its own plan at a smaller one
/// fits is not the sweep's last word: dtr-greedy finds no plan for
/// ResNet-50 at 25% of its peak and one at 20%, and the 25% row (with its
/// plan file) takes that one. It read `no-fit` where the sweep held a plan
/// that fits.
#[test]
fn a_no_fit_row_takes_a_plan_found_at_a_smaller_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let g = Graph::load(&root.join("models/resnet50.yaml")).unwrap();
    let peak = analysis::checkpoint_all_peak(&g);
    let (b20, b25) = (peak.scale_ceil(20, 100), peak.scale_ceil(25, 100));
    let mut cfg = SweepConfig::new(vec![b20, b25], dir.path().join("r.csv"));
    cfg.strategies = sweep::select_strategies("dtr-greedy").unwrap();
    cfg.quiet = true;
    cfg.plans_dir = Some(dir.path().join("plans"));
    let summary = sweep::run(&g, &cfg).unwrap();
    let rows = summary.rows;
    let at = |b: Bytes| rows.iter().find(|r| r.budget == b).unwrap();
    let (small, large) = (at(b20), at(b25));
    assert_eq!(small.status, "feasible", "{small:?}");
    assert_eq!(summary.took_smaller, 1, "{rows:?}");
    assert_eq!(large.status, "feasible");
    assert_eq!(large.cost, small.cost);
    assert!(large.peak.unwrap() <= b20);
    let p = dir
        .path()
        .join(format!("plans/dtr-greedy-{}.json", b25.get()));
    let f: PlanFile = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let sim = simulate(&g, &Plan::from_file_statements(&g, &f.statements).unwrap()).unwrap();
    assert_eq!(Some(sim.cost), large.cost);
}

/// A row's status agrees with its own gap: dtr-greedy's plan for the
/// tiny MLP of docs/format.md at 83% of its peak is the one remat-fast
/// proves optimal, and the shared bound proves it too, so its row is
/// `optimal` (it read `feasible` beside a gap of 0). DTR's own bound is
/// 12.6% below it.
#[test]
fn a_plan_the_rows_bound_proves_optimal_is_optimal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp.yaml");
    std::fs::write(
        &path,
        "name: tiny-mlp\ngraph: forward\ncost_unit: flop\nfixed_memory: 100000\nnodes:
  - {name: input, cost: 0, memory: 100352, requires_grad: false}
  - {name: fc1, cost: 25690112, memory: 131072, deps: [input], saves: [input]}
  - {name: relu1, cost: 32768, memory: 131072, deps: [fc1], saves: [self]}
  - {name: fc2, cost: 33554432, memory: 131072, deps: [relu1], saves: [relu1]}
  - {name: relu2, cost: 32768, memory: 131072, deps: [fc2], saves: [self]}
  - {name: fc3, cost: 327680, memory: 1280, deps: [relu2], saves: [relu2]}
  - {name: loss, cost: 1280, memory: 4, deps: [fc3]}\n",
    )
    .unwrap();
    let g = Graph::load(&path).unwrap();
    let mut cfg = SweepConfig::new(vec![Bytes(493_724)], dir.path().join("m.csv"));
    cfg.strategies = sweep::select_strategies("dtr-greedy,remat-fast").unwrap();
    cfg.quiet = true;
    let rows = sweep::run(&g, &cfg).unwrap().rows;
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.cost, Some(204_637_440.0), "{r:?}");
        assert!(r.gap.unwrap() <= 1e-4, "{r:?}");
        assert_eq!(r.status, "optimal", "{r:?}");
    }
}

/// With `--plans`, a row takes a smaller budget's plan only when that
/// plan's file replays to that row's figures: here the file at 73 B was
/// left by another run (the plan at 80 B, under 73 B's name), so the row
/// at 74 B takes the next cheapest smaller plan whose file does replay
/// (72 B's), and its own file replays to it.
#[test]
fn a_plan_file_left_by_another_run_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let g = Graph::load(&root.join("tests/data/order/f2.yaml")).unwrap();
    let plans = dir.path().join("plans");
    let run = |budgets: &[u64], csv: &str| {
        let b = budgets.iter().map(|&b| Bytes(b)).collect();
        let mut cfg = SweepConfig::new(b, dir.path().join(csv));
        cfg.strategies = sweep::select_strategies("remat-fast").unwrap();
        cfg.quiet = true;
        cfg.opts.time_limit = std::time::Duration::from_secs(5);
        cfg.plans_dir = Some(plans.clone());
        sweep::run(&g, &cfg).unwrap().rows
    };
    run(&[72, 73], "plain.csv");
    run(&[80], "other.csv");
    std::fs::rename(
        plans.join("remat-fast-80.json"),
        plans.join("remat-fast-73.json"),
    )
    .unwrap();
    let rows = run(&[72, 73, 74], "plain.csv");
    let at = |b: u64| rows.iter().find(|r| r.budget == Bytes(b)).unwrap();
    let (small, stale, large) = (at(72), at(73), at(74));
    assert!(stale.cost < small.cost, "{stale:?} {small:?}");
    assert_eq!(large.cost, small.cost);
    assert_eq!(large.lp_bound, None);
    let f: PlanFile =
        serde_json::from_str(&std::fs::read_to_string(plans.join("remat-fast-74.json")).unwrap())
            .unwrap();
    assert_eq!(f.budget, Some(74));
    let sim = simulate(&g, &Plan::from_file_statements(&g, &f.statements).unwrap()).unwrap();
    assert_eq!(Some(sim.cost), large.cost);
    assert_eq!(Some(sim.peak), large.peak);
}
