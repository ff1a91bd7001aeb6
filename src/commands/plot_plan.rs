//! `remat plot-plan`: memory in use over a plan's statements; with a
//! device, both tiers' memory and the copy engines' lanes over time.

use anyhow::Result;
use remat::cli::{
    check_output, input_err, load_device, load_graph, load_plan, parse_budget, plural,
};
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
    /// Budget line (default: the budget recorded in the plan file, else
    /// the device's fast-tier capacity).
    #[arg(short, long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Device file (devices/*.yaml): draw the plan against time on it, both
    /// tiers' memory above the compute and copy-engine lanes. Needed for
    /// plans with transfer statements.
    #[arg(long)]
    device: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        plan,
        output,
        budget,
        device,
    } = args;
    let inputs: Vec<&std::path::Path> = [model.as_path(), plan.as_path()]
        .into_iter()
        .chain(device.as_deref())
        .collect();
    check_output(&output, &inputs)?;
    let g = load_graph(&model)?;
    let device = device.as_deref().map(|d| load_device(d, &g)).transpose()?;
    let (file, p) = load_plan(&g, &model, &plan)?;
    let budget = match budget {
        Some(b) => Some(parse_budget(&g, &b)?.bytes),
        None => file.budget.map(Bytes),
    };
    // A plan file without a budget is still drawn against the memory it
    // would have on the device.
    let given = budget;
    let budget = budget.or(device.as_ref().map(|d| d.fast_capacity));
    let plot_err = |e: PlotError| match e {
        PlotError::Plan(_) => input_err(format!("{}: {e}", plan.display())),
        // Names the output path itself; the plan is not at fault.
        PlotError::Format { .. } => input_err(e.to_string()),
        e => e.into(),
    };
    if let Some(d) = &device {
        let (sim, tl) =
            plot::plot_plan_timed(&g, &p, d, budget, &file.strategy, &output).map_err(plot_err)?;
        warn_over(&plan, sim.peak, budget);
        // Against the device's own capacity the warning above has said it.
        let note = given.and_then(|b| super::over_device(sim.peak, d, Some(b)));
        if let Some(n) = note.filter(|_| !ctx.quiet) {
            eprintln!("note: {n}");
        }
        if !ctx.quiet {
            eprintln!(
                "wrote {} ({} statements, {} on {}, {})",
                output.display(),
                p.statements.len(),
                plural(tl.copies.len(), "copy", "copies"),
                d.name,
                plural(
                    sim.computations - g.len(),
                    "recomputation",
                    "recomputations"
                )
            );
        }
        return Ok(());
    }
    // Without a device there is no time axis and no slow tier to draw.
    if p.statements.iter().any(|s| s.is_transfer()) {
        return Err(input_err(format!(
            "{}: the plan moves values to a slow tier; pass --device FILE to plot it against time",
            plan.display()
        )));
    }
    let trace = plot::plot_plan(&g, &p, budget, &file.strategy, &output).map_err(plot_err)?;
    let peak = trace.live.iter().copied().max().unwrap_or_default();
    warn_over(&plan, peak, budget);
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

fn warn_over(plan: &std::path::Path, peak: Bytes, budget: Option<Bytes>) {
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
}
