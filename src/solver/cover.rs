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
//! - *Inputs of inputs*: `ρ[u]` needs `u`'s own inputs in turn, kept from
//!   their death up to `u`'s last reader or computed again themselves. And
//!   where the program knows when `u` is needed (a moment column, or a
//!   `ρ`), an input `u` not kept at the end of stage `t` comes back after
//!   `t`, so each input `w` of `u` that died by `t` is kept at the end of
//!   `t` or computed again after it: `e[u, t] + e[w, t] + ρ[w] ≥ demand`.
//!   Without these, a value whose input was cheap to recompute looked
//!   cheap to free even when that input's own inputs were long gone:
//!   random-layered-n250 at 90% had a bound of 126,631 below its optimum,
//!   126,704, which it now reaches.
//! - *The moment of recomputation*: inside stage `r`, when `v` is computed
//!   (stage computations run in topological order), every value read at or
//!   after `r` is resident unless claimed absent, and so are `v`'s dead
//!   inputs.
//!
//! The segment details ([`Detail::Segments`], [`Detail::SegmentInputs`])
//! have one column per segment, standing for any recomputation in it, and
//! claim the value absent through the whole segment. They have no moment
//! rows. The input rows still hold there for a chosen set of inputs, the
//! largest whose bytes together fit in the value's own: a plan that brings
//! `v` back in stage `r` holds each such input `u` from its last reader up
//! to `r`, so the claim "`u` kept" is true up to `r`. Past `r` it may be
//! false, but there `v` is present while its column claims it absent, and
//! `v`'s bytes, over-claimed, make up for the input bytes wrongly charged
//! (each input charged once per stage, for whichever columns ask). This is
//! what makes a cheap value cheap only with its input: GPT-2's softmax
//! costs 1/26 of its scores, which died when it was computed.
//!
//! What the program leaves out (why it is a bound, not the optimum): when
//! a `ρ` runs (so its inputs' inputs are followed one level only, per
//! stage), and values that are present when it claims them absent. The eviction bound is its one-stage fractional
//! special case.

use super::{solve_mip, Backend, Col, MipStatus, Model, Params, SolverError};
use crate::graph::analysis::{last_use, segments, stage_needs, Segment};
use crate::graph::{Graph, NodeId};
use crate::schedule::Schedule;
use crate::units::Bytes;
use std::collections::HashMap;
use std::time::Duration;

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
    /// Whether the solver stopped at its limit: a MIP without its proof, or
    /// an LP whose last round was unfinished or left rows violated.
    pub stopped: bool,
    pub seconds: f64,
    pub columns: usize,
    /// The program's best solution read as a schedule
    /// ([`Program::schedule_of`]): unchecked, a start for a search.
    pub plan: Option<Schedule>,
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
    /// The segment columns, plus the input rows for the inputs a column can
    /// pay for (see `linked_inputs`): still linear in the edges and the hot
    /// stages they span, and far tighter wherever a cheap value is cheap
    /// only because its input is gone (a softmax whose scores were freed:
    /// GPT-2 at 50%, 2.0% → 0.2% of the plan).
    SegmentInputs,
    /// A column per segment and recomputation stage, with the input and
    /// moment rows: quadratic in segment length, and much tighter on
    /// random DAGs, where recomputations drag their inputs along.
    Moments,
    /// [`Detail::Moments`] for sequences of computations
    /// ([`sequence_bound`]): a moment row counts every other value computed
    /// again in the same stage as possibly still absent, not only those
    /// after it in topological order, since a sequence need not compute a
    /// stage in that order. Weaker on schedules; holds on sequences.
    SequenceMoments,
}

impl Detail {
    /// Whether the program has moment columns and rows.
    fn moments(self) -> bool {
        matches!(self, Detail::Moments | Detail::SequenceMoments)
    }
}

/// What a recomputation must find room for: the stage needs and last
/// readers, shared by the size estimate and the program.
struct Room<'a> {
    g: &'a Graph,
    needs: &'a [f64],
    last: Vec<usize>,
}

impl<'a> Room<'a> {
    fn new(g: &'a Graph, needs: &'a [f64]) -> Room<'a> {
        Room {
            g,
            needs,
            last: last_use(g).iter().map(|l| l.idx()).collect(),
        }
    }

    fn hot(&self, t: usize) -> bool {
        self.needs[t] > 0.0
    }

    fn mem(&self, i: usize) -> f64 {
        self.g.memory(NodeId::from(i)).as_f64()
    }

    /// The bytes a recomputation of `v` in stage `r` lacks before any value
    /// is absent: every value read at or after `r` (which includes `v`) and
    /// `v`'s inputs that died before `r`, beyond the budget.
    fn excess_at(&self, v: usize, r: usize) -> f64 {
        // need_r counts node r's output and the budget's room; the live
        // values are what is left without the output.
        let live_over_budget = self.needs[r] - self.mem(r);
        let dead_inputs: f64 = self
            .g
            .deps(NodeId::from(v))
            .iter()
            .filter(|u| self.last[u.idx()] < r)
            .map(|u| self.mem(u.idx()))
            .sum();
        live_over_budget + dead_inputs
    }

    /// Whether segment `s` gets a column for recomputing in stage `r`.
    /// Recomputing in r + 1 instead serves every plan that recomputes in r
    /// just as well when stage r has no row (not hot: the same stages
    /// covered, the same input links) and the moment in r + 1 lacks no room
    /// (no moment row): same cost, more claimed absent. So such an r is
    /// left out, and a plan's point uses the next column kept.
    fn keeps(&self, s: &Segment, r: usize) -> bool {
        r > s.last || self.hot(r) || self.excess_at(s.value.idx(), r + 1) > 0.0
    }
}

/// The inputs of `v` whose link rows a recomputation column of `v` gets.
/// A [`Detail::Moments`] column says when `v` comes back, so every input
/// is linked; a segment column, only [`segment_inputs`].
fn linked_inputs(g: &Graph, detail: Detail, v: usize) -> Vec<usize> {
    match detail {
        Detail::Segments => Vec::new(),
        Detail::SegmentInputs => segment_inputs(g, v),
        Detail::Moments | Detail::SequenceMoments => g
            .deps(NodeId::from(v))
            .iter()
            .map(|u| u.idx())
            .filter(|&u| g.memory(NodeId::from(u)).get() > 0)
            .collect(),
    }
}

