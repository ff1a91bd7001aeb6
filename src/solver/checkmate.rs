//! The Checkmate MILP (MLSys 2020, eq. 9) with T = n frontier-advancing
//! stages, written once against [`Model`] so every backend solves the same
//! formulation, and the LP relaxation is the same model without
//! integrality.
//!
//! Variables: R[t,i] (i ≤ t, R[t,t] = 1) and S[t,i] (i < t) binary;
//! FREE[t,(i,k)] binary for each edge with k ≤ t; U[t,k] (k ≤ t) continuous
//! in [0, budget − fixed_memory]. FREE is linearised through the hazard count
//! h = (1 − R[t,k]) + S[t+1,i] + Σ_{j ∈ users(i), k < j ≤ t} R[t,j] (no S term
//! at the last stage): 1 − FREE ≤ h and κ(1 − FREE) ≥ h, κ = max h.
//!
//! Magnitudes: memory is divided by the largest node's memory and costs by
//! the largest node cost, so coefficients lie in (0, 1] whatever the units
//! (FLOPs around 1e12, bytes around 1e9). Nothing reported to a user comes
//! from these scaled numbers: plans go through the simulator.

use super::{Col, Model};
use crate::graph::{Graph, NodeId};
use crate::schedule::Schedule;
use crate::units::Bytes;

/// How the MILP ties FREE to R and S.
///
/// `Paper` is eq. 9 as published: FREE binary, linearised through one
/// aggregated hazard count with a big-M of κ. `Tight` makes FREE
/// continuous with one bound per hazard (FREE ≤ R[t,k], FREE ≤ 1 − S[t+1,i],
/// FREE ≤ 1 − R[t,j]). Freeing only ever lowers U, so with R and S integral
/// the optimum can always take FREE at its upper bound, min over hazards,
/// which is the paper's value: both MILPs have the same optimal cost and the
/// same feasible (R, S). But `Tight` has no FREE binaries at all (about half
/// of the paper's) and its LP relaxation is tighter, because
/// FREE ≤ 1 − max hazard is below the aggregated FREE ≤ 1 − Σ hazards / κ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FreeModel {
    #[default]
    Paper,
    Tight,
}

/// The MILP's stages: one per kernel, at the kernel's last output (its
/// frontier). Without multi-output kernels this is one stage per node, as in
/// the paper. A group's earlier members get no stage of their own: such a
/// stage could compute nothing its frontier stage cannot, and it would
/// nearly double the model of an imported graph (ResNet-18: 303 nodes,
/// 162 kernels).
#[derive(Debug, Clone)]
pub(crate) struct Stages {
    /// The frontier node of each stage (a kernel's last member), ascending.
    pub ends: Vec<usize>,
    /// The stage (= kernel) index of each node.
    pub kern: Vec<usize>,
}

