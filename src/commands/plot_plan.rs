//! `remat plot-plan`: memory in use over a plan's statements.

use anyhow::Result;
use remat::cli::{input_err, load_graph, load_plan, parse_budget};
use remat::reports::plot::{self, PlotError};
use remat::Bytes;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file the plan was made for.
    model: PathBuf,
    /// Plan JSON file.
    plan: PathBuf,
    /// Output image (.svg or .png).
    #[arg(short, long)]
    output: PathBuf,
    /// Budget line (default: the budget recorded in the plan file).
    #[arg(short, long)]
    budget: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let Args {
        model,
        plan,
        output,
        budget,
    } = args;
    let g = load_graph(&model)?;
    let (file, p) = load_plan(&g, &plan)?;
    let budget = match budget {
        Some(b) => Some(parse_budget(&g, &b)?),
        None => file.budget.map(Bytes),
    };
    let trace = plot::plot_plan(&g, &p, budget, &file.strategy, &output).map_err(|e| match e {
        PlotError::Plan(_) | PlotError::Format { .. } => {
            input_err(format!("{}: {e}", plan.display()))
        }
        e => e.into(),
    })?;
    eprintln!(
        "wrote {} ({} statements, {} recomputations)",
        output.display(),
        trace.live.len(),
        trace.recomputations.len()
    );
    Ok(())
}
