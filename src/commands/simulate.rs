//! `remat simulate`: replay any plan file and measure it.

use anyhow::Result;
use remat::cli::{check_plan, load_device, load_graph, load_plan, parse_budget};
use remat::graph::analysis::first_computations_in_file_order;
use remat::schedule::plan::Statement;
use remat::units::short_float;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file the plan was made for.
    model: PathBuf,
    /// Plan file, JSON or text (as `solve --plan` writes them).
    plan: PathBuf,
    /// Check the peak against this budget instead of the one the plan records.
    #[arg(short, long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Device file (devices/*.yaml): replay the plan timed on it (needed for transfers).
    #[arg(long)]
    device: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        plan,
        budget,
        device,
    } = args;
    let g = load_graph(&model)?;
    let (file, p) = load_plan(&g, &model, &plan)?;
    let device = device.as_deref().map(|d| load_device(d, &g)).transpose()?;
    // A bad -b is bad input: refused before any figure is printed (the
    // report used to come first, then the error).
    let budget = budget.map(|b| parse_budget(&g, &b)).transpose()?;
    let (rep, limit) = check_plan(
        &g,
        &plan,
        &file,
        &p,
        device.as_ref(),
        budget.as_ref().map(|b| b.bytes),
    )?;
    let unit = g.cost_unit.as_deref().unwrap_or("cost units");
    outln!(
        "plan             {} ({} statements)",
        plan.display(),
        p.statements.len()
    )?;
    outln!(
        "computations     {} for {} nodes",
        rep.computations,
        g.len()
    )?;
    outln!(
        "cost             {} {unit} ({:.4}x checkpoint-all)",
        short_float(rep.cost),
        g.overhead(rep.cost)
    )?;
    outln!("peak memory      {} ({} bytes)", rep.peak.human(), rep.peak)?;
    if let (Some(t), Some(d)) = (&rep.timing, &device) {
        out!(
            "{}",
            remat::reports::table::timing_lines(t, d.all_fast_step(&g))
        )?;
    }
    let claims_differ = file.cost.is_finite()
        && ((rep.cost - file.cost).abs() > 1e-6 * rep.cost.abs().max(1.0)
            || rep.peak.get() != file.peak_memory);
    if claims_differ {
        outln!(
            "note             the file claims cost {} and peak {}; the figures above are the simulator's",
            short_float(file.cost),
            file.peak_memory
        )?;
    }
    // The simulator counts the graph's fixed memory, whatever the plan
    // file records; a plan made when the graph held another (a changed
    // optimizer state, say) used to pass without a word. Like the claims
    // line above it is part of the report on standard output, which -q
    // (no notes on standard error) leaves whole.
    if file.fixed_memory != g.fixed_memory.get() {
        outln!(
            "note             the file records fixed memory {} bytes; the graph's is {} bytes, which the figures above count",
            file.fixed_memory,
            g.fixed_memory.get()
        )?;
    }
    // solve's bounds, statuses and infeasibility proofs keep the file's
    // order of first computations (as Checkmate does); a plan in another
    // order may beat an "optimal" answer or fit an "infeasible" budget,
    // and the user comparing the two should know why.
    let computed = p.statements.iter().filter_map(|s| match s {
        Statement::Compute { node, .. } => Some(*node),
        _ => None,
    });
    if !first_computations_in_file_order(&g, computed) {
        outln!("note             the plan first computes the nodes in another order than the graph file's; solve's bounds and statuses are about plans in the file's order, except where solve says it planned in another order (then they are about that order)")?;
    }
    let over = device
        .as_ref()
        .and_then(|d| super::over_device(rep.peak, d, limit));
    if let Some(b) = limit {
        let fits = match &device {
            Some(d) if over.is_some() => format!(
                "fits the budget, not {}'s fast memory ({})",
                d.name,
                d.fast_capacity.human()
            ),
            _ => "fits".to_string(),
        };
        // Echoed in the units it was given in, as solve does.
        let shown = match &budget {
            Some(given) if given.bytes == b => given.show(),
            _ => format!("{} ({} bytes)", b.human(), b),
        };
        outln!("budget           {shown}: {fits}")?;
    }
    // Only once the plan has passed: a plan over its budget gets its one
    // line of error alone.
    remat::cli::note_cost_unit(device.as_ref(), &g, ctx.quiet);
    if let Some(n) = over.filter(|_| !ctx.quiet) {
        eprintln!("note: {n}");
    }
    Ok(())
}