/// `e[u,t]`: `u`, dead, kept at hot stage `t`, made once per value and
/// stage. Its bytes count against the stage's need (both cover programs).
pub(super) fn kept_column(
    kept: &mut HashMap<(usize, usize), Col>,
    model: &mut Model,
    stage_rows: &mut [Vec<(Col, f64)>],
    g: &Graph,
    u: usize,
    t: usize,
) -> Col {
    *kept.entry((u, t)).or_insert_with(|| {
        let e = model.add_col(0.0, 1.0, 0.0, false);
        stage_rows[t].push((e, -g.memory(NodeId::from(u)).as_f64()));
        e
    })
}

/// The inputs a segment column of `v` may link: the largest whose bytes
/// together fit in `v`'s. A segment column claims `v` absent through its
/// whole segment, also after the plan has brought it back, and an input
/// linked there may be claimed kept at stages where the plan has freed it
/// again; the claim stays valid as long as `v`'s bytes, which the column
/// over-claims at those stages, pay for the inputs it wrongly holds (module
/// doc).
fn segment_inputs(g: &Graph, v: usize) -> Vec<usize> {
    let mut deps: Vec<usize> = g
        .deps(NodeId::from(v))
        .iter()
        .map(|u| u.idx())
        .filter(|&u| g.memory(NodeId::from(u)).get() > 0)
        .collect();
    deps.sort_by_key(|&u| std::cmp::Reverse(g.memory(NodeId::from(u))));
    let mut room = g.memory(NodeId::from(v)).get();
    deps.retain(|&u| {
        let m = g.memory(NodeId::from(u)).get();
        let fits = m <= room;
        if fits {
            room -= m;
        }
        fits
    });
    deps
}

/// How big each program would be, to choose those worth building.
struct Sizes {
    /// Nonzeros of the stage rows of [`Detail::Segments`].
    segment_nonzeros: usize,
    /// Link rows [`Detail::SegmentInputs`] adds, at most (every input
    /// counted, not only those `linked_inputs` keeps).
    input_links: usize,
    /// Columns of [`Detail::Moments`], counted exactly only when the
    /// segments are short enough for that to be cheap.
    moment_columns: usize,
    /// Nonzeros its moment rows had when each listed every column whose
    /// claim spans its stage (see `sizes`).
    moment_nonzeros: usize,
}

fn sizes(g: &Graph, budget: Bytes) -> Sizes {
    let needs = stage_needs(g, budget);
    // hot_before[t]: hot stages among 0..t.
    let mut hot_before = vec![0usize; g.len() + 1];
    for (t, &n) in needs.iter().enumerate() {
        hot_before[t + 1] = hot_before[t] + usize::from(n > 0.0);
    }
    let all: Vec<Segment> = segments(g)
        .into_iter()
        .filter(|s| g.memory(s.value).get() > 0)
        .collect();
    let segment_nonzeros = all
        .iter()
        .map(|s| hot_before[s.last + 1] - hot_before[s.first])
        .sum();
    let last = last_use(g);
    let input_links = all
        .iter()
        .flat_map(|s| g.deps(s.value).iter().map(move |&u| (s, u)))
        .filter(|&(_, u)| g.memory(u).get() > 0)
        .map(|(s, u)| {
            let from = (last[u.idx()].idx() + 1).min(s.last + 1);
            hot_before[s.last + 1] - hot_before[from]
        })
        .sum();
    let stages: usize = all.iter().map(|s| s.last + 2 - s.first).sum();
    let (moment_columns, moment_nonzeros) = if stages > 20 * MOMENT_LP_COLUMNS_MAX {
        (stages, usize::MAX)
    } else {
        let room = Room::new(g, &needs);
        let kept: Vec<(usize, usize)> = all
            .iter()
            .flat_map(|s| {
                let room = &room;
                (s.first..=s.last + 1)
                    .filter(move |&r| room.keeps(s, r))
                    .map(move |r| (s.first, r))
            })
            .collect();
        // What the moment rows listed when each named every column whose
        // claim spans its stage. They no longer do (see [`Claims`]), but
        // this still decides which instances get the moments program's LP,
        // as before: the programs it would admit, such as
        // checkmate-mobilenet at 60% (4 s more in a solve), raised no bound.
        let mut spanning = vec![0i64; g.len() + 2];
        for &(first, r) in &kept {
            spanning[first] += 1;
            spanning[r] -= 1;
        }
        for t in 1..spanning.len() {
            spanning[t] += spanning[t - 1];
        }
        let nonzeros = kept.iter().map(|&(_, r)| spanning[r].max(0) as usize).sum();
        (kept.len(), nonzeros)
    };
    Sizes {
        segment_nonzeros,
        input_links,
        moment_columns,
        moment_nonzeros,
    }
}

/// Builds and solves the cover program on HiGHS within `params`. A plan in
/// hand (`known`) is mapped onto the program and handed to the solver as
/// its first incumbent, which spares it the search for one.
pub fn cover_bound(
    g: &Graph,
    budget: Bytes,
    detail: Detail,
    params: &Params,
    known: Option<&Schedule>,
) -> Result<CoverBound, SolverError> {
    let base = g.total_cost();
    let needs = stage_needs(g, budget);
    if needs.iter().all(|&n| n <= 0.0) {
        return Ok(CoverBound {
            bound: base,
            proven: true,
            stopped: false,
            seconds: 0.0,
            columns: 0,
            plan: None,
        });
    }
    let prog = Program::build(g, &needs, detail);
    let warm = known.map(|sch| prog.point_of(g, sch));
    let r = solve_mip(&prog.model, Backend::Highs, params, warm.as_deref())?;
    let (model, scale) = (&prog.model, prog.scale);

    let (extra, proven) = match r.status {
        MipStatus::Optimal => (r.bound.unwrap_or(0.0), true),
        MipStatus::Infeasible => (f64::INFINITY, true),
        MipStatus::Feasible | MipStatus::NoSolution => (r.bound.unwrap_or(0.0), false),
    };
    Ok(CoverBound {
        bound: base + extra.max(0.0) * scale,
        proven,
        stopped: !proven,
        seconds: r.seconds,
        columns: model.num_cols(),
        plan: r.x.as_deref().map(|x| prog.schedule_of(g, x)),
    })
}

