//! HiGHS through its C API (`highs-sys`, built from source and linked
//! statically). The C API rather than the `highs` crate, because we need the
//! MIP dual bound, callbacks (time to the first solution) and repeated LP
//! solves with changed bounds on one instance.

use super::{LpResult, LpStatus, MipResult, MipStatus, Model, Params, Progress, SolverError};
use crate::solver::Backend;
use highs_sys::*;
use std::ffi::{c_char, c_int, c_void, CString};
use std::time::Instant;

/// One HiGHS instance. Owns the C object; quiet unless asked otherwise.
pub struct Highs {
    ptr: *mut c_void,
}

// A Highs instance is used by one thread at a time; HiGHS instances share
// no mutable state except the global task scheduler, which is thread-safe.
unsafe impl Send for Highs {}

impl Drop for Highs {
    fn drop(&mut self) {
        unsafe { Highs_destroy(self.ptr) }
    }
}

fn err(msg: impl Into<String>) -> SolverError {
    SolverError::Failed {
        backend: Backend::Highs,
        msg: msg.into(),
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("option names have no NUL")
}

impl Highs {
    pub fn new(verbose: bool) -> Highs {
        let ptr = unsafe { Highs_create() };
        let mut h = Highs { ptr };
        h.set_bool("output_flag", verbose);
        h.set_bool("log_to_console", verbose);
        h
    }

    pub fn set_bool(&mut self, name: &str, v: bool) {
        let n = cstr(name);
        unsafe { Highs_setBoolOptionValue(self.ptr, n.as_ptr(), v as HighsInt) };
    }

    pub fn set_int(&mut self, name: &str, v: i64) {
        let n = cstr(name);
        let v = v.clamp(HighsInt::MIN as i64, HighsInt::MAX as i64) as HighsInt;
        unsafe { Highs_setIntOptionValue(self.ptr, n.as_ptr(), v) };
    }

    pub fn set_double(&mut self, name: &str, v: f64) {
        let n = cstr(name);
        unsafe { Highs_setDoubleOptionValue(self.ptr, n.as_ptr(), v) };
    }

    pub fn set_string(&mut self, name: &str, v: &str) {
        let (n, v) = (cstr(name), cstr(v));
        unsafe { Highs_setStringOptionValue(self.ptr, n.as_ptr(), v.as_ptr()) };
    }

    fn apply(&mut self, p: &Params) {
        self.set_double("time_limit", p.time_limit.as_secs_f64().max(0.0));
        self.set_double("mip_rel_gap", p.gap.max(0.0));
        self.set_int("threads", p.threads.max(1) as i64);
        // Params::feasibility_tolerance says why 1e-9 is the default.
        self.set_double("mip_feasibility_tolerance", p.feasibility_tolerance);
        self.set_double("primal_feasibility_tolerance", p.feasibility_tolerance);
        // Expert tuning without a rebuild: `REMAT_HIGHS_OPTIONS=name=value,...`
        // (HiGHS option names; values parsed by HiGHS, unknown ones ignored).
        if let Ok(opts) = std::env::var("REMAT_HIGHS_OPTIONS") {
            for (k, v) in opts.split(',').filter_map(|kv| kv.split_once('=')) {
                if let (Ok(k), Ok(v)) = (CString::new(k.trim()), CString::new(v.trim())) {
                    unsafe { Highs_setOptionValue(self.ptr, k.as_ptr(), v.as_ptr()) };
                }
            }
        }
    }

    /// Loads `m` (row-wise, as stored). `integer` = false loads the LP.
    pub fn pass(&mut self, m: &Model, integer: bool) -> Result<(), SolverError> {
        let start: Vec<HighsInt> = m.row_start[..m.num_rows()]
            .iter()
            .map(|&s| s as HighsInt)
            .collect();
        let index: Vec<HighsInt> = m.row_index.iter().map(|&c| c as HighsInt).collect();
        // An all-continuous integrality vector makes HiGHS treat the model
        // as an LP, so one call serves both.
        let integrality: Vec<HighsInt> = m
            .integer
            .iter()
            .map(|&b| {
                if b && integer {
                    kHighsVarTypeInteger
                } else {
                    kHighsVarTypeContinuous
                }
            })
            .collect();
        let st = unsafe {
            Highs_passMip(
                self.ptr,
                m.num_cols() as HighsInt,
                m.num_rows() as HighsInt,
                m.num_nonzeros() as HighsInt,
                kHighsMatrixFormatRowwise,
                kHighsObjSenseMinimize,
                0.0,
                m.col_cost.as_ptr(),
                m.col_lower.as_ptr(),
                m.col_upper.as_ptr(),
                m.row_lower.as_ptr(),
                m.row_upper.as_ptr(),
                start.as_ptr(),
                index.as_ptr(),
                m.row_value.as_ptr(),
                integrality.as_ptr(),
            )
        };
        if st == kHighsStatusError {
            return Err(SolverError::Model {
                backend: Backend::Highs,
                msg: "passModel returned an error".into(),
            });
        }
        Ok(())
    }

    pub fn set_solution(&mut self, x: &[f64]) -> bool {
        let st = unsafe {
            Highs_setSolution(
                self.ptr,
                x.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        st != kHighsStatusError
    }

    pub fn change_col_bounds(&mut self, from: usize, lower: &[f64], upper: &[f64]) {
        if lower.is_empty() {
            return;
        }
        unsafe {
            Highs_changeColsBoundsByRange(
                self.ptr,
                from as HighsInt,
                (from + lower.len() - 1) as HighsInt,
                lower.as_ptr(),
                upper.as_ptr(),
            )
        };
    }

    /// Appends rows `rows` of `m` to the loaded model. HiGHS keeps its
    /// basis (the new rows' slacks basic), so the next dual simplex solve
    /// starts from the last optimum.
    pub fn add_rows(&mut self, m: &Model, rows: &[usize]) -> Result<(), SolverError> {
        let (mut starts, mut index, mut value) = (Vec::new(), Vec::new(), Vec::new());
        for &r in rows {
            starts.push(index.len() as HighsInt);
            for p in m.row_start[r]..m.row_start[r + 1] {
                index.push(m.row_index[p] as HighsInt);
                value.push(m.row_value[p]);
            }
        }
        let lower: Vec<f64> = rows.iter().map(|&r| m.row_lower[r]).collect();
        let upper: Vec<f64> = rows.iter().map(|&r| m.row_upper[r]).collect();
        let st = unsafe {
            Highs_addRows(
                self.ptr,
                rows.len() as HighsInt,
                lower.as_ptr(),
                upper.as_ptr(),
                index.len() as HighsInt,
                starts.as_ptr(),
                index.as_ptr(),
                value.as_ptr(),
            )
        };
        if st == kHighsStatusError {
            return Err(err("addRows returned an error"));
        }
        Ok(())
    }

    pub fn run(&mut self) -> Result<(), SolverError> {
        // Clocks are cumulative across runs otherwise, and the time limit
        // would then count earlier solves.
        unsafe { Highs_zeroAllClocks(self.ptr) };
        let st = unsafe { Highs_run(self.ptr) };
        if st == kHighsStatusError {
            return Err(err(format!(
                "run failed (model status {})",
                self.model_status()
            )));
        }
        Ok(())
    }

    pub fn model_status(&self) -> HighsInt {
        unsafe { Highs_getModelStatus(self.ptr) }
    }

    pub fn double_info(&self, name: &str) -> Option<f64> {
        let n = cstr(name);
        let mut v = 0.0;
        let st = unsafe { Highs_getDoubleInfoValue(self.ptr, n.as_ptr(), &mut v) };
        (st != kHighsStatusError).then_some(v)
    }

    pub fn int_info(&self, name: &str) -> Option<i64> {
        let n = cstr(name);
        let mut v: HighsInt = 0;
        let st = unsafe { Highs_getIntInfoValue(self.ptr, n.as_ptr(), &mut v) };
        (st != kHighsStatusError).then_some(v as i64)
    }

    pub fn objective(&self) -> f64 {
        unsafe { Highs_getObjectiveValue(self.ptr) }
    }

    pub fn primal(&self, num_cols: usize, num_rows: usize) -> Vec<f64> {
        self.solution(num_cols, num_rows).0
    }

    /// Column values and row duals (HiGHS's sign convention: reduced costs
    /// are c − Aᵀy).
    pub fn solution(&self, num_cols: usize, num_rows: usize) -> (Vec<f64>, Vec<f64>) {
        let mut x = vec![0.0; num_cols];
        let mut cd = vec![0.0; num_cols];
        let mut rv = vec![0.0; num_rows];
        let mut rd = vec![0.0; num_rows];
        unsafe {
            Highs_getSolution(
                self.ptr,
                x.as_mut_ptr(),
                cd.as_mut_ptr(),
                rv.as_mut_ptr(),
                rd.as_mut_ptr(),
            )
        };
        (x, rd)
    }

    /// Whether HiGHS holds row duals (of any quality): after a time limit in
    /// dual simplex they are still dual feasible, and any multipliers give
    /// a valid Lagrangian bound.
    fn has_duals(&self) -> bool {
        self.int_info("dual_solution_status")
            .is_some_and(|s| s != kHighsSolutionStatusNone as i64)
    }

    fn has_primal_solution(&self) -> bool {
        self.int_info("primal_solution_status") == Some(kHighsSolutionStatusFeasible as i64)
    }
}

/// Written by the callbacks: when the first solution appeared, and the
/// incumbent and dual bound at each improvement and log line; read by them:
/// the caller's stop flag.
struct CallbackData {
    first_solution: Option<f64>,
    trace: Vec<Progress>,
    on_progress: Option<super::OnProgress>,
    on_solution: Option<super::OnSolution>,
    stop: Option<super::StopFlag>,
    num_cols: usize,
}

impl CallbackData {
    fn new(p: &Params, num_cols: usize) -> Box<CallbackData> {
        Box::new(CallbackData {
            first_solution: None,
            trace: Vec::new(),
            on_progress: p.on_progress.clone(),
            on_solution: p.on_solution.clone(),
            stop: p.stop.clone(),
            num_cols,
        })
    }
}

/// The loops HiGHS polls for an interrupt: simplex iterations, IPM
/// iterations, and the MIP's node loop.
const INTERRUPTS: [c_int; 3] = [
    kHighsCallbackSimplexInterrupt,
    kHighsCallbackIpmInterrupt,
    kHighsCallbackMipInterrupt,
];

unsafe extern "C" fn on_event(
    kind: c_int,
    _msg: *const c_char,
    out: *const HighsCallbackDataOut,
    input: *mut HighsCallbackDataIn,
    user: *mut c_void,
) {
    if user.is_null() {
        return;
    }
    let data = &mut *(user as *mut CallbackData);
    let polls = INTERRUPTS.contains(&kind) || kind == kHighsCallbackMipLogging;
    if polls && !input.is_null() && super::stop_requested(&data.stop) {
        (*input).user_interrupt = 1;
    }
    if out.is_null() {
        return;
    }
    let out = &*out;
    if kind == kHighsCallbackMipImprovingSolution && data.first_solution.is_none() {
        data.first_solution = Some(out.running_time);
    }
    if kind == kHighsCallbackMipImprovingSolution {
        if let Some(f) = &data.on_solution {
            let n = usize::try_from(out.mip_solution_size).unwrap_or(0);
            if !out.mip_solution.is_null() && n == data.num_cols {
                let x = std::slice::from_raw_parts(out.mip_solution, n);
                // A panic must not unwind into HiGHS: the plan is lost, the
                // solve goes on.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.0(x)));
            }
        }
    }
    if kind == kHighsCallbackMipImprovingSolution || kind == kHighsCallbackMipLogging {
        let finite = |v: f64| (v.is_finite() && v.abs() < 1e30).then_some(v);
        let p = Progress {
            secs: out.running_time,
            cost: finite(out.mip_primal_bound),
            bound: finite(out.mip_dual_bound),
        };
        data.trace.push(p);
        if let Some(f) = &data.on_progress {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.0(p)));
        }
    }
}

impl Highs {
    /// Installs `on_event` with `data` (which must outlive every run) and
    /// starts the callbacks it serves: the interrupts when there is a stop
    /// flag, the MIP's own when `mip`.
    fn listen(&mut self, data: &mut CallbackData, mip: bool) {
        unsafe {
            Highs_setCallback(
                self.ptr,
                Some(on_event),
                data as *mut CallbackData as *mut c_void,
            );
            if data.stop.is_some() {
                for k in INTERRUPTS {
                    Highs_startCallback(self.ptr, k);
                }
            }
            if mip {
                Highs_startCallback(self.ptr, kHighsCallbackMipImprovingSolution);
                Highs_startCallback(self.ptr, kHighsCallbackMipLogging);
            }
        }
    }
}

/// What a run that ended in a solver error still answers: the solver's
/// own last point where it satisfies the model (at the tolerance of
/// [`Model::max_violation`]'s checks elsewhere), else the caller's warm
/// start where it does, as an unproven `Feasible` result that names the
/// error; else the error. Why: an incumbent or a warm start that satisfies
/// the model is a plan the simulator can still check, and dropping it for
/// a numerical failure late in the search loses finished work.
fn held_after_error(
    m: &Model,
    own: Vec<f64>,
    warm: Option<&[f64]>,
    e: SolverError,
    seconds: f64,
) -> Result<MipResult, SolverError> {
    let usable = |x: &Vec<f64>| x.len() == m.num_cols() && m.max_violation(x) <= 1e-6;
    let (x, held) = match Some(own).filter(usable) {
        Some(x) => (x, "a solution of its own that satisfies the model"),
        None => match warm.map(<[f64]>::to_vec).filter(usable) {
            Some(x) => (x, "the warm start, which stands"),
            None => return Err(e),
        },
    };
    Ok(MipResult {
        status: MipStatus::Feasible,
        objective: Some(m.objective(&x)),
        x: Some(x),
        bound: None,
        first_solution_secs: None,
        seconds,
        trace: Vec::new(),
        failed: Some(format!("{e}, holding {held}")),
    })
}

pub fn solve_mip(m: &Model, p: &Params, warm: Option<&[f64]>) -> Result<MipResult, SolverError> {
    let start = Instant::now();
    let mut h = Highs::new(p.verbose);
    h.apply(p);
    h.pass(m, true)?;
    // `cb` outlives every run of `h` (only `h.run` calls back).
    let mut cb = CallbackData::new(p, m.num_cols());
    h.listen(&mut cb, true);
    if let Some(x) = warm {
        if x.len() == m.num_cols() {
            h.set_solution(x);
        }
    }
    if super::stop_requested(&p.stop) {
        return Err(err("stopped before the solve started"));
    }
    if let Err(e) = h.run() {
        // HiGHS can fail mid-search on numerical trouble (model status 4,
        // a solve error: seen on AutoTM's asynchronous MILP for MobileNet
        // at 60%). Whatever incumbent it holds, or else the caller's warm
        // start, is still a solution to check; only without either is
        // the run lost.
        // HiGHS also ends in a solve error when its own final check finds
        // its optimum infeasible by a hair (4.6e-9 on AutoTM's asynchronous
        // MILP for a 4-node chain on the GH200, whose times span 10^8): it
        // then marks the solution infeasible, but still holds it, and the
        // model's own check ([`held_after_error`]) decides.
        let own = h.primal(m.num_cols(), m.num_rows());
        let seconds = start.elapsed().as_secs_f64();
        return held_after_error(m, own, warm, e, seconds).map(|r| MipResult {
            first_solution_secs: cb.first_solution,
            trace: cb.trace,
            ..r
        });
    }
    let status = h.model_status();
    let seconds = start.elapsed().as_secs_f64();
    if status == kHighsModelStatusInfeasible {
        return Ok(MipResult {
            status: MipStatus::Infeasible,
            x: None,
            objective: None,
            bound: None,
            first_solution_secs: None,
            seconds,
            trace: cb.trace,
            failed: None,
        });
    }
    let is_mip = m.is_mip();
    let bound = if is_mip {
        h.double_info("mip_dual_bound").filter(|b| b.is_finite())
    } else if status == kHighsModelStatusOptimal {
        Some(h.objective())
    } else {
        None
    };
    let x = h
        .has_primal_solution()
        .then(|| h.primal(m.num_cols(), m.num_rows()));
    let objective = x.as_ref().map(|x| m.objective(x));
    let status = match (&x, status) {
        (Some(_), s) if s == kHighsModelStatusOptimal => MipStatus::Optimal,
        (Some(_), _) => MipStatus::Feasible,
        (None, s)
            if s == kHighsModelStatusTimeLimit
                || s == kHighsModelStatusInterrupt
                || s == kHighsModelStatusIterationLimit
                || s == kHighsModelStatusSolutionLimit =>
        {
            MipStatus::NoSolution
        }
        (None, s) if s == kHighsModelStatusUnboundedOrInfeasible => MipStatus::Infeasible,
        (None, s) => {
            return Err(err(format!(
                "stopped with model status {s} and no solution"
            )))
        }
    };
    Ok(MipResult {
        status,
        x,
        objective,
        bound,
        first_solution_secs: cb.first_solution,
        seconds,
        trace: cb.trace,
        failed: None,
    })
}

/// Which LP algorithm to use. Interior point scales better on the large,
/// degenerate relaxations of big graphs; dual simplex re-solves fast after a
/// bound change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpMethod {
    Choose,
    Simplex,
    Ipm,
}

