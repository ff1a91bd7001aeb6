//! AutoTM's placement-and-movement ILP (Hildebrand et al., ASPLOS 2020),
//! written on this crate's stages so that its solutions are schedules the
//! one plan generator and simulator accept. The strategies `autotm-static`,
//! `autotm-sync` and `autotm-async` are three [`Moves`] of this one model.
//!
//! AutoTM gives each tensor a network-flow graph through its lifetime:
//! one DRAM and one PMM node per kernel that touches it, edges for staying
//! and for moving, flow 1 from its producer to its last user. Here the
//! kernels that touch value `i` are its own stage `u0 = i` and its
//! readers' stages `u1 < … < um`; between two of them (a *segment*) the
//! flow takes one of these paths, which are the edges of AutoTM's graph
//! with the stage at which they are taken:
//!
//! - `a[j]`: stay in fast memory through the segment;
//! - `x[j,q]`: leave fast memory after stage `q` (`S` up to `q`), copying
//!   out during `q` unless a slow copy already exists (`o[j,q]`);
//! - `y[j,p]`: come back by a copy in during stage `p` (resident from
//!   `p + 1`), after leaving or having arrived in the slow tier;
//! - `c[j]`: stay slow and let the reader at `u(j+1)` read it directly
//!   (only where the device allows direct reads).
//!
//! Flow conservation per segment: `a + Σx = F` (arrived fast: `F = 1` for
//! the producer, else the previous segment's `a + Σy`) and
//! `Σy + c = Σx + c[j−1]` (what went slow comes back or is read slow). A
//! copy in follows its leave: `Σ_{p≤t} y ≤ Σ_{q<t} x + c[j−1]`. A value is
//! copied out at most once (`Σo ≤ 1`) and its slow copy is kept to its
//! last read, so a second eviction costs nothing: a slow copy of an
//! unchanged tensor stays valid (AutoTM pays a second move; we do not).
//!
//! Memory, per stage `t`, exactly the plan generator's accounting: the
//! stage's own output, plus each value held through it (`a`, `x` with
//! `q ≥ t`, or `y` with `p ≤ t`, the copy-in buffer counting from the start
//! of its stage) must fit the budget less fixed memory.
//!
//! Time. [`Moves::Static`] and [`Moves::Sync`] price every move on the
//! compute stream, as AutoTM's static and synchronous formulations do:
//! step = compute + Σ copies + Σ direct reads. On a device whose engines
//! are `synchronous` that is the simulator's step time exactly; on a GPU
//! the simulator overlaps the copies, and the plan runs faster than the
//! objective. [`Moves::Async`] has a stage time `τ_t` bounded below by each
//! resource of the stage as the simulator runs it: the compute stream
//! (compute, direct reads, then the copy out of the value just computed),
//! the engine taking copies out (copies of kept values from the stage's
//! start, then the fresh value's), and the engine taking copies in (one
//! engine for both on `shared` devices); `Σ τ_t` is the simulator's step
//! time exactly on every device with copy engines.
//!
//! Where moves may happen: Static, one copy out right after the producer
//! and nothing else; Sync, AutoTM's "just before or just after the kernels
//! that use or produce them" (`q = u_j`, `p = u(j+1) − 1`); Async, any
//! stage within `window` stages after a use (leave) or before the next
//! one (copy in), AutoTM's asynchronous extension with a bounded window
//! to keep the model small.

use super::model::{Col, Model};
use crate::device::{Device, Engines};
use crate::graph::{Graph, NodeId};
use crate::schedule::Schedule;
use crate::units::Bytes;

/// Which of AutoTM's formulations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moves {
    /// Each value in one tier for its whole life (after its producer).
    Static,
    /// Moves adjacent to uses, blocking the compute stream.
    Sync,
    /// Moves within `window` stages of a use, overlapping compute.
    Async { window: usize },
}