/// The input links of the cover program under construction: per dead
/// input, its ρ column and its kept columns, shared by every column that
/// needs it (each input is charged once per stage).
struct Inputs<'a> {
    g: &'a Graph,
    last: &'a [usize],
    scale: f64,
    again: HashMap<usize, Col>,
    /// The values given a ρ, in the order they got it.
    order: Vec<usize>,
    kept: HashMap<(usize, usize), Col>,
    /// N[u, t, deep]: some recomputation after stage `t` needs `u` (at least
    /// each demand's column). One column per input and stage carries the
    /// rows below for every demand, instead of one copy per demand: the
    /// same LP, a fraction of the rows.
    needed: HashMap<(usize, usize, bool), Col>,
    /// `(N[u, t], demand, t)`: N ≥ demand.
    demands: Vec<(Col, Col, usize)>,
    rows: Vec<Vec<(Col, f64)>>,
}

impl<'a> Inputs<'a> {
    fn new(g: &'a Graph, last: &'a [usize], scale: f64) -> Inputs<'a> {
        Inputs {
            g,
            last,
            scale,
            again: HashMap::new(),
            order: Vec::new(),
            kept: HashMap::new(),
            needed: HashMap::new(),
            demands: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// `demand` (a recomputation that needs `u`) is met by ρ[u] or by `u`
    /// kept at the end of every stage in `stages`. With `deep`, also by
    /// `u`'s own inputs at each such stage: where `u` is not kept at the end
    /// of stage `t`, it comes back after `t`, and that computation needs
    /// each input `w` that died by `t`, kept at the end of `t` (`e[w, t]`)
    /// or computed again after `t` (ρ[w]). That holds only where `demand`
    /// says when `u` is needed: a ρ column or a [`Detail::Moments`] column
    /// (a segment column may stand for a recomputation before `t`).
    fn link(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        u: usize,
        stages: impl Iterator<Item = usize>,
        demand: Col,
        deep: bool,
    ) {
        if self.g.memory(NodeId::from(u)).get() == 0 {
            return;
        }
        for t in stages {
            // A shallow link is one row; N pays only where it carries the
            // deep rows (on the segment programs it made the zoo ResNet-50's
            // program at 60% miss its time).
            if !deep {
                let rho = self.rho(model, u);
                let e = self.kept(model, stage_rows, u, t);
                self.rows.push(vec![(e, 1.0), (rho, 1.0), (demand, -1.0)]);
                continue;
            }
            let need = match self.needed.get(&(u, t, deep)) {
                Some(&c) => c,
                None => {
                    let c = model.add_col(0.0, 1.0, 0.0, false);
                    self.needed.insert((u, t, deep), c);
                    self.need_rows(model, stage_rows, u, t, c, deep);
                    c
                }
            };
            self.demands.push((need, demand, t));
        }
    }

    /// The rows of a new N[u, t] (see [`Inputs::link`]).
    fn need_rows(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        u: usize,
        t: usize,
        need: Col,
        deep: bool,
    ) {
        let rho = self.rho(model, u);
        let e = self.kept(model, stage_rows, u, t);
        self.rows.push(vec![(e, 1.0), (rho, 1.0), (need, -1.0)]);
        let (g, last) = (self.g, self.last);
        if !deep {
            return;
        }
        for w in g.deps(NodeId::from(u)).iter().map(|w| w.idx()) {
            if last[w] >= t || g.memory(NodeId::from(w)).get() == 0 {
                continue;
            }
            let rho_w = self.rho(model, w);
            let e_w = self.kept(model, stage_rows, w, t);
            self.rows
                .push(vec![(e, 1.0), (e_w, 1.0), (rho_w, 1.0), (need, -1.0)]);
        }
    }

    fn rho(&mut self, model: &mut Model, u: usize) -> Col {
        let (g, scale) = (self.g, self.scale);
        *self.again.entry(u).or_insert_with(|| {
            self.order.push(u);
            model.add_col(0.0, 1.0, g.cost(NodeId::from(u)) / scale, true)
        })
    }

    fn kept(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        u: usize,
        t: usize,
    ) -> Col {
        kept_column(&mut self.kept, model, stage_rows, self.g, u, t)
    }
}

/// The program's LP relaxation alone, for programs too big to solve as
/// integer programs within a strategy's share of time: its bound is the
/// Lagrangian bound of the LP's duals, computed from the model exactly
/// (valid whatever the solver's tolerances, and even for an LP stopped
/// early). Never `proven`, and no plan.
pub fn cover_bound_relaxed(
    g: &Graph,
    budget: Bytes,
    detail: Detail,
    params: &Params,
) -> Result<CoverBound, SolverError> {
    let base = g.total_cost();
    let needs = stage_needs(g, budget);
    let prog = Program::build(g, &needs, detail);
    let start = std::time::Instant::now();
    let (extra, finished) = solve_lp_by_row_generation(&prog, params)?;
    Ok(CoverBound {
        bound: base + extra.max(0.0) * prog.scale,
        proven: false,
        stopped: !finished,
        seconds: start.elapsed().as_secs_f64(),
        columns: prog.model.num_cols(),
        plan: None,
    })
}

/// The program's LP bound by row generation: solved first with only its
/// chain rows (the suffix columns' definitions) and stage rows, then with
/// the input and moment rows that its solution violates, round by round,
/// until none is violated (the whole program's LP) or time runs out. Each
/// round's LP is a relaxation of the whole program's, so the Lagrangian
/// bound of its duals, with zero for the rows left out, holds for the whole
/// program, even for a round stopped early: the best round is returned,
/// with whether the last round found the whole program's LP optimum.
///
/// Why: few of these rows bind at the optimum, and the simplex pays for
/// every row it carries. Measured, one thread, in the orders of annealed
/// plans at 60% (docs/scale.md): random-layered-n250, the same bound
/// (138,697) in 2.9 s instead of 25 s, with 31,220 of its 65,179 rows;
/// n500 (498,088 rows), 289,314 in 181 s and 0.9 GB with 216,256 rows, where
/// the whole LP had not finished in 1,200 s.
fn solve_lp_by_row_generation(prog: &Program, params: &Params) -> Result<(f64, bool), SolverError> {
    use super::fixing::DualBound;
    use super::highs::{LpMethod, LpSession};
    let start = std::time::Instant::now();
    let full = &prog.model;
    let lazy = |row: usize| row >= prog.moment_rows || prog.link_rows.contains(&row);
    let mut current = full.select_rows((0..full.num_rows()).filter(|&r| !lazy(r)));
    let mut waiting: Vec<usize> = (0..full.num_rows()).filter(|&r| lazy(r)).collect();
    let mut lp = LpSession::new(&current, params, LpMethod::Choose)?;
    let mut best = f64::NEG_INFINITY;
    let mut finished = false;
    loop {
        let left = params.time_limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        lp.set_time_limit(left.as_secs_f64());
        let r = lp.solve()?;
        if r.status == super::LpStatus::Infeasible {
            return Ok((f64::INFINITY, true));
        }
        if !r.row_dual.is_empty() {
            best = best.max(DualBound::from_duals(&current, &r.row_dual).bound);
        }
        if r.status != super::LpStatus::Optimal {
            break;
        }
        // Each waiting row with how far its activity is past its bounds.
        let (mut violated, mut rest) = (Vec::new(), Vec::new());
        for &row in &waiting {
            let a = full.row_activity(row, &r.x);
            let off = (full.row_lower[row] - a).max(a - full.row_upper[row]);
            if off > 1e-7 {
                violated.push((row, off));
            } else {
                rest.push(row);
            }
        }
        if violated.is_empty() {
            finished = true;
            break;
        }
        let (violated, rest) = most_violated(full, violated, rest, current.num_rows() / 4);
        // Dual simplex re-solves from the last basis after rows are added.
        lp.set_method(LpMethod::Simplex);
        lp.add_rows(full, &violated)?;
        for &row in &violated {
            current.push_row_of(full, row);
        }
        waiting = rest;
    }
    Ok((if best.is_finite() { best } else { 0.0 }, finished))
}

/// The `cap` rows of `violated` (each with how far its activity is past
/// its bounds) farthest from their bound in distance to the row's
/// hyperplane, the others back with `rest`. Why a quarter
/// of the LP's rows per round: adding every violated row made rounds that
/// each cost a large share of the whole solve. Measured by row generation
/// in annealed orders at 60%: random-layered-n500, 286,678 in 109 s
/// instead of 150 s, 277k instead of 274k at 25 s (a fixed 10,000 rows did
/// better on n500 and worse on n1000; 3,000 and 5,000 worse on both);
/// n1000, 530k at 150 s instead of 232 s.
fn most_violated(
    m: &Model,
    violated: Vec<(usize, f64)>,
    mut rest: Vec<usize>,
    cap: usize,
) -> (Vec<usize>, Vec<usize>) {
    let cap = cap.max(1);
    if violated.len() <= cap {
        return (violated.into_iter().map(|(row, _)| row).collect(), rest);
    }
    let distance = |row: usize, off: f64| {
        let norm: f64 = (m.row_start[row]..m.row_start[row + 1])
            .map(|p| m.row_value[p] * m.row_value[p])
            .sum::<f64>()
            .sqrt();
        off / norm.max(1e-12)
    };
    let mut by: Vec<(f64, usize)> = violated
        .iter()
        .map(|&(row, off)| (distance(row, off), row))
        .collect();
    by.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    rest.extend(by[cap..].iter().map(|&(_, row)| row));
    (by[..cap].iter().map(|&(_, row)| row).collect(), rest)
}

/// The program, with what it takes to map a plan onto it.
pub struct Program {
    pub model: Model,
    /// Costs are divided by the largest node cost, so the solver's
    /// tolerances are relative to the instance.
    pub scale: f64,
    detail: Detail,
    recomputes: Vec<Recompute>,
    /// ρ[u]: u computed again after its last reader.
    again: HashMap<usize, Col>,
    /// e[u, t]: u, dead, kept at the end of stage t.
    kept: HashMap<(usize, usize), Col>,
    /// `(N, demand, t)`, see [`Inputs`].
    demands: Vec<(Col, Col, usize)>,
    /// The input rows: `[e, ρ, N]`, and with an input's own input
    /// `[e, e_w, ρ_w, N]`.
    links: Vec<Vec<(Col, f64)>>,
    /// [`Detail::Moments`]: per segment, its columns with their suffix
    /// sums (see [`Claims`]).
    claims: Claims,
    /// The first moment row (they are the model's last rows) and the input
    /// rows: the rows that [`solve_lp_by_row_generation`] adds only once
    /// violated.
    moment_rows: usize,
    link_rows: std::ops::Range<usize>,
}

/// What a [`Detail::Moments`] segment claims absent, without a nonzero per
/// column and stage. Its moment columns `c_1..c_m` (recomputation stages
/// `r_1 < … < r_m`) exclude each other, and at stage `t` the value is
/// claimed absent by exactly those with `r_i > t`: their sum, one suffix
/// column `Z_i = c_i + Z_{i+1}`. The stage rows and the moment rows read
/// `Z`, one nonzero per segment and stage instead of one per column and
/// stage (quadratic in the segment's length: the zoo ResNet-50 at 30% had
/// 1.5×10⁸ nonzeros, and its LP did not finish in 150 s). The same LP as
/// with the columns listed.
#[derive(Default)]
struct Claims {
    segments: Vec<ClaimedSegment>,
}

struct ClaimedSegment {
    value: usize,
    first: usize,
    /// `(r_i, c_i, Z_i)`, by increasing stage.
    cols: Vec<(usize, Col, Col)>,
}

impl Claims {
    /// The suffix column claiming segment `k` absent at stage `t`, if any.
    fn at(&self, k: usize, t: usize) -> Option<Col> {
        let ClaimedSegment { first, cols, .. } = &self.segments[k];
        if t < *first {
            return None;
        }
        let i = cols.partition_point(|&(r, _, _)| r <= t);
        cols.get(i).map(|&(_, _, z)| z)
    }
}

impl Program {
    pub fn build(g: &Graph, needs: &[f64], detail: Detail) -> Program {
        let n = g.len();
        let room = Room::new(g, needs);
        let hot = |t: usize| room.hot(t);
        let mem = |i: usize| room.mem(i);
        let cost = |i: usize| g.cost(NodeId::from(i));
        let last = &room.last;
        let scale = g.ids().map(|i| g.cost(i)).fold(0.0, f64::max);
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let all = segments(g);
        // Stages where some recomputation could have a moment row.
        let mut tight = vec![false; n + 1];
        if detail.moments() {
            for s in all.iter().filter(|s| mem(s.value.idx()) > 0.0) {
                for (r, t) in tight.iter_mut().enumerate().take(s.last + 2).skip(s.first) {
                    *t = *t || room.excess_at(s.value.idx(), r) > 0.0;
                }
            }
        }

        let mut model = Model::new();
        let mut stage_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        let mut recomputes: Vec<Recompute> = Vec::new();
        let mut claims = Claims::default();
        for s in all {
            let v = s.value.idx();
            // A segment without a hot stage matters only where it can be absent
            // at the moment of a recomputation; elsewhere its columns would be
            // zero in every optimum, so leaving them out loses nothing.
            let useful = (s.first..=s.last).any(hot)
                || (detail.moments() && (s.first..=s.last + 1).any(|r| tight[r]));
            if mem(v) <= 0.0 || !useful {
                continue;
            }
            let mut one = Vec::new();
            let from = match detail {
                Detail::Segments | Detail::SegmentInputs => s.last + 1,
                Detail::Moments | Detail::SequenceMoments => s.first,
            };
            for r in from..=s.last + 1 {
                if detail.moments() && !room.keeps(&s, r) {
                    continue;
                }
                let col = model.add_col(0.0, 1.0, cost(v) / scale, true);
                one.push((col, 1.0));
                if !detail.moments() {
                    for t in (s.first..r).filter(|&t| hot(t)) {
                        stage_rows[t].push((col, mem(v)));
                    }
                }
                recomputes.push(Recompute {
                    value: v,
                    first: s.first,
                    recompute: r,
                    col,
                });
            }
            if detail.moments() && !one.is_empty() {
                // Z_i = c_i + Z_{i+1}, from the last column back; Z_1 ≤ 1
                // is the columns' exclusion.
                let cols = &recomputes[recomputes.len() - one.len()..];
                let mut z: Vec<(usize, Col, Col)> = Vec::with_capacity(cols.len());
                let mut next: Option<Col> = None;
                for x in cols.iter().rev() {
                    let zc = model.add_col(0.0, 1.0, 0.0, false);
                    let mut row = vec![(zc, 1.0), (x.col, -1.0)];
                    row.extend(next.map(|c| (c, -1.0)));
                    model.add_row(0.0, 0.0, &row);
                    z.push((x.recompute, x.col, zc));
                    next = Some(zc);
                }
                z.reverse();
                let k = claims.segments.len();
                claims.segments.push(ClaimedSegment {
                    value: v,
                    first: s.first,
                    cols: z,
                });
                let last_r = cols[cols.len() - 1].recompute;
                for t in (s.first..last_r).filter(|&t| hot(t)) {
                    if let Some(zc) = claims.at(k, t) {
                        stage_rows[t].push((zc, mem(v)));
                    }
                }
            } else if one.len() > 1 {
                model.add_row(f64::NEG_INFINITY, 1.0, &one);
            }
        }
        // Inputs that died before the recomputation: computed again once
        // (ρ[u]) or kept through every hot stage in between (e[u, t]).
        let mut inputs = Inputs::new(g, last, scale);
        for x in &recomputes {
            for u in linked_inputs(g, detail, x.value) {
                let gap = (last[u] + 1..x.recompute).filter(|&t| hot(t));
                let deep = detail.moments();
                inputs.link(&mut model, &mut stage_rows, u, gap, x.col, deep);
            }
        }
        // ρ[u] itself needs u's inputs: u comes back in some stage after its
        // last reader, so an input w that died before that reader is kept
        // through every hot stage from its own death to u's last reader, or
        // is computed again too. Followed to the inputs of inputs until no
        // new ρ appears (each value has one ρ, so this ends). Only in the
        // moments program: on the segment programs of large random DAGs the
        // chains multiply the program (random-layered-n1000 at 80%: 267,206
        // columns, unsolved in 15 s where it had been solved in 26 s), for
        // 0.1% of bound on n250 at 80%.
        let mut done = 0;
        while detail.moments() && done < inputs.order.len() {
            let u = inputs.order[done];
            done += 1;
            let rho = inputs.again[&u];
            for w in g.deps(NodeId::from(u)).iter().map(|w| w.idx()) {
                let gap = (last[w] + 1..=last[u]).filter(|&t| hot(t));
                inputs.link(&mut model, &mut stage_rows, w, gap, rho, true);
            }
        }
        let Inputs {
            again,
            kept,
            demands,
            rows,
            ..
        } = inputs;
        let link_rows = model.num_rows();
        for l in &rows {
            model.add_row(0.0, f64::INFINITY, l);
        }
        // A segment's columns exclude each other, and those that need N[u, t]
        // are the ones that recompute after t: the segment's suffix column
        // at t (all of them, Z_1, when t is before the segment). One row
        // N ≥ Z per segment and N, two nonzeros; listing the columns made
        // these rows quadratic in the segment's length (random-layered-n500
        // in an annealed order at 60%: 8.3×10⁶ nonzeros of the program's
        // 1.4×10⁷). A ρ demand gets a row of its own.
        let segment_of: HashMap<Col, usize> = claims
            .segments
            .iter()
            .enumerate()
            .flat_map(|(k, seg)| seg.cols.iter().map(move |&(_, c, _)| (c, k)))
            .collect();
        let mut suffix_rows = std::collections::BTreeSet::new();
        for &(need, demand, t) in &demands {
            match segment_of.get(&demand) {
                Some(&k) => {
                    let z = claims.at(k, t).unwrap_or(claims.segments[k].cols[0].2);
                    suffix_rows.insert((need, z));
                }
                None => model.add_row(0.0, f64::INFINITY, &[(need, 1.0), (demand, -1.0)]),
            }
        }
        for &(need, z) in &suffix_rows {
            model.add_row(0.0, f64::INFINITY, &[(need, 1.0), (z, -1.0)]);
        }
        let stage_rows_from = model.num_rows();
        for (t, row) in stage_rows.iter().enumerate().filter(|&(t, _)| hot(t)) {
            model.add_covering_row(row, needs[t]);
        }
        // A segment column only says "absent somewhere in the segment",
        // not when it comes back, so the moment rows need moment columns.
        let moment_rows = model.num_rows();
        if detail.moments() {
            // The moment of each recomputation: inside stage r, every
            // value claimed absent at r (the suffix column of its segment
            // there) and not one of the recomputed value's inputs (resident
            // then, whatever their columns claim), and every value computed
            // again in r after this one, frees at least the excess. Each
            // value's bytes are capped at the row's excess (a row is met by
            // any one value that large), and the row is in units of that
            // excess: in bytes, HiGHS reported a bound above the optimum of
            // checkmate-fcn8vgg at 80%.
            let mut ending: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
            for (k, x) in recomputes.iter().enumerate() {
                ending[x.recompute].push(k);
            }
            // The segments claiming something at stage r: those that start
            // by r and have a column after it (listed only where a moment
            // row can be).
            let mut spanning: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
            for (k, seg) in claims.segments.iter().enumerate() {
                let end = seg.cols.last().map_or(seg.first, |&(r, _, _)| r);
                for (r, at) in spanning.iter_mut().enumerate().take(end).skip(seg.first) {
                    if tight[r] {
                        at.push(k);
                    }
                }
            }
            for x in &recomputes {
                let r = x.recompute;
                let k = room.excess_at(x.value, r);
                if k <= 0.0 {
                    continue;
                }
                let inputs = g.deps(NodeId::from(x.value));
                let counts = |y: usize| y != x.value && !inputs.contains(&NodeId::from(y));
                let mut row: Vec<(Col, f64)> = spanning[r]
                    .iter()
                    .filter(|&&j| counts(claims.segments[j].value))
                    .filter_map(|&j| {
                        let y = claims.segments[j].value;
                        claims.at(j, r).map(|z| (z, mem(y).min(k) / k))
                    })
                    .collect();
                // Values computed after this one in the same stage are still
                // absent at its moment; values before it are back.
                // A sequence may compute them in any order: then any of
                // them may still be absent.
                let after = |y: usize| match detail {
                    Detail::SequenceMoments => y != x.value,
                    _ => y > x.value,
                };
                row.extend(
                    ending[r]
                        .iter()
                        .map(|&j| recomputes[j])
                        .filter(|y| after(y.value) && counts(y.value))
                        .map(|y| (y.col, mem(y.value).min(k) / k)),
                );
                row.push((x.col, -1.0));
                model.add_row(0.0, f64::INFINITY, &row);
            }
        }
        Program {
            model,
            scale,
            detail,
            recomputes,
            again,
            kept,
            demands,
            links: rows,
            claims,
            moment_rows,
            link_rows: link_rows..stage_rows_from,
        }
    }

