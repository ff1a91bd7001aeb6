//! The joint recompute-or-offload MILP (`remat-tiered`): Checkmate's R, S
//! and FREE with the tiered variables of [`crate::schedule::Transfers`]
//! (H, O, P), direct reads D where the device allows them, and one stage
//! time τ_t per stage. The objective Σ τ_t is the simulated step time of
//! the plan the schedule generates (tested), because the model only admits
//! plans whose stage time the simulator computes the same way:
//!
//! - copies out are of kept values (O ≤ S), or of the stage's frontier:
//!   the frontier is the stage's last computation, so its copy starts when
//!   the stage's computing ends, behind the copies already on its engine
//!   (a linear term). A copy of a value recomputed mid-stage would start
//!   at a time that depends on the order of the stage's computations, which
//!   a linear model cannot price: the model has none;
//! - copies run within their stage (the plan's rule), so a stage lasts the
//!   larger of its compute stream (computations plus direct reads) and
//!   each copy engine's load; a shared engine carries both directions; on
//!   a synchronous device everything runs in sequence.
//!
//! Rows beyond Checkmate's (with i < t throughout):
//! - S[t+1,i] ≤ S[t,i] + R[t,i] + P[t,i]; H[t+1,i] ≤ H[t,i] + O[t,i];
//! - O[t,i] ≤ S[t,i] (i < t), O[t,i] + H[t,i] ≤ 1 (one slow copy at a time);
//! - P[t,i] ≤ H[t,i], P[t,i] + S[t,i] + R[t,i] ≤ 1, P[t,i] ≤ S[t+1,i];
//! - R[t,k] ≤ R[t,i] + S[t,i] + D[t,(i,k)], D ≤ H[t,i];
//! - memory: a copy in holds its buffer from the start of its stage, so
//!   U[t,0] adds Σ P[t,i]·m_i; a value being copied out is not freed in its
//!   stage (FREE[t,(i,k)] + O[t,i] ≤ 1), and a value read directly is
//!   never freed from fast memory (FREE ≤ R[t,i] + S[t,i]);
//! - slow capacity: Σ (H[t,i] + O[t,i])·m_i ≤ capacity, where it can bind.
//!
//! FREE is the tight, continuous form (see [`super::checkmate::FreeModel`]).
//! Columns exist only where they can matter: no transfer variable for a
//! value of zero bytes, and none after a value's last read.

use super::checkmate::{memory_rows, sorted_edges, tri, StageCols};
use super::{Col, Model};
use crate::device::{Device, Engines};
use crate::graph::{analysis, Graph, NodeId};
use crate::schedule::Schedule;
use crate::units::{Bytes, Seconds};

/// What the model may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Forbid recomputation (R[t,i] = 0 for i < t): the offload-only
    /// optimum.
    pub no_recompute: bool,
    /// Allow transfers at all; without them the model is Checkmate's with
    /// time as its objective.
    pub transfers: bool,
}

const NONE: u32 = u32::MAX;

/// A built model and the map from (stage, node) to its columns.
pub struct TieredFormulation {
    pub n: usize,
    pub model: Model,
    r_base: usize,
    s_base: usize,
    u_base: usize,
    tau_base: usize,
    /// Sparse per-(stage, node) columns, `tri(t) + i`, NONE where absent.
    h: Vec<u32>,
    o: Vec<u32>,
    p: Vec<u32>,
    /// FREE and D columns of stage t: one per edge with target ≤ t.
    edges: Vec<(usize, usize)>,
    edge_start: Vec<usize>,
    f_col: Vec<Vec<u32>>,
    d_col: Vec<Vec<u32>>,
    /// Bytes per model memory unit, and seconds per objective unit.
    pub mem_scale: f64,
    pub time_scale: f64,
    fixed_memory: Bytes,
    /// Seconds of each node's computation, each value's copy out and in,
    /// and of reading it directly (when the device allows it).
    secs: Vec<f64>,
    out_secs: Vec<f64>,
    in_secs: Vec<f64>,
    direct_secs: Option<Vec<f64>>,
    engines: Engines,
}