/// One segment of one value's life: from stage `from` (a use) to the
/// next use `to`.
struct Segment {
    value: usize,
    from: usize,
    to: usize,
    a: Col,
    /// (stage q, x column, o column)
    leave: Vec<(usize, Col, Col)>,
    /// (stage p, y column)
    fetch: Vec<(usize, Col)>,
    c: Option<Col>,
    /// How many arguments of the node at `to` read the value.
    reads: usize,
}

/// The built model and what is needed to read a schedule back from it.
pub struct AutotmModel {
    pub model: Model,
    segments: Vec<Segment>,
    n: usize,
    /// Objective units: seconds per unit (the all-fast step).
    pub scale: f64,
    /// Objective constant in seconds (the compute of every stage, for the
    /// additive formulations).
    pub constant: f64,
}

impl AutotmModel {
    /// The model's step time in seconds for a column vector.
    pub fn step_secs(&self, x: &[f64]) -> f64 {
        self.constant + self.model.objective(x) * self.scale
    }
}

/// Builds the model. A stage that cannot fit even in principle (its own
/// output and fixed memory over the budget) makes it infeasible. `None`
/// once `stop` is set.
pub fn build(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    moves: Moves,
    stop: &Option<super::StopFlag>,
) -> Option<AutotmModel> {
    let n = g.len();
    let mut m = Model::new();
    let compute: Vec<f64> = g.ids().map(|k| dev.compute_time(g.cost(k)).get()).collect();
    let total: f64 = compute.iter().sum();
    let scale = if total > 0.0 { total } else { 1.0 };
    let out_secs = |i: usize| dev.copy_time(g.memory(NodeId::from(i)), true).get() / scale;
    let in_secs = |i: usize| dev.copy_time(g.memory(NodeId::from(i)), false).get() / scale;
    let direct = |i: usize| {
        dev.direct_read_time(g.memory(NodeId::from(i)))
            .map(|s| s.get() / scale)
    };
    let additive = !matches!(moves, Moves::Async { .. });
    let bin = |m: &mut Model, cost: f64| m.add_col(0.0, 1.0, cost, true);

    let mut segments: Vec<Segment> = Vec::new();
    // Per value: the o columns (at most one copy out) and the segment
    // range, for the conservation rows.
    for i in 0..n {
        if i % 256 == 0 && super::stop_requested(stop) {
            return None;
        }
        let id = NodeId::from(i);
        let mut uses: Vec<usize> = g.users(id).iter().map(|u| u.idx()).collect();
        uses.sort_unstable();
        uses.dedup();
        let mut from = i;
        for (j, &to) in uses.iter().enumerate() {
            let reads = g
                .deps(NodeId::from(to))
                .iter()
                .filter(|&&d| d == id)
                .count();
            let a = bin(&mut m, 0.0);
            let leave_stages: Vec<usize> = match moves {
                Moves::Static if j == 0 => vec![from],
                Moves::Static => vec![],
                Moves::Sync => vec![from],
                Moves::Async { window } => (from..to).take(window.max(1)).collect(),
            };
            let fetch_stages: Vec<usize> = match moves {
                Moves::Static => vec![],
                Moves::Sync => (to >= from + 2).then_some(to - 1).into_iter().collect(),
                Moves::Async { window } => (from + 1..to).rev().take(window.max(1)).rev().collect(),
            };
            let leave = leave_stages
                .into_iter()
                .map(|q| {
                    let x = bin(&mut m, 0.0);
                    let o = bin(&mut m, if additive { out_secs(i) } else { 0.0 });
                    (q, x, o)
                })
                .collect();
            let fetch = fetch_stages
                .into_iter()
                .map(|p| (p, bin(&mut m, if additive { in_secs(i) } else { 0.0 })))
                .collect();
            let c = direct(i).map(|d| {
                let cost = if additive { d * reads as f64 } else { 0.0 };
                bin(&mut m, cost)
            });
            segments.push(Segment {
                value: i,
                from,
                to,
                a,
                leave,
                fetch,
                c,
                reads,
            });
            from = to;
        }
    }

    // Flow, precedence and copy-out rows, value by value.
    let mut s = 0;
    while s < segments.len() {
        let i = segments[s].value;
        let mut e = s;
        while e < segments.len() && segments[e].value == i {
            e += 1;
        }
        let mut all_o: Vec<(Col, f64)> = Vec::new();
        for k in s..e {
            let seg = &segments[k];
            let prev = (k > s).then(|| &segments[k - 1]);
            // a + Σx = F.
            let mut row: Vec<(Col, f64)> = vec![(seg.a, 1.0)];
            row.extend(seg.leave.iter().map(|&(_, x, _)| (x, 1.0)));
            match prev {
                None => m.add_row(1.0, 1.0, &row),
                Some(p) => {
                    row.push((p.a, -1.0));
                    row.extend(p.fetch.iter().map(|&(_, y)| (y, -1.0)));
                    m.add_row(0.0, 0.0, &row);
                }
            }
            // Σy + c − Σx − c[j−1] = 0.
            let mut row: Vec<(Col, f64)> = seg.fetch.iter().map(|&(_, y)| (y, 1.0)).collect();
            row.extend(seg.c.map(|c| (c, 1.0)));
            row.extend(seg.leave.iter().map(|&(_, x, _)| (x, -1.0)));
            if let Some(pc) = prev.and_then(|p| p.c) {
                row.push((pc, -1.0));
            }
            m.add_row(0.0, 0.0, &row);
            // A copy in follows the leave (or a slow arrival).
            // (One leave and one fetch are ordered by construction.)
            if seg.fetch.len() > 1 || seg.leave.len() > 1 {
                for &(t, _) in &seg.fetch {
                    let mut row: Vec<(Col, f64)> = seg
                        .fetch
                        .iter()
                        .filter(|&&(p, _)| p <= t)
                        .map(|&(_, y)| (y, 1.0))
                        .collect();
                    row.extend(
                        seg.leave
                            .iter()
                            .filter(|&&(q, _, _)| q < t)
                            .map(|&(_, x, _)| (x, -1.0)),
                    );
                    if let Some(pc) = prev.and_then(|p| p.c) {
                        row.push((pc, -1.0));
                    }
                    m.add_row(f64::NEG_INFINITY, 0.0, &row);
                }
            }
            // o ≤ x; leaving needs a slow copy: Σx − Σo ≤ copies made before.
            for &(_, x, o) in &seg.leave {
                m.add_row(f64::NEG_INFINITY, 0.0, &[(o, 1.0), (x, -1.0)]);
            }
            let mut row: Vec<(Col, f64)> = Vec::new();
            for &(_, x, o) in &seg.leave {
                row.push((x, 1.0));
                row.push((o, -1.0));
            }
            row.extend(all_o.iter().map(|&(o, _)| (o, -1.0)));
            if !seg.leave.is_empty() {
                m.add_row(f64::NEG_INFINITY, 0.0, &row);
            }
            all_o.extend(seg.leave.iter().map(|&(_, _, o)| (o, 1.0)));
        }
        if all_o.len() > 1 {
            m.add_row(f64::NEG_INFINITY, 1.0, &all_o);
        }
        s = e;
    }

    // Memory rows, in units of the budget.
    let b = budget.as_f64().max(1.0);
    let mut mem_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    for (k, seg) in segments.iter().enumerate() {
        if k % 256 == 0 && super::stop_requested(stop) {
            return None;
        }
        let w = g.memory(NodeId::from(seg.value)).as_f64() / b;
        if w == 0.0 {
            continue;
        }
        for (t, row) in mem_rows
            .iter_mut()
            .enumerate()
            .take(seg.to + 1)
            .skip(seg.from + 1)
        {
            row.push((seg.a, w));
            row.extend(
                seg.leave
                    .iter()
                    .filter(|&&(q, _, _)| q >= t)
                    .map(|&(_, x, _)| (x, w)),
            );
            row.extend(
                seg.fetch
                    .iter()
                    .filter(|&&(p, _)| p <= t)
                    .map(|&(_, y)| (y, w)),
            );
        }
    }
    for (t, row) in mem_rows.into_iter().enumerate() {
        if t % 256 == 0 && super::stop_requested(stop) {
            return None;
        }
        // A margin of 1e-7 of the budget in whole bytes (a kilobyte in
        // 10 GB; none for tiny budgets, where byte sums are exact) keeps the
        // solver's feasibility tolerance from rounding a plan over it.
        let room = (budget.as_f64()
            - (budget.as_f64() * 1e-7).floor()
            - g.fixed_memory.as_f64()
            - g.memory(NodeId::from(t)).as_f64())
            / b;
        m.add_row(f64::NEG_INFINITY, room, &merge(row));
    }

    // The slow tier's capacity, only where it could bind.
    let everything: f64 = g.ids().map(|k| g.memory(k).as_f64()).sum();
    if everything > dev.slow.capacity.as_f64() {
        let cap = dev.slow.capacity.as_f64() / b;
        let mut rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        for seg in &segments {
            let w = g.memory(NodeId::from(seg.value)).as_f64() / b;
            let last = segments
                .iter()
                .filter(|s| s.value == seg.value)
                .map(|s| s.to)
                .max()
                .unwrap_or(seg.to);
            for &(q, _, o) in &seg.leave {
                for row in rows.iter_mut().take(last + 1).skip(q) {
                    row.push((o, w));
                }
            }
        }
        for row in rows {
            if !row.is_empty() {
                m.add_row(f64::NEG_INFINITY, cap, &merge(row));
            }
        }
    }

    let constant = if additive { total } else { 0.0 };
    if !additive {
        // τ_t, in units of the all-fast step, bounded by each resource.
        let mut own: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        let mut kept: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        let mut fetched: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        let mut reads: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        for seg in &segments {
            let i = seg.value;
            for &(q, _, o) in &seg.leave {
                if q == i {
                    own[q].push((o, out_secs(i)));
                } else {
                    kept[q].push((o, out_secs(i)));
                }
            }
            for &(p, y) in &seg.fetch {
                fetched[p].push((y, in_secs(i)));
            }
            if let (Some(c), Some(d)) = (seg.c, direct(i)) {
                reads[seg.to].push((c, d * seg.reads as f64));
            }
        }
        for t in 0..n {
            if t % 256 == 0 && super::stop_requested(stop) {
                return None;
            }
            let tau = m.add_col(0.0, f64::INFINITY, 1.0, false);
            let c_t = compute[t] / scale;
            let row = |m: &mut Model, lo: f64, parts: &[&Vec<(Col, f64)>]| {
                let mut r: Vec<(Col, f64)> = vec![(tau, 1.0)];
                for p in parts {
                    r.extend(p.iter().map(|&(c, v)| (c, -v)));
                }
                m.add_row(lo, f64::INFINITY, &merge(r));
            };
            match dev.slow.engines {
                Engines::Duplex => {
                    row(&mut m, c_t, &[&reads[t], &own[t]]);
                    row(&mut m, 0.0, &[&kept[t], &own[t]]);
                    row(&mut m, 0.0, &[&fetched[t]]);
                }
                Engines::Shared => {
                    row(&mut m, c_t, &[&reads[t], &own[t]]);
                    row(&mut m, 0.0, &[&fetched[t], &kept[t], &own[t]]);
                }
                Engines::Synchronous => {
                    row(&mut m, c_t, &[&reads[t], &own[t], &kept[t], &fetched[t]]);
                }
            }
        }
    }
    Some(AutotmModel {
        model: m,
        segments,
        n,
        scale,
        constant,
    })
}

