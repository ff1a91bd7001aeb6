//! `remat plot-plan`: memory in use over a plan's statements.

use anyhow::Result;
use remat::cli::{input_err, load_graph, load_plan, parse_budget, plural};
use remat::reports::plot::{self, PlotError};
use remat::Bytes;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file the plan was made for.
    model: PathBuf,
    /// Plan file, JSON or text.
    plan: PathBuf,
    /// Output image (.svg or .png).
    #[arg(short, long)]
    output: PathBuf,
    /// Budget line (default: the budget recorded in the plan file).
    #[arg(short, long, allow_hyphen_values = true)]
    budget: Option<String>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        plan,
        output,
        budget,
    } = args;
    let g = load_graph(&model)?;
    let (file, p) = load_plan(&g, &model, &plan)?;
    let budget = match budget {
        Some(b) => Some(parse_budget(&g, &b)?.bytes),
        None => file.budget.map(Bytes),
    };
    let trace = plot::plot_plan(&g, &p, budget, &file.strategy, &output).map_err(|e| match e {
        PlotError::Plan(_) | PlotError::Format { .. } => {
            input_err(format!("{}: {e}", plan.display()))
        }
        e => e.into(),
    })?;
    let peak = trace.live.iter().copied().max().unwrap_or_default();
    if let Some(b) = budget.filter(|b| peak > *b) {
        eprintln!(
            "warning: {}: the plan's peak {} ({} bytes) exceeds the budget {} ({} bytes); the figure says so",
            plan.display(),
            peak.human(),
            peak,
            b.human(),
            b
        );
    }
    if !ctx.quiet {
        eprintln!(
            "wrote {} ({} statements, {})",
            output.display(),
            trace.live.len(),
            plural(
                trace.recomputations.len(),
                "recomputation",
                "recomputations"
            )
        );
    }
    Ok(())
}
