//! The segment-cover bound: a small integer program whose optimum is a lower
//! bound on every plan's cost, far tighter than the Checkmate LP, and small
//! enough to solve to optimality in a fraction of a second on the public
//! graphs.
//!
//! Why it holds. Between two consecutive reads of a value `v` (or between
//! its computation and its first read) lies a *segment* of stages that do
//! not read it. If `v` is absent at any moment inside a segment, it must be
//! computed again before the read that closes the segment: one more
//! computation of `v`, and a different one for every segment. Map any plan
//! to the program by choosing, per segment where `v` is ever absent, the
//! column `x[s, r]` of the *last* stage `r` that computes `v` again; the
//! column claims `v` absent from the segment's start until `r`. That claim
//! may include moments when `v` was in fact present, which only makes the
//! rows below easier to meet, so every plan maps to a feasible point of the
//! same or lower cost. The rows:
//!
//! - *End of stage `t`* (see [`stage_needs`]): the values claimed absent
//!   free at least `need_t` bytes, plus the bytes of every input that was
//!   kept past its last reader for a recomputation after `t`.
//! - *Inputs*: computing `v` again in stage `r` needs each input `u` that
//!   died before `r` (its last reader is before `r`): either `u` is
//!   computed again after its last reader (`ρ[u]`, once per `u`, at its
//!   cost), or it is still resident at the end of every stage between
//!   (`e[u, t]`, bytes in that stage's row).
//! - *The moment of recomputation*: inside stage `r`, when `v` is computed
//!   (stage computations run in topological order), every value read at or
//!   after `r` is resident unless claimed absent, and so are `v`'s dead
//!   inputs.
//!
//! What the program leaves out (why it is a bound, not the optimum): the
//! inputs of the inputs' recomputations, and values that are present when
//! it claims them absent. The eviction bound is its one-stage fractional
//! special case.

use super::{solve_mip, Backend, Col, MipStatus, Model, Params, SolverError};
use crate::graph::analysis::{last_use, segments, stage_needs};
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;
use std::collections::HashMap;

/// The cover program's answer.
#[derive(Debug, Clone)]
pub struct CoverBound {
    /// Every node once plus the program's proven lower bound: a lower bound
    /// on every plan's cost at the budget; infinite when the program proves
    /// that no plan fits.
    pub bound: f64,
    /// Whether the program was solved to optimality (else `bound` is the
    /// solver's best bound when the time limit hit).
    pub proven: bool,
    pub seconds: f64,
    pub columns: usize,
}

/// A recomputation column: `value` absent at the end of stages
/// `first..recompute` and computed again in stage `recompute`.
#[derive(Debug, Clone, Copy)]
struct Recompute {
    value: usize,
    first: usize,
    recompute: usize,
    col: Col,
}

/// How much of the program to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// One column per segment (the value is absent somewhere in it), the
    /// end-of-stage rows only: linear in the graph's edges, solved in
    /// milliseconds to seconds up to 10³ nodes, and already exact on the
    /// CNN training graphs.
    Segments,
    /// A column per segment and recomputation stage, with the input and
    /// moment rows: quadratic in segment length, and much tighter on
    /// random DAGs, where recomputations drag their inputs along.
    Moments,
}

/// How big each program would be: (nonzeros of [`Detail::Segments`],
/// columns of [`Detail::Moments`]), in O(edges).
fn sizes(g: &Graph, budget: Bytes) -> (usize, usize) {
    let needs = stage_needs(g, budget);
    // hot_before[t]: hot stages among 0..t.
    let mut hot_before = vec![0usize; g.len() + 1];
    for (t, &n) in needs.iter().enumerate() {
        hot_before[t + 1] = hot_before[t] + usize::from(n > 0.0);
    }
    let (mut nonzeros, mut columns) = (0, 0);
    for s in segments(g) {
        let hot = hot_before[s.last + 1] - hot_before[s.first];
        if hot > 0 && g.memory(s.value).get() > 0 {
            nonzeros += hot;
            columns += s.last + 1 - s.first;
        }
    }
    (nonzeros, columns)
}