    /// A schedule read off a solution `x` of the program: every value
    /// absent where its chosen column claims it (from its segment's start
    /// to the stage that computes it again), every input such a
    /// recomputation needs kept from its death unless its ρ is chosen (then
    /// its own inputs, in turn), everything else held as checkpoint-all
    /// holds it, and the computations [`solve_r`] adds. The program leaves
    /// out where a ρ runs and the moments between a node's first
    /// computations, so the schedule may not fit or may cost more: it is a
    /// start for the search, checked like any plan, not an answer.
    pub fn schedule_of(&self, g: &Graph, x: &[f64]) -> Schedule {
        let mut sch = Schedule::checkpoint_all(g);
        let last = last_use(g);
        let chosen = |c: Col| x.get(c).is_some_and(|&v| v > 0.5);
        let again: Vec<bool> = (0..g.len())
            .map(|u| self.again.get(&u).is_some_and(|&c| chosen(c)))
            .collect();
        // (value, stage it must be resident in), inputs first followed.
        let mut needed: Vec<(usize, usize)> = Vec::new();
        for c in self.recomputes.iter().filter(|c| chosen(c.col)) {
            let r = c.recompute.min(sch.stages() - 1);
            if c.first < r {
                sch.set_s_range(c.value, c.first + 1..=r, false);
            }
            needed.extend(g.deps(NodeId::from(c.value)).iter().map(|u| (u.idx(), r)));
        }
        let mut seen = std::collections::HashSet::new();
        while let Some((u, r)) = needed.pop() {
            if last[u].idx() >= r || !seen.insert((u, r)) {
                continue;
            }
            if again[u] {
                needed.extend(g.deps(NodeId::from(u)).iter().map(|w| (w.idx(), r)));
            } else {
                sch.set_s_range(u, last[u].idx() + 1..=r, true);
            }
        }
        crate::schedule::solve_r(g, sch)
    }