impl Stages {
    pub fn of(g: &Graph) -> Stages {
        let ends: Vec<usize> = g
            .ids()
            .filter(|&i| g.group_end(i) == i.idx())
            .map(|i| i.idx())
            .collect();
        let mut kern = Vec::with_capacity(g.len());
        for (a, &e) in ends.iter().enumerate() {
            kern.resize(e + 1, a);
        }
        Stages { ends, kern }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The first node of stage `a`'s kernel: every value before it may be
    /// kept into the stage.
    pub fn start(&self, a: usize) -> usize {
        if a == 0 {
            0
        } else {
            self.ends[a - 1] + 1
        }
    }
}

/// A built Checkmate model and the map from (stage, node) to columns.
pub struct Formulation {
    pub n: usize,
    pub model: Model,
    stages: Stages,
    r_base: usize,
    s_base: usize,
    f_base: usize,
    u_base: usize,
    /// Column offsets of each stage within the S, FREE and U blocks (R's is
    /// triangular in kernels).
    s_off: Vec<usize>,
    f_off: Vec<usize>,
    u_off: Vec<usize>,
    /// Edges (i, k) sorted by k: FREE columns of stage t cover the prefix
    /// `edges[..edge_start[t + 1]]`.
    edges: Vec<(usize, usize)>,
    edge_start: Vec<usize>,
    /// Bytes per model memory unit.
    pub mem_scale: f64,
    /// Cost units per model objective unit.
    pub cost_scale: f64,
    pub fixed_memory: Bytes,
}

/// Reads a schedule off a model vector (see [`Formulation::decoder`]).
#[derive(Debug, Clone)]
pub struct Decoder {
    n: usize,
    stages: Stages,
    r_base: usize,
    s_base: usize,
    s_off: Vec<usize>,
}

impl Decoder {
    /// The schedule a model vector encodes: R and S where above one half.
    /// A group's earlier members' stages compute nothing and keep what its
    /// frontier stage keeps.
    pub fn schedule(&self, x: &[f64]) -> Schedule {
        let st = &self.stages;
        let mut sch = Schedule::identity(self.n);
        for (a, &t) in st.ends.iter().enumerate() {
            for b in 0..=a {
                let on = x[self.r_base + tri(a) + b] > 0.5;
                for i in st.start(b)..=st.ends[b] {
                    sch.set_r(t, i, on);
                }
            }
            let start = st.start(a);
            for i in 0..start {
                if x[self.s_base + self.s_off[a] + i] > 0.5 {
                    sch.set_s_range(i, start..=t, true);
                }
            }
            for t2 in start..t {
                sch.set_r(t2, t2, false);
            }
        }
        sch
    }
}

pub(crate) fn tri(t: usize) -> usize {
    t * (t + 1) / 2
}

/// The graph's edges sorted by target, and where each target's run starts.
/// A group's members read the same values, so only its last member (where
/// the kernel runs) has edges: a value is freed after the kernel, never
/// between its outputs.
pub(crate) fn sorted_edges(g: &Graph) -> (Vec<(usize, usize)>, Vec<usize>) {
    let n = g.len();
    let mut edges = Vec::with_capacity(g.num_edges());
    let mut start = Vec::with_capacity(n + 1);
    for k in 0..n {
        start.push(edges.len());
        if g.group_end(NodeId::from(k)) != k {
            continue;
        }
        let mut deps: Vec<usize> = g.deps(NodeId::from(k)).iter().map(|d| d.idx()).collect();
        deps.sort_unstable();
        deps.dedup();
        edges.extend(deps.into_iter().map(|i| (i, k)));
    }
    start.push(edges.len());
    (edges, start)
}

/// The edges FREE is defined on: [`sorted_edges`], plus, for each output
/// of a multi-output kernel, an edge from the output to the kernel itself.
/// A kernel makes all its outputs, but a stage often needs only some (a
/// recomputed batch norm whose statistics only the backward reads): the
/// self-edge frees an output that nothing later in the stage reads and
/// the next stage does not keep right after the kernel, as a plan does.
/// Without it the MILP would hold such outputs to the stage's end, and
/// plans that fit would not fit its model (ResNet-18 at PyTorch's 0.2
/// peak: the partitioner's own plan did not).
pub(crate) fn free_edges(g: &Graph) -> (Vec<(usize, usize)>, Vec<usize>) {
    let (edges, start) = sorted_edges(g);
    if !g.has_groups() {
        return (edges, start);
    }
    let mut out = Vec::with_capacity(edges.len() + g.len());
    let mut out_start = Vec::with_capacity(start.len());
    for k in 0..g.len() {
        out_start.push(out.len());
        out.extend_from_slice(&edges[start[k]..start[k + 1]]);
        let group = g.group(NodeId::from(k));
        if group.end() == &k && group.start() != &k {
            out.extend(group.map(|i| (i, k)));
        }
    }
    out_start.push(out.len());
    (out, out_start)
}

/// One stage's columns as the memory recurrence reads them: U by node,
/// R and S by node, FREE by edge index.
pub(crate) struct StageCols<'a> {
    pub u: &'a dyn Fn(usize) -> Col,
    pub r: &'a dyn Fn(usize) -> Col,
    pub s: &'a dyn Fn(usize) -> Col,
    pub free: &'a dyn Fn(usize) -> Col,
}