/// Columns the model of `g` would have at most (transfers allowed), for a
/// size check before building: R, S, U, H, O, P triangular, FREE (and D
/// with direct reads) one per edge and stage.
pub fn columns(g: &Graph, direct: bool) -> usize {
    let n = g.len();
    let (edges, _) = sorted_edges(g);
    let per_edge: usize = edges.iter().map(|&(_, k)| n - k).sum();
    6 * tri(n) + per_edge * if direct { 2 } else { 1 } + n
}

impl TieredFormulation {
    /// Builds the model for fast-memory `budget` (fixed memory included) on
    /// `dev`.
    pub fn build(g: &Graph, budget: Bytes, dev: &Device, opt: Options) -> TieredFormulation {
        let n = g.len();
        let inf = f64::INFINITY;
        let mem_scale = g
            .ids()
            .map(|i| g.memory(i).as_f64())
            .fold(0.0, f64::max)
            .max(1.0);
        let secs: Vec<f64> = g.ids().map(|i| dev.compute_time(g.cost(i)).get()).collect();
        let out_secs: Vec<f64> = g
            .ids()
            .map(|i| dev.copy_time(g.memory(i), true).get())
            .collect();
        let in_secs: Vec<f64> = g
            .ids()
            .map(|i| dev.copy_time(g.memory(i), false).get())
            .collect();
        let direct_secs: Option<Vec<f64>> =
            dev.slow.direct_read.filter(|_| opt.transfers).map(|_| {
                g.ids()
                    .map(|i| dev.direct_read_time(g.memory(i)).map_or(0.0, |s| s.get()))
                    .collect()
            });
        let time_scale = secs
            .iter()
            .chain(&out_secs)
            .chain(&in_secs)
            .copied()
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let cap = (budget.as_f64() - g.fixed_memory.as_f64()).max(0.0) / mem_scale;
        let mem: Vec<f64> = g.ids().map(|i| g.memory(i).as_f64() / mem_scale).collect();
        let last: Vec<usize> = analysis::last_use(g).iter().map(|l| l.idx()).collect();
        let (edges, edge_start) = sorted_edges(g);
        let movable = |i: usize| opt.transfers && g.memory(NodeId::from(i)).get() > 0;

        let mut m = Model::new();
        let r_base = m.num_cols();
        for t in 0..n {
            for i in 0..=t {
                let ub = if i == t || !opt.no_recompute {
                    1.0
                } else {
                    0.0
                };
                m.add_col(if i == t { 1.0 } else { 0.0 }, ub, 0.0, true);
            }
        }
        let s_base = m.num_cols();
        for t in 0..n {
            for _ in 0..t {
                m.add_col(0.0, 1.0, 0.0, true);
            }
        }
        let u_base = m.num_cols();
        for t in 0..n {
            for _ in 0..=t {
                m.add_col(0.0, cap, 0.0, false);
            }
        }
        let tau_base = m.num_cols();
        for _ in 0..n {
            m.add_col(0.0, inf, 1.0, false);
        }
        // Transfer columns: H[t,i] for i < t - 1 (a slow copy needs a copy
        // out in an earlier stage, of a value kept there), up to the last
        // read; O[t,i] for kept values with a read after t; P[t,i] with
        // the value read after t.
        let mut h = vec![NONE; tri(n)];
        let mut o = vec![NONE; tri(n)];
        let mut p = vec![NONE; tri(n)];
        for t in 0..n {
            for i in 0..=t {
                if !movable(i) {
                    continue;
                }
                if i < t && t <= last[i] {
                    h[tri(t) + i] = m.add_col(0.0, 1.0, 0.0, true) as u32;
                }
                if t < last[i] {
                    o[tri(t) + i] = m.add_col(0.0, 1.0, 0.0, true) as u32;
                }
                if h[tri(t) + i] != NONE && t < last[i] && t + 1 < n {
                    p[tri(t) + i] = m.add_col(0.0, 1.0, 0.0, true) as u32;
                }
            }
        }
        let mut f_col = Vec::with_capacity(n);
        let mut d_col = Vec::with_capacity(n);
        for t in 0..n {
            let es = &edges[..edge_start[t + 1]];
            f_col.push(
                es.iter()
                    .map(|_| m.add_col(0.0, 1.0, 0.0, false) as u32)
                    .collect::<Vec<_>>(),
            );
            d_col.push(
                es.iter()
                    .map(|&(i, _)| {
                        if direct_secs.is_some() && h[tri(t) + i] != NONE {
                            m.add_col(0.0, 1.0, 0.0, true) as u32
                        } else {
                            NONE
                        }
                    })
                    .collect::<Vec<_>>(),
            );
        }
        let f = TieredFormulation {
            n,
            model: Model::new(),
            r_base,
            s_base,
            u_base,
            tau_base,
            h,
            o,
            p,
            edges,
            edge_start,
            f_col,
            d_col,
            mem_scale,
            time_scale,
            fixed_memory: g.fixed_memory,
            secs,
            out_secs,
            in_secs,
            direct_secs,
            engines: dev.slow.engines,
        };
        let mut row: Vec<(Col, f64)> = Vec::with_capacity(64);

        for t in 0..n {
            // (1b) S[t+1,i] ≤ S[t,i] + R[t,i] + P[t,i].
            if t + 1 < n {
                for i in 0..=t {
                    row.clear();
                    row.push((f.s(t + 1, i), 1.0));
                    row.push((f.r(t, i), -1.0));
                    if i < t {
                        row.push((f.s(t, i), -1.0));
                    }
                    if let Some(pc) = f.p(t, i) {
                        row.push((pc, -1.0));
                    }
                    m.add_row(-inf, 0.0, &row);
                }
            }
            for i in 0..=t {
                // H[t+1,i] ≤ H[t,i] + O[t,i].
                if let Some(hn) = (t + 1 < n).then(|| f.h(t + 1, i)).flatten() {
                    row.clear();
                    row.push((hn, 1.0));
                    if let Some(hc) = f.h(t, i) {
                        row.push((hc, -1.0));
                    }
                    if let Some(oc) = f.o(t, i) {
                        row.push((oc, -1.0));
                    }
                    m.add_row(-inf, 0.0, &row);
                }
                if i == t {
                    continue; // the frontier: computed, and held by no slow copy
                }
                if let Some(oc) = f.o(t, i) {
                    m.add_row(-inf, 0.0, &[(oc, 1.0), (f.s(t, i), -1.0)]);
                    if let Some(hc) = f.h(t, i) {
                        m.add_row(-inf, 1.0, &[(oc, 1.0), (hc, 1.0)]);
                    }
                }
                if let Some(pc) = f.p(t, i) {
                    match f.h(t, i) {
                        Some(hc) => m.add_row(-inf, 0.0, &[(pc, 1.0), (hc, -1.0)]),
                        None => m.add_row(-inf, 0.0, &[(pc, 1.0)]),
                    }
                    m.add_row(-inf, 1.0, &[(pc, 1.0), (f.s(t, i), 1.0), (f.r(t, i), 1.0)]);
                    m.add_row(-inf, 0.0, &[(pc, 1.0), (f.s(t + 1, i), -1.0)]);
                }
            }
            // (1c) with direct reads, and FREE's hazards.
            for (e, &(i, k)) in f.edges[..f.edge_start[t + 1]].iter().enumerate() {
                row.clear();
                row.push((f.r(t, k), 1.0));
                row.push((f.r(t, i), -1.0));
                if i < t {
                    row.push((f.s(t, i), -1.0));
                }
                let dc = f.d(t, e);
                if let Some(dc) = dc {
                    row.push((dc, -1.0));
                    let hc = f.h(t, i).expect("D only where H exists");
                    m.add_row(-inf, 0.0, &[(dc, 1.0), (hc, -1.0)]);
                    // A value read from the slow tier is not also resident.
                    m.add_row(-inf, 1.0, &[(dc, 1.0), (f.s(t, i), 1.0), (f.r(t, i), 1.0)]);
                }
                m.add_row(-inf, 0.0, &row);

                let free = f.free(t, e);
                m.add_row(-inf, 0.0, &[(free, 1.0), (f.r(t, k), -1.0)]);
                if t + 1 < n {
                    m.add_row(-inf, 1.0, &[(free, 1.0), (f.s(t + 1, i), 1.0)]);
                }
                for j in g
                    .users(NodeId::from(i))
                    .iter()
                    .map(|j| j.idx())
                    .filter(|&j| j > k && j <= t)
                {
                    m.add_row(-inf, 1.0, &[(free, 1.0), (f.r(t, j), 1.0)]);
                }
                if i < t {
                    if let Some(oc) = f.o(t, i) {
                        m.add_row(-inf, 1.0, &[(free, 1.0), (oc, 1.0)]);
                    }
                    if dc.is_some() {
                        m.add_row(
                            -inf,
                            0.0,
                            &[(free, 1.0), (f.r(t, i), -1.0), (f.s(t, i), -1.0)],
                        );
                    }
                }
            }
            // Memory: U[t,0] = R[t,0]·m_0 + Σ S[t,i]·m_i + Σ P[t,i]·m_i, then
            // the Checkmate recurrence.
            let start: Vec<(Col, f64)> = (0..t)
                .filter_map(|i| f.p(t, i).map(|pc| (pc, mem[i])))
                .collect();
            let cols = StageCols {
                u: &|k| f.u(t, k),
                r: &|i| f.r(t, i),
                s: &|i| f.s(t, i),
                free: &|e| f.free(t, e),
            };
            memory_rows(&mut m, t, t, &mem, &f.edges, &f.edge_start, &cols, &start);
            // Stage time.
            let ts = f.time_scale;
            let mut compute: Vec<(Col, f64)> =
                (0..=t).map(|i| (f.r(t, i), f.secs[i] / ts)).collect();
            if let Some(ds) = &f.direct_secs {
                for (e, &(i, _)) in f.edges[..f.edge_start[t + 1]].iter().enumerate() {
                    if let Some(dc) = f.d(t, e) {
                        compute.push((dc, ds[i] / ts));
                    }
                }
            }
            let outs: Vec<(Col, f64)> = (0..t)
                .filter_map(|i| f.o(t, i).map(|c| (c, f.out_secs[i] / ts)))
                .collect();
            // The frontier's copy starts when its computation ends, the
            // stage's last, behind the copies already queued on its engine.
            let front: Vec<(Col, f64)> = f
                .o(t, t)
                .map(|c| (c, f.out_secs[t] / ts))
                .into_iter()
                .collect();
            let ins: Vec<(Col, f64)> = (0..t)
                .filter_map(|i| f.p(t, i).map(|c| (c, f.in_secs[i] / ts)))
                .collect();
            let tau = f.tau(t);
            let mut bound = |parts: &[&[(Col, f64)]]| {
                row.clear();
                row.push((tau, 1.0));
                for part in parts {
                    row.extend(part.iter().map(|&(c, v)| (c, -v)));
                }
                m.add_row(0.0, inf, &row);
            };
            match f.engines {
                Engines::Duplex => {
                    bound(&[&compute, &front]);
                    if !outs.is_empty() {
                        bound(&[&outs, &front]);
                    }
                    if !ins.is_empty() {
                        bound(&[&ins]);
                    }
                }
                Engines::Shared => {
                    bound(&[&compute, &front]);
                    if !outs.is_empty() || !ins.is_empty() {
                        bound(&[&outs, &ins, &front]);
                    }
                }
                Engines::Synchronous => bound(&[&compute, &outs, &ins, &front]),
            }
            // The slow tier's capacity, where it can bind.
            let total: f64 = mem.iter().sum();
            if opt.transfers && total * mem_scale > dev.slow.capacity.as_f64() {
                row.clear();
                for (i, &mi) in mem.iter().enumerate().take(t + 1) {
                    if let Some(hc) = f.h(t, i) {
                        row.push((hc, mi));
                    }
                    if let Some(oc) = f.o(t, i) {
                        row.push((oc, mi));
                    }
                }
                if !row.is_empty() {
                    m.add_row(-inf, dev.slow.capacity.as_f64() / mem_scale, &row);
                }
            }
        }
        TieredFormulation { model: m, ..f }
    }

