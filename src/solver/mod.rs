//! MILP and LP solvers behind one small interface.
//!
//! Why our own layer instead of good_lp: the strategies need the MIP's best
//! bound (to report a certified gap when a time limit stops the search), the
//! precise termination status, warm starts, a callback for the time to the
//! first plan, and cheap re-solves of an LP after changing column bounds
//! (the ε search of two-phase rounding). good_lp exposes none of these. So a
//! formulation is written once against [`Model`], and each backend
//! translates it directly: HiGHS through `highs-sys` (the C API; see
//! [`highs`]) and the vendored CBC through `coin_cbc`'s raw bindings (see
//! [`cbc`]). LPs always run on HiGHS.

pub mod autotm;
pub mod cbc;
pub mod checkmate;
pub mod cover;
pub mod fixing;
pub mod highs;
pub mod model;
pub mod moment_bound;
pub mod step_cover;
pub mod tiered;

pub use model::{Col, Model};

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which MILP solver runs the model. Both are compiled into the binary.
/// HiGHS is the default: on the Checkmate MILP it was faster than CBC on
/// every instance but the tiniest (see benches/milp.rs and
/// results/milp_bench.csv).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Backend {
    #[default]
    Highs,
    Cbc,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::Highs, Backend::Cbc];
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Highs => "highs",
            Backend::Cbc => "cbc",
        })
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "highs" => Ok(Backend::Highs),
            "cbc" => Ok(Backend::Cbc),
            _ => Err(format!("unknown solver '{s}' (use highs or cbc)")),
        }
    }
}

/// Solver knobs, independent of the backend.
#[derive(Debug, Clone)]
pub struct Params {
    pub time_limit: Duration,
    /// Relative MIP gap at which the solver may stop and call it optimal.
    pub gap: f64,
    pub threads: usize,
    /// Let the solver print its log. Off unless `REMAT_SOLVER_LOG` is set,
    /// because the CLI's own output must stay readable and parseable.
    pub verbose: bool,
    /// Called from the solver's callbacks at each improvement and log
    /// line, in model units, for a live display of a long solve.
    pub on_progress: Option<OnProgress>,
    /// Called from the solver's callback with each improving MIP solution
    /// (all columns of the model, in its own units), so that a caller who
    /// stops waiting still has the best plan found (HiGHS only).
    pub on_solution: Option<OnSolution>,
    /// Set by whoever stopped waiting: the solver stops at its next poll
    /// of the interrupt callbacks (HiGHS: every simplex, IPM and MIP loop;
    /// not presolve or the setup before them). CBC only stops at its time
    /// limit.
    pub stop: Option<StopFlag>,
    /// HiGHS's MIP and primal feasibility tolerance. 1e-9 by default: the
    /// Checkmate models count memory in units of the largest node, where
    /// 1e-6 could admit plans kilobytes over budget. Models whose rows are
    /// of order one ask for HiGHS's defaults (1e-6): at 1e-9 HiGHS called
    /// a step cover program optimal at a bound above a known plan
    /// (MobileNet at 50% on the GH200; CBC and HiGHS at 1e-6 agree below
    /// it).
    pub feasibility_tolerance: f64,
}

#[derive(Clone)]
pub struct OnProgress(pub std::sync::Arc<dyn Fn(Progress) + Send + Sync>);

/// A solution callback: each improving solution's column values.
pub type SolutionFn = dyn Fn(&[f64]) + Send + Sync;

/// See [`Params::on_solution`].
#[derive(Clone)]
pub struct OnSolution(pub std::sync::Arc<SolutionFn>);

impl std::fmt::Debug for OnSolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnSolution")
    }
}

/// A request to stop, shared between whoever waits and whoever works.
pub type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// Whether `stop` is set (never, without a flag).
pub fn stop_requested(stop: &Option<StopFlag>) -> bool {
    stop.as_ref()
        .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
}