/// An LP kept loaded so that later solves after bound changes start from
/// the previous basis.
pub struct LpSession {
    // Dropped before `_cb`, which its callback points into.
    h: Highs,
    _cb: Box<CallbackData>,
    cols: usize,
    rows: usize,
}

impl LpSession {
    pub fn new(m: &Model, p: &Params, method: LpMethod) -> Result<LpSession, SolverError> {
        let mut h = Highs::new(p.verbose);
        h.apply(p);
        h.set_string(
            "solver",
            match method {
                LpMethod::Choose => "choose",
                LpMethod::Simplex => "simplex",
                LpMethod::Ipm => "ipm",
            },
        );
        h.pass(m, false)?;
        let mut cb = CallbackData::new(p, m.num_cols());
        if p.stop.is_some() {
            h.listen(&mut cb, false);
        }
        Ok(LpSession {
            h,
            _cb: cb,
            cols: m.num_cols(),
            rows: m.num_rows(),
        })
    }

    pub fn set_method(&mut self, method: LpMethod) {
        self.h.set_string(
            "solver",
            match method {
                LpMethod::Choose => "choose",
                LpMethod::Simplex => "simplex",
                LpMethod::Ipm => "ipm",
            },
        );
    }

    pub fn set_time_limit(&mut self, secs: f64) {
        self.h.set_double("time_limit", secs.max(0.0));
    }