    /// The program's point for a schedule: per segment, the column of the
    /// last stage that computes the value again inside it; ρ[u] when u is
    /// computed after its last reader; each e[u, t] true where the plan
    /// keeps u at the end of stage t, and raised where a link asks for it
    /// (a segment column's over-claim, see the module doc). The validity argument in the module doc says this point is
    /// feasible for every plan that fits, at no more than its cost; the tests
    /// hold every strategy's plans to that.
    pub fn point_of(&self, g: &Graph, sch: &Schedule) -> Vec<f64> {
        let mut x = vec![0.0f64; self.model.num_cols()];
        let last = last_use(g);
        let computes = |t: usize, v: usize| t < sch.stages() && sch.r(t, v);
        // A segment's columns are adjacent, by increasing stage: the last
        // one whose stage computes the value wins. A Segments column
        // stands for any recomputation in the segment.
        let mut k = 0;
        while k < self.recomputes.len() {
            let c = self.recomputes[k];
            let mut end = k;
            while end < self.recomputes.len()
                && self.recomputes[end].value == c.value
                && self.recomputes[end].first == c.first
            {
                end += 1;
            }
            let chosen = match self.detail {
                Detail::Segments | Detail::SegmentInputs => (c.first..=c.recompute)
                    .any(|t| computes(t, c.value))
                    .then_some(c.col),
                // The last recomputation in the segment, moved forward to
                // the next column kept (see `Room::keeps`).
                Detail::Moments | Detail::SequenceMoments => {
                    let close = self.recomputes[end - 1].recompute;
                    (c.first..=close)
                        .rev()
                        .find(|&t| computes(t, c.value))
                        .and_then(|t| {
                            self.recomputes[k..end]
                                .iter()
                                .find(|d| d.recompute >= t)
                                .map(|d| d.col)
                        })
                }
            };
            if let Some(col) = chosen {
                x[col] = 1.0;
            }
            k = end;
        }
        for (&u, &col) in &self.again {
            let after = last[u].idx() + 1;
            if (after..sch.stages()).any(|t| sch.r(t, u)) {
                x[col] = 1.0;
            }
        }
        for seg in &self.claims.segments {
            let mut sum = 0.0;
            for &(_, c, z) in seg.cols.iter().rev() {
                sum += x[c];
                x[z] = sum;
            }
        }
        for &(need, demand, _) in &self.demands {
            x[need] = x[need].max(x[demand]);
        }
        for (&(u, t), &e) in &self.kept {
            if t + 1 < sch.stages() && sch.s(t + 1, u) {
                x[e] = 1.0;
            }
        }
        for l in self.links.iter().filter(|l| l.len() == 3) {
            let (e, rho, col) = (l[0].0, l[1].0, l[2].0);
            x[e] = x[e].max(x[col] - x[rho]);
        }
        x
    }
}

/// Largest [`Detail::Segments`] program worth building (nonzeros): beyond
/// it the eviction bound alone is reported. random-layered-n1000 at 60%
/// has ~10⁵ and solves in ~6 s.
pub const SEGMENT_NONZEROS_MAX: usize = 400_000;

/// Most link rows a [`Detail::SegmentInputs`] program may add.
pub const INPUT_LINKS_MAX: usize = 1_000_000;

/// Above this many link rows the [`Detail::SegmentInputs`] program's LP
/// relaxation is solved first, before the segment program's MIP, which
/// may take a solve's whole bound share on such graphs (10.6 s of 13 s in
/// remat-fast on n1000 at 60%), and before its own MIP, which HiGHS's
/// setup may overrun until it is abandoned. Measured on
/// random-layered-n1000 at 60% (680,510 links): the LP gives 525,984 in
/// 2.8 s and the MIP 526,086 after 60 s, but a solve's bound (20 s at
/// most) abandoned the MIP and stayed at the segment program's 514,037;
/// n500 at 60% (155,575 links) likewise stayed at 267,707, where the LP
/// gives 276,869 in 0.65 s. Below it the MIP finishes (n500 at 80%:
/// 60,238 links).
pub const INPUT_LINKS_LP_FIRST: usize = 100_000;

/// Largest [`Detail::Moments`] program worth building (columns kept, see
/// `Room::keeps`). Measured: 608 columns solve in 0.4 s (random-layered
/// n100 at 80%), 3,636 in 13 s (n250 at 90%); 7,775 (n250 at 80%) ran
/// 65 s past a 20 s limit, in HiGHS's presolve and root, which the limit
/// does not interrupt.
pub const MOMENT_COLUMNS_MAX: usize = 4_000;

/// Largest [`Detail::Moments`] program whose LP relaxation is solved
/// instead (moment columns, and nonzeros of their moment rows in the old
/// form, which listed every column whose claim spans the row's stage; see
/// `sizes`). Measured (one thread, with the suffix columns of [`Claims`]):
/// random-layered-n250 at 80%, 1.7 s and 0.12 GB (was 5.7 s and 0.38 GB;
/// 129,737 against the segment program's 128,849); checkmate-mobilenet at
/// 60%, 2.0 s and 0.15 GB (was 37 s and 3 GB), which the caps still leave
/// out: it gives no more than the segment program's proven optimum.
pub const MOMENT_LP_COLUMNS_MAX: usize = 16_000;
pub const MOMENT_LP_NONZEROS_MAX: usize = 4_000_000;

/// Largest [`Detail::Moments`] program (moment columns, as `sizes` counts
/// them) whose LP relaxation a bound for a plan already in hand solves
/// ([`cover_programs_past_the_caps`]), where nothing waits on it but the
/// plan's certificate. Measured, one thread, by row generation, in the
/// orders of annealed plans at 60% (docs/scale.md): random-layered-n250,
/// 5,613 moment columns (30,572 columns in all), 138,697 in 2.9 s against
/// the segment programs' 131,721; n500, 34,660 (179,102), 286,678 in
/// 150 s and 0.9 GB, already 274,058 at 30 s, against 270,391. n1000 is
/// past it (143,422 moment columns, 680,818 in all, 5.7×10⁷ nonzeros,
/// 3.9 GB) and gets the LP only with time for it ([`moments_lp_fits_in`]).
pub const MOMENT_LP_COLUMNS_PAST_THE_CAPS: usize = 64_000;

/// Largest moments program whose LP a bound for a plan in hand builds at
/// all, however long its time ([`moments_lp_fits_in`]): memory, about
/// 27 KB per moment column (random-layered-n1000 at 60%, in an annealed
/// order: 143,422 moment columns, 680,818 columns in all, 3.9 GB
/// resident).
pub const MOMENT_LP_COLUMNS_MOST: usize = 200_000;

/// Moment columns per second of the bound's time past
/// [`MOMENT_LP_COLUMNS_PAST_THE_CAPS`] ([`moments_lp_fits_in`]): n1000's
/// 143,422 need 96 s, by when its LP is above the segment programs.
pub const MOMENT_LP_COLUMNS_PER_SECOND: usize = 1_500;

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
    /// The last cover program's solution as a schedule, for the search to
    /// start from (unchecked: see [`Program::schedule_of`]).
    pub plan: Option<Schedule>,
}