    pub fn r(&self, t: usize, i: usize) -> Col {
        debug_assert!(i <= t);
        self.r_base + tri(t) + i
    }

    pub fn s(&self, t: usize, i: usize) -> Col {
        debug_assert!(i < t);
        self.s_base + t * (t - 1) / 2 + i
    }

    pub fn u(&self, t: usize, k: usize) -> Col {
        self.u_base + tri(t) + k
    }

    pub fn tau(&self, t: usize) -> Col {
        self.tau_base + t
    }

    fn sparse(v: &[u32], t: usize, i: usize) -> Option<Col> {
        if i > t {
            return None;
        }
        let c = v[tri(t) + i];
        (c != NONE).then_some(c as Col)
    }

    pub fn h(&self, t: usize, i: usize) -> Option<Col> {
        Self::sparse(&self.h, t, i)
    }

    pub fn o(&self, t: usize, i: usize) -> Option<Col> {
        Self::sparse(&self.o, t, i)
    }

    pub fn p(&self, t: usize, i: usize) -> Option<Col> {
        Self::sparse(&self.p, t, i)
    }

    fn free(&self, t: usize, e: usize) -> Col {
        self.f_col[t][e] as Col
    }

    fn d(&self, t: usize, e: usize) -> Option<Col> {
        let c = self.d_col[t][e];
        (c != NONE).then_some(c as Col)
    }