/// Checkmate's memory recurrence for stage `t`, shared by both MILPs:
/// U[t,0] = R[t,0]·m_0 + Σ S[t,i]·m_i + Σ `start` (further (column,
/// memory) terms held from the stage's start), then
/// U[t,k+1] = U[t,k] + R[t,k+1]·m_{k+1} − Σ FREE[t,(i,k)]·m_i.
/// Only values before `kept` can be kept into the stage (t, except in a
/// group's stage, where its members are not made yet).
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_rows(
    m: &mut Model,
    t: usize,
    kept: usize,
    mem: &[f64],
    edges: &[(usize, usize)],
    edge_start: &[usize],
    c: &StageCols,
    start: &[(Col, f64)],
) {
    let mut row: Vec<(Col, f64)> = Vec::with_capacity(t + 2 + start.len());
    row.push(((c.u)(0), 1.0));
    row.push(((c.r)(0), -mem[0]));
    for (i, &mi) in mem.iter().enumerate().take(kept) {
        row.push(((c.s)(i), -mi));
    }
    row.extend(start.iter().map(|&(col, v)| (col, -v)));
    m.add_row(0.0, 0.0, &row);
    for k in 0..t {
        row.clear();
        row.push(((c.u)(k + 1), 1.0));
        row.push(((c.u)(k), -1.0));
        row.push(((c.r)(k + 1), -mem[k + 1]));
        for (e, &(i, _)) in edges
            .iter()
            .enumerate()
            .take(edge_start[k + 1])
            .skip(edge_start[k])
        {
            row.push(((c.free)(e), mem[i]));
        }
        m.add_row(0.0, 0.0, &row);
    }
}

/// The most columns a Checkmate model may have before the strategies that
/// build it decline to. Memory grows about 2.3 KB per column (measured RSS:
/// random-layered-n500, 1.0 M columns, 2.5 GB; n1000, 4.4 M columns,
/// 9.5 GB and twice its time limit in presolve). At this limit a model
/// needs about 6 GB; a model that large has never reached a better plan
/// or bound than the graph's own within 600 s here, so past it the
/// strategies answer without it.
pub const MAX_COLUMNS: usize = 2_500_000;

/// Columns of the Checkmate model of `g`, counted without building it:
/// R, S and U are triangular in (stage, node), and FREE has one column per
/// edge (i, k) in every stage t ≥ k.
pub fn columns(g: &Graph) -> usize {
    let st = Stages::of(g);
    let (edges, _) = free_edges(g);
    let k = st.len();
    let free: usize = edges.iter().map(|&(_, e)| k - st.kern[e]).sum();
    let s: usize = (0..k).map(|a| st.start(a)).sum();
    let u: usize = st.ends.iter().map(|&t| t + 1).sum();
    tri(k) + s + u + free
}

/// `Err` with a one-line reason when the model of `g` is over
/// [`MAX_COLUMNS`].
pub fn check_size(g: &Graph) -> Result<(), String> {
    let cols = columns(g);
    if cols > MAX_COLUMNS {
        Err(format!(
            "the Checkmate model would have {cols} columns, over the limit of {MAX_COLUMNS} (about 6 GB)"
        ))
    } else {
        Ok(())
    }
}

impl Formulation {
    /// Builds the MILP for memory `budget` (fixed memory included).
    /// `integer = false` gives the LP relaxation. `cost_bound` adds
    /// Σ cost·R ≤ bound (a feasibility question for the max-batch search).
    pub fn build(g: &Graph, budget: Bytes, integer: bool, cost_bound: Option<f64>) -> Formulation {
        Self::build_as(g, budget, integer, cost_bound, FreeModel::Paper)
    }

