//! `remat plot`: the overhead-vs-budget figure of a sweep CSV.

use anyhow::Result;
use remat::cli::input_err;
use remat::reports::plot;
use remat::workflows::sweep;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sweep CSV.
    csv: PathBuf,
    /// Output image (.svg or .png).
    #[arg(short, long)]
    output: PathBuf,
    /// Model to plot, if the CSV has several.
    #[arg(long)]
    model: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let Args { csv, output, model } = args;
    let rows = sweep::read_csv(&csv).map_err(|e| input_err(e.to_string()))?;
    let model = match model {
        Some(m) => m,
        None => {
            let mut names: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
            names.dedup();
            match names.as_slice() {
                [one] => one.to_string(),
                [] => return Err(input_err(format!("{}: no rows", csv.display()))),
                _ => {
                    return Err(input_err(format!(
                        "{} has several models; pick one with --model",
                        csv.display()
                    )))
                }
            }
        }
    };
    plot::plot_sweep(&rows, &model, &output).map_err(|e| input_err(e.to_string()))?;
    eprintln!("wrote {}", output.display());
    Ok(())
}