    /// The model's step time for a solution vector, in seconds.
    pub fn step_of(&self, x: &[f64]) -> Seconds {
        Seconds(self.model.objective(x) * self.time_scale)
    }

    /// Reads the schedule (R, S, O, P, H) from a solution vector.
    pub fn schedule(&self, x: &[f64]) -> Schedule {
        let on = |c: Col| x[c] > 0.5;
        let mut sch = Schedule::identity(self.n);
        for t in 0..self.n {
            if self.o(t, t).is_some_and(on) {
                sch.set_o(t, t, true);
            }
            for i in 0..t {
                sch.set_r(t, i, on(self.r(t, i)));
                sch.set_s(t, i, on(self.s(t, i)));
                if self.h(t, i).is_some_and(on) {
                    sch.set_h(t, i, true);
                }
                if self.o(t, i).is_some_and(on) {
                    sch.set_o(t, i, true);
                }
                if self.p(t, i).is_some_and(on) {
                    sch.set_p(t, i, true);
                }
            }
        }
        sch
    }

    /// The full column vector of a schedule, with FREE, D, U and τ derived
    /// as the model defines them, if the schedule is one the model admits
    /// (`None` otherwise: a copy out of a computed value, a transfer where
    /// the model has no column). Checked against the rows by the caller.
    pub fn vector_for(&self, g: &Graph, sch: &Schedule) -> Option<Vec<f64>> {
        let n = self.n;
        if sch.stages() != n {
            return None;
        }
        let mut x = vec![0.0; self.model.num_cols()];
        let set = |x: &mut Vec<f64>, c: Option<Col>| -> Option<()> {
            x[c?] = 1.0;
            Some(())
        };
        let h_rows = sch.h_rows();
        for t in 0..n {
            for i in sch.r_row(t).iter().map(|&i| i as usize) {
                x[self.r(t, i)] = 1.0;
            }
            for i in sch.kept(t).map(|i| i.idx()) {
                x[self.s(t, i)] = 1.0;
            }
            for &i in &h_rows[t] {
                set(&mut x, self.h(t, i as usize))?;
            }
            for &i in sch.o_row(t) {
                if !sch.s(t, i as usize) && i as usize != t {
                    return None;
                }
                set(&mut x, self.o(t, i as usize))?;
            }
            for &i in sch.p_row(t) {
                set(&mut x, self.p(t, i as usize))?;
            }
        }
        let mem = |i: usize| g.memory(NodeId::from(i)).as_f64() / self.mem_scale;
        for t in 0..n {
            let r = sch.r_dense(t);
            let resident = |i: usize| r.contains(i) || sch.s(t, i);
            let mut freed = vec![0.0; t + 1];
            for (e, &(i, k)) in self.edges[..self.edge_start[t + 1]].iter().enumerate() {
                if !r.contains(k) {
                    continue;
                }
                if !resident(i) {
                    // Read straight from the slow copy.
                    set(&mut x, self.d(t, e))?;
                    continue;
                }
                let later = g
                    .users(NodeId::from(i))
                    .iter()
                    .any(|j| j.idx() > k && j.idx() <= t && r.contains(j.idx()));
                let kept = t + 1 < n && sch.s(t + 1, i);
                if !later && !kept && !sch.o(t, i) {
                    x[self.free(t, e)] = 1.0;
                    freed[k] += mem(i);
                }
            }
            let mut u = if r.contains(0) { mem(0) } else { 0.0 };
            u += sch.kept(t).map(|i| i.idx()).map(mem).sum::<f64>();
            u += sch.p_row(t).iter().map(|&i| mem(i as usize)).sum::<f64>();
            x[self.u(t, 0)] = u;
            for k in 0..t {
                if r.contains(k + 1) {
                    u += mem(k + 1);
                }
                u -= freed[k];
                x[self.u(t, k + 1)] = u.max(0.0);
            }
            // τ_t: the largest of the stage's lower bounds.
            let mut compute: f64 = r.ones().map(|i| self.secs[i]).sum();
            if let Some(ds) = &self.direct_secs {
                for (e, &(i, _)) in self.edges[..self.edge_start[t + 1]].iter().enumerate() {
                    if self.d(t, e).is_some_and(|c| x[c] > 0.5) {
                        compute += ds[i];
                    }
                }
            }
            let (mut out, mut front) = (0.0, 0.0);
            for &i in sch.o_row(t) {
                let i = i as usize;
                *(if i == t { &mut front } else { &mut out }) += self.out_secs[i];
            }
            let inn: f64 = sch.p_row(t).iter().map(|&i| self.in_secs[i as usize]).sum();
            let tau = match self.engines {
                Engines::Duplex => (compute.max(out) + front).max(inn),
                Engines::Shared => compute.max(out + inn) + front,
                Engines::Synchronous => compute + out + inn + front,
            };
            x[self.tau(t)] = tau / self.time_scale;
        }
        Some(x)
    }

