//! `remat solve`: one plan within one budget, with a one-screen summary.

use super::SolverArgs;
use anyhow::Result;
use remat::cli::{input_err, load_graph, parse_budget, write_atomic};
use remat::solve::{self, Outcome};
use remat::strategies;
use remat::Graph;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON).
    model: PathBuf,
    /// Memory budget: bytes, KB/MB/GB, KiB/MiB/GiB, or NN% of the checkpoint-all peak.
    #[arg(short, long)]
    budget: String,
    /// Strategy name (see `remat strategies`). The default proves its
    /// answer optimal when it can; `remat-fast` answers within a minute.
    #[arg(short, long, default_value = "remat-exact")]
    strategy: String,
    /// Write the plan: JSON if the name ends in .json, text otherwise.
    #[arg(long)]
    plan: Option<PathBuf>,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args) -> Result<()> {
    let Args {
        model,
        budget,
        strategy,
        plan,
        solver,
    } = args;
    let g = load_graph(&model)?;
    let budget = parse_budget(&g, &budget)?;
    let strat = strategies::by_name(&strategy).ok_or_else(|| {
        input_err(format!(
            "unknown strategy '{strategy}'; available: {}",
            strategies::names().join(", ")
        ))
    })?;
    let out = match solve::run(&g, strat.as_ref(), budget, &solver.options()) {
        Err(e @ solve::SolveError::BelowMinimum { .. }) => return Err(input_err(e.to_string())),
        r => r?,
    };
    print_summary(&g, &out);
    if let Some(path) = plan {
        let Some(pf) = out.plan_file(&g) else {
            return Err(anyhow::anyhow!("no plan to write: status {}", out.status));
        };
        let bytes = if path.extension().is_some_and(|e| e == "json") {
            serde_json::to_vec_pretty(&pf)?
        } else {
            out.plan
                .as_ref()
                .map(|p| p.to_text(&g))
                .unwrap_or_default()
                .into_bytes()
        };
        write_atomic(&path, &bytes)?;
        println!("plan written     {}", path.display());
    }
    Ok(())
}

fn print_summary(g: &Graph, out: &Outcome) {
    println!("model            {} ({} nodes)", g.name, g.len());
    println!("strategy         {}", out.strategy);
    println!(
        "budget           {} ({} bytes)",
        out.budget.human(),
        out.budget
    );
    println!("status           {}", out.status);
    if let Some(sim) = &out.sim {
        let base = g.total_cost();
        println!(
            "cost             {} ({:.4}x checkpoint-all, {} recomputations)",
            sim.cost,
            if base > 0.0 { sim.cost / base } else { 1.0 },
            sim.computations - g.len()
        );
        println!("peak memory      {} ({} bytes)", sim.peak.human(), sim.peak);
    }
    if let Some(lb) = out.lower_bound {
        let ratio = out.cost().map(|c| if lb > 0.0 { c / lb } else { 1.0 });
        match ratio {
            Some(r) => println!(
                "lower bound      {lb} (plan/bound = {r:.4}, gap {:.3}%)",
                out.gap().unwrap_or(0.0) * 100.0
            ),
            None => println!("lower bound      {lb}"),
        }
    }
    if let Some(d) = &out.detail {
        println!("detail           {d}");
    }
    println!("solve time       {:.2} s", out.seconds);
}
