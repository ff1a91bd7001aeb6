//! `remat solve`: one plan within one budget, with a one-screen summary.

use super::{Ctx, SolverArgs};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use remat::cli::{
    check_output, input_err, interrupt, load_device, load_graph, plan_text, write_output,
};
use remat::cli::{plural, Budget, Interrupted};
use remat::graph::analysis::order_is_forced;
use remat::solve::{self, Outcome, SolveError};
use remat::strategies::watch::Watch;
use remat::strategies::{self, Status, Strategy, StrategyError};
use remat::units::short_float;
use remat::{Bytes, Graph};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON).
    model: PathBuf,
    /// Memory budget: bytes, KB/MB/GB, KiB/MiB/GiB, or NN% of the
    /// checkpoint-all peak. Required without --device; with one it defaults
    /// to the device's fast-tier capacity.
    #[arg(short, long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Strategy name (see `remat strategies`). The default proves its
    /// answer optimal when it can; `remat-fast` answers within a minute.
    #[arg(
        short,
        long,
        visible_alias = "strategies",
        default_value = "remat-exact"
    )]
    strategy: String,
    /// Write the plan: JSON if the name ends in .json, text otherwise (`-`: standard output).
    #[arg(long, visible_alias = "plans")]
    plan: Option<PathBuf>,
    /// Device file (devices/*.yaml): time the plan on it and report its step time.
    #[arg(long)]
    device: Option<PathBuf>,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args, ctx: &Ctx) -> Result<()> {
    let Args {
        model,
        budget,
        strategy,
        plan,
        device,
        solver,
    } = args;
    let g = load_graph(&model)?;
    if let Some(p) = &plan {
        let inputs: Vec<&std::path::Path> = std::iter::once(model.as_path())
            .chain(device.as_deref())
            .collect();
        check_output(p, &inputs)?;
    }
    let device = device
        .as_deref()
        .map(|d| load_device(d, &g))
        .transpose()?
        .map(Arc::new);
    let budget = Budget::given_or_device(&g, budget.as_deref(), device.as_deref())?;
    // Notes wait until the input has passed every check, so that a bad
    // input still gets its one line of error; `-q` silences them all.
    let mut notes: Vec<String> = budget.warning(&g).into_iter().collect();
    notes.extend(device.as_deref().and_then(|d| d.cost_unit_note(&g)));
    // An explicit budget may exceed the device it is timed on; the plan
    // then fits the budget and not the card.
    if let Some(d) = device.as_deref().filter(|d| budget.bytes > d.fast_capacity) {
        notes.push(format!(
            "the budget {} is more than {}'s fast memory ({}): the plan fits the budget, not the device",
            budget.bytes.human(),
            d.name,
            d.fast_capacity.human()
        ));
    }
    let strat = strategies::by_name(&strategy).ok_or_else(|| {
        input_err(format!(
            "unknown strategy '{strategy}'; available: {}",
            strategies::names().join(", ")
        ))
    })?;
    solver.check_no_recompute([strat.name()])?;
    solver.note_search_orders([strat.as_ref()], ctx.quiet);
    // lp-bound answers with a bound alone: a script waiting for the plan
    // file found out only later that none was written.
    if plan.is_some() && !strat.makes_plans() {
        return Err(input_err(format!(
            "{} makes no plan; --plan needs a strategy that makes one",
            strat.name()
        )));
    }
    // A strategy that only moves values to a slow tier, asked for by name
    // without one, is a usage mistake (it used to exit 1 as "does not
    // apply", like a property of the graph).
    if device.is_none()
        && strategies::tiered_policies()
            .iter()
            .any(|t| t.name() == strat.name())
    {
        return Err(input_err(format!(
            "-s {}: it moves values to a slow tier; pass --device FILE (devices/*.yaml) to give it one",
            strat.name()
        )));
    }
    let (out, interrupted) =
        match run_watched(&g, strat, budget.bytes, &solver, device.clone(), ctx.quiet)? {
            Ok(Answer::Finished(o)) => (o, false),
            Ok(Answer::Interrupted(o)) => (o, true),
            Err(e @ SolveError::BelowMinimum { .. }) => {
                // A budget the user never typed is named as the device's.
                let hint = budget
                    .did_you_mean(&g)
                    .or_else(|| {
                        budget.from_device.as_ref().map(|d| {
                            format!("the budget is the fast-tier capacity of device '{d}'")
                        })
                    })
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                return Err(input_err(format!("{e}{hint}")));
            }
            // A strategy asked for by name on a graph or device it does
            // not apply to is a usage mistake, as is one that needs a
            // device and has none (it exited 1, as if no plan were found).
            Err(SolveError::Strategy(e @ StrategyError::NotApplicable { .. })) => {
                return Err(input_err(format!("{}: {e}", model.display())));
            }
            Err(e) => return Err(e.into()),
        };
    for n in notes.iter().filter(|_| !ctx.quiet) {
        eprintln!("note: {n}");
    }
    // Whether the claims below cover every plan, or those in the file's
    // order only (docs/scale.md, "Plans in the file's node order, and in others").
    let forced = order_is_forced(&g);
    let to_stdout = plan.as_ref().is_some_and(|p| p.as_os_str() == "-");
    // The plan file first: a summary piped into `head` used to end the
    // process at its first failed line, before the plan was written. On
    // standard output, the plan comes after the summary (on stderr).
    let plan_bytes = match (plan.as_ref(), out.status.has_plan()) {
        (Some(path), true) => out
            .plan_file(&g)
            .map(|pf| -> Result<(&std::path::PathBuf, Vec<u8>)> {
                let bytes = if path.extension().is_some_and(|e| e == "json") {
                    serde_json::to_vec_pretty(&pf)?
                } else {
                    plan_text(&pf).into_bytes()
                };
                Ok((path, bytes))
            })
            .transpose()?,
        _ => None,
    };
    let write_plan = || -> Result<()> {
        if let Some((path, bytes)) = &plan_bytes {
            write_output(path, bytes)?;
        }
        Ok(())
    };
    if !to_stdout {
        write_plan()?;
    }
    if to_stdout {
        print_summary(
            &mut std::io::stderr(),
            &g,
            &budget,
            &out,
            device.as_deref(),
            forced,
        )?;
    } else {
        print_summary(
            &mut std::io::stdout(),
            &g,
            &budget,
            &out,
            device.as_deref(),
            forced,
        )
        .context("writing to standard output")?;
    }
    if let (Some(t), Some(d)) = (out.timing(), &device) {
        let mut lines = remat::reports::table::timing_lines(t, d.all_fast_step(&g));
        if let (Some(lb), Some(gap)) = (out.step_bound, out.step_gap()) {
            let which = if out.order.is_some() {
                "no plan within the budget that first computes the nodes in this plan's order"
            } else if forced {
                "no plan within the budget"
            } else {
                "no plan within the budget that first computes the nodes in the file's order"
            };
            lines.push_str(&format!(
                "step bound       {lb} (gap {:.3}%: {which} is faster)\n",
                gap * 100.0
            ));
        }
        if to_stdout {
            eprint!("{lines}");
        } else {
            out!("{lines}")?;
        }
    }
    if to_stdout {
        write_plan()?;
    } else if let Some((path, _)) = &plan_bytes {
        outln!("plan written     {}", path.display())?;
    }
    if interrupted {
        return Err(Interrupted.into());
    }
    let limit = solver.options(super::SOLVE_SECONDS).time_limit;
    status_result(&out, &budget, device.as_deref(), forced, limit)
}