    /// [`Formulation::build`] with a choice of FREE linearisation.
    ///
    /// R has one column per (stage, kernel): a kernel's outputs are made
    /// together, so its members share the column and the kernel's cost.
    pub fn build_as(
        g: &Graph,
        budget: Bytes,
        integer: bool,
        cost_bound: Option<f64>,
        free_model: FreeModel,
    ) -> Formulation {
        let n = g.len();
        let stages = Stages::of(g);
        let nk = stages.len();
        let free_integer = integer && free_model == FreeModel::Paper;
        let mem_scale = g
            .ids()
            .map(|i| g.memory(i).as_f64())
            .fold(0.0, f64::max)
            .max(1.0);
        let cost_scale = g
            .ids()
            .map(|i| g.cost(i))
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let cap = (budget.as_f64() - g.fixed_memory.as_f64()).max(0.0) / mem_scale;
        let mem: Vec<f64> = g.ids().map(|i| g.memory(i).as_f64() / mem_scale).collect();
        let mut kcost = vec![0.0; nk];
        for i in g.ids() {
            kcost[stages.kern[i.idx()]] += g.cost(i) / cost_scale;
        }
        let (edges, edge_start) = free_edges(g);

        let mut m = Model::new();
        let r_base = 0;
        for a in 0..nk {
            for (b, &c) in kcost.iter().enumerate().take(a + 1) {
                let lo = if a == b { 1.0 } else { 0.0 };
                m.add_col(lo, 1.0, c, integer);
            }
        }
        let s_base = m.num_cols();
        let mut s_off = Vec::with_capacity(nk);
        for a in 0..nk {
            s_off.push(m.num_cols() - s_base);
            for _ in 0..stages.start(a) {
                m.add_col(0.0, 1.0, 0.0, integer);
            }
        }
        let f_base = m.num_cols();
        let mut f_off = Vec::with_capacity(nk);
        for &t in &stages.ends {
            f_off.push(m.num_cols() - f_base);
            for _ in 0..edge_start[t + 1] {
                m.add_col(0.0, 1.0, 0.0, free_integer);
            }
        }
        let u_base = m.num_cols();
        let mut u_off = Vec::with_capacity(nk);
        for &t in &stages.ends {
            u_off.push(m.num_cols() - u_base);
            for _ in 0..=t {
                m.add_col(0.0, cap, 0.0, false);
            }
        }
        let f = Formulation {
            n,
            model: Model::new(),
            stages,
            r_base,
            s_base,
            f_base,
            u_base,
            s_off,
            f_off,
            u_off,
            edges,
            edge_start,
            mem_scale,
            cost_scale,
            fixed_memory: g.fixed_memory,
        };
        let st = &f.stages;
        let inf = f64::INFINITY;
        let mut row: Vec<(Col, f64)> = Vec::with_capacity(64);

        // (1b) S[t',i] <= S[t,i] + R[t,i], t' the stage after t.
        for a in 0..nk.saturating_sub(1) {
            let (t, next) = (st.ends[a], st.ends[a + 1]);
            for i in 0..=t {
                row.clear();
                row.push((f.s(next, i), 1.0));
                row.push((f.r(t, i), -1.0));
                if i < st.start(a) {
                    row.push((f.s(t, i), -1.0));
                }
                m.add_row(-inf, 0.0, &row);
            }
        }
        // (1c) R[t,k] <= R[t,i] + S[t,i] for every edge (i, k), k <= t
        // (not the self-edges of a kernel's outputs).
        for &t in &st.ends {
            for &(i, k) in f.edges[..f.edge_start[t + 1]]
                .iter()
                .filter(|&&(i, k)| i < g.group_start(NodeId::from(k)))
            {
                m.add_row(
                    -inf,
                    0.0,
                    &[(f.r(t, k), 1.0), (f.r(t, i), -1.0), (f.s(t, i), -1.0)],
                );
            }
        }
        // FREE through hazards.
        for (a, &t) in st.ends.iter().enumerate() {
            let next = st.ends.get(a + 1).copied();
            for (e, &(i, k)) in f.edges[..f.edge_start[t + 1]].iter().enumerate() {
                let free = f.free(t, e);
                // Later readers in the stage, one R column per kernel.
                let mut later: Vec<usize> = g
                    .users(NodeId::from(i))
                    .iter()
                    .map(|j| g.group_end(*j))
                    .filter(|&j| j > k && j <= t)
                    .collect();
                later.sort_unstable();
                later.dedup();
                if free_model == FreeModel::Tight {
                    // One bound per hazard: FREE ≤ R[t,k], FREE + S[t',i] ≤ 1,
                    // FREE + R[t,j] ≤ 1.
                    m.add_row(-inf, 0.0, &[(free, 1.0), (f.r(t, k), -1.0)]);
                    if let Some(next) = next {
                        m.add_row(-inf, 1.0, &[(free, 1.0), (f.s(next, i), 1.0)]);
                    }
                    for j in later {
                        m.add_row(-inf, 1.0, &[(free, 1.0), (f.r(t, j), 1.0)]);
                    }
                    continue;
                }
                row.clear();
                row.push((f.r(t, k), 1.0));
                let mut kappa = 1.0;
                if let Some(next) = next {
                    row.push((f.s(next, i), -1.0));
                    kappa += 1.0;
                }
                for j in later {
                    row.push((f.r(t, j), -1.0));
                    kappa += 1.0;
                }
                // 1 − FREE ≤ h  ⇔  −FREE + R[t,k] − S − ΣR ≤ 0.
                row.push((free, -1.0));
                m.add_row(-inf, 0.0, &row);
                // κ(1 − FREE) ≥ h  ⇔  −κ·FREE + R[t,k] − S − ΣR ≥ 1 − κ.
                row.last_mut().expect("pushed").1 = -kappa;
                m.add_row(1.0 - kappa, inf, &row);
            }
        }
        for (a, &t) in st.ends.iter().enumerate() {
            let cols = StageCols {
                u: &|k| f.u(t, k),
                r: &|i| f.r(t, i),
                s: &|i| f.s(t, i),
                free: &|e| f.free(t, e),
            };
            let kept = st.start(a);
            memory_rows(&mut m, t, kept, &mem, &f.edges, &f.edge_start, &cols, &[]);
        }
        if let Some(b) = cost_bound {
            row.clear();
            for a in 0..nk {
                for (b, &c) in kcost.iter().enumerate().take(a + 1) {
                    row.push((f.r_base + tri(a) + b, c));
                }
            }
            let ub = b / cost_scale;
            m.add_row(-inf, ub + ub.abs() * 1e-9, &row);
        }
        Formulation { model: m, ..f }
    }

