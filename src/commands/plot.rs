//! `remat plot`: the overhead-vs-budget figure of a sweep CSV.

use anyhow::Result;
use remat::cli::{check_output, input_err};
use remat::reports::plot;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sweep CSV files (others, such as benchmark CSVs, are skipped).
    #[arg(required = true)]
    csv: Vec<PathBuf>,
    /// Output image (.svg or .png).
    #[arg(short, long)]
    output: PathBuf,
    /// Model to plot, if the CSV has several.
    #[arg(long)]
    model: Option<String>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args { csv, output, model } = args;
    let inputs: Vec<&std::path::Path> = csv.iter().map(PathBuf::as_path).collect();
    check_output(&output, &inputs)?;
    let rows = super::report::read_sweeps(&csv, ctx.quiet)?;
    let csv = csv
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let model = match model {
        Some(m) => m,
        None => {
            let mut names: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            match names.as_slice() {
                [one] => one.to_string(),
                [] => return Err(input_err(format!("{}: no rows", csv))),
                _ => {
                    return Err(input_err(format!(
                        "{} has several models; pick one with --model",
                        csv
                    )))
                }
            }
        }
    };
    plot::plot_sweep(&rows, &model, &output).map_err(|e| input_err(e.to_string()))?;
    if !ctx.quiet {
        eprintln!("wrote {}", output.display());
    }
    Ok(())
}