/// `enough`: a bound at or above it already certifies the plan in hand,
/// so the tighter (slower) program is skipped once it is reached.
pub fn graph_bound(
    g: &Graph,
    budget: Bytes,
    params: &Params,
    known: Option<&Schedule>,
    enough: Option<f64>,
) -> GraphBound {
    let details = cover_programs(g, budget);
    raise_bound(
        g,
        budget,
        params,
        known,
        enough,
        eviction(g, budget),
        &details,
        None,
    )
}

/// The eviction bound as a [`GraphBound`]: the start of [`graph_bound`],
/// and its answer when the cover program is not built or not waited for.
pub fn eviction(g: &Graph, budget: Bytes) -> GraphBound {
    GraphBound {
        value: crate::graph::analysis::eviction_bound(g, budget),
        proven: false,
        note: "eviction bound".into(),
        plan: None,
    }
}

/// A lower bound on every *sequence* of computations whose first
/// computations are in `g`'s order ([`crate::schedule::sequence`]), not
/// only on schedules: the eviction bound, the segment details, and the
/// moments program with [`Detail::SequenceMoments`]'s rows.
///
/// Why those hold for a sequence: their argument uses only the moments of
/// first computations (the ends of stages, where the budget holds), the
/// first computations' reads (the segments), and that a recomputation
/// reads its inputs when it runs. A sequence may recompute a value twice
/// within a stage, or in another order than the topological one. The
/// segment rows do not look inside a stage; the moment rows do, and
/// [`Detail::Moments`]'s assume the topological order there: on 84
/// annealed sequences of small random DAGs it claimed more than the
/// sequence's cost several times (some "no plan fits"), and with the
/// rows that assume no order within a stage, never
/// (`the_sequence_bound_holds_for_annealed_sequences`, tests/bounds.rs).
///
/// Each better bound is also written to `progress`, as in [`raise_bound`].
pub fn sequence_bound(
    g: &Graph,
    budget: Bytes,
    params: &Params,
    enough: f64,
    progress: Option<&std::sync::Mutex<GraphBound>>,
) -> GraphBound {
    let details: Vec<(Detail, bool)> = cover_programs_past_the_caps(g, budget, params.time_limit)
        .into_iter()
        .map(|(d, relaxed)| match d {
            Detail::Moments => (Detail::SequenceMoments, relaxed),
            d => (d, relaxed),
        })
        .collect();
    raise_bound(
        g,
        budget,
        params,
        None,
        Some(enough),
        eviction(g, budget),
        &details,
        progress,
    )
}