    /// R's column for node `i` in stage `t` (a stage's frontier): its
    /// kernel's.
    pub fn r(&self, t: usize, i: usize) -> Col {
        debug_assert!(i <= t);
        let (a, b) = (self.stages.kern[t], self.stages.kern[i]);
        debug_assert_eq!(self.stages.ends[a], t);
        self.r_base + tri(a) + b
    }

    pub fn s(&self, t: usize, i: usize) -> Col {
        let a = self.stages.kern[t];
        debug_assert!(i < self.stages.start(a));
        self.s_base + self.s_off[a] + i
    }

    fn free(&self, t: usize, e: usize) -> Col {
        self.f_base + self.f_off[self.stages.kern[t]] + e
    }

    pub fn u(&self, t: usize, k: usize) -> Col {
        debug_assert!(k <= t);
        self.u_base + self.u_off[self.stages.kern[t]] + k
    }

    /// Columns of all U variables: a contiguous block, so a new budget is a
    /// single bound change.
    pub fn u_cols(&self) -> std::ops::Range<Col> {
        self.u_base..self.model.num_cols().max(self.u_base)
    }

    /// U's upper bound, in model units, for a memory budget.
    pub fn u_cap(&self, budget: Bytes) -> f64 {
        (budget.as_f64() - self.fixed_memory.as_f64()).max(0.0) / self.mem_scale
    }

