//! One module per subcommand, as cargo does: each holds its clap arguments
//! (`Args`) and its handler (`run`), so that adding or changing a command
//! touches one file, and `main.rs` only dispatches.

/// `print!` for command output. `print!` panics when standard output
/// cannot be written (`> /dev/full`: exit 101 and a backtrace); this
/// returns the error instead, so that the command ends with one line and
/// exit code 1. A closed pipe never gets here: `main` restores SIGPIPE, and
/// `remat ... | head` ends quietly as any Unix filter does.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::commands::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for command output, returning the write's error as [`out!`] does.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::commands::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod baselines;
pub mod graph;
pub mod hints;
pub mod inspect;
pub mod max_batch;
pub mod plot;
pub mod plot_plan;
pub mod report;
pub mod simulate;
pub mod solve;
pub mod strategies;
pub mod sweep;
pub mod zoo;

use remat::solver::Backend;
use remat::strategies::SolveOptions;
use std::time::Duration;

pub use remat::cli::write_stdout;

/// The note for a plan replayed on a device whose fast memory it
/// overflows: it fits the budget it was made for, not the card. `solve`
/// says so of a budget over the device; the commands that replay a plan
/// file said nothing and reported "fits".
pub fn over_device(
    peak: remat::Bytes,
    d: &remat::device::Device,
    budget: Option<remat::Bytes>,
) -> Option<String> {
    (peak > d.fast_capacity).then(|| {
        let what = match budget {
            Some(b) if peak <= b => "the plan fits the budget, not the device",
            // Without a budget there is nothing else it fits (the note
            // said "fits the budget" with none given).
            _ => "it does not fit on the device",
        };
        format!(
            "the plan's peak {} is more than {}'s fast memory ({}): {what}",
            peak.human(),
            d.name,
            d.fast_capacity.human()
        )
    })
}

/// What every command shares: the global flags.
pub struct Ctx {
    /// No progress display and no notes; results and errors still print.
    pub quiet: bool,
}

/// The solver flags every solving command shares.
#[derive(clap::Args, Clone)]
pub struct SolverArgs {
    /// Stop each solve after this many seconds with the best plan so far
    /// [default: 60 for solve and for each sweep pair, 10 for each solve
    /// of a max-batch search].
    #[arg(long, allow_hyphen_values = true, value_parser = parse_seconds)]
    pub time_limit: Option<f64>,
    /// Relative gap at which the solver may stop: 1% or 0.01. A plan is
    /// called optimal only within 0.01% (or by the solver's proof); a looser
    /// gap stops sooner and reports `feasible` with its gap.
    #[arg(long, default_value = "0.01%", allow_hyphen_values = true, value_parser = parse_gap)]
    pub gap: f64,
    /// Solver threads (at most this machine's cores); also the annealing's
    /// independent walks at once under `--search-orders`.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true, value_parser = parse_threads)]
    pub threads: usize,
    /// MILP backend: highs or cbc.
    #[arg(long, default_value_t = Backend::default())]
    pub solver: Backend,
    /// Forbid recomputation: remat-tiered then finds the offload-only
    /// optimum (no other strategy takes it).
    #[arg(long)]
    pub no_recompute: bool,
    /// Also plan in another node order, found by a search over orders,
    /// with half of the time where a schedule in it is found; the cheaper
    /// plan wins; a plan more than 3% from its bound is then annealed in
    /// any order in the last quarter (remat-fast and
    /// remat-exact, on graphs with another topological order and no
    /// multi-output kernels). Without it, another order is tried only
    /// where no plan in the file's order fits. A sweep's CSV does not
    /// record it: rows resume with or without it.
    #[arg(long)]
    pub search_orders: bool,
}

/// The one strategy that honours `--no-recompute`.
const NO_RECOMPUTE_TAKER: &str = "remat-tiered";

/// Default time limits, per solve, from measurements (docs/commands.md, "Time
/// limits"): on the public benchmark graphs a 600 s limit returned the
/// same plan as 60 s in all 15 instances, so a single solve gets 60 s. A
/// max-batch search runs a few dozen solves per strategy, so each gets 10.
pub const SOLVE_SECONDS: f64 = 60.0;
pub const MAX_BATCH_SECONDS: f64 = 10.0;