/// The cover programs small enough to build for this instance, in the
/// order [`graph_bound`] solves them, each with whether only its LP
/// relaxation is solved ([`cover_bound_relaxed`]).
pub fn cover_programs(g: &Graph, budget: Bytes) -> Vec<(Detail, bool)> {
    programs_of(&sizes(g, budget))
}

fn programs_of(size: &Sizes) -> Vec<(Detail, bool)> {
    let segments = size.segment_nonzeros <= SEGMENT_NONZEROS_MAX;
    let inputs = segments && size.input_links <= INPUT_LINKS_MAX;
    [
        (
            (Detail::SegmentInputs, true),
            inputs && size.input_links > INPUT_LINKS_LP_FIRST,
        ),
        ((Detail::Segments, false), segments),
        ((Detail::SegmentInputs, false), inputs),
        (
            (Detail::Moments, size.moment_columns > MOMENT_COLUMNS_MAX),
            size.moment_columns <= MOMENT_LP_COLUMNS_MAX
                && size.moment_nonzeros <= MOMENT_LP_NONZEROS_MAX,
        ),
    ]
    .into_iter()
    .filter_map(|(d, fits)| fits.then_some(d))
    .collect()
}

/// [`cover_programs`], with the moments program's LP relaxation where the
/// caps leave it out and `time` is enough for its size
/// ([`moments_lp_fits_in`]), solved by row generation right after the LP
/// relaxations that lead the list and before the segment programs' integer
/// programs. For a caller whose plan is in hand and whose time is its own
/// (the bound in an annealed plan's order): the caps are set for a
/// strategy's share, where an LP of half a minute would starve the search.
/// In the orders that annealing finds, the moments program's LP is much
/// stronger than the segment programs (random-layered-n250 at 60%: 138,697
/// against 131,721; n500: 289,314 against 270,391; n1000: 531,116 at 97 s
/// and 544,889 at 300 s against 522,618, docs/scale.md), and the segment
/// programs' integer programs had used up the bound's time on n500 before
/// it ran. Its rounds run under HiGHS's own time limit, and a stopped one
/// still answers with the Lagrangian bound of its duals.
pub fn cover_programs_past_the_caps(
    g: &Graph,
    budget: Bytes,
    time: Duration,
) -> Vec<(Detail, bool)> {
    let size = sizes(g, budget);
    let mut details = programs_of(&size);
    if !details.iter().any(|&(d, _)| d == Detail::Moments)
        && moments_lp_fits_in(size.moment_columns, time)
    {
        let at = details.iter().take_while(|&&(_, relaxed)| relaxed).count();
        details.insert(at, (Detail::Moments, true));
    }
    details
}

