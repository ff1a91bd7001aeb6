//! The `remat` command line: a thin clap layer. Each subcommand's flags and
//! handler live in `commands/`; this file only parses and dispatches, and
//! turns errors into exit codes.

mod commands;

use clap::{Parser, Subcommand};
use remat::cli::exit_code;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "remat",
    version,
    about = "Find the execution plan with the least extra compute that trains a network within a memory budget"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress display and no notes on standard error.
    #[arg(short, long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Print node and edge counts, costs, the checkpoint-all peak and the smallest budget (no plan fits below it).
    Inspect(commands::inspect::Args),
    /// Write the explicit training graph (after backward generation and ordering).
    Graph(commands::graph::Args),
    /// Find a plan within a memory budget and print a summary.
    Solve(commands::solve::Args),
    /// Check a plan file against a graph and report its cost and peak.
    Simulate(commands::simulate::Args),
    /// Write a plan's CachedArrays-style hint stream (will_read, will_write, archive, retire) as JSON.
    Hints(commands::hints::Args),
    /// List the available strategies.
    Strategies(commands::strategies::Args),
    /// Solve every (strategy, budget) pair and write one CSV row per pair as it finishes;
    /// re-running resumes.
    Sweep(commands::sweep::Args),
    /// Plot overhead vs budget from a sweep CSV (.svg or .png).
    Plot(commands::plot::Args),
    /// Plot the memory in use over a plan's statements against the budget, recomputations marked.
    PlotPlan(commands::plot_plan::Args),
    /// Summarize sweep CSVs: cost relative to the ILP per strategy, and the smallest feasible budget.
    Report(commands::report::Args),
    /// Find the largest batch each strategy trains within a memory size at bounded overhead.
    MaxBatch(commands::max_batch::Args),
    /// Generate model graphs: the paper's networks, GPT-2, synthetic families; --all regenerates models/ and budgets/.
    Zoo(commands::zoo::Args),
    /// Every prior-work heuristic at every knob setting: simulated cost and peak (trade-off curves).
    Baselines(commands::baselines::Args),
}

fn main() -> ExitCode {
    // `remat inspect m.yaml | head` closes our stdout early: die quietly of
    // SIGPIPE like any Unix filter, instead of panicking in `println!`.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let ctx = commands::Ctx { quiet: cli.quiet };
    let result = match cli.command {
        Command::Inspect(a) => commands::inspect::run(a, &ctx),
        Command::Graph(a) => commands::graph::run(a, &ctx),
        Command::Solve(a) => commands::solve::run(a, &ctx),
        Command::Simulate(a) => commands::simulate::run(a, &ctx),
        Command::Hints(a) => commands::hints::run(a, &ctx),
        Command::Strategies(a) => commands::strategies::run(a, &ctx),
        Command::Sweep(a) => commands::sweep::run(a, &ctx),
        Command::Plot(a) => commands::plot::run(a, &ctx),
        Command::PlotPlan(a) => commands::plot_plan::run(a, &ctx),
        Command::Report(a) => commands::report::run(a, &ctx),
        Command::MaxBatch(a) => commands::max_batch::run(a, &ctx),
        Command::Zoo(a) => commands::zoo::run(a, &ctx),
        Command::Baselines(a) => commands::baselines::run(a, &ctx),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = exit_code(&e);
            let msg = format!("{e:#}");
            // Bad input is one line, whatever the file names in it hold
            // (a path with a newline split it in two).
            let msg = if code == 2 {
                remat::cli::shorten_line(&remat::cli::escape_controls(&msg))
            } else {
                msg
            };
            eprintln!("error: {msg}");
            ExitCode::from(code)
        }
    }
}

/// A command-line mistake in one line, exit code 2, like every other bad
/// input: clap's own rendering adds a blank line, usage and "try --help",
/// which scripts reading the last line of stderr then take for the error.
/// Help and version requests print as clap has them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    // Everything before the usage block, on one line: the message, the
    // arguments it lists, and clap's tip when it has one.
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut msg = String::new();
    for p in parts {
        if !msg.is_empty() {
            msg.push_str(if p.starts_with("tip:") { "; " } else { " " });
        }
        msg.push_str(p);
    }
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    eprintln!("error: {msg} (see --help)");
    ExitCode::from(2)
}
