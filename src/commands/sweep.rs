//! `remat sweep`: every (strategy, budget) pair, one resumable CSV row each.

use super::SolverArgs;
use anyhow::Result;
use remat::cli::{
    check_distinct_outputs, check_output, check_output_dir, check_resumable_output, input_err,
    load_device, load_graph, plural,
};
use remat::reports::plot;
use remat::strategies;
use remat::workflows::budgets::{self, BudgetList};
use remat::workflows::resultlog::LogError;
use remat::workflows::sweep::{self, select_strategies, SweepConfig, SweepError};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON).
    model: PathBuf,
    /// Budgets: a comma-separated list (`90%,80%,12GB`) or a budget file
    /// (YAML, see docs/format.md). Default: the model folder's sibling
    /// budgets/<model file stem>.yaml if it exists, else 20 budgets from the
    /// smallest budget (no plan fits below it) to the checkpoint-all peak.
    #[arg(short, long, allow_hyphen_values = true)]
    budgets: Option<String>,
    /// Comma-separated strategy names, or `all`.
    #[arg(short, long, visible_alias = "strategy", default_value = "all")]
    strategies: String,
    /// Output CSV (appended to; rows already there are skipped).
    #[arg(short, long)]
    output: PathBuf,
    /// Also plot overhead vs budget (.svg or .png).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Pairs solved in parallel (default: all cores).
    #[arg(long, allow_hyphen_values = true, value_parser = super::parse_jobs)]
    jobs: Option<usize>,
    /// Write every plan as DIR/<strategy>-<budget_bytes>.json.
    #[arg(long, visible_alias = "plan")]
    plans: Option<PathBuf>,
    /// Drop this model's rows from the CSV and solve them again (needed
    /// when the graph changed since they were written).
    #[arg(long)]
    fresh: bool,
    /// Write 0 for solve_seconds, so that the CSV is reproducible byte for byte.
    #[arg(long, hide = true)]
    zero_timings: bool,
    /// Skip the LP relaxation (slow on very large graphs): the lp_bound
    /// and gap columns then carry the graph bound (eviction and cover
    /// programs) and the strategy's own, which are always there.
    #[arg(long)]
    no_lp_bound: bool,
    /// Device file (devices/*.yaml): time every plan on it and fill the
    /// time columns (step time, overhead against all-fast, stalls, bytes
    /// moved, slow-tier peak). A CSV's rows are resumed only on the same
    /// device (or on none, for rows swept without one).
    #[arg(long)]
    device: Option<PathBuf>,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        budgets,
        strategies,
        output,
        plot,
        jobs,
        plans,
        fresh,
        zero_timings,
        no_lp_bound,
        device,
        solver,
    } = args;
    // Every file this command reads: the model, the device, and a budget
    // file (named, or the model's default one).
    let budget_file = match &budgets {
        Some(b) => Some(PathBuf::from(b)).filter(|p| p.is_file()),
        None => budgets::default_file(&model),
    };
    let inputs: Vec<&std::path::Path> = [Some(model.as_path()), device.as_deref()]
        .into_iter()
        .chain([budget_file.as_deref()])
        .flatten()
        .collect();
    check_resumable_output(&output, "sweep")?;
    let outputs: Vec<(&str, &std::path::Path)> = [
        Some(("-o", output.as_path())),
        plot.as_deref().map(|p| ("--plot", p)),
        plans.as_deref().map(|p| ("--plans", p)),
    ]
    .into_iter()
    .flatten()
    .collect();
    check_distinct_outputs(&outputs)?;
    check_output(&output, &inputs)?;
    if let Some(p) = &plot {
        plot::check_format(p).map_err(|e| input_err(e.to_string()))?;
        let mut inputs = inputs.clone();
        inputs.push(&output);
        check_output(p, &inputs)?;
    }
    if let Some(p) = &plans {
        check_output_dir(p, "--plans")?;
    }
    let g = load_graph(&model)?;
    let device = device
        .as_deref()
        .map(|d| load_device(d, &g))
        .transpose()?
        .map(std::sync::Arc::new);
    let quiet = ctx.quiet;
    let (list, source) = match budgets {
        Some(b) => BudgetList::from_arg(&b),
        None => match budgets::default_file(&model) {
            Some(p) => BudgetList::load(&p).map(|l| (l, p.display().to_string())),
            None => Ok((BudgetList::default_range(), "default range".to_string())),
        },
    }
    .map_err(|e| input_err(e.to_string()))?;
    list.check_model(&g, &source)
        .map_err(|e| input_err(e.to_string()))?;
    let named = if source.starts_with("--budgets ") {
        "--budgets"
    } else {
        source.as_str()
    };
    list.check_nonzero(&g, named)
        .map_err(|e| input_err(e.to_string()))?;
    remat::cli::note_cost_unit(device.as_deref(), &g, ctx.quiet);
    // A bare `90` in `--budgets 90,80` or in a budget file is bytes, and
    // below the smallest budget every row would say infeasible: say what
    // was probably meant.
    for n in list.slips(&g, named).iter().filter(|_| !quiet) {
        eprintln!("note: {n}");
    }
    // As solve says of one budget: past the peak nothing is recomputed.
    let peak = remat::graph::analysis::checkpoint_all_peak(&g);
    let above = list.resolve(&g).into_iter().filter(|&b| b > peak).count();
    if above > 0 && !quiet {
        eprintln!(
            "note: {above} of the budgets are more than the checkpoint-all peak ({}): no recomputation is needed there",
            peak.human()
        );
    }
    // As solve and max-batch say of one budget: the plans fit the budget,
    // not the device.
    if let Some(d) = device.as_deref().filter(|_| !quiet) {
        let over = list
            .resolve(&g)
            .into_iter()
            .filter(|&b| b > d.fast_capacity)
            .count();
        if over > 0 {
            eprintln!(
                "note: {over} of the budgets are more than {}'s fast memory ({}): their plans fit the budget, not the device",
                d.name,
                d.fast_capacity.human()
            );
        }
    }
    super::check_device_named(&strategies, device.is_some())?;
    let mut cfg = SweepConfig::new(list.resolve(&g), output.clone());
    cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
    solver.check_no_recompute(cfg.strategies.iter().map(|s| s.name()))?;
    solver.note_search_orders(cfg.strategies.iter().map(|s| s.as_ref()), quiet);
    cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
    cfg.opts = solver.options(super::SOLVE_SECONDS);
    cfg.opts.device = device;
    cfg.quiet = quiet;
    cfg.plans_dir = plans;
    cfg.zero_timings = zero_timings;
    cfg.fresh = fresh;
    if !no_lp_bound {
        cfg.lp_bound = Some(std::sync::Arc::new(strategies::lp_bound::lp_lower_bound));
    }
    if !quiet {
        cfg.header = Some(format!(
            "sweep {}: {} ({}) x {}{}",
            g.name,
            plural(cfg.budgets.len(), "budget", "budgets"),
            source,
            plural(cfg.strategies.len(), "strategy", "strategies"),
            cfg.opts
                .device
                .as_ref()
                .map(|d| format!(", timed on device '{}'", d.name))
                .unwrap_or_default()
        ));
    }
    // With --fresh, "the same command" would drop the finished rows again.
    remat::cli::interrupt::exit_on_interrupt(format!(
        "interrupted: the rows finished so far are in {}; run {} again to resume (the sweep ends by giving each row the cheapest plan found at its budget or below, which an interrupted one has not done)",
        output.display(),
        if fresh {
            "the same command without --fresh"
        } else {
            "the same command"
        }
    ));
    let summary = sweep::run(&g, &cfg).map_err(|e| match e {
        SweepError::Log(
            LogError::Format { .. } | LogError::OtherKind { .. } | LogError::Busy { .. },
        )
        | SweepError::GraphChanged { .. }
        | SweepError::DeviceChanged { .. } => input_err(e.to_string()),
        e => e.into(),
    })?;
    if let Some(p) = &plot {
        plot::plot_sweep(&summary.rows, &g.name, p)?;
    }
    if !quiet {
        eprintln!(
            "wrote {} ({} new rows, {} already there{}){}",
            output.display(),
            summary.solved,
            summary.resumed,
            match summary.took_smaller {
                0 => String::new(),
                n => format!(
                    "; {} a smaller budget's cheaper plan",
                    plural(n, "row took", "rows took")
                ),
            },
            plot.map(|p| format!(", plot {}", p.display()))
                .unwrap_or_default()
        );
    }
    // The rows are in the CSV, so a plain re-run resumes them and writes
    // no plan: only --fresh solves them again.
    if !summary.plan_failures.is_empty() {
        anyhow::bail!(
            "{} could not be written (the rows are in {}; re-run with --fresh to write them): {}",
            plural(summary.plan_failures.len(), "plan file", "plan files"),
            output.display(),
            summary.plan_failures.join("; ")
        );
    }
    if !summary.failures.is_empty() {
        anyhow::bail!(
            "{} pairs failed and have no row (re-run to retry them):\n  {}",
            summary.failures.len(),
            summary.failures.join("\n  ")
        );
    }
    Ok(())
}