    pub fn num_binaries(&self) -> usize {
        self.model.integer.iter().filter(|&&b| b).count()
    }

    /// Reads (R, S) from a solution vector (values above one half are set).
    pub fn schedule(&self, x: &[f64]) -> Schedule {
        self.decoder().schedule(x)
    }

    /// What [`Formulation::schedule`] needs, without the model: for a
    /// solver callback that decodes incumbents on another thread.
    pub fn decoder(&self) -> Decoder {
        Decoder {
            n: self.n,
            stages: self.stages.clone(),
            r_base: self.r_base,
            s_base: self.s_base,
            s_off: self.s_off.clone(),
        }
    }

    /// Fractional S of an LP solution: `out[t][i]` for i < t, for every
    /// node's stage (a group's earlier members' stages keep what its
    /// frontier stage keeps).
    pub fn fractional_s(&self, x: &[f64]) -> Vec<Vec<f64>> {
        let st = &self.stages;
        (0..self.n)
            .map(|t| {
                let a = st.kern[t];
                let start = st.start(a);
                (0..t)
                    .map(|i| {
                        if i < start {
                            x[self.s(st.ends[a], i)].clamp(0.0, 1.0)
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The solver's memory promise in bytes: the largest U, unscaled, plus
    /// fixed memory.
    pub fn peak_of(&self, x: &[f64]) -> f64 {
        let u = x[self.u_cols()].iter().copied().fold(0.0, f64::max);
        u * self.mem_scale + self.fixed_memory.as_f64()
    }

    /// The full column vector for (R, S), with FREE and U derived exactly as
    /// the MILP defines them (FREE = 1 wherever no hazard remains), and the
    /// largest U in bytes (fixed memory included). Used to warm-start. What
    /// a group's earlier members' stages compute is moved into the group's
    /// stage, which the MILP's stages can express.
    pub fn vector_for(&self, g: &Graph, sch: &Schedule) -> (Vec<f64>, Bytes) {
        let st = &self.stages;
        let sch = on_kernel_stages(g, st, sch);
        let mut x = vec![0.0; self.model.num_cols()];
        for &t in &st.ends {
            for i in sch.r_row(t).iter().map(|&i| i as usize) {
                x[self.r(t, i)] = 1.0;
            }
            for i in sch.kept(t).map(|i| i.idx()) {
                x[self.s(t, i)] = 1.0;
            }
        }
        let usage = milp_usage(g, &sch);
        for (a, &t) in st.ends.iter().enumerate() {
            for (e, &free) in usage.free[a].iter().enumerate() {
                if free {
                    x[self.free(t, e)] = 1.0;
                }
            }
            for (k, &u) in usage.u[a].iter().enumerate() {
                x[self.u(t, k)] = u as f64 / self.mem_scale;
            }
        }
        (x, usage.peak + g.fixed_memory)
    }
}

/// `sch` with the computations of every stage that is not a kernel's
/// frontier moved into the next frontier stage, and the keeps in between
/// made equal to that stage's: the form [`Formulation`] reads.
fn on_kernel_stages(g: &Graph, st: &Stages, sch: &Schedule) -> Schedule {
    if !g.has_groups() {
        return sch.clone();
    }
    let mut out = sch.clone();
    for (a, &t) in st.ends.iter().enumerate() {
        let start = st.start(a);
        let mut r = sch.r_dense(t);
        for t2 in start..t {
            r.union_with(&sch.r_dense(t2));
        }
        let mut s = sch.kept_dense(t);
        s.difference_with(&r);
        for t2 in start..=t {
            for i in 0..=t2 {
                out.set_r(t2, i, false);
                if i < t2 {
                    out.set_s(t2, i, s.contains(i));
                }
            }
        }
        for i in r.ones() {
            out.set_r(t, i, true);
        }
    }
    out
}

/// FREE and U of a schedule as the MILP defines them, in exact bytes.
pub struct MilpUsage {
    /// `free[a][e]` for stage `a` (a kernel's frontier t) and the edges with
    /// target ≤ t, sorted by target.
    pub free: Vec<Vec<bool>>,
    /// `u[a][k]` for k ≤ t, in bytes.
    pub u: Vec<Vec<u128>>,
    /// The largest U (without fixed memory).
    pub peak: Bytes,
}

/// Derives the MILP's FREE and U from (R, S), over the kernels' frontier
/// stages. The MILP's memory model is more conservative than the
/// simulator's (it charges every S = 1 from the start of a stage and never
/// frees a value no later node reads in the stage), so the simulator's peak
/// never exceeds this one.
pub fn milp_usage(g: &Graph, sch: &Schedule) -> MilpUsage {
    let st = Stages::of(g);
    let (edges, edge_start) = free_edges(g);
    let mut free = Vec::with_capacity(st.len());
    let mut u = Vec::with_capacity(st.len());
    let mut peak: u128 = 0;
    for (a, &t) in st.ends.iter().enumerate() {
        let r = sch.r_dense(t);
        let next = st.ends.get(a + 1).copied();
        let keep_next = |i: usize| next.is_some_and(|t2| sch.s(t2, i));
        let fr: Vec<bool> = edges[..edge_start[t + 1]]
            .iter()
            .map(|&(i, k)| {
                r.contains(k)
                    && !keep_next(i)
                    && !g
                        .users(NodeId::from(i))
                        .iter()
                        .any(|j| j.idx() > k && j.idx() <= t && r.contains(j.idx()))
            })
            .collect();
        let mem = |i: usize| g.memory(NodeId::from(i)).get() as u128;
        let mut cur: u128 = if r.contains(0) { mem(0) } else { 0 };
        cur += sch.kept(t).map(|i| i.idx()).map(mem).sum::<u128>();
        let mut row = Vec::with_capacity(t + 1);
        row.push(cur);
        for k in 0..t {
            let freed: u128 = (edge_start[k]..edge_start[k + 1])
                .filter(|&e| fr[e])
                .map(|e| mem(edges[e].0))
                .sum();
            if r.contains(k + 1) {
                cur += mem(k + 1);
            }
            // Every freed value is resident (constraint 1c), so this cannot
            // underflow.
            cur = cur.saturating_sub(freed);
            row.push(cur);
        }
        peak = peak.max(row.iter().copied().max().unwrap_or(0));
        free.push(fr);
        u.push(row);
    }
    MilpUsage {
        free,
        u,
        peak: Bytes(peak.min(u64::MAX as u128) as u64),
    }
}

/// Removes checkpoints the MILP would pay memory for but no plan needs: a
/// value kept into stage t that is also recomputed in t, or that nothing in
/// t reads and stage t + 1 does not keep. Keeps the schedule valid and
/// never raises any stage's memory.
pub fn drop_spurious(g: &Graph, sch: &mut Schedule) {
    let n = sch.stages();
    for t in (0..n).rev() {
        let kept: Vec<usize> = sch.kept(t).map(|i| i.idx()).collect();
        for i in kept {
            let needed = !sch.r(t, i)
                && (g
                    .users(NodeId::from(i))
                    .iter()
                    .any(|k| k.idx() <= t && sch.r(t, k.idx()))
                    || (t + 1 < n && sch.s(t + 1, i)));
            if !needed {
                sch.set_s(t, i, false);
            }
        }
    }
}
