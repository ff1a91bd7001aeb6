//! `remat baselines`: every prior-work heuristic at every knob setting.

use anyhow::Result;
use remat::cli::{check_output, load_graph, write_output};
use remat::workflows::baselines;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON).
    model: PathBuf,
    /// Also write every setting as CSV.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// List every setting, not only each strategy's trade-off (Pareto) points.
    #[arg(long)]
    all: bool,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args { model, output, all } = args;
    if let Some(o) = &output {
        check_output(o, &[&model])?;
    }
    let g = load_graph(&model)?;
    let bar = if ctx.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    let bar = bar.with_style(
        indicatif::ProgressStyle::with_template("{msg:15} [{bar:30}] {pos}/{len}")
            .expect("valid template"),
    );
    let curves = baselines::curves(&g, &mut |name, done, total| {
        bar.set_message(name.to_string());
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let table = baselines::to_table(&g, &curves, all);
    // `-o -` is the CSV on standard output, as for every command; the
    // table then goes to standard error, so that a pipe gets the CSV
    // alone (it used to be written to a file named `-`).
    let to_stdout = output.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if to_stdout {
        eprint!("{table}");
    } else {
        out!("{table}")?;
    }
    if let Some(path) = output {
        write_output(&path, &baselines::to_csv(&g, &curves)?)?;
        if !ctx.quiet && !to_stdout {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