impl SolverArgs {
    /// `--no-recompute` with a strategy that cannot honour it used to be
    /// ignored, and the plan printed recomputed anyway. checkpoint-all
    /// never recomputes, so it keeps the flag by construction.
    pub fn check_no_recompute<'a>(
        &self,
        strategies: impl IntoIterator<Item = &'a str>,
    ) -> anyhow::Result<()> {
        if !self.no_recompute {
            return Ok(());
        }
        let others: Vec<&str> = strategies
            .into_iter()
            .filter(|s| ![NO_RECOMPUTE_TAKER, "checkpoint-all"].contains(s))
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        Err(remat::cli::input_err(format!(
            "--no-recompute applies only to {NO_RECOMPUTE_TAKER} (with --device); not to {}",
            others.join(", ")
        )))
    }

    /// A note when `--search-orders` reaches no strategy that searches
    /// other node orders: it was ignored without a word (`-s dtr-greedy`),
    /// where `--no-recompute` is refused. A note, not an error: in a sweep
    /// the flag serves whichever strategies take it.
    pub fn note_search_orders<'a>(
        &self,
        strategies: impl IntoIterator<Item = &'a dyn remat::strategies::Strategy>,
        quiet: bool,
    ) {
        if !self.search_orders || quiet {
            return;
        }
        let names: Vec<&str> = strategies.into_iter().map(|s| s.name()).collect();
        let takers: Vec<&str> = remat::strategies::every()
            .filter(|s| s.may_reorder())
            .map(|s| s.name())
            .collect();
        if names.iter().any(|n| takers.contains(n)) {
            return;
        }
        eprintln!(
            "note: --search-orders has no effect on {}: only {} search other node orders",
            names.join(", "),
            takers.join(", ")
        );
    }

    /// The options, with `default_secs` when no `--time-limit` was given.
    pub fn options(&self, default_secs: f64) -> SolveOptions {
        SolveOptions {
            time_limit: Duration::from_secs_f64(self.time_limit.unwrap_or(default_secs)),
            gap: self.gap,
            threads: self.threads,
            backend: self.solver,
            no_recompute: self.no_recompute,
            search_orders: self.search_orders,
            ..SolveOptions::default()
        }
    }
}

/// A year: longer limits are typos, and `Duration` cannot hold `inf`.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

pub(crate) fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number of seconds from 0 to {MAX_SECONDS} (a year)"
        )),
    }
}

/// `1%` or `0.01`. A bare number above 1 is refused rather than read as
/// a fraction: `--gap 5` almost always means 5%, not 500%.
fn parse_gap(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    let v = num
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or("expected a relative gap such as 1% or 0.01")?
        / scale;
    if v > 1.0 {
        return Err(if scale == 1.0 {
            format!("a gap above 1 (100%) means nothing; for {num} percent write --gap {num}%")
        } else {
            "a gap above 100% means nothing".to_string()
        });
    }
    Ok(v)
}

/// `--jobs`: how many solves run at once. Zero used to mean one without a
/// word, and `-1` got clap's advice to write `-- -1`.
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a number of parallel solves, at least 1".into()),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=cores).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a number of threads from 1 to {cores} (this machine's cores)"
        )),
    }
}

/// A policy that moves values to a slow tier, named in `-s` without
/// `--device`, is a usage mistake (exit 2) in every command: `sweep` wrote a
/// `not-applicable` row and exited 0 where `solve` and `max-batch` refuse.
pub fn check_device_named(list: &str, device: bool) -> anyhow::Result<()> {
    use remat::cli::input_err;
    use remat::strategies;
    if device {
        return Ok(());
    }
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "tiered" {
            return Err(input_err(
                "-s tiered: its strategies move values to a slow tier; pass --device FILE (devices/*.yaml) to give them one",
            ));
        }
        if strategies::tiered_policies()
            .iter()
            .any(|t| t.name() == name)
        {
            return Err(input_err(format!(
                "-s {name}: it moves values to a slow tier; pass --device FILE (devices/*.yaml) to give it one"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_as_percent_or_fraction() {
        assert_eq!(parse_gap("1%"), Ok(0.01));
        assert_eq!(parse_gap("0.01"), Ok(0.01));
        assert!(parse_gap("5").unwrap_err().contains("--gap 5%"));
        for bad in ["-1", "nan", "inf", "150%", "x"] {
            assert!(parse_gap(bad).is_err(), "{bad}");
        }
        for bad in ["inf", "1e308", "-1", "nan"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert!(parse_threads("100000").is_err());
        assert!(parse_threads("0").is_err());
    }
}