    /// Sets the bounds of columns `from..from + lower.len()`.
    pub fn change_col_bounds(&mut self, from: usize, lower: &[f64], upper: &[f64]) {
        self.h.change_col_bounds(from, lower, upper);
    }

    /// Appends rows `rows` of `m` (a model with the same columns), for
    /// row generation: the next solve warm-starts from the last basis.
    pub fn add_rows(&mut self, m: &Model, rows: &[usize]) -> Result<(), SolverError> {
        self.h.add_rows(m, rows)?;
        self.rows += rows.len();
        Ok(())
    }

    pub fn solve(&mut self) -> Result<LpResult, SolverError> {
        let start = Instant::now();
        self.h.run()?;
        let s = self.h.model_status();
        let status = if s == kHighsModelStatusOptimal {
            LpStatus::Optimal
        } else if s == kHighsModelStatusInfeasible || s == kHighsModelStatusUnboundedOrInfeasible {
            // Our LPs have bounded columns, so "unbounded or infeasible"
            // can only mean infeasible.
            LpStatus::Infeasible
        } else {
            LpStatus::Stopped
        };
        let (x, row_dual) = if status == LpStatus::Optimal {
            self.h.solution(self.cols, self.rows)
        } else if status == LpStatus::Stopped && self.h.has_duals() {
            // No optimum, but the duals still bound the optimum from below.
            (Vec::new(), self.h.solution(self.cols, self.rows).1)
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(LpResult {
            status,
            objective: self.h.objective(),
            x,
            row_dual,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// min x + y with x + y ≥ 3, x integer in [0, 10], y in [0, 1].
    fn model() -> Model {
        let mut m = Model::new();
        let x = m.add_col(0.0, 10.0, 1.0, true);
        let y = m.add_col(0.0, 1.0, 1.0, false);
        m.add_row(3.0, f64::INFINITY, &[(x, 1.0), (y, 1.0)]);
        m
    }

    fn failure() -> SolverError {
        err("solve error (model status 4)")
    }

    #[test]
    fn after_an_error_the_solvers_own_point_stands_where_it_satisfies_the_model() {
        let m = model();
        let r = held_after_error(&m, vec![3.0, 0.5], Some(&[5.0, 0.0]), failure(), 1.5)
            .expect("a point that satisfies the model");
        assert_eq!(r.status, MipStatus::Feasible);
        assert_eq!(r.x.as_deref(), Some(&[3.0, 0.5][..]));
        assert_eq!(r.objective, Some(3.5));
        assert_eq!(r.bound, None, "an error proves nothing");
        assert!(r.stopped_by().contains("the solver ended in an error"));
        assert!(r.stopped_by().contains("a solution of its own"));
    }

    #[test]
    fn after_an_error_the_warm_start_stands_where_the_solvers_point_does_not() {
        let m = model();
        // Over by 0.5 on the row: not a solution.
        let r = held_after_error(&m, vec![2.0, 0.5], Some(&[5.0, 0.0]), failure(), 1.5)
            .expect("the warm start satisfies the model");
        assert_eq!(r.x.as_deref(), Some(&[5.0, 0.0][..]));
        assert_eq!(r.objective, Some(5.0));
        assert!(r.stopped_by().contains("the warm start"));
        // Nor is a point that breaks integrality (x = 2.5 covers the row)
        // or has the wrong length.
        let r = held_after_error(&m, vec![2.5, 0.5], Some(&[5.0, 0.0]), failure(), 1.5).unwrap();
        assert_eq!(r.objective, Some(5.0));
        let r = held_after_error(&m, vec![], Some(&[5.0, 0.0]), failure(), 1.5).unwrap();
        assert_eq!(r.objective, Some(5.0));
    }

    #[test]
    fn after_an_error_with_nothing_that_satisfies_the_model_the_error_stands() {
        let m = model();
        let e = held_after_error(&m, vec![0.0, 0.0], Some(&[1.0, 1.0]), failure(), 1.5);
        assert!(matches!(e, Err(SolverError::Failed { .. })), "{e:?}");
        assert!(held_after_error(&m, vec![0.0, 0.0], None, failure(), 1.5).is_err());
    }
}