/// Builds and solves the cover program on HiGHS within `params`.
pub fn cover_bound(
    g: &Graph,
    budget: Bytes,
    detail: Detail,
    params: &Params,
) -> Result<CoverBound, SolverError> {
    let base = g.total_cost();
    let needs = stage_needs(g, budget);
    if needs.iter().all(|&n| n <= 0.0) {
        return Ok(CoverBound {
            bound: base,
            proven: true,
            seconds: 0.0,
            columns: 0,
        });
    }
    let (model, scale) = build(g, budget, &needs, detail);
    let r = solve_mip(&model, Backend::Highs, params, None)?;

    let (extra, proven) = match r.status {
        MipStatus::Optimal => (r.bound.unwrap_or(0.0), true),
        MipStatus::Infeasible => (f64::INFINITY, true),
        MipStatus::Feasible | MipStatus::NoSolution => (r.bound.unwrap_or(0.0), false),
    };
    Ok(CoverBound {
        bound: base + extra.max(0.0) * scale,
        proven,
        seconds: r.seconds,
        columns: model.num_cols(),
    })
}

/// The program and its cost scale (costs are divided by the largest node
/// cost so the solver's tolerances are relative to the instance).
fn build(g: &Graph, budget: Bytes, needs: &[f64], detail: Detail) -> (Model, f64) {
    let n = g.len();
    let avail = budget.saturating_sub(g.fixed_memory).as_f64();
    let hot = |t: usize| needs[t] > 0.0;
    let mem = |i: usize| g.memory(NodeId::from(i)).as_f64();
    let cost = |i: usize| g.cost(NodeId::from(i));
    let last: Vec<usize> = last_use(g).iter().map(|l| l.idx()).collect();
    let scale = g.ids().map(|i| g.cost(i)).fold(0.0, f64::max);
    let scale = if scale > 0.0 { scale } else { 1.0 };

    let mut model = Model::new();
    let mut stage_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut recomputes: Vec<Recompute> = Vec::new();
    for s in segments(g) {
        let v = s.value.idx();
        if mem(v) <= 0.0 || !(s.first..=s.last).any(hot) {
            continue;
        }
        let mut one = Vec::new();
        let from = match detail {
            Detail::Segments => s.last + 1,
            Detail::Moments => s.first + 1,
        };
        for r in from..=s.last + 1 {
            let col = model.add_col(0.0, 1.0, cost(v) / scale, true);
            one.push((col, 1.0));
            for t in (s.first..r).filter(|&t| hot(t)) {
                stage_rows[t].push((col, mem(v)));
            }
            recomputes.push(Recompute {
                value: v,
                first: s.first,
                recompute: r,
                col,
            });
        }
        if one.len() > 1 {
            model.add_row(f64::NEG_INFINITY, 1.0, &one);
        }
    }
    if detail == Detail::Segments {
        // A column then only says "absent somewhere in the segment", not
        // when it comes back, so the input and moment rows do not apply.
        for (t, row) in stage_rows.iter().enumerate().filter(|&(t, _)| hot(t)) {
            model.add_row(needs[t], f64::INFINITY, row);
        }
        return (model, scale);
    }

    // Inputs that died before the recomputation: computed again once
    // (ρ[u]) or kept through every hot stage in between (e[u, t]).
    let mut again: HashMap<usize, Col> = HashMap::new();
    let mut kept: HashMap<(usize, usize), Col> = HashMap::new();
    let mut links: Vec<[(Col, f64); 3]> = Vec::new();
    for x in &recomputes {
        for &u in g.deps(NodeId::from(x.value)) {
            let u = u.idx();
            let gap = last[u] + 1..x.recompute;
            if mem(u) <= 0.0 || !gap.clone().any(hot) {
                continue;
            }
            let rho = *again
                .entry(u)
                .or_insert_with(|| model.add_col(0.0, 1.0, cost(u) / scale, true));
            for t in gap.filter(|&t| hot(t)) {
                let e = *kept.entry((u, t)).or_insert_with(|| {
                    let e = model.add_col(0.0, 1.0, 0.0, false);
                    stage_rows[t].push((e, -mem(u)));
                    e
                });
                links.push([(e, 1.0), (rho, 1.0), (x.col, -1.0)]);
            }
        }
    }
    for l in &links {
        model.add_row(0.0, f64::INFINITY, l);
    }
    for (t, row) in stage_rows.iter().enumerate().filter(|&(t, _)| hot(t)) {
        model.add_row(needs[t], f64::INFINITY, row);
    }

    // The moment of each recomputation. live[r]: bytes of the values
    // computed before r and read at or after r (need_r without node r).
    let live = |r: usize| needs[r] - mem(r) + avail;
    // Columns claiming their value absent at a moment inside stage r:
    // absent since at most r and computed again after r.
    let mut spanning: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    let mut ending: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (k, x) in recomputes.iter().enumerate() {
        for r in x.first..x.recompute {
            spanning[r].push(k);
        }
        ending[x.recompute].push(k);
    }
    for x in &recomputes {
        let r = x.recompute;
        let dead_inputs: f64 = g
            .deps(NodeId::from(x.value))
            .iter()
            .filter(|u| last[u.idx()] < r)
            .map(|u| mem(u.idx()))
            .sum();
        let k = live(r) + dead_inputs - avail;
        if k <= 0.0 {
            continue;
        }
        // Values computed after this one in the same stage are still
        // absent at its moment; values before it are back.
        let claims = spanning[r]
            .iter()
            .chain(ending[r].iter().filter(|&&j| recomputes[j].value > x.value));
        // Its inputs are resident at that moment whatever their columns
        // claim, so their claims do not count toward it.
        let inputs = g.deps(NodeId::from(x.value));
        let mut row: Vec<(Col, f64)> = claims
            .map(|&j| recomputes[j])
            .filter(|y| y.value != x.value && !inputs.contains(&NodeId::from(y.value)))
            .map(|y| (y.col, mem(y.value).min(k)))
            .collect();
        row.push((x.col, -k));
        model.add_row(0.0, f64::INFINITY, &row);
    }
    (model, scale)
}

