//! The moment bound: a lower bound on the step time of every plan within a
//! budget on a tiered device, from a few *moments* at once (the first
//! computation of a chosen node each), with what a recomputation needs.
//!
//! Why it exists. The closed-form step bound ([`super::tiered::step_bound`])
//! lets a stage give up any crossing bytes at their own cost. On ResNet-50
//! a ReLU's output is the cheapest byte there is, but it is recomputed from
//! a batch norm's output, which the network never keeps, which is
//! recomputed from a convolution's output: giving up the cheap bytes keeps
//! the expensive ones, or pays for them too. And one stage alone cannot
//! see that a value recomputed for one part of the backward pass and
//! dropped again must be recomputed again for the next.
//!
//! Why it holds. Take any plan that first computes the nodes in the
//! file's order, and moments `t_1 < … < t_K`. At moment `j` (while node
//! `t_j` is computed) each value computed so far is resident or not
//! (`x`); between moments `j` and `j + 1` (window `j`) it may be
//! recomputed (`r`), fetched (`f`: copy in issued in the window, so not
//! resident at the moment) or read directly (`d`). The plan satisfies:
//! - memory: the residents at each moment fit the budget; node `t_j`
//!   itself is resident, and so are its inputs unless read directly;
//! - every read in window `j` of a value computed before `t_j`, by a first
//!   computation or by a recomputation, finds it resident at moment `j` or
//!   made present in the window (`x + r + f + d ≥ 1`);
//! - a value resident at moment `j + 1` was resident at `j`, or made
//!   present in window `j`, or first computed there;
//! - a slow copy (`h`, held by the end of a window) is made while the value
//!   is present, and a value fetched or read directly after a moment where
//!   it was absent (with no recomputation between) had its copy end before
//!   that moment: a deallocation waits for its copy out;
//! - the lanes: each window's compute stream carries its first
//!   computations, recomputations and direct reads; every copy out that
//!   ended by a moment ran before it, and every fetch issued after a
//!   moment ran after it (a shared engine carries both; a synchronous
//!   device runs copies on the compute stream).
//!
//! Map the plan's events onto the windows (a value made present twice in
//! a window counts once, a window's events overlap freely, latencies are
//! left out, memory is checked only at the moments): every plan is a
//! feasible point whose objective, the sum of the windows' times, is at
//! most its step time. So the MILP's optimum, and its solver's bound when
//! stopped early, is a lower bound; with one moment and no closures it is
//! the closed form's argument at that stage.
//!
//! The moments are chosen greedily: the closed form's stages are the
//! candidates, and a moment is added while it raises the bound.
//!
//! Measured (docs/tiers.md, results/moment_bound.csv): ResNet-50 at 30%,
//! closed form 32.953 → 33.20 ms on the GH200 and 106.35 → 107.68 ms on
//! the A100; GPT-2 at 30% on the A100 120.58 → 127.08 ms, 0.5% from its
//! plan.

use super::tiered::step_bound_stages;
use super::{solve_mip, Backend, Col, Model, Params, SolverError};
use crate::device::{Device, Engines};
use crate::graph::{Graph, NodeId};
use crate::units::{Bytes, Seconds};
use std::time::{Duration, Instant};

/// The graphs the bound is built for: its columns grow with nodes times
/// moments, and each solve is a small MILP only below this.
pub const MAX_NODES: usize = 4_000;

/// At most this many moments in one model. On ResNet-50 at 30% with
/// 150 s, four moments gave 107.845 ms on the A100 against 107.684 from
/// two (the GH200: 33.203 against 33.200).
const MAX_MOMENTS: usize = 4;

/// From the third moment on, only this many of the last round's best
/// candidates are tried.
const BEAM: usize = 3;

/// Candidate moments: the closed form's best stage and the best of each of
/// this many slices of the stages that must give up bytes.
const SLICES: usize = 8;

#[derive(Debug, Clone)]
pub struct MomentBound {
    /// A lower bound on every plan's step time (in the file's order).
    pub bound: Seconds,
    /// The moments of the model that gave it.
    pub moments: Vec<NodeId>,
    /// MILPs solved (each a valid bound on its own).
    pub solves: usize,
    pub seconds: f64,
}

