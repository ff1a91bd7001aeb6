//! One module per subcommand, as cargo does: each holds its clap arguments
//! (`Args`) and its handler (`run`), so that adding or changing a command
//! touches one file, and `main.rs` only dispatches.

pub mod baselines;
pub mod graph;
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

/// The solver flags every solving command shares.
#[derive(clap::Args, Clone)]
pub struct SolverArgs {
    /// Stop the solver after this many seconds and return the best plan so far.
    #[arg(long, default_value_t = 600.0)]
    pub time_limit: f64,
    /// Relative MIP gap at which the solver may stop and call the plan optimal.
    #[arg(long, default_value_t = 1e-4)]
    pub gap: f64,
    /// Solver threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// MILP backend: highs or cbc.
    #[arg(long, default_value_t = Backend::default())]
    pub solver: Backend,
}

impl SolverArgs {
    pub fn options(&self) -> SolveOptions {
        SolveOptions {
            time_limit: Duration::from_secs_f64(self.time_limit.max(0.0)),
            gap: self.gap,
            threads: self.threads.max(1),
            backend: self.solver,
            ..SolveOptions::default()
        }
    }
}