/// Largest [`Detail::Segments`] program worth building (nonzeros): beyond
/// it the eviction bound alone is reported. random-layered-n1000 at 60%
/// has ~10⁵ and solves in ~6 s.
pub const SEGMENT_NONZEROS_MAX: usize = 400_000;

/// Largest [`Detail::Moments`] program worth building. Measured: 518
/// columns solve in ~3 s and 5,352 in ~28 s (random-layered n100, n250).
pub const MOMENT_COLUMNS_MAX: usize = 2_500;

/// The best lower bound the graph gives without the Checkmate model: the
/// eviction bound, then the cover program at each detail the instance is
/// small enough for, within `time_limit` in all. Never fails: a solver
/// error leaves the bound where it was and says so in `note`.
#[derive(Debug, Clone)]
pub struct GraphBound {
    /// A lower bound on every plan's cost; infinite when the cover program
    /// proves that no plan fits.
    pub value: f64,
    /// Whether the value is the cover program's proven optimum (else a
    /// weaker bound: eviction, or a stopped solve).
    pub proven: bool,
    pub note: String,
}

pub fn graph_bound(g: &Graph, budget: Bytes, params: &Params) -> GraphBound {
    let start = std::time::Instant::now();
    let mut best = GraphBound {
        value: crate::graph::analysis::eviction_bound(g, budget),
        proven: false,
        note: "eviction bound".into(),
    };
    let (segment_nonzeros, moment_cols) = sizes(g, budget);
    let plan: &[(Detail, bool)] = &[
        (Detail::Segments, segment_nonzeros <= SEGMENT_NONZEROS_MAX),
        (Detail::Moments, moment_cols <= MOMENT_COLUMNS_MAX),
    ];
    for &(detail, fits) in plan {
        if !fits || best.value.is_infinite() {
            continue;
        }
        let left = params.time_limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        let p = Params {
            time_limit: left,
            ..params.clone()
        };
        match cover_bound(g, budget, detail, &p) {
            Ok(c) if c.bound >= best.value => {
                best = GraphBound {
                    value: c.bound,
                    proven: c.proven,
                    note: format!(
                        "cover program ({}, {} columns, {} in {:.2} s)",
                        match detail {
                            Detail::Segments => "segments",
                            Detail::Moments => "recomputation moments",
                        },
                        c.columns,
                        if c.proven { "solved" } else { "stopped" },
                        c.seconds
                    ),
                }
            }
            Ok(_) => {}
            Err(e) => best.note = format!("{}; the cover program failed: {e}", best.note),
        }
    }
    best
}