/// How a watched solve ended.
enum Answer {
    Finished(Outcome),
    /// Stopped by SIGINT/SIGTERM: the best plan reported until then.
    Interrupted(Outcome),
}

/// Runs the solve on its own thread while this one shows a progress line
/// (on a terminal, unless quiet) and watches for SIGINT/SIGTERM. On an
/// interrupt the answer is the best plan reported so far; the solver
/// thread, which has no way to be stopped mid-MILP, ends with the process.
fn run_watched(
    g: &Graph,
    strat: Box<dyn Strategy>,
    budget: Bytes,
    solver: &SolverArgs,
    device: Option<Arc<remat::device::Device>>,
    quiet: bool,
) -> Result<Result<Answer, SolveError>> {
    let watch = Arc::new(Watch::default());
    let mut opts = solver.options(super::SOLVE_SECONDS);
    opts.watch = Some(watch.clone());
    opts.device = device.clone();
    let name = strat.name();
    let (tx, rx) = mpsc::channel();
    let owned = g.clone();
    interrupt::install();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(solve::run(&owned, strat.as_ref(), budget, &opts));
    });
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
            .with_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"))
    };
    let base = g.total_cost().max(f64::MIN_POSITIVE);
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(r) => {
                bar.finish_and_clear();
                return Ok(r.map(Answer::Finished));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bar.finish_and_clear();
                anyhow::bail!("internal error: the {name} solve stopped without an answer");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let secs = start.elapsed().as_secs_f64();
        let snap = watch.snapshot();
        if interrupt::requested() {
            bar.finish_and_clear();
            return Ok(Ok(Answer::Interrupted(solve::from_snapshot(
                g,
                name,
                budget,
                &snap,
                secs,
                device.as_deref(),
            ))));
        }
        // Incumbent and bound as multiples of checkpoint-all's cost: short
        // enough for one terminal line whatever the cost unit.
        let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.4}x", v / base));
        let gap = match (snap.cost, snap.bound) {
            (Some(c), Some(b)) if c > 0.0 => format!("{:.3}%", ((c - b) / c).max(0.0) * 100.0),
            _ => "-".into(),
        };
        bar.set_message(format!(
            "{name} {secs:.0} s: plan {}, bound {}, gap {gap}; Ctrl-C keeps it",
            ratio(snap.cost),
            ratio(snap.bound)
        ));
        bar.tick();
    }
}

