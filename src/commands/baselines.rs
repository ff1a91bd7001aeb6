//! `remat baselines`: every prior-work heuristic at every knob setting.

use anyhow::Result;
use remat::cli::{check_output, interrupt, load_graph, write_output, Interrupted};
use remat::workflows::baselines;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    /// Stop evaluating settings after this many seconds and report those
    /// evaluated, counting the rest [default: no limit]. Ctrl-C does the
    /// same, then exits with 130.
    #[arg(long, allow_hyphen_values = true, value_parser = super::parse_seconds)]
    time_limit: Option<f64>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        output,
        all,
        time_limit,
    } = args;
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
    // Every setting takes one replay; on a 50,000-node chain that is more
    // than ten minutes in all, so a run can be cut short and still report
    // what it measured.
    let deadline = time_limit.map(|t| Instant::now() + Duration::from_secs_f64(t));
    interrupt::install();
    let stop = || interrupt::requested() || deadline.is_some_and(|d| Instant::now() >= d);
    let curves = baselines::curves(&g, &stop, &mut |name, done, total| {
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
    if baselines::stopped_early(&curves) {
        if interrupt::requested() {
            return Err(Interrupted.into());
        }
        if !ctx.quiet {
            eprintln!(
                "note: the time limit ran out before every setting was evaluated; the table says how many were not"
            );
        }
    }
    Ok(())
}
