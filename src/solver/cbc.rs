//! The vendored CBC (built by `cbc-src`, linked statically) through
//! `coin_cbc`'s raw bindings. CBC is not thread-safe: `coin_cbc` serialises
//! every solve behind a process-wide lock, so concurrent callers queue.

use super::{Backend, MipResult, MipStatus, Model, Params, SolverError};
use coin_cbc::raw;
use std::ffi::CString;
use std::time::Instant;

/// CBC reads bounds beyond ±1e30 as infinite; IEEE infinities are mapped
/// there so no backend depends on how the other spells "unbounded".
fn finite(v: f64) -> f64 {
    v.clamp(-1e30, 1e30)
}

fn set(m: &mut raw::Model, k: &str, v: &str) {
    let (k, v) = (
        CString::new(k).expect("no NUL"),
        CString::new(v).expect("no NUL"),
    );
    m.set_parameter(&k, &v);
}

pub fn solve_mip(m: &Model, p: &Params, warm: Option<&[f64]>) -> Result<MipResult, SolverError> {
    let start = Instant::now();
    let (cs, ci, cv) = m.to_csc();
    let fin = |v: &[f64]| v.iter().map(|&x| finite(x)).collect::<Vec<f64>>();
    let mut cbc = raw::Model::new();
    cbc.load_problem(
        m.num_cols(),
        m.num_rows(),
        &cs,
        &ci,
        &cv,
        Some(&fin(&m.col_lower)),
        Some(&fin(&m.col_upper)),
        Some(&m.col_cost),
        Some(&fin(&m.row_lower)),
        Some(&fin(&m.row_upper)),
    );
    for (j, &int) in m.integer.iter().enumerate() {
        if int {
            cbc.set_integer(j);
        }
    }
    if !p.verbose {
        set(&mut cbc, "log", "0");
        set(&mut cbc, "slog", "0");
        cbc.set_log_level(0);
    }
    set(&mut cbc, "timeMode", "elapsed");
    set(
        &mut cbc,
        "sec",
        &format!("{}", p.time_limit.as_secs_f64().max(0.01)),
    );
    set(&mut cbc, "ratio", &format!("{}", p.gap.max(0.0)));
    // The vendored CBC is built without thread support, so `threads`
    // is not passed (CBC would print an error for it).
    if let Some(x) = warm {
        if x.len() == m.num_cols() {
            cbc.set_initial_solution(x);
        }
    }
    cbc.solve();
    let seconds = start.elapsed().as_secs_f64();
    if cbc.is_abandoned() {
        return Err(SolverError::Failed {
            backend: Backend::Cbc,
            msg: "CBC abandoned the search (numerical trouble)".into(),
        });
    }
    // CBC's status flags do not say reliably whether a solution exists
    // after a time limit, so the vector is checked against the model.
    let mut x: Vec<f64> = cbc.col_solution().to_vec();
    let mut feasible = m.max_violation(&x) <= 1e-5;
    let mut proven_optimal = cbc.is_proven_optimal();
    // With a warm start CBC searches under the incumbent's cutoff; when
    // nothing better exists it may report the search "infeasible" and not
    // hand the incumbent back. Then the incumbent is the answer (optimal if
    // the search completed).
    if let Some(w) = warm.filter(|w| w.len() == m.num_cols() && m.max_violation(w) <= 1e-6) {
        if !feasible || m.objective(&x) > m.objective(w) {
            let complete = proven_optimal || cbc.is_proven_infeasible();
            x = w.to_vec();
            feasible = true;
            proven_optimal = complete;
        }
    }
    let bound = if m.is_mip() {
        Some(cbc.best_possible_value()).filter(|b| b.is_finite() && b.abs() < 1e40)
    } else {
        None
    };
    let status = if feasible && proven_optimal {
        MipStatus::Optimal
    } else if feasible {
        MipStatus::Feasible
    } else if cbc.is_proven_infeasible()
        || cbc.secondary_status() == raw::SecondaryStatus::LinearRelaxationInfeasible
    {
        MipStatus::Infeasible
    } else {
        MipStatus::NoSolution
    };
    let x = feasible.then_some(x);
    let objective = x.as_ref().map(|x| m.objective(x));
    // A proven optimum's bound is its objective (up to the gap).
    let bound = match status {
        MipStatus::Optimal => objective.map(|o| {
            let proven = o - p.gap * o.abs();
            bound.map_or(proven, |b| b.max(proven))
        }),
        _ => bound,
    };
    Ok(MipResult {
        status,
        x,
        objective,
        bound,
        first_solution_secs: None,
        trace: Vec::new(),
        seconds,
        failed: None,
    })
}