/// Sums duplicate columns: a row may name a column once.
fn merge(mut row: Vec<(Col, f64)>) -> Vec<(Col, f64)> {
    row.sort_by_key(|&(c, _)| c);
    let mut out: Vec<(Col, f64)> = Vec::with_capacity(row.len());
    for (c, v) in row {
        match out.last_mut() {
            Some(last) if last.0 == c => last.1 += v,
            _ => out.push((c, v)),
        }
    }
    out
}

impl AutotmModel {
    /// A starting point that needs the least memory the model knows per
    /// value: leave fast memory right after every use, and come back as
    /// late as the moves allow (or read directly, where `direct`). Whether
    /// it fits is the caller's check ([`Model::max_violation`]).
    pub fn least_memory(&self, direct: bool) -> Vec<f64> {
        let mut x = vec![0.0; self.model.num_cols()];
        let mut made = vec![false; self.n];
        let mut slow = false;
        let mut value = usize::MAX;
        for seg in &self.segments {
            if seg.value != value {
                value = seg.value;
                slow = false;
            }
            let leave = seg.leave.first();
            let fetch = seg.fetch.last();
            let go_slow = |x: &mut Vec<f64>, made: &mut Vec<bool>| {
                if let Some(&(_, xc, o)) = leave {
                    x[xc] = 1.0;
                    if !made[value] {
                        x[o] = 1.0;
                        made[value] = true;
                    }
                }
            };
            match (slow, fetch, seg.c) {
                (true, _, Some(c)) if direct => x[c] = 1.0,
                (true, Some(&(_, y)), _) => {
                    x[y] = 1.0;
                    slow = false;
                }
                (true, None, Some(c)) => x[c] = 1.0,
                (false, _, Some(c)) if direct && leave.is_some() => {
                    go_slow(&mut x, &mut made);
                    x[c] = 1.0;
                    slow = true;
                }
                (false, Some(&(p, y)), _) if leave.is_some_and(|&(q, _, _)| q < p) => {
                    go_slow(&mut x, &mut made);
                    x[y] = 1.0;
                }
                (false, _, _) => x[seg.a] = 1.0,
                (true, None, None) => unreachable!("a slow value always has a way back"),
            }
        }
        self.fill_tau(&mut x);
        x
    }

