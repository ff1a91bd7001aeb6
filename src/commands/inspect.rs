//! `remat inspect`: what a graph costs and the budgets it allows.

use anyhow::Result;
use remat::cli::{load_graph, percent_of_peak_up};
use remat::graph::analysis;
use remat::units::short_float;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON).
    model: PathBuf,
    /// Print the figures as one JSON object (bytes and cost units), for
    /// scripts: the text layout is for people and may change.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, _: &super::Ctx) -> Result<()> {
    let g = load_graph(&args.model)?;
    let s = analysis::summarize(&g);
    // Kernels: a multi-output kernel's group counts once.
    let kernels = g.ids().filter(|&i| g.group_end(i) == i.idx()).count();
    let in_groups = g.ids().filter(|&i| g.group(i).count() > 1).count();
    if args.json {
        let v = serde_json::json!({
            "model": g.name,
            "fingerprint": g.fingerprint().to_string(),
            "nodes": s.nodes,
            "forward_nodes": s.forward,
            "backward_nodes": s.backward,
            "edges": s.edges,
            "kernels": kernels,
            "batch_size": g.batch_size,
            "cost_unit": g.cost_unit,
            "total_cost": s.total_cost,
            "forward_cost": s.forward_cost,
            "fixed_memory": s.fixed_memory.get(),
            "checkpoint_all_peak": s.checkpoint_all_peak.get(),
            "smallest_budget": s.min_budget.get(),
        });
        outln!("{v}")?;
        return Ok(());
    }
    outln!("model            {}", g.name)?;
    outln!("fingerprint      {}", g.fingerprint())?;
    outln!(
        "nodes            {} ({} forward, {} backward), {} edges",
        s.nodes,
        s.forward,
        s.backward,
        s.edges
    )?;
    if g.has_groups() {
        outln!(
            "kernels          {kernels} ({in_groups} nodes are outputs of multi-output kernels, computed together)"
        )?;
    }
    outln!("batch size       {}", g.batch_size)?;
    let unit = g.cost_unit.as_deref().unwrap_or("units");
    outln!(
        "total cost       {} {unit} (forward {})",
        short_float(s.total_cost),
        short_float(s.forward_cost)
    )?;
    outln!(
        "fixed memory     {} ({} bytes)",
        s.fixed_memory.human(),
        s.fixed_memory
    )?;
    outln!(
        "checkpoint-all   peak {} ({} bytes)",
        s.checkpoint_all_peak.human(),
        s.checkpoint_all_peak
    )?;
    outln!(
        // A floor, not a promise: it is the largest node with all its
        // inputs plus the fixed memory, and on tight graphs no plan reaches
        // it (a tester read it as the budget to solve at).
        "smallest budget  {} ({} bytes, {}): no plan fits below this (the largest node with its inputs, plus fixed memory); a plan at it is not guaranteed",
        s.min_budget.human_up(),
        s.min_budget,
        percent_of_peak_up(&g, s.min_budget)
    )?;
    Ok(())
}