impl std::fmt::Debug for OnProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnProgress")
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            time_limit: Duration::from_secs(600),
            gap: 1e-4,
            threads: 1,
            verbose: verbose_from_env(),
            on_progress: None,
            on_solution: None,
            stop: None,
            feasibility_tolerance: 1e-9,
        }
    }
}

/// `REMAT_SOLVER_LOG=1` turns on the solvers' own logs.
pub fn verbose_from_env() -> bool {
    std::env::var_os("REMAT_SOLVER_LOG").is_some_and(|v| !v.is_empty() && v != "0")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MipStatus {
    /// Proven optimal within the requested gap.
    Optimal,
    /// A solution, but the search stopped (time limit) before proving it.
    Feasible,
    /// Proven to have no solution.
    Infeasible,
    /// Stopped before finding any solution.
    NoSolution,
}

#[derive(Debug, Clone)]
pub struct MipResult {
    pub status: MipStatus,
    /// The best solution found, if any.
    pub x: Option<Vec<f64>>,
    pub objective: Option<f64>,
    /// Proven lower bound on the optimum (minimisation), if the solver has
    /// one.
    pub bound: Option<f64>,
    /// Seconds from the start of the run to the first solution found by the
    /// solver (a warm start counts), when the backend reports it.
    pub first_solution_secs: Option<f64>,
    pub seconds: f64,
    /// The run's incumbent and bound over time, in model units, when the
    /// backend reports them (HiGHS does, through its callbacks).
    pub trace: Vec<Progress>,
    /// The solver's error, when the run ended on one and what it had (its
    /// incumbent, or the warm start) is still returned as `Feasible`.
    pub failed: Option<String>,
}

impl MipResult {
    /// Why a run that has a solution did not prove it: for the answer's
    /// detail line, which must not blame the clock for a solver error.
    pub fn stopped_by(&self) -> String {
        match &self.failed {
            Some(e) => format!("unproven: the solver ended in an error ({e})"),
            None => "stopped by its time limit".into(),
        }
    }
}

/// One point of a run's progress: the best plan's cost and the best lower
/// bound known at `secs`. Telemetry for time-to-gap measurements only:
/// every reported cost still comes from the simulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub secs: f64,
    pub cost: Option<f64>,
    pub bound: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SolverError {
    #[error("{backend} rejected the model: {msg}")]
    Model { backend: Backend, msg: String },
    #[error("{backend} failed: {msg}")]
    Failed { backend: Backend, msg: String },
}

/// Solves a MILP (or an LP, if no column is integer) on `backend`, starting
/// from `warm` if given (a full column vector the caller believes feasible).
pub fn solve_mip(
    model: &Model,
    backend: Backend,
    params: &Params,
    warm: Option<&[f64]>,
) -> Result<MipResult, SolverError> {
    // A model without columns (AutoTM's on a graph with no edges has no
    // value to place) is settled here: HiGHS answers it with "model empty"
    // and no solution, which reached the user as a solver failure.
    if model.num_cols() == 0 {
        let feasible = model.max_violation(&[]) <= 0.0;
        return Ok(MipResult {
            status: if feasible {
                MipStatus::Optimal
            } else {
                MipStatus::Infeasible
            },
            x: feasible.then(Vec::new),
            objective: feasible.then_some(0.0),
            bound: feasible.then_some(0.0),
            first_solution_secs: feasible.then_some(0.0),
            seconds: 0.0,
            trace: Vec::new(),
            failed: None,
        });
    }
    match backend {
        Backend::Highs => highs::solve_mip(model, params, warm),
        Backend::Cbc => cbc::solve_mip(model, params, warm),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpStatus {
    Optimal,
    Infeasible,
    /// Time limit or numerical trouble: no trustworthy optimum.
    Stopped,
}

#[derive(Debug, Clone)]
pub struct LpResult {
    pub status: LpStatus,
    pub objective: f64,
    pub x: Vec<f64>,
    /// Row duals at the optimum (empty otherwise): any multipliers give a
    /// Lagrangian bound, see [`fixing`].
    pub row_dual: Vec<f64>,
    pub seconds: f64,
}