    /// The model's memory promise in bytes: the largest U plus fixed memory.
    pub fn peak_of(&self, x: &[f64]) -> f64 {
        let end = self.u_base + tri(self.n);
        let u = x[self.u_base..end].iter().copied().fold(0.0, f64::max);
        u * self.mem_scale + self.fixed_memory.as_f64()
    }
}

/// A lower bound on the step time of every plan within `budget` on `dev`,
/// from the graph alone: every node computed once, raised by the tightest
/// stage. At stage t the values that cross it (computed before t, read
/// after t, not inputs of t) must give up `need_t` bytes of fast memory
/// (see [`analysis::eviction_bound`]). Each byte given up is either
/// recomputed after t (at least its own cost, taken cheapest per byte
/// first) or copied to the slow tier before t and brought back (or read
/// directly) after it.
///
/// Why the copies are timed against the two sides of t, not the whole
/// step: a value counts as absent at t only once it is deallocated before
/// t's computation, and a deallocation waits for its copy out, so every
/// copy out of the `x` offloaded bytes ends before t starts: t starts no
/// sooner than `x` over the bandwidth toward the slow tier, nor before the
/// nodes ahead of it ran. A copy in that brings one back is issued after
/// t (else the value would be resident at t), so it ends no sooner than
/// t's end plus `x` over the bandwidth toward fast memory, unless its
/// reader reads the slow copy directly, which the compute stream pays for.
/// On a synchronous device the copies run on the compute stream itself.
/// Latencies are left out, so it holds for any number of copies. At the
/// turn from forward to backward this is what makes heavy offloading
/// costly: the forward pass is too short to carry it all out.
pub fn step_bound(g: &Graph, budget: Bytes, dev: &Device, no_recompute: bool) -> Seconds {
    let all_fast = dev.all_fast_step(g).get();
    Seconds(
        step_bound_stages(g, budget, dev, no_recompute)
            .into_iter()
            .fold(all_fast, |a, (_, b)| a.max(b)),
    )
}

