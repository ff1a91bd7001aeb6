//! `remat report`: the Table-2 style summary of sweep CSVs.

use anyhow::Result;
use remat::cli::{check_output, input_err, plural, write_atomic};
use remat::reports::table;
use remat::workflows::resultlog::LogError;
use remat::workflows::sweep::{self, Row, SweepError};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sweep CSV files (others, such as benchmark CSVs, are skipped).
    #[arg(required = true)]
    csv: Vec<PathBuf>,
    /// Also write the report (Markdown) to this file.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Reads every sweep CSV among `paths`. A CSV of another kind is skipped
/// with a note, so that `results/*.csv` works although the folder also
/// holds benchmark tables; only when none is a sweep CSV is that an error.
/// Rows of one model from different graphs or devices are refused, and a
/// pair given twice with the same result counts once ([`table::merge`]).
pub fn read_sweeps(paths: &[PathBuf], quiet: bool) -> Result<Vec<Row>> {
    let mut sources = Vec::new();
    for p in paths {
        match sweep::read_csv(p) {
            Ok(r) => sources.push((p.display().to_string(), r)),
            Err(SweepError::Log(LogError::OtherKind { .. })) if paths.len() > 1 => {
                if !quiet {
                    eprintln!("note: skipping {}: not a sweep CSV", p.display());
                }
            }
            Err(e) => return Err(input_err(e.to_string())),
        }
    }
    if sources.is_empty() {
        return Err(input_err(format!(
            "none of {} is a sweep CSV",
            paths
                .iter()
                .map(|p: &PathBuf| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let merged = table::merge(&sources).map_err(|e| input_err(e.to_string()))?;
    if merged.duplicates > 0 && !quiet {
        eprintln!(
            "note: {} counted once: the same pair with the same result was read before",
            plural(merged.duplicates, "repeated row", "repeated rows")
        );
    }
    Ok(merged.rows)
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    if let Some(o) = &args.output {
        let inputs: Vec<&std::path::Path> = args.csv.iter().map(PathBuf::as_path).collect();
        check_output(o, &inputs)?;
    }
    let rows = read_sweeps(&args.csv, ctx.quiet)?;
    // Sweep CSVs with a header alone printed nothing and exited 0.
    if rows.is_empty() {
        return Err(input_err(format!(
            "{}: no rows to report",
            args.csv
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let text = table::render(&table::summarize(&rows));
    // `-o -` is standard output, where the report goes anyway (it used to
    // be written to a file named `-` as well).
    let to_stdout = args.output.as_ref().is_some_and(|o| o.as_os_str() == "-");
    out!("{text}")?;
    if let Some(o) = args.output.filter(|_| !to_stdout) {
        write_atomic(&o, text.as_bytes())?;
    }
    Ok(())
}