    /// Sets each τ column to the largest of its rows' bounds, so a vector
    /// chosen on the binaries is feasible on the stage times too.
    fn fill_tau(&self, x: &mut [f64]) {
        let m = &self.model;
        for r in 0..m.num_rows() {
            let (lo, hi) = (m.row_lower[r], m.row_upper[r]);
            if hi != f64::INFINITY || lo == f64::NEG_INFINITY {
                continue;
            }
            let span = m.row_start[r]..m.row_start[r + 1];
            // Stage-time rows: τ (continuous, coefficient 1) minus binaries.
            let Some(p) = span
                .clone()
                .find(|&p| !m.integer[m.row_index[p] as usize] && m.row_value[p] == 1.0)
            else {
                continue;
            };
            let tau = m.row_index[p] as usize;
            let rest: f64 = span
                .filter(|&q| q != p)
                .map(|q| m.row_value[q] * x[m.row_index[q] as usize])
                .sum();
            x[tau] = x[tau].max(lo - rest);
        }
    }

    /// The schedule a column vector describes.
    pub fn schedule(&self, x: &[f64]) -> Schedule {
        let on = |c: Col| x[c] > 0.5;
        let mut sch = Schedule::identity(self.n);
        // Per value: the stage of its copy out and its last read.
        let mut out_at: Vec<Option<usize>> = vec![None; self.n];
        let mut last: Vec<usize> = (0..self.n).collect();
        for seg in &self.segments {
            let i = seg.value;
            last[i] = last[i].max(seg.to);
            for &(q, xc, o) in &seg.leave {
                if on(o) {
                    out_at[i] = Some(q);
                    sch.set_o(q, i, true);
                }
                if on(xc) {
                    sch.set_s_range(i, seg.from + 1..=q, true);
                }
            }
            if on(seg.a) {
                sch.set_s_range(i, seg.from + 1..=seg.to, true);
            }
            for &(p, y) in &seg.fetch {
                if on(y) {
                    sch.set_p(p, i, true);
                    sch.set_s_range(i, p + 1..=seg.to, true);
                }
            }
        }
        for i in 0..self.n {
            if let Some(q) = out_at[i] {
                sch.set_h_range(i, q + 1..=last[i], true);
            }
        }
        sch
    }
}