/// [`step_bound`]'s argument at each stage that must give up bytes, in
/// node order: the candidates for [`super::moment_bound`]'s moments.
pub fn step_bound_stages(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
) -> Vec<(NodeId, f64)> {
    let all_fast = dev.all_fast_step(g).get();
    let per_byte = |bw: crate::units::Bandwidth| 1.0 / bw.get();
    let (out_b, in_b) = (per_byte(dev.slow.to_slow), per_byte(dev.slow.to_fast));
    let direct_b = dev.slow.direct_read.map(per_byte);
    let time = |v: NodeId| dev.compute_time(g.cost(v)).get();
    // Compute time of the nodes before each stage, each once.
    let mut ahead = Vec::with_capacity(g.len());
    let mut sum = 0.0;
    for v in g.ids() {
        ahead.push(sum);
        sum += time(v);
    }
    let mut stages = Vec::new();
    analysis::for_each_forced_cover(g, budget, |t, need, crossing, cover| {
        let (before, own) = (ahead[t.idx()], time(t));
        let after = (all_fast - before - own).max(0.0);
        // The recompute share's cheapest cost for `y` bytes: the crossing
        // values cheapest per byte first, infinite past what crosses.
        let rec = |y: f64| -> f64 {
            if y <= 0.0 {
                0.0
            } else if no_recompute {
                f64::INFINITY
            } else {
                dev.compute_time(cover(y)).get()
            }
        };
        let at = |x: f64| -> f64 {
            let back = after + rec(need - x);
            if dev.slow.engines == Engines::Synchronous {
                let fetch = direct_b.map_or(in_b, |d| d.min(in_b));
                return before + x * out_b + own + back + x * fetch;
            }
            // The later part: the compute stream (first computations,
            // recomputations, direct reads of `d` bytes) against the
            // engine toward fast memory (the other `x - d`). Balanced where
            // the two meet.
            let later = match direct_b {
                Some(d) if x * in_b > back => {
                    let dbytes = (x * in_b - back) / (d + in_b);
                    back + dbytes * d
                }
                _ => back.max(x * in_b),
            };
            before.max(x * out_b) + own + later
        };
        // Convex in x (maxima and sums of convex pieces, and a partial
        // minimum of a jointly convex one): ternary search over the x that
        // leave the recompute share finite.
        let lo0 = if no_recompute {
            need
        } else {
            (need - crossing).max(0.0)
        };
        let (mut lo, mut hi) = (lo0, need);
        for _ in 0..100 {
            let (a, b) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
            if at(a) <= at(b) {
                hi = b;
            } else {
                lo = a;
            }
        }
        let best = at(lo).min(at(hi)).min(at(lo0)).min(at(need));
        stages.push((t, best));
    });
    stages
}