/// The bound within `params.time_limit`, or `None` where it is not built
/// (multi-output kernels, more than [`MAX_NODES`] nodes, no stage that
/// must give up bytes, or the time was up before a first solve).
pub fn moment_bound(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    params: &Params,
) -> Result<Option<MomentBound>, SolverError> {
    let start = Instant::now();
    if g.has_groups() || g.len() > MAX_NODES || g.len() < 2 {
        return Ok(None);
    }
    let stages = step_bound_stages(g, budget, dev, no_recompute);
    if stages.is_empty() {
        return Ok(None);
    }
    let deadline = start + params.time_limit;
    let by_value = |a: &&(NodeId, f64), b: &&(NodeId, f64)| a.1.total_cmp(&b.1);
    let mut candidates: Vec<NodeId> = Vec::new();
    if let Some(&(t, _)) = stages.iter().max_by(by_value) {
        candidates.push(t);
    }
    let per = stages.len().div_ceil(SLICES);
    for slice in stages.chunks(per) {
        if let Some(&(t, _)) = slice.iter().max_by(by_value) {
            if !candidates.contains(&t) {
                candidates.push(t);
            }
        }
    }
    let mut best: Option<MomentBound> = None;
    let mut solves = 0;
    let mut chosen: Vec<NodeId> = Vec::new();
    let mut current = f64::NEG_INFINITY;
    // Each round's candidates with what they gave, for the next round.
    let mut scored: Vec<(NodeId, f64)> = Vec::new();
    while chosen.len() < MAX_MOMENTS {
        let mut round: Option<(NodeId, f64)> = None;
        // The first two rounds try every candidate (one or two moments
        // solve in a second on ResNet-50); later ones only the best few of
        // the round before, since a third moment takes ten times as long.
        let mut left: Vec<NodeId> = if chosen.len() < 2 {
            candidates.clone()
        } else {
            scored.sort_by(|a, b| b.1.total_cmp(&a.1));
            scored.iter().map(|&(c, _)| c).take(BEAM + 1).collect()
        };
        left.retain(|c| !chosen.contains(c));
        left.truncate(if chosen.len() < 2 { usize::MAX } else { BEAM });
        scored.clear();
        for (i, &c) in left.iter().enumerate() {
            let now = Instant::now();
            if now >= deadline || super::stop_requested(&params.stop) {
                break;
            }
            // An even share of what is left for each of the first two
            // rounds' solves, which are quick. From the third moment on,
            // each in the beam's order gets all that is left: a solve
            // stopped short answers its LP bound, below the round before's,
            // and is lost (ResNet-50 at 30% on the A100: the best triple
            // needs 17 s alone, and a third of the 60 s share's rest gave it
            // 14 s, so the bound stayed at two moments, 107.684 against
            // 107.841 ms).
            let left_t = deadline.saturating_duration_since(now);
            let share = if chosen.len() < 2 {
                left_t / (left.len() - i) as u32
            } else {
                left_t
            };
            let mut moments = chosen.clone();
            moments.push(c);
            moments.sort_unstable();
            let p = Params {
                time_limit: share.max(Duration::from_millis(50)),
                ..params.clone()
            };
            let Some(b) = solve_moments(g, budget, dev, no_recompute, &moments, &p)? else {
                continue;
            };
            solves += 1;
            if best.as_ref().is_none_or(|x| b > x.bound.get()) {
                best = Some(MomentBound {
                    bound: Seconds(b),
                    moments: moments.clone(),
                    solves,
                    seconds: 0.0,
                });
            }
            scored.push((c, b));
            if round.is_none_or(|(_, v)| b > v) {
                round = Some((c, b));
            }
        }
        match round {
            Some((c, b)) if b > current * (1.0 + 1e-5) || chosen.is_empty() => {
                chosen.push(c);
                current = b;
            }
            _ => break,
        }
    }
    Ok(best.map(|mut b| {
        b.solves = solves;
        b.seconds = start.elapsed().as_secs_f64();
        b
    }))
}

/// The model for these moments (sorted, distinct), solved: its optimum or
/// the solver's bound when stopped, in seconds; `None` without either.
pub fn solve_moments(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    moments: &[NodeId],
    params: &Params,
) -> Result<Option<f64>, SolverError> {
    let (m, scale) = build(g, budget, dev, no_recompute, moments);
    let p = Params {
        feasibility_tolerance: 1e-6,
        ..params.clone()
    };
    let r = solve_mip(&m, Backend::Highs, &p, None)?;
    Ok(match r.status {
        // No point fits: no plan does either. The pipeline refuses budgets
        // below the hard floor before any strategy runs, so this is the
        // model's tolerance, not a proof; claim nothing.
        super::MipStatus::Infeasible => None,
        // Only the solver's bound is one: an incumbent's objective is not,
        // unless proven within the gap, which is then taken off it.
        super::MipStatus::Optimal => r
            .bound
            .or(r.objective.map(|o| o * (1.0 - p.gap.clamp(0.0, 0.5))))
            .map(|b| b * scale),
        _ => r.bound.map(|b| b * scale),
    })
}

