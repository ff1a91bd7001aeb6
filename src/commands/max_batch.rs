//! `remat max-batch`: the largest batch each strategy trains in a device's memory.

use super::SolverArgs;
use anyhow::Result;
use remat::cli::{input_err, load_graph};
use remat::units::BudgetSpec;
use remat::workflows::maxbatch::{self, CostRule, MaxBatchConfig, MaxBatchError};
use remat::workflows::resultlog::LogError;
use remat::workflows::sweep::{self, select_strategies};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON); costs and activation memory scale from its batch_size.
    model: PathBuf,
    /// Device memory, e.g. 16GB or 16GiB.
    #[arg(long)]
    memory: String,
    /// Comma-separated strategy names, or `all` (checkpoint-all is always included).
    #[arg(short, long, visible_alias = "strategy", default_value = "all")]
    strategies: String,
    /// Allow cost up to F x checkpoint-all cost, instead of one extra forward pass.
    #[arg(long)]
    max_overhead: Option<f64>,
    /// Largest batch tried.
    #[arg(long, default_value_t = 1 << 24)]
    max_batch: u32,
    /// Write the results as CSV (rows are kept; re-running skips them).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Strategies searched in parallel (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        memory,
        strategies,
        max_overhead,
        max_batch,
        output,
        jobs,
        solver,
    } = args;
    let g = load_graph(&model)?;
    let memory = match BudgetSpec::parse(&memory) {
        Ok(BudgetSpec::Absolute(b)) => b,
        Ok(_) => {
            return Err(input_err(
                "--memory must be a size such as 16GB, not a percentage",
            ))
        }
        Err(e) => return Err(input_err(format!("--memory: {e}"))),
    };
    // Parameters, gradients and optimizer state do not shrink with the
    // batch: if they alone overflow the device, no batch fits, and a table
    // of zeros would hide why.
    if g.fixed_memory >= memory {
        return Err(input_err(format!(
            "{}: the fixed memory (parameters, gradients, optimizer state) alone needs {} ({} bytes), more than --memory {} ({} bytes): no batch fits",
            model.display(),
            g.fixed_memory.human(),
            g.fixed_memory,
            memory.human(),
            memory
        )));
    }
    let mut cfg = MaxBatchConfig::new(memory);
    cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
    if let Some(f) = max_overhead {
        if !(f.is_finite() && f > 0.0) {
            return Err(input_err("--max-overhead must be a positive number"));
        }
        cfg.rule = CostRule::MaxOverhead(f);
    }
    cfg.max_batch = max_batch.max(1);
    cfg.opts = solver.options(super::MAX_BATCH_SECONDS);
    cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
    cfg.quiet = ctx.quiet;
    cfg.output = output.clone();
    let rows = maxbatch::run(&g, &cfg).map_err(|e| match e {
        MaxBatchError::Log(LogError::Format { .. } | LogError::OtherKind { .. }) => {
            input_err(e.to_string())
        }
        e => e.into(),
    })?;
    println!(
        "{} at {} ({} bytes), cost rule {}",
        g.name,
        memory.human(),
        memory,
        cfg.rule.label()
    );
    print!("{}", maxbatch::render(&rows));
    if let Some(o) = output.filter(|_| !ctx.quiet) {
        eprintln!("wrote {}", o.display());
    }
    Ok(())
}
