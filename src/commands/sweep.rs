//! `remat sweep`: every (strategy, budget) pair, one resumable CSV row each.

use super::SolverArgs;
use anyhow::Result;
use remat::cli::{input_err, load_graph};
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
    /// Budget file (YAML); default budgets/<model file stem>.yaml if it exists, else
    /// 20 budgets from the smallest feasible one to the checkpoint-all peak.
    #[arg(long)]
    budgets: Option<PathBuf>,
    /// Comma-separated strategy names, or `all`.
    #[arg(long, default_value = "all")]
    strategies: String,
    /// Output CSV (appended to; rows already there are skipped).
    #[arg(short, long)]
    output: PathBuf,
    /// Also plot overhead vs budget (.svg or .png).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Pairs solved in parallel (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// No progress bar or notes.
    #[arg(long)]
    quiet: bool,
    /// Write every plan as DIR/<strategy>-<budget_bytes>.json.
    #[arg(long)]
    plans: Option<PathBuf>,
    /// Write 0 for solve_seconds, so that the CSV is reproducible byte for byte.
    #[arg(long, hide = true)]
    zero_timings: bool,
    /// Leave the lp_bound and gap columns empty instead of solving the
    /// LP relaxation once per budget (it is slow on very large graphs).
    #[arg(long)]
    no_lp_bound: bool,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args) -> Result<()> {
    let Args {
        model,
        budgets,
        strategies,
        output,
        plot,
        jobs,
        quiet,
        plans,
        zero_timings,
        no_lp_bound,
        solver,
    } = args;
    let g = load_graph(&model)?;
    let file = budgets.or_else(|| budgets::default_file(&model));
    let list = match &file {
        Some(p) => BudgetList::load(p).map_err(|e| input_err(e.to_string()))?,
        None => BudgetList::default_range(),
    };
    let mut cfg = SweepConfig::new(list.resolve(&g), output.clone());
    cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
    cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
    cfg.opts = solver.options();
    cfg.quiet = quiet;
    cfg.plans_dir = plans;
    cfg.zero_timings = zero_timings;
    if !no_lp_bound {
        cfg.lp_bound = Some(std::sync::Arc::new(strategies::lp_bound::lp_lower_bound));
    }
    if !quiet {
        eprintln!(
            "sweep {}: {} budgets ({}) x {} strategies",
            g.name,
            cfg.budgets.len(),
            file.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "default range".into()),
            cfg.strategies.len()
        );
    }
    let summary = sweep::run(&g, &cfg).map_err(|e| match e {
        SweepError::Log(LogError::Format { .. }) => input_err(e.to_string()),
        e => e.into(),
    })?;
    if let Some(p) = &plot {
        plot::plot_sweep(&summary.rows, &g.name, p)?;
    }
    if !quiet {
        eprintln!(
            "wrote {} ({} new rows, {} already there){}",
            output.display(),
            summary.solved,
            summary.resumed,
            plot.map(|p| format!(", plot {}", p.display()))
                .unwrap_or_default()
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