/// The exit code of an answer, as the README's table gives it.
fn status_result(
    out: &Outcome,
    budget: &Budget,
    device: Option<&remat::device::Device>,
    forced: bool,
    limit: std::time::Duration,
) -> Result<()> {
    let tiers = device.is_some();
    // A search that ended well before its limit ran out of moves, not of
    // time: more time is no advice then (remat-tiered on GPT-2 just above
    // its direct-read floor stopped at 3.4 s of 10, and at 7.7 s of 30).
    let ended_early = out.seconds < 0.9 * limit.as_secs_f64();
    // No "did you mean N%?" here: below the smallest budget the pipeline
    // refused the budget before any strategy ran (with the hint); above
    // it, a bare number is taken at its word (docs/format.md, Budgets).
    match out.status {
        Status::Optimal | Status::Feasible | Status::Bound => Ok(()),
        Status::Infeasible if forced => Err(input_err(format!(
            "infeasible: no plan fits {}",
            budget.show()
        ))),
        Status::Infeasible if out.every_order => Err(input_err(format!(
            "infeasible: no plan fits {}, in any node order",
            budget.show()
        ))),
        // The proof covers the file's order of first computations only;
        // another topological order may fit (a tester's reordered plan
        // did, and `simulate` rightly accepted it).
        Status::Infeasible => Err(input_err(format!(
            "infeasible: no plan that first computes the nodes in the file's order fits {}; reordering the graph file may let one fit",
            budget.show()
        ))),
        // With a slow tier, its capacity bounds the plans too (offload-all
        // on a 5 GB tier was said not to fit the fast budget alone).
        Status::NoFit => anyhow::bail!(
            "{} found no plan that fits {}{}; that does not mean none exists: try {}",
            out.strategy,
            budget.show(),
            device
                .filter(|d| d.slow.capacity > Bytes::ZERO)
                .map(|d| format!(
                    " with {}'s slow tier of {}",
                    d.name,
                    d.slow.capacity.human()
                ))
                .unwrap_or_default(),
            if tiers && out.strategy == "remat-tiered" && ended_early {
                format!(
                    "-s remat-fast (its offload moves run longer), or a larger budget; its searches ended after {:.1} s of the {:.0} s limit, so a longer --time-limit will not help",
                    out.seconds,
                    limit.as_secs_f64()
                )
            } else if tiers && out.strategy == "remat-tiered" {
                "a longer --time-limit, -s remat-fast (its offload moves run longer), or a larger budget".to_string()
            } else if tiers {
                // remat-tiered, when it too finds none, points back here:
                // a larger budget is the way out of that loop.
                "-s remat-tiered (recomputation and offloading together), or a larger budget"
                    .to_string()
            } else {
                // Never the strategy that just failed.
                let others: Vec<&str> = ["remat-exact", "remat-fast"]
                    .into_iter()
                    .filter(|s| *s != out.strategy)
                    .collect();
                format!("-s {}", others.join(" or "))
            }
        ),
        // remat-exact seeds from a share of its limit and gives the rest to
        // the MILP; remat-fast spends all of it on finding plans.
        Status::NoSolution if out.strategy == "remat-exact" && !tiers => anyhow::bail!(
            "no plan found within the time limit; -s remat-fast or a longer --time-limit may find one"
        ),
        Status::NoSolution => anyhow::bail!(
            "no plan found within the time limit; a longer --time-limit may find one"
        ),
    }
}

