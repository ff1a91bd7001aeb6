//! `remat report`: the Table-2 style summary of sweep CSVs.

use anyhow::Result;
use remat::cli::{input_err, write_atomic};
use remat::reports::table;
use remat::workflows::sweep;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sweep CSV files.
    #[arg(required = true)]
    csv: Vec<PathBuf>,
    /// Also write the report (Markdown) to this file.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let mut rows = Vec::new();
    for p in &args.csv {
        rows.extend(sweep::read_csv(p).map_err(|e| input_err(e.to_string()))?);
    }
    let text = table::render(&table::summarize(&rows));
    print!("{text}");
    if let Some(o) = args.output {
        write_atomic(&o, text.as_bytes())?;
    }
    Ok(())
}