/// Builds the model; the objective is in units of the second return value
/// (seconds), the all-fast step, so that it is of order one. The rows
/// index several tables by the same (moment, value) pair, hence the
/// index loops.
#[allow(clippy::needless_range_loop)]
fn build(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    moments: &[NodeId],
) -> (Model, f64) {
    const NONE: Col = usize::MAX;
    let n = g.len();
    let k = moments.len();
    let t_of = |j: usize| moments[j].idx();
    let all_fast = dev.all_fast_step(g).get().max(f64::MIN_POSITIVE);
    let s = 1.0 / all_fast;
    let time = |v: usize| dev.compute_time(g.cost(NodeId::from(v))).get() * s;
    let bytes = |v: usize| g.memory(NodeId::from(v)).as_f64();
    let avail = budget.saturating_sub(g.fixed_memory).as_f64().max(1.0);
    let direct = dev.slow.direct_read.is_some();
    let per_byte = |bw: crate::units::Bandwidth| s / bw.get();
    let (out_b, in_b) = (per_byte(dev.slow.to_slow), per_byte(dev.slow.to_fast));
    let dr_b = dev.slow.direct_read.map_or(0.0, per_byte);
    let sync = dev.slow.engines == Engines::Synchronous;
    let is_dep = |j: usize, v: usize| g.deps(moments[j]).contains(&NodeId::from(v));
    // Resident at moment j whatever the plan: node t_j, zero-byte values,
    // and (without direct reads) t_j's inputs.
    let forced = |j: usize, v: usize| v == t_of(j) || bytes(v) == 0.0 || (!direct && is_dep(j, v));
    let mut m = Model::new();
    let mut x = vec![vec![NONE; n]; k];
    let mut r = vec![vec![NONE; n]; k];
    let mut f = vec![vec![NONE; n]; k];
    let mut d = vec![vec![NONE; n]; k];
    for j in 0..k {
        for v in 0..=t_of(j) {
            let lo = if forced(j, v) { 1.0 } else { 0.0 };
            x[j][v] = m.add_col(lo, 1.0, 0.0, true);
            if v < t_of(j) {
                let r_up = if no_recompute { 0.0 } else { 1.0 };
                r[j][v] = m.add_col(0.0, r_up, 0.0, true);
                f[j][v] = m.add_col(0.0, 1.0, 0.0, true);
                if direct {
                    d[j][v] = m.add_col(0.0, 1.0, 0.0, true);
                }
            }
        }
    }
    // Window w runs from moment w - 1 (or the start) to moment w (or the
    // end); h[w][v]: a slow copy of v has ended by the end of window w.
    let end_of = |w: usize| if w < k { t_of(w) } else { n };
    let begin_of = |w: usize| if w == 0 { 0 } else { t_of(w - 1) };
    let h: Vec<Vec<Col>> = (0..=k)
        .map(|w| {
            (0..end_of(w))
                .map(|_| m.add_col(0.0, 1.0, 0.0, true))
                .collect()
        })
        .collect();
    let first: Vec<f64> = (0..=k)
        .map(|w| (begin_of(w)..end_of(w)).map(time).sum())
        .collect();
    let tau: Vec<Col> = (0..=k)
        .map(|w| m.add_col(first[w], f64::INFINITY, 1.0, false))
        .collect();
    // Present in window j + 1 without a first computation there.
    let present = |j: usize, v: usize| -> Vec<(Col, f64)> {
        let mut e = vec![(x[j][v], 1.0), (r[j][v], 1.0), (f[j][v], 1.0)];
        if direct {
            e.push((d[j][v], 1.0));
        }
        e
    };
    for j in 0..k {
        let t = t_of(j);
        let mut read = vec![false; t];
        for u in t..end_of(j + 1) {
            for &w in g.deps(NodeId::from(u)) {
                if w.idx() < t {
                    read[w.idx()] = true;
                }
            }
        }
        for v in 0..t {
            if read[v] && !forced(j, v) {
                m.add_row(1.0, f64::INFINITY, &present(j, v));
            }
            // Node t_j reads its inputs at the moment itself: resident, or
            // read directly.
            if direct && is_dep(j, v) && bytes(v) > 0.0 {
                m.add_row(1.0, f64::INFINITY, &[(x[j][v], 1.0), (d[j][v], 1.0)]);
            }
            for &w in g.deps(NodeId::from(v)) {
                let mut e = present(j, w.idx());
                e.push((r[j][v], -1.0));
                m.add_row(0.0, f64::INFINITY, &e);
            }
            m.add_row(f64::NEG_INFINITY, 0.0, &[(f[j][v], 1.0), (h[j][v], -1.0)]);
            if direct {
                m.add_row(f64::NEG_INFINITY, 0.0, &[(d[j][v], 1.0), (h[j][v], -1.0)]);
            }
            if j + 1 < k {
                m.add_row(
                    f64::NEG_INFINITY,
                    0.0,
                    &[
                        (x[j + 1][v], 1.0),
                        (x[j][v], -1.0),
                        (r[j][v], -1.0),
                        (f[j][v], -1.0),
                    ],
                );
            }
        }
        let row: Vec<(Col, f64)> = (0..=t).map(|v| (x[j][v], bytes(v) / avail)).collect();
        m.add_row(f64::NEG_INFINITY, 1.0, &row);
    }
    // Absent at an earlier moment, brought back from the slow tier later
    // with no recomputation between: the copy ended before that moment.
    for j2 in 0..k {
        for j1 in 0..j2 {
            for v in 0..t_of(j1) {
                for c in [f[j2][v], d[j2][v]] {
                    if c == NONE {
                        continue;
                    }
                    let mut e = vec![(x[j1][v], 1.0), (h[j1][v], 1.0), (c, -1.0)];
                    e.extend((j1..j2).map(|i| (r[i][v], 1.0)));
                    m.add_row(0.0, f64::INFINITY, &e);
                }
            }
        }
    }
    // Slow copies are kept once made, and made while the value is present.
    for w in 1..=k {
        for v in 0..end_of(w - 1) {
            m.add_row(0.0, f64::INFINITY, &[(h[w][v], 1.0), (h[w - 1][v], -1.0)]);
            if v < t_of(w - 1) {
                let mut e = present(w - 1, v);
                e.push((h[w][v], -1.0));
                e.push((h[w - 1][v], 1.0));
                m.add_row(0.0, f64::INFINITY, &e);
            }
        }
    }
    // The compute stream of each window.
    for w in 0..=k {
        let mut e: Vec<(Col, f64)> = vec![(tau[w], 1.0)];
        if w >= 1 {
            let j = w - 1;
            for v in 0..t_of(j) {
                e.push((r[j][v], -time(v)));
                if direct {
                    e.push((d[j][v], -bytes(v) * dr_b));
                }
                if sync {
                    e.push((f[j][v], -bytes(v) * in_b));
                }
            }
        }
        if sync {
            for v in 0..end_of(w) {
                e.push((h[w][v], -bytes(v) * out_b));
                if w >= 1 && v < end_of(w - 1) {
                    e.push((h[w - 1][v], bytes(v) * out_b));
                }
            }
        }
        m.add_row(first[w], f64::INFINITY, &e);
    }
    if !sync {
        // Fetches issued after moment j, by window.
        let fetched_after = |j: usize| -> Vec<(Col, f64)> {
            (j..k)
                .flat_map(|i| (0..t_of(i)).map(move |v| (i, v)))
                .map(|(i, v)| (f[i][v], bytes(v) * in_b))
                .collect()
        };
        for w in 1..=k {
            let mut e: Vec<(Col, f64)> = (0..w).map(|i| (tau[i], 1.0)).collect();
            e.extend((0..end_of(w - 1)).map(|v| (h[w - 1][v], -bytes(v) * out_b)));
            m.add_row(0.0, f64::INFINITY, &e);
        }
        for j in 0..k {
            let mut e: Vec<(Col, f64)> = ((j + 1)..=k).map(|i| (tau[i], 1.0)).collect();
            e.extend(fetched_after(j).into_iter().map(|(c, v)| (c, -v)));
            m.add_row(0.0, f64::INFINITY, &e);
        }
        if dev.slow.engines == Engines::Shared {
            for j in 0..k {
                let mut e: Vec<(Col, f64)> = (0..=k).map(|i| (tau[i], 1.0)).collect();
                e.extend((0..end_of(j)).map(|v| (h[j][v], -bytes(v) * out_b)));
                e.extend(fetched_after(j).into_iter().map(|(c, v)| (c, -v)));
                m.add_row(0.0, f64::INFINITY, &e);
            }
        }
    }
    (m, all_fast)
}