/// The summary goes to `w`: standard output, or standard error when the
/// plan itself is written to standard output (`--plan -`), so that a pipe
/// receives the plan alone.
fn print_summary(
    w: &mut dyn std::io::Write,
    g: &Graph,
    budget: &Budget,
    out: &Outcome,
    device: Option<&remat::device::Device>,
    forced: bool,
) -> std::io::Result<()> {
    let unit = g.cost_unit.as_deref().unwrap_or("cost units");
    writeln!(w, "model            {} ({} nodes)", g.name, g.len())?;
    writeln!(w, "strategy         {}", out.strategy)?;
    writeln!(w, "budget           {}", budget.show())?;
    writeln!(w, "status           {}", out.status)?;
    if let Some(sim) = &out.sim {
        writeln!(
            w,
            "cost             {} {unit} ({:.4}x checkpoint-all, {})",
            short_float(sim.cost),
            g.overhead(sim.cost),
            plural(
                sim.computations - g.len(),
                "recomputation",
                "recomputations"
            )
        )?;
        writeln!(
            w,
            "peak memory      {} ({} bytes)",
            sim.peak.human(),
            sim.peak
        )?;
    }
    if let Some(lb) = out.lower_bound {
        let ratio = out.cost().map(|c| if lb > 0.0 { c / lb } else { 1.0 });
        let lb_text = short_float(lb);
        // Cost bounds come from recomputation alone: on a device with a
        // slow tier, a plan that offloads may compute less than the bound
        // (another strategy's plan beat it, unqualified, in one summary).
        let scope = match (
            device.is_some_and(|d| d.slow.capacity > Bytes::ZERO),
            forced,
            out.order.is_some(),
        ) {
            (_, _, true) => ", plans in this plan's node order",
            (true, true, _) => ", recompute-only plans",
            (true, false, _) => ", recompute-only plans in the file's node order",
            (false, true, _) => "",
            (false, false, _) => ", plans in the file's node order",
        };
        match ratio {
            Some(r) => writeln!(
                w,
                "lower bound      {lb_text} {unit}{scope} (plan/bound = {r:.4}, gap {:.3}%)",
                out.gap().unwrap_or(0.0) * 100.0
            ),
            None => writeln!(w, "lower bound      {lb_text} {unit}{scope}"),
        }?;
    }
    if let Some(d) = &out.detail {
        writeln!(w, "detail           {d}")?;
    }
    writeln!(w, "solve time       {:.2} s", out.seconds)
}