/// Whether a moments program of `columns` moment columns (as `sizes`
/// counts them: exactly, unless the segments span more than 20 ×
/// [`MOMENT_LP_COLUMNS_MAX`] stages, which then count) is worth its LP in
/// `time`: always up to [`MOMENT_LP_COLUMNS_PAST_THE_CAPS`]; past it, up to
/// [`MOMENT_LP_COLUMNS_MOST`], when `time` gives at least a second per
/// [`MOMENT_LP_COLUMNS_PER_SECOND`] columns. Why: the program is built
/// before HiGHS sees the clock, and its first rounds of row generation
/// are weaker than the segment programs, which it displaces; given the
/// time it is far stronger (random-layered-n1000 at 60%, in an annealed
/// order: 143,422 moment columns, 680,818 in all, built in about 10 s;
/// 521,770 at 55 s, 531,116 at 97 s, 544,889 at 300 s, where the segment
/// programs give 522,618).
pub fn moments_lp_fits_in(columns: usize, time: Duration) -> bool {
    columns <= MOMENT_LP_COLUMNS_PAST_THE_CAPS
        || (columns <= MOMENT_LP_COLUMNS_MOST
            && time.as_secs_f64() * MOMENT_LP_COLUMNS_PER_SECOND as f64 >= columns as f64)
}

/// [`graph_bound`] from `best`, over the programs `details`. Each better
/// bound is also written to `progress`, for a caller that stops waiting
/// (HiGHS's presolve does not poll its interrupt): what finished before is
/// not lost with the program that overran.
#[allow(clippy::too_many_arguments)]
pub fn raise_bound(
    g: &Graph,
    budget: Bytes,
    params: &Params,
    known: Option<&Schedule>,
    enough: Option<f64>,
    mut best: GraphBound,
    details: &[(Detail, bool)],
    progress: Option<&std::sync::Mutex<GraphBound>>,
) -> GraphBound {
    let start = std::time::Instant::now();
    for &(detail, relaxed) in details {
        if best.value.is_infinite()
            || enough.is_some_and(|e| best.value >= e)
            || super::stop_requested(&params.stop)
        {
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
        let solved = if relaxed {
            cover_bound_relaxed(g, budget, detail, &p)
        } else {
            cover_bound(g, budget, detail, &p, known)
        };
        match solved {
            // An infeasible relaxation would prove that no plan fits; on the
            // large programs only it reaches, that proof has not been
            // checked against any other (random-layered-n250 at 60%,
            // docs/scale.md), so it is not claimed.
            Ok(c) if relaxed && c.bound.is_infinite() => {}
            Ok(c) if c.bound >= best.value => {
                best = GraphBound {
                    value: c.bound,
                    proven: c.proven,
                    note: format!(
                        "cover program ({}, {} columns, {} in {:.2} s)",
                        match detail {
                            Detail::Segments => "segments",
                            Detail::SegmentInputs => "segments with inputs",
                            Detail::Moments => "recomputation moments",
                            Detail::SequenceMoments => "recomputation moments in any order",
                        },
                        c.columns,
                        match (relaxed, c.stopped) {
                            (true, false) => "its LP relaxation solved",
                            (true, true) => "its LP relaxation stopped",
                            (false, false) => "solved",
                            (false, true) => "stopped",
                        },
                        c.seconds
                    ),
                    plan: c.plan.or(best.plan),
                };
                if let Some(Ok(mut p)) = progress.map(|p| p.lock()) {
                    *p = best.clone();
                }
            }
            // A MIP below its own LP relaxation's bound (stopped early)
            // still has a solution nearer the optimum than a coarser
            // program's, for the search to start from.
            Ok(c) => best.plan = c.plan.or(best.plan),
            Err(e) => best.note = format!("{}; the cover program failed: {e}", best.note),
        }
    }
    best
}
