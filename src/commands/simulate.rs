//! `remat simulate`: replay any plan file and measure it.

use anyhow::Result;
use remat::cli::{input_err, load_graph, load_plan, parse_budget};
use remat::schedule::simulate;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file the plan was made for.
    model: PathBuf,
    /// Plan JSON file.
    plan: PathBuf,
    /// Also check the peak against this budget.
    #[arg(short, long)]
    budget: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let Args {
        model,
        plan,
        budget,
    } = args;
    let g = load_graph(&model)?;
    let (file, p) = load_plan(&g, &plan)?;
    let rep = simulate(&g, &p).map_err(|e| input_err(format!("{}: {e}", plan.display())))?;
    println!(
        "plan             {} ({} statements)",
        plan.display(),
        p.statements.len()
    );
    println!(
        "computations     {} for {} nodes",
        rep.computations,
        g.len()
    );
    println!(
        "cost             {} ({:.4}x checkpoint-all)",
        rep.cost,
        rep.cost / g.total_cost().max(f64::MIN_POSITIVE)
    );
    println!("peak memory      {} ({} bytes)", rep.peak.human(), rep.peak);
    if (rep.cost - file.cost).abs() > 1e-6 * rep.cost.abs().max(1.0)
        || rep.peak.get() != file.peak_memory
    {
        println!(
            "note             the file claims cost {} and peak {}; the figures above are the simulator's",
            file.cost, file.peak_memory
        );
    }
    if let Some(b) = budget {
        let b = parse_budget(&g, &b)?;
        if rep.peak > b {
            return Err(input_err(format!(
                "{}: peak {} exceeds the budget {}",
                plan.display(),
                rep.peak,
                b
            )));
        }
        println!("budget           {} ({} bytes): fits", b.human(), b);
    }
    Ok(())
}
