//! The step-time cover program: a lower bound on the step time of every
//! plan within a budget on a tiered device, from the graph alone. It is the
//! segment cover of [`super::cover`] with two more ways for a value to be
//! absent, and one resource per lane instead of one cost.
//!
//! Why it holds. A *segment* of value `v` is a run of stages between two
//! consecutive reads of `v` (or its computation and its first read). If `v`
//! is absent from fast memory at the moment some stage of the segment
//! computes its node, then before the read that closes the segment `v` is
//! computed again (`a`, on the compute stream), copied back in (`b`, on the
//! engine toward fast memory, which needs a slow copy: `o[v]`, once per
//! value, on the engine toward slow memory), or, where kernels may read
//! the slow tier, read from there by the closing reader (`d`, on the
//! compute stream, which also needs `o[v]`). Each is a separate event per
//! segment, since the segments are separated by reads. Map a plan onto the
//! program by claiming `v` absent over the whole segment whenever it is
//! absent anywhere in it (which only eases the rows), with the event it
//! used; every plan maps to a feasible point whose lanes carry no more
//! than the plan's.
//!
//! The rows:
//! - *Stage `t`* (where `need_t > 0`, see [`stage_needs`]): the values
//!   claimed absent while node `t` is computed hold at least `need_t` bytes.
//!   With direct reads, the inputs of `t` that it reads from the slow tier
//!   count too.
//! - *Direct reads of stage `t`*: node `t`, its inputs and the fixed memory
//!   fit the budget only if the inputs read from the slow tier make up the
//!   excess (a stage whose excess no input can cover is below the floor).
//! - *Lanes*: the step lasts at least every lane's load. The compute stream
//!   carries every node once, the recomputations and the direct reads; the
//!   engines carry the copies (latency included, once per copy); a shared
//!   engine carries both directions, a synchronous device everything.
//!
//! Two forms. [`Program::whole_step`] has one load per lane over the whole
//! step, and leaves out when copies can run. [`staged`] places each copy in
//! a stage of its window, with a time per stage: the plan's copies end
//! within their stage, so the step is the sum of the stages' longest
//! lanes. That is tighter, often by several percent where copies crowd
//! the stages around the forward-to-backward turn, and it is exact on FCN8
//! without recomputation (tests/step_cover.rs), but it grows with the
//! segments' lengths, so the whole-step form stands in past
//! [`STAGED_MAX_COLUMNS`].
//!
//! Both forms give a recomputation one column per *moment* ([`Moments`]):
//! the hot stage of its segment after which the value comes back, so that
//! it claims the value absent only up to there. Each input that died
//! before that moment is linked (`InputLinks`): kept through the hot
//! stages from its last reader, recomputed after its last reader (`ρ`,
//! whose own inputs are linked in turn) or brought back from the slow
//! tier, the last two loading their lanes over the whole step. In the
//! staged form the moment also places the recomputation's compute: in the
//! stages between that hot stage and the next.
//!
//! The staged form also checks memory where each recomputation runs
//! ([`recomputations_fit`], rows added lazily as solutions break them).
//!
//! What both leave out: the cost of bringing back an input still alive but
//! absent when a recomputation runs (only the fetch deadline of
//! [`inputs_arrive`], and only without direct reads), where `ρ` and the
//! fetches of dead inputs run, memory at other moments (and anywhere in
//! the whole-step form but at a node's first computation), when a copy out
//! of a value recomputed in its stage can start, and the slow tier's
//! capacity. That is why it is a bound and not the optimum.

use super::{solve_mip, Backend, Col, MipStatus, Model, Params, SolverError};
use crate::device::{Device, Engines};
use crate::graph::analysis::{segments, stage_needs};
use crate::graph::{Graph, NodeId};
use crate::units::{Bytes, Seconds};

/// The stages with something to give up (`need_t > 0`), ascending, so that
/// a segment finds its own by binary search instead of a walk over every
/// stage it spans.
struct HotStages(Vec<usize>);

impl HotStages {
    fn new(needs: &[f64]) -> HotStages {
        HotStages((0..needs.len()).filter(|&t| needs[t] > 0.0).collect())
    }

    fn within(&self, first: usize, last: usize) -> &[usize] {
        let a = self.0.partition_point(|&t| t < first);
        let b = self.0.partition_point(|&t| t <= last);
        &self.0[a..b.max(a)]
    }
}

/// Which plans a bound must hold for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copies {
    /// Every copy runs within the stage it starts in (no leads): the
    /// tiered MILP's family, for which the staged form is tight.
    WithinStage,
    /// Copies may span stages (leads, docs/format.md): what an engine is
    /// given in a stage may run in any later one, so each engine lane
    /// carries its unfinished work forward instead of fitting its stage.
    Spanning,
}

/// The program's answer.
#[derive(Debug, Clone)]
pub struct StepCover {
    /// A lower bound on every plan's step time; infinite when the program
    /// proves that no plan fits, which is trusted only below the budget's
    /// hard floor (the largest node with what it must read, see
    /// [`step_cover_bound`]).
    pub bound: Seconds,
    /// Whether the program was solved to optimality (else the solver's
    /// best bound when it stopped).
    pub proven: bool,
    pub seconds: f64,
    pub columns: usize,
}

/// The program itself: its objective is the step time, in units of
/// `scale` seconds.
pub struct Program {
    pub model: Model,
    /// Seconds per model time unit: times are divided by the all-fast step
    /// so that the solver's tolerances are relative to the instance.
    pub scale: f64,
    /// What the staged form's event columns stand for, to read a solution
    /// back (empty for the whole-step form).
    pub events: Vec<(Col, Event)>,
    /// Rows left out of the first solve and added only once a solution
    /// breaks them ([`recomputations_fit`]'s): with all of them FCN8's
    /// staged program was still open after 120 s where it had been solved
    /// in 43 s.
    pub lazy: Vec<usize>,
    /// The rows and columns that only the lazy rows need (their shared
    /// sums, the direct reads of inputs and where those run): left out,
    /// and the columns held at zero, until a lazy row joins, so that the
    /// first round is the program without them.
    pub lazy_support: (std::ops::Range<usize>, std::ops::Range<usize>),
}

/// One event column of the staged form: the value it moves or computes,
/// and the stage it is placed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `value` computed again from stage `from` on, after its segment's
    /// hot stages before `from`, for its read at `read`.
    Recompute {
        value: NodeId,
        from: usize,
        read: usize,
    },
    /// A copy of `value` into fast memory issued in `stage`, for `read`.
    CopyIn {
        value: NodeId,
        stage: usize,
        read: usize,
    },
    /// `value`'s first copy to the slow tier, issued in `stage`.
    CopyOut { value: NodeId, stage: usize },
    /// `value` read from the slow tier by node `stage`.
    Direct { value: NodeId, stage: usize },
    /// `value` computed again after its last reader, somewhere (`ρ`).
    Again { value: NodeId },
    /// `value` brought back from the slow tier after its last reader (`φ`).
    Fetched { value: NodeId },
}

/// Per stage, on a device whose kernels read the slow tier: the bytes by
/// which node t, its inputs and the fixed memory exceed the budget, which
/// the inputs read from there must make up (zero without direct reads:
/// such a stage is below the pipeline's floor).
fn direct_excess(g: &Graph, budget: Bytes, dev: &Device) -> Vec<f64> {
    let avail = budget.saturating_sub(g.fixed_memory).as_f64();
    g.ids()
        .map(|t| match dev.slow.direct_read {
            None => 0.0,
            Some(_) => {
                let inputs: f64 = g.deps(t).iter().map(|&u| g.memory(u).as_f64()).sum();
                inputs + g.memory(t).as_f64() - avail
            }
        })
        .collect()
}

/// What both forms start from.
struct Common {
    needs: Vec<f64>,
    hot_stages: HotStages,
    forced: Vec<f64>,
    /// Seconds per model time unit (the all-fast step).
    scale: f64,
}

impl Common {
    /// `None` when no stage must give anything up.
    fn new(g: &Graph, budget: Bytes, dev: &Device) -> Option<Common> {
        let needs = stage_needs(g, budget);
        let forced = direct_excess(g, budget, dev);
        if needs.iter().chain(&forced).all(|&x| x <= 0.0) {
            return None;
        }
        let all_fast = dev.all_fast_step(g).get();
        Some(Common {
            hot_stages: HotStages::new(&needs),
            needs,
            forced,
            scale: if all_fast > 0.0 { all_fast } else { 1.0 },
        })
    }
}

impl Program {
    /// `None` when no stage needs anything evicted: the all-fast step is
    /// then the bound.
    pub fn whole_step(
        g: &Graph,
        budget: Bytes,
        dev: &Device,
        no_recompute: bool,
    ) -> Option<Program> {
        let Common {
            needs,
            hot_stages,
            forced,
            scale,
        } = Common::new(g, budget, dev)?;
        let n = g.len();
        let direct_bw = dev.slow.direct_read;
        let all_fast = dev.all_fast_step(g).get();
        let time = |s: Seconds| s.get() / scale;

        let mut model = Model::new();
        let step = model.add_col(0.0, f64::INFINITY, 1.0, false);
        let mut stage_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        let mut direct_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
        // The lanes' loads.
        let mut compute: Vec<(Col, f64)> = Vec::new();
        let mut outs: Vec<(Col, f64)> = Vec::new();
        let mut ins: Vec<(Col, f64)> = Vec::new();
        let mut slow_copy: Vec<Option<Col>> = vec![None; n];
        // (value, its segment's recomputation columns), linked once every
        // slow copy column exists.
        let mut recomputes: Vec<(usize, Moments)> = Vec::new();
        let mut inputs = InputLinks::new(g);
        for s in segments(g) {
            let v = s.value;
            let m = g.memory(v).as_f64();
            let closing = s.last + 1;
            let inside = hot_stages.within(s.first, s.last).iter().copied();
            let read_hot = direct_bw.is_some()
                && closing < n
                && (needs[closing] > 0.0 || forced[closing] > 0.0);
            if m <= 0.0 || (inside.clone().next().is_none() && !read_hot) {
                continue;
            }
            let mut events: Vec<(Col, f64)> = Vec::new();
            let mut out_col = |model: &mut Model| {
                *slow_copy[v.idx()].get_or_insert_with(|| {
                    let c = model.add_col(0.0, 1.0, 0.0, true);
                    outs.push((c, time(dev.copy_time(g.memory(v), true))));
                    c
                })
            };
            if inside.clone().next().is_some() {
                let b = model.add_col(0.0, 1.0, 0.0, true);
                ins.push((b, time(dev.copy_time(g.memory(v), false))));
                let o = out_col(&mut model);
                model.add_row(0.0, f64::INFINITY, &[(o, 1.0), (b, -1.0)]);
                events.push((b, 1.0));
            }
            if let Some(bw) = direct_bw.filter(|_| closing < n) {
                let d = model.add_col(0.0, 1.0, 0.0, true);
                compute.push((d, time(bw.time(g.memory(v)))));
                let o = out_col(&mut model);
                model.add_row(0.0, f64::INFINITY, &[(o, 1.0), (d, -1.0)]);
                stage_rows[closing].push((d, m));
                direct_rows[closing].push((d, m));
                events.push((d, 1.0));
            }
            let inside = hot_stages.within(s.first, s.last);
            for &t in inside {
                for &(c, _) in &events {
                    stage_rows[t].push((c, m));
                }
            }
            if !inside.is_empty() && !no_recompute {
                let moments = Moments::build(&mut model, &mut stage_rows, &s, inside, false, m, n);
                let work = time(dev.compute_time(g.cost(v)));
                for &(a, _, _) in &moments.cols {
                    compute.push((a, work));
                    events.push((a, 1.0));
                }
                recomputes.push((v.idx(), moments));
            }
            if events.len() > 1 {
                model.add_row(f64::NEG_INFINITY, 1.0, &events);
            }
        }
        inputs.outs = slow_copy
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        for (v, moments) in &recomputes {
            inputs.link_moments(&mut model, &mut stage_rows, &hot_stages, *v, moments);
        }
        inputs.link_inputs_of_inputs(&mut model, &mut stage_rows, &hot_stages);
        let [again, fetch_out, fetch_in] = inputs.loads(dev, &time);
        compute.extend(again);
        outs.extend(fetch_out);
        ins.extend(fetch_in);
        for t in 0..n {
            if needs[t] > 0.0 {
                model.add_covering_row(&stage_rows[t], needs[t]);
            }
            if forced[t] > 0.0 {
                model.add_covering_row(&direct_rows[t], forced[t]);
            }
        }
        // step ≥ load, with the load's constant (every node once) as the
        // row's lower bound.
        let base = all_fast / scale;
        let mut lane =
            |constant: f64, parts: &[&[(Col, f64)]]| lane_row(&mut model, step, constant, parts);
        match dev.slow.engines {
            Engines::Duplex => {
                lane(base, &[&compute]);
                lane(0.0, &[&outs]);
                lane(0.0, &[&ins]);
            }
            Engines::Shared => {
                lane(base, &[&compute]);
                lane(0.0, &[&outs, &ins]);
            }
            Engines::Synchronous => lane(base, &[&compute, &outs, &ins]),
        }
        Some(Program {
            model,
            scale,
            events: Vec::new(),
            lazy: Vec::new(),
            lazy_support: (0..0, 0..0),
        })
    }
}

/// The staged program: the same events, placed in the stages where the
/// plan's rules let them run. Every copy runs within one stage, and a
/// stage lasts the longest of its lanes, so the step is Σ_t τ_t with τ_t
/// at least each lane's load in stage t. A value absent while stage `t`
/// computes, by the slow route, was copied out in some stage `q < t` (its
/// first copy out: `o[v, q]`) and comes back by a copy in in some stage
/// `p` with `t < p ≤ last` (the segment's last copy in: `b[s, p]`; its
/// buffer counts from the start of `p`) or by a direct read at the
/// closing stage. A segment in which the plan recomputes its value is
/// mapped onto `a[s]` alone, which claims the whole segment; its
/// recomputation runs in the stages from the segment's first absent moment
/// to its closing read, split among them as the program likes (a
/// relaxation of where it runs). A segment whose value is recomputed
/// midway only to be copied out, and comes back from the slow tier for
/// its read, maps onto both: the moment before that recomputation, and
/// the slow route at the hot stages after it, since the copy out is then
/// placed in a stage after the moment. So every plan maps onto a feasible
/// point whose stage loads are at most the plan's.
///
/// With [`Copies::Spanning`] each engine lane gets a carry per stage: the
/// work issued by the end of stage `t` and not yet done, `c_t ≥ 0`. The
/// engine does `c_{t-1} + load_t − c_t ≤ τ_t` in stage `t`, and the step is
/// at least `Σ τ + c_last`. A copy out of the stage's own frontier runs in
/// that stage only after the frontier is computed: the part `x_t` done
/// there adds to the compute lane, and the rest stays in the carry
/// (`c_t ≥ load − x_t`). A plan with leads maps onto this with its real
/// per-stage engine work, so the bound holds for it. Deadlines: the work
/// an engine has done before node `t` is computed covers every copy out
/// of a value counted absent at `t` and every copy in read by `t` or
/// earlier (an engine's work cannot serve two deadlines).
pub fn staged(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    copies: Copies,
) -> Option<Program> {
    let Common {
        needs,
        hot_stages,
        forced,
        scale,
    } = Common::new(g, budget, dev)?;
    let n = g.len();
    let direct_bw = dev.slow.direct_read;
    let hot = |t: usize| needs[t] > 0.0 || forced[t] > 0.0;
    let time = |s: Seconds| s.get() / scale;

    let mut model = Model::new();
    // The step as one column, Σ τ_t as a row: the lanes' rows read τ_t.
    let step = model.add_col(0.0, f64::INFINITY, 1.0, false);
    let tau: Vec<Col> = g
        .ids()
        .map(|t| model.add_col(time(dev.compute_time(g.cost(t))), f64::INFINITY, 0.0, false))
        .collect();
    let mut sum = vec![(step, 1.0)];
    sum.extend(tau.iter().map(|&c| (c, -1.0)));
    // With spanning copies the step may outlast Σ τ (an engine's leftover).
    let upper = match copies {
        Copies::WithinStage => 0.0,
        Copies::Spanning => f64::INFINITY,
    };
    model.add_row(0.0, upper, &sum);
    let mut compute_lane: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut out_lane: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut in_lane: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut stage_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut direct_rows: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    let mut frontier: Vec<Option<(Col, f64)>> = vec![None; n];
    // Deadlines, for copies that span stages: per stage, the copies out
    // that must be done by its end (their value is absent there by the slow
    // route, `w`, or read directly there, `d`), each with the copy's time
    // and the first stage it can be issued in (its value's own), and the
    // copies in that must be done by its end (their segment's read is
    // there).
    let mut out_since: Vec<Issued> = vec![Vec::new(); n];
    let mut in_due: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];
    // The copies in issued in their reader's own stage (with that stage,
    // for the windows of `carried_lanes`). Copies in issued earlier get no
    // window: valid too, but with them FCN8's program took 2 to 5 times as
    // long to prove, and VGG16's bound gained nothing from them.
    let mut in_since: Vec<Issued> = vec![Vec::new(); n];
    // The direct reads of each node (on the compute lane of its stage).
    let mut direct_lane: Vec<Vec<(Col, f64)>> = vec![Vec::new(); n];

    let mut inputs = InputLinks::new(g);
    let mut log: Vec<(Col, Event)> = Vec::new();
    // For the memory where recomputations run (`recomputations_fit`): per
    // stage, each value's claims to be absent there; per value, its ways
    // back into fast memory and the stages they run in; every
    // recomputation column.
    let mut claims: Vec<Vec<(usize, Col)>> = vec![Vec::new(); n];
    let mut back_in: Vec<Vec<(usize, usize, Col)>> = vec![Vec::new(); n];
    let mut windows: Vec<Window> = Vec::new();
    // Per value, its segments' copies in: (first, last, [(stage, column)]).
    let mut fetches: Vec<Vec<SegmentCols>> = vec![Vec::new(); n];
    // Inputs' arrival deadlines (`inputs_arrive`) only where copies span
    // stages and there are no direct reads: with them the recomputation
    // may read `u` from the slow tier while its copy in runs.
    let arrivals = copies == Copies::Spanning && direct_bw.is_none();
    // Segments by value.
    let mut by_value: Vec<Vec<crate::graph::analysis::Segment>> = vec![Vec::new(); n];
    for s in segments(g) {
        by_value[s.value.idx()].push(s);
    }
    for (v, segs) in by_value.iter().enumerate() {
        let id = crate::graph::NodeId::from(v);
        let m = g.memory(id).as_f64();
        if m <= 0.0 {
            continue;
        }
        // Per segment: its hot stages inside, and whether its closing read
        // is a hot stage that may read the slow tier.
        // Per segment: its hot stages inside, whether its closing read is a
        // hot stage that may read the slow tier, and whether it follows a
        // segment whose closing read may be direct: the value is then
        // absent at that read and must come back (or be read directly
        // again) before this segment's own read, whatever its stages need.
        let mut useful: Vec<(&crate::graph::analysis::Segment, Vec<usize>, bool, bool)> =
            Vec::new();
        let mut chained = false;
        for s in segs {
            let inside: Vec<usize> = hot_stages.within(s.first, s.last).to_vec();
            let closing = s.last + 1;
            let read = direct_bw.is_some() && closing < n && hot(closing);
            if inside.is_empty() && !read && !chained {
                continue;
            }
            useful.push((s, inside, read, chained));
            chained = direct_bw.is_some() && closing < n;
        }
        if useful.is_empty() {
            continue;
        }
        // Copies out: o[v, q] for q from v's own stage up to the last stage
        // before an absent moment; cumulative columns at each moment.
        let last_moment = useful
            .iter()
            .filter_map(|(s, inside, read, _)| {
                if *read {
                    Some(s.last + 1)
                } else {
                    inside.last().copied()
                }
            })
            .max()
            .unwrap_or(v);
        let out_time = time(dev.copy_time(g.memory(id), true));
        let outs: Vec<Col> = (v..last_moment)
            .map(|q| {
                let c = model.add_col(0.0, 1.0, 0.0, true);
                log.push((
                    c,
                    Event::CopyOut {
                        value: id,
                        stage: q,
                    },
                ));
                out_lane[q].push((c, out_time));
                c
            })
            .collect();
        model.add_row(
            f64::NEG_INFINITY,
            1.0,
            &outs.iter().map(|&c| (c, 1.0)).collect::<Vec<_>>(),
        );
        // A copy out in v's own stage starts only once v is computed.
        if let Some(&f) = outs.first() {
            frontier[v] = Some((f, out_time));
        }
        inputs.outs[v] = outs.clone();
        // copied_by(t): a column no larger than Σ_{q < t} o[v, q].
        let mut moments: Vec<usize> = useful
            .iter()
            .flat_map(|(s, inside, read, _)| {
                inside.iter().copied().chain(read.then_some(s.last + 1))
            })
            .collect();
        moments.sort_unstable();
        moments.dedup();
        let mut copied_by: Vec<(usize, Col)> = Vec::with_capacity(moments.len());
        let mut prev: Option<(usize, Col)> = None;
        for &t in &moments {
            let c = model.add_col(0.0, 1.0, 0.0, false);
            let (from, mut row) = match prev {
                Some((pt, pc)) => (pt, vec![(c, 1.0), (pc, -1.0)]),
                None => (v, vec![(c, 1.0)]),
            };
            row.extend((from.max(v)..t).map(|q| (outs[q - v], -1.0)));
            model.add_row(f64::NEG_INFINITY, 0.0, &row);
            copied_by.push((t, c));
            prev = Some((t, c));
        }
        let copied = |t: usize| {
            copied_by[copied_by
                .binary_search_by_key(&t, |&(k, _)| k)
                .expect("a moment")]
            .1
        };
        let in_time = time(dev.copy_time(g.memory(id), false));
        let mut prev_direct: Option<Col> = None;
        // The previous segment's claim that the value is absent at its
        // direct read.
        let mut prev_absent: Option<Col> = None;
        for (s, inside, read, chained) in &useful {
            // The segment's recomputation moments, and its ways back from
            // the slow tier (a direct read, copies in).
            let mut again: Vec<(Col, f64)> = Vec::new();
            let mut returns: Vec<(Col, f64)> = Vec::new();
            // A chained segment's first moment and its window's start.
            let mut head: Option<(usize, Col)> = None;
            // The recomputation's claims per hot stage, to keep the slow
            // route from claiming the same stage again.
            let mut recomputed_absent: Vec<(usize, Col)> = Vec::new();
            if (!inside.is_empty() || *chained) && !no_recompute {
                let moments =
                    Moments::build(&mut model, &mut stage_rows, s, inside, *chained, m, n);
                recomputed_absent.clone_from(&moments.absent);
                for &(t, c) in &moments.absent {
                    claims[t].push((v, c));
                }
                let work = time(dev.compute_time(g.cost(id)));
                for &(a, from, to) in &moments.cols {
                    // Its compute lands in the stages of its window.
                    spread(&mut model, &mut compute_lane[from..=to], a, work);
                    if *chained && again.is_empty() {
                        head = Some((from, a));
                    }
                    again.push((a, 1.0));
                    back_in[v].push((from, to, a));
                    windows.push(Window {
                        col: a,
                        value: v,
                        from,
                        to,
                    });
                    log.push((
                        a,
                        Event::Recompute {
                            value: id,
                            from,
                            read: s.last + 1,
                        },
                    ));
                }
                inputs.link_moments(&mut model, &mut stage_rows, &hot_stages, v, &moments);
                if arrivals {
                    inputs_arrive(
                        &mut model,
                        g,
                        v,
                        &moments.cols,
                        &fetches,
                        &mut in_due,
                        &|u| time(dev.copy_time(g.memory(NodeId::from(u)), false)),
                    );
                }
            }
            let d = match direct_bw.filter(|_| s.last + 1 < n) {
                Some(bw) => {
                    let d = model.add_col(0.0, 1.0, 0.0, true);
                    log.push((
                        d,
                        Event::Direct {
                            value: id,
                            stage: s.last + 1,
                        },
                    ));
                    compute_lane[s.last + 1].push((d, time(bw.time(g.memory(id)))));
                    direct_lane[s.last + 1].push((d, time(bw.time(g.memory(id)))));
                    // Its slow copy is there before the reader runs,
                    // whether or not the stage needs the value absent.
                    out_since[s.last + 1].push((d, out_time, v));
                    returns.push((d, 1.0));
                    Some(d)
                }
                None => None,
            };
            // Copies in: b[s, p] for p after the first absent moment, up to
            // the stage before the closing read. A chained segment's value
            // is absent from its start, and its copy in may already be
            // issued in the stage of the direct read before it (that node
            // reads the slow copy while the fast one is filled).
            let first = if *chained {
                Some(s.first - 1)
            } else {
                inside.first().map(|&f| f + 1)
            };
            // Where copies span stages, a plan may also fetch in the
            // reader's own stage, once the stage's earlier kernels have
            // freed their inputs, and wait for it before the reader runs:
            // a tester's plan did, and beat this program's bound. The
            // deadline rows then hold the reader back until the copy is
            // done, which is the stall such a plan pays.
            let last_in = match copies {
                Copies::Spanning => s.last + 1,
                Copies::WithinStage => s.last,
            };
            let ins: Vec<(usize, Col)> = match first {
                Some(f) => (f..=last_in)
                    .map(|p| {
                        let c = model.add_col(0.0, 1.0, 0.0, true);
                        log.push((
                            c,
                            Event::CopyIn {
                                value: id,
                                stage: p,
                                read: s.last + 1,
                            },
                        ));
                        in_lane[p].push((c, in_time));
                        back_in[v].push((p, p, c));
                        if let Some(due) = in_due.get_mut(s.last + 1) {
                            due.push((c, in_time));
                            if p == s.last + 1 {
                                in_since[p].push((c, in_time, p));
                            }
                        }
                        returns.push((c, 1.0));
                        (p, c)
                    })
                    .collect(),
                None => Vec::new(),
            };
            // At most one recomputation moment and at most one way back
            // from the slow tier, but a segment may use one of each: a plan
            // may recompute the value in the middle of the segment only to
            // copy that instance out while the engine toward the slow tier
            // is idle, and bring it back (or read it directly) for the
            // closing read. The value is then absent at the hot stages
            // before the recomputation by its moment and at those after it
            // by the slow route, each stage claimed once (the rows on `w`
            // below). A tester's plan did this on FCN8 at 50% on the GH200
            // and beat the program that allowed one event per segment.
            for part in [&again, &returns] {
                if part.len() > 1 {
                    model.add_row(f64::NEG_INFINITY, 1.0, part);
                }
            }
            // Both only when the slow copy is made from the recomputed
            // instance (a plan whose copy out came earlier maps onto the
            // slow route at every hot stage where the value is absent). Per
            // hot stage t: absent there by the recomputation (`A_t`, the sum
            // of the moments after t) and back by the slow route means a
            // copy out after t, a tighter row than one per moment. A
            // chained segment's first moment (absent from its start) needs
            // a copy from its start on.
            if !returns.is_empty() {
                let claims = recomputed_absent.iter().map(|&(t, c)| (t + 1, c));
                for (from, claim) in head.into_iter().chain(claims) {
                    let mut row = vec![(claim, 1.0)];
                    row.extend(returns.iter().copied());
                    let late = from.saturating_sub(v).min(outs.len());
                    row.extend(outs[late..].iter().map(|&o| (o, -1.0)));
                    model.add_row(f64::NEG_INFINITY, 1.0, &row);
                }
            }
            if let (true, Some(pd)) = (*chained, prev_direct) {
                let mut row = vec![(pd, 1.0)];
                row.extend(again.iter().chain(&returns).map(|&(c, _)| (c, -1.0)));
                model.add_row(f64::NEG_INFINITY, 0.0, &row);
            }
            prev_direct = d;
            // back_after(t) ≤ Σ_{p > t} b[s, p], built from the last moment
            // backwards.
            let mut later: Option<(usize, Col)> = None;
            let mut back_after: Vec<(usize, Col)> = Vec::new();
            for &t in inside.iter().rev() {
                let c = model.add_col(0.0, 1.0, 0.0, false);
                let to = later.map_or(last_in, |(lt, _)| lt);
                let mut row = vec![(c, 1.0)];
                if let Some((_, lc)) = later {
                    row.push((lc, -1.0));
                }
                row.extend(
                    ins.iter()
                        .filter(|&&(p, _)| p > t && p <= to)
                        .map(|&(_, b)| (b, -1.0)),
                );
                model.add_row(f64::NEG_INFINITY, 0.0, &row);
                back_after.push((t, c));
                later = Some((t, c));
            }
            for &(t, back) in &back_after {
                // w: absent at t by the slow route.
                let w = model.add_col(0.0, 1.0, 0.0, false);
                model.add_row(f64::NEG_INFINITY, 0.0, &[(w, 1.0), (copied(t), -1.0)]);
                let mut row = vec![(w, 1.0), (back, -1.0)];
                if let Some(d) = d {
                    row.push((d, -1.0));
                }
                model.add_row(f64::NEG_INFINITY, 0.0, &row);
                if let Ok(k) = recomputed_absent.binary_search_by_key(&t, |&(h, _)| h) {
                    model.add_row(
                        f64::NEG_INFINITY,
                        1.0,
                        &[(w, 1.0), (recomputed_absent[k].1, 1.0)],
                    );
                }
                stage_rows[t].push((w, m));
                claims[t].push((v, w));
                out_since[t].push((w, out_time, v));
            }
            if arrivals {
                fetches[v].push(SegmentCols {
                    first: s.first,
                    last: s.last,
                    ins: ins.clone(),
                });
            }
            // A copy in issued in the stage of the direct read before this
            // segment fills its buffer there: the value is not absent from
            // fast memory at that read.
            if let (true, Some(w), Some(&(p, b))) = (*chained, prev_absent, ins.first()) {
                if p + 1 == s.first {
                    model.add_row(f64::NEG_INFINITY, 1.0, &[(w, 1.0), (b, 1.0)]);
                }
            }
            prev_absent = None;
            if let (true, Some(d)) = (*read, d) {
                let c = s.last + 1;
                let w = model.add_col(0.0, 1.0, 0.0, false);
                prev_absent = Some(w);
                model.add_row(f64::NEG_INFINITY, 0.0, &[(w, 1.0), (copied(c), -1.0)]);
                model.add_row(f64::NEG_INFINITY, 0.0, &[(w, 1.0), (d, -1.0)]);
                if needs[c] > 0.0 {
                    stage_rows[c].push((w, m));
                    claims[c].push((v, w));
                }
                if forced[c] > 0.0 {
                    direct_rows[c].push((w, m));
                }
            }
        }
    }
    inputs.link_inputs_of_inputs(&mut model, &mut stage_rows, &hot_stages);
    let (rows_before, cols_before) = (model.num_rows(), model.num_cols());
    let lazy = recomputations_fit(
        &mut model,
        g,
        budget,
        dev,
        &time,
        Fit {
            needs: &needs,
            claims: &claims,
            back_in: &back_in,
            windows: &windows,
        },
        &mut compute_lane,
    );
    let lazy_support = (rows_before..model.num_rows(), cols_before..model.num_cols());
    for t in 0..n {
        if needs[t] > 0.0 {
            model.add_covering_row(&stage_rows[t], needs[t]);
        }
        if forced[t] > 0.0 {
            model.add_covering_row(&direct_rows[t], forced[t]);
        }
    }
    let base = |t: usize| time(dev.compute_time(g.cost(crate::graph::NodeId::from(t))));
    inputs.charge(
        &mut model,
        step,
        dev,
        &time,
        (0..n).map(base).sum(),
        [&compute_lane, &out_lane, &in_lane],
    );
    if copies == Copies::Spanning && dev.slow.engines != Engines::Synchronous {
        let out_due: Vec<Vec<(Col, f64)>> = out_since
            .iter()
            .map(|due| due.iter().map(|&(c, w, _)| (c, w)).collect())
            .collect();
        carried_lanes(
            &mut model,
            &tau,
            step,
            &base,
            &compute_lane,
            &frontier,
            [&out_lane, &in_lane],
            [&out_due, &in_due],
            [&out_since, &in_since],
            &direct_lane,
            dev.slow.engines,
        );
        log.extend(inputs.logged());
        return Some(Program {
            model,
            scale,
            events: log,
            lazy,
            lazy_support,
        });
    }
    for t in 0..n {
        let compute = &compute_lane[t];
        let mut lane = |constant: f64, parts: &[&[(Col, f64)]]| {
            if parts.iter().any(|p| !p.is_empty()) {
                lane_row(&mut model, tau[t], constant, parts);
            }
        };
        let after: Vec<(Col, f64)> = compute.iter().copied().chain(frontier[t]).collect();
        match dev.slow.engines {
            Engines::Duplex => {
                lane(base(t), &[&after]);
                lane(0.0, &[&out_lane[t]]);
                lane(0.0, &[&in_lane[t]]);
            }
            Engines::Shared => {
                lane(base(t), &[&after]);
                lane(0.0, &[&out_lane[t], &in_lane[t]]);
            }
            Engines::Synchronous => lane(base(t), &[compute, &out_lane[t], &in_lane[t]]),
        }
    }
    log.extend(inputs.logged());
    Some(Program {
        model,
        scale,
        events: log,
        lazy,
        lazy_support,
    })
}

/// A recomputation column of `value` and the stages its compute may run in.
struct Window {
    col: Col,
    value: usize,
    from: usize,
    to: usize,
}

/// What [`recomputations_fit`] reads of the staged program.
struct Fit<'a> {
    needs: &'a [f64],
    /// Per stage, `(value, column)`: the value claimed absent there.
    claims: &'a [Vec<(usize, Col)>],
    /// Per value, `(from, to, column)`: a way back into fast memory (a
    /// recomputation or a copy in) in stages `from..=to`.
    back_in: &'a [Vec<(usize, usize, Col)>],
    windows: &'a [Window],
}

/// Memory where a recomputation runs. The stage rows count memory only as
/// each node is computed, so without these rows a recomputation could read
/// an input that the same point holds in the slow tier: on VGG16 at 50% on
/// the GH200 the program recomputed `block1_pool` just before its
/// gradient's reader from `block1_conv2`, which it read directly from the
/// slow tier one stage later, for free, where the plans read `block1_pool`
/// directly (2.3 ms) because 3.3 GB more do not fit there.
///
/// A recomputation of `v` in window `from..=to` runs before node `to` (the
/// next hot stage of its segment, or its read), at some moment `m` in those
/// stages. At `m` fast memory holds `v`, each input `u` of `v` unless the
/// recomputation reads it from the slow tier (`δ_u`, paid on the compute
/// stream in the window), and every value live across node `to` that was
/// computed before `from`, unless it is claimed absent at `to` or comes
/// back into fast memory within the window (after `m`, for all the row
/// knows). Claims at `to` may exceed what a plan has absent there, and the
/// ways back may be counted for values that were there all along; both
/// only loosen the row. A value made in the window, and node `to`'s own
/// output, are left out.
#[allow(clippy::too_many_arguments)]
fn recomputations_fit(
    model: &mut Model,
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    time: &dyn Fn(Seconds) -> f64,
    fit: Fit,
    compute_lane: &mut [Vec<(Col, f64)>],
) -> Vec<usize> {
    let avail = budget.saturating_sub(g.fixed_memory).as_f64();
    let last: Vec<usize> = crate::graph::analysis::last_use(g)
        .iter()
        .map(|l| l.idx())
        .collect();
    let bytes = |x: usize| g.memory(NodeId::from(x)).as_f64();
    // A value's claim at `to` and its ways back within `from..=to`, each
    // weighted by `scale`.
    let terms = |x: usize, from: usize, to: usize, scale: f64| {
        let claimed = fit.claims[to].iter().filter(move |&&(y, _)| y == x);
        let back = fit.back_in[x]
            .iter()
            .filter(move |&&(lo, hi, _)| lo <= to && hi >= from);
        claimed
            .map(move |&(_, c)| (c, scale))
            .chain(back.map(move |&(_, _, c)| (c, scale)))
    };
    // Per window `(from, to)`, shared by its recomputations: the values
    // live across `to` made before `from` (their bytes), and a column no
    // larger than the bytes of theirs claimed absent or coming back, in
    // units of `avail` (one row per window instead of the sum in each
    // recomputation's row: ResNet-50's program had 5.4 million more
    // nonzeros the other way).
    let mut shared: std::collections::HashMap<(usize, usize), (Col, f64)> = Default::default();
    let mut lazy = Vec::new();
    for w in fit.windows {
        let (from, to) = (w.from, w.to);
        if fit.needs[to] <= 0.0 || from > to {
            continue;
        }
        let live = |x: usize| last[x] >= to && bytes(x) > 0.0;
        let &mut (p, held_all) = shared.entry((from, to)).or_insert_with(|| {
            let p = model.add_col(0.0, f64::INFINITY, 0.0, false);
            let mut def = vec![(p, 1.0)];
            let mut held = 0.0;
            for x in (0..from).filter(|&x| live(x)) {
                held += bytes(x);
                def.extend(terms(x, from, to, -bytes(x) / avail));
            }
            model.add_row(f64::NEG_INFINITY, 0.0, &merged(&def));
            (p, held)
        });
        let v = NodeId::from(w.value);
        let inputs = g.deps(v);
        let needed = bytes(w.value) + inputs.iter().map(|u| bytes(u.idx())).sum::<f64>();
        // The recomputed value and its inputs are counted whole, not as
        // values that may be absent.
        let mut own: Vec<usize> = inputs.iter().map(|u| u.idx()).collect();
        own.push(w.value);
        own.sort_unstable();
        own.dedup();
        own.retain(|&x| x < from && live(x));
        let held = held_all - own.iter().map(|&x| bytes(x)).sum::<f64>();
        if held + needed <= avail {
            continue;
        }
        let mut row = vec![(p, 1.0), (w.col, -needed / avail)];
        for &x in &own {
            row.extend(terms(x, from, to, -bytes(x) / avail));
        }
        if let Some(bw) = dev.slow.direct_read {
            for &u in inputs {
                let delta = model.add_col(0.0, 1.0, 0.0, true);
                model.add_row(f64::NEG_INFINITY, 0.0, &[(delta, 1.0), (w.col, -1.0)]);
                row.push((delta, bytes(u.idx()) / avail));
                let work = time(bw.time(g.memory(u)));
                spread(model, &mut compute_lane[from..=to], delta, work);
            }
        }
        lazy.push(model.num_rows());
        model.add_row((held - avail) / avail, f64::INFINITY, &merged(&row));
    }
    lazy
}

/// Work `x · work` done somewhere in `lanes`' stages, split as the program
/// likes.
fn spread(model: &mut Model, lanes: &mut [Vec<(Col, f64)>], x: Col, work: f64) {
    let mut split = vec![(x, -work)];
    for lane in lanes {
        let y = model.add_col(0.0, f64::INFINITY, 0.0, false);
        lane.push((y, 1.0));
        split.push((y, 1.0));
    }
    model.add_row(0.0, f64::INFINITY, &split);
}

/// One segment's recomputation columns by moment (see [`staged`]).
struct Moments {
    /// `(a_i, from, to)`: the value computed again in a stage from `from`
    /// to `to`, absent at the hot stages inside before `from`.
    cols: Vec<(Col, usize, usize)>,
    /// Per hot stage inside, ascending: the sum of the columns that claim
    /// the value absent there.
    absent: Vec<(usize, Col)>,
    /// The segment's first stage.
    first: usize,
}

impl Moments {
    /// One column per moment: `a_i` is absent at the first `i` hot stages
    /// inside (`inside`) and computed again after the i-th, by the next
    /// (for the read at `last + 1` after the last; a chained segment's
    /// `a_0` is absent from its start only). A plan maps onto the column of
    /// the last hot stage at which the value is absent, when it comes back
    /// by a recomputation: it claims the value absent at every hot stage
    /// up to there, which only eases the stage rows, and nothing after.
    /// The stage rows get `A_j = Σ_{i ≥ j} a_i` (one column and row per hot
    /// stage) rather than every column that claims stage `j`.
    fn build(
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        s: &crate::graph::analysis::Segment,
        inside: &[usize],
        chained: bool,
        bytes: f64,
        n: usize,
    ) -> Moments {
        let mut cols = Vec::with_capacity(inside.len() + 1);
        for i in usize::from(!chained)..=inside.len() {
            let a = model.add_col(0.0, 1.0, 0.0, true);
            let from = if i == 0 { s.first } else { inside[i - 1] + 1 };
            let to = inside.get(i).copied().unwrap_or(s.last + 1).min(n - 1);
            cols.push((a, from, to.max(from)));
        }
        let mut absent = Vec::with_capacity(inside.len());
        let mut later: Option<Col> = None;
        for (j, &t) in inside.iter().enumerate().rev() {
            let (a, _, _) = cols[cols.len() - inside.len() + j];
            let c = model.add_col(0.0, 1.0, 0.0, false);
            let mut row = vec![(c, 1.0), (a, -1.0)];
            row.extend(later.map(|l| (l, -1.0)));
            model.add_row(0.0, 0.0, &row);
            stage_rows[t].push((c, bytes));
            absent.push((t, c));
            later = Some(c);
        }
        absent.reverse();
        Moments {
            cols,
            absent,
            first: s.first,
        }
    }

    /// The columns whose sum says the value comes back after hot stage
    /// `t` (one column inside the segment; before it, the chained
    /// segment's `a_0` and the sum of the others).
    fn back_after(&self, t: usize) -> Vec<Col> {
        if let Ok(j) = self.absent.binary_search_by_key(&t, |&(h, _)| h) {
            return vec![self.absent[j].1];
        }
        if t >= self.first {
            return Vec::new();
        }
        let head = self
            .cols
            .first()
            .filter(|&&(_, from, _)| from == self.first && self.cols.len() > self.absent.len());
        head.map(|&(a, _, _)| a)
            .into_iter()
            .chain(self.absent.first().map(|&(_, c)| c))
            .collect()
    }
}

/// A segment's copies in: its first and last stage, and each copy's issue
/// stage and column.
#[derive(Clone)]
struct SegmentCols {
    first: usize,
    last: usize,
    ins: Vec<(usize, Col)>,
}

/// With copies that span stages, a recomputation of `v` reads each input
/// `u` when it runs, not when `u`'s own segment is read: if `u` was
/// brought back by a copy issued no later than the recomputation's window
/// starts (`from`), that copy is done before the recomputation, so by
/// `to` at the latest, not only by `u`'s next read. The earlier deadline
/// is `z ≥ a + Σ b − 1` at `to`, taken back at the read so that the copy
/// counts once there.
fn inputs_arrive(
    model: &mut Model,
    g: &Graph,
    v: usize,
    moments: &[(Col, usize, usize)],
    fetches: &[Vec<SegmentCols>],
    in_due: &mut [Vec<(Col, f64)>],
    copy_in_time: &dyn Fn(usize) -> f64,
) {
    for &(a, from, to) in moments {
        for &u in g.deps(NodeId::from(v)) {
            let u = u.idx();
            let Some(seg) = fetches[u]
                .iter()
                .find(|c| c.first <= from && from <= c.last + 1)
            else {
                continue;
            };
            let (last, ins) = (seg.last, &seg.ins);
            let read = last + 1;
            if to >= read {
                continue;
            }
            let early: Vec<(Col, f64)> = ins
                .iter()
                .filter(|&&(p, _)| p <= from)
                .map(|&(_, c)| (c, -1.0))
                .collect();
            if early.is_empty() {
                continue;
            }
            let z = model.add_col(0.0, 1.0, 0.0, false);
            let mut row = vec![(z, 1.0), (a, -1.0)];
            row.extend(early);
            model.add_row(-1.0, f64::INFINITY, &row);
            let t = copy_in_time(u);
            in_due[to].push((z, t));
            in_due[read].push((z, -t));
        }
    }
}

/// The input rows of the recomputation columns (as in
/// [`super::cover::Detail::Moments`]). A recomputation of `v` needs each
/// input `u` that died before it: `u` is kept through every hot stage from
/// its last reader to the recomputation's moment (bytes in that stage's
/// row), or computed again after its last reader (`ρ[u]`), or brought back
/// from the slow tier (`φ[u]`, or a copy out of `u` the program already
/// places). A moment column claims nothing after `v` is back, so every
/// input is linked, whatever its bytes (a column claiming the whole
/// segment could link only the inputs its own bytes pay for). `ρ` and `φ`
/// are placed in no stage: they load their lane over the whole step (the
/// compute stream for `ρ`, the engine toward the slow tier for `φ`).
struct InputLinks<'a> {
    g: &'a Graph,
    last: Vec<usize>,
    /// The copy-out columns of each value, once its turn has come (inputs
    /// come before their readers in the order).
    outs: Vec<Vec<Col>>,
    kept: std::collections::HashMap<(usize, usize), Col>,
    again: std::collections::HashMap<usize, Col>,
    fetched: std::collections::HashMap<usize, Col>,
    demands: std::collections::HashMap<(usize, usize), Col>,
}

impl<'a> InputLinks<'a> {
    fn new(g: &'a Graph) -> InputLinks<'a> {
        InputLinks {
            g,
            last: crate::graph::analysis::last_use(g)
                .iter()
                .map(|l| l.idx())
                .collect(),
            outs: vec![Vec::new(); g.len()],
            kept: Default::default(),
            again: Default::default(),
            fetched: Default::default(),
            demands: Default::default(),
        }
    }

    /// Links the moment columns of one segment of `v`: `(a, from)` brings
    /// `v` back by computing it at some stage from `from` on, so each
    /// input `u` of `v` that died before `from` is there then: kept
    /// through every hot stage after its last reader and before `from`,
    /// computed again (`ρ[u]`) or brought back (`φ[u]`, or a copy out of
    /// `u`). Unlike a segment column, a moment column claims nothing after
    /// `v` is back, so every input is linked, whatever its bytes. The
    /// segment's columns exclude each other: one row per input and stage
    /// bounds the demand column `N[u,t]` by their sum.
    fn link_moments(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        hot: &HotStages,
        v: usize,
        moments: &Moments,
    ) {
        let Some(latest) = moments.cols.iter().map(|&(_, from, _)| from).max() else {
            return;
        };
        for &u in self.g.deps(NodeId::from(v)) {
            let u = u.idx();
            if self.g.memory(u.into()).get() == 0 || latest == 0 {
                continue;
            }
            for &t in hot.within(self.last[u] + 1, latest - 1) {
                let after = moments.back_after(t);
                if after.is_empty() {
                    continue;
                }
                let demand = self.demand(model, stage_rows, u, t);
                let mut row = vec![(demand, 1.0)];
                row.extend(after.into_iter().map(|a| (a, -1.0)));
                model.add_row(0.0, f64::INFINITY, &row);
            }
        }
    }

    /// `N[u,t]`: `u` is needed after hot stage `t`, past its last reader,
    /// so it is kept at `t`, computed again, or brought back.
    fn demand(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        u: usize,
        t: usize,
    ) -> Col {
        if let Some(&c) = self.demands.get(&(u, t)) {
            return c;
        }
        let rho = *self
            .again
            .entry(u)
            .or_insert_with(|| model.add_col(0.0, 1.0, 0.0, true));
        let phi = *self
            .fetched
            .entry(u)
            .or_insert_with(|| model.add_col(0.0, 1.0, 0.0, true));
        let e = super::cover::kept_column(&mut self.kept, model, stage_rows, self.g, u, t);
        let c = model.add_col(0.0, 1.0, 0.0, false);
        let mut row = vec![(e, 1.0), (rho, 1.0), (phi, 1.0), (c, -1.0)];
        row.extend(self.outs[u].iter().map(|&o| (o, 1.0)));
        model.add_row(0.0, f64::INFINITY, &row);
        self.demands.insert((u, t), c);
        c
    }

    /// A value computed again after its last reader (`ρ[u]`) needs its
    /// own inputs then: each input `w` dead by `u`'s last reader is kept
    /// through the hot stages up to it, computed again, or brought back.
    /// Followed until no new `ρ` appears.
    fn link_inputs_of_inputs(
        &mut self,
        model: &mut Model,
        stage_rows: &mut [Vec<(Col, f64)>],
        hot: &HotStages,
    ) {
        let mut done = std::collections::HashSet::new();
        loop {
            let mut todo: Vec<usize> = self
                .again
                .keys()
                .copied()
                .filter(|u| !done.contains(u))
                .collect();
            if todo.is_empty() {
                return;
            }
            todo.sort_unstable();
            for u in todo {
                done.insert(u);
                let rho = self.again[&u];
                for &w in self.g.deps(crate::graph::NodeId::from(u)) {
                    let w = w.idx();
                    if self.g.memory(crate::graph::NodeId::from(w)).get() == 0 {
                        continue;
                    }
                    for &t in hot.within(self.last[w] + 1, self.last[u]) {
                        let demand = self.demand(model, stage_rows, w, t);
                        model.add_row(0.0, f64::INFINITY, &[(demand, 1.0), (rho, -1.0)]);
                    }
                }
            }
        }
    }

    /// The `ρ` and `φ` columns, by what they stand for.
    fn logged(&self) -> Vec<(Col, Event)> {
        let mut out: Vec<(Col, Event)> = self
            .again
            .iter()
            .map(|(&u, &c)| (c, Event::Again { value: u.into() }))
            .chain(
                self.fetched
                    .iter()
                    .map(|(&u, &c)| (c, Event::Fetched { value: u.into() })),
            )
            .collect();
        out.sort_by_key(|&(c, _)| c);
        out
    }

    /// What `ρ` and `φ` load over the whole step: the compute stream, the
    /// engine toward the slow tier, and (without direct reads, where the
    /// input can only come back by a copy in) the engine toward fast memory.
    fn loads(&self, dev: &Device, time: &dyn Fn(Seconds) -> f64) -> [Vec<(Col, f64)>; 3] {
        let id = crate::graph::NodeId::from;
        let again = self
            .again
            .iter()
            .map(|(&u, &c)| (c, time(dev.compute_time(self.g.cost(id(u))))))
            .collect();
        let copies = |to_slow: bool| -> Vec<(Col, f64)> {
            self.fetched
                .iter()
                .map(|(&u, &c)| (c, time(dev.copy_time(self.g.memory(id(u)), to_slow))))
                .collect()
        };
        let back = if dev.slow.direct_read.is_none() {
            copies(false)
        } else {
            Vec::new()
        };
        [again, copies(true), back]
    }

    /// The staged program's rows over the whole step for `ρ` and `φ`:
    /// `lanes` are its per-stage compute, out and in loads, `base` every
    /// node once.
    fn charge(
        &self,
        model: &mut Model,
        step: Col,
        dev: &Device,
        time: &dyn Fn(Seconds) -> f64,
        base: f64,
        [compute, outs, ins]: [&[Vec<(Col, f64)>]; 3],
    ) {
        if self.again.is_empty() {
            return;
        }
        let [again, fetch_out, fetch_in] = self.loads(dev, time);
        let all = |lanes: &[&[Vec<(Col, f64)>]]| -> Vec<(Col, f64)> {
            lanes
                .iter()
                .flat_map(|l| l.iter().flatten().copied())
                .collect()
        };
        let mut lane =
            |constant: f64, parts: &[&[(Col, f64)]]| lane_row(model, step, constant, parts);
        let (compute, outs, ins) = (all(&[compute]), all(&[outs]), all(&[ins]));
        match dev.slow.engines {
            Engines::Duplex => {
                lane(base, &[&compute, &again]);
                lane(0.0, &[&outs, &fetch_out]);
                lane(0.0, &[&ins, &fetch_in]);
            }
            Engines::Shared => {
                lane(base, &[&compute, &again]);
                lane(0.0, &[&outs, &ins, &fetch_out, &fetch_in]);
            }
            Engines::Synchronous => lane(
                base,
                &[&compute, &outs, &ins, &again, &fetch_out, &fetch_in],
            ),
        }
    }
}

/// `time ≥ constant + Σ loads`. A column may load two parts (a fetch of a
/// dead input loads both directions of a shared engine, and every lane of
/// a synchronous device): its weights add up, since a row may hold a
/// column only once.
fn lane_row(model: &mut Model, time: Col, constant: f64, parts: &[&[(Col, f64)]]) {
    let mut load: std::collections::BTreeMap<Col, f64> = Default::default();
    for &(c, w) in parts.iter().copied().flatten() {
        *load.entry(c).or_default() += w;
    }
    let mut row = vec![(time, 1.0)];
    row.extend(load.into_iter().map(|(c, w)| (c, -w)));
    model.add_row(constant, f64::INFINITY, &row);
}

/// A row's terms with each column once (a row may hold a column only
/// once; a direct read is both a load and a deadline), weights added.
fn merged(row: &[(Col, f64)]) -> Vec<(Col, f64)> {
    let mut m: std::collections::BTreeMap<Col, f64> = Default::default();
    for &(c, w) in row {
        *m.entry(c).or_default() += w;
    }
    m.into_iter().collect()
}

/// Per stage, weighted columns (a lane's loads, or its deadlines).
type Stagewise = Vec<(Col, f64)>;

/// Per stage, the copies due there: column, time, and the first stage the
/// copy can be issued in.
type Issued = Vec<(Col, f64, usize)>;

/// The distinct first stages of the copies due at one stage, in order.
fn issue_stages(due: &[(Col, f64, usize)]) -> impl Iterator<Item = usize> {
    due.iter()
        .map(|e| e.2)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
}

/// An engine lane: its loads, the deadlines of its copies out and of its
/// copies in, and whether the frontier's copy out runs on it.
type Lane<'a> = (
    &'a [Stagewise],
    &'a [Stagewise],
    &'a [Stagewise],
    bool,
    &'a [Issued],
);

/// The lane rows of the staged program when copies may span stages (see
/// [`staged`]): one carry column per engine lane and stage.
#[allow(clippy::too_many_arguments)]
fn carried_lanes(
    model: &mut Model,
    tau: &[Col],
    step: Col,
    base: &dyn Fn(usize) -> f64,
    compute_lane: &[Vec<(Col, f64)>],
    frontier: &[Option<(Col, f64)>],
    [out_lane, in_lane]: [&[Vec<(Col, f64)>]; 2],
    [out_due, in_due]: [&[Vec<(Col, f64)>]; 2],
    [out_since, in_since]: [&[Issued]; 2],
    direct_lane: &[Vec<(Col, f64)>],
    engines: Engines,
) {
    let n = tau.len();
    // Lanes as (per-stage loads, deadlines of copies out, deadlines of
    // copies in, whether the frontier's copy out is on it).
    let merge = |a: &[Vec<(Col, f64)>], b: &[Vec<(Col, f64)>]| -> Vec<Vec<(Col, f64)>> {
        (0..n)
            .map(|t| a[t].iter().chain(&b[t]).copied().collect())
            .collect()
    };
    let shared;
    let none: Vec<Stagewise> = vec![Vec::new(); n];
    let both: Vec<Issued>;
    let lanes: Vec<Lane> = match engines {
        Engines::Shared => {
            shared = merge(out_lane, in_lane);
            both = (0..n)
                .map(|t| out_since[t].iter().chain(&in_since[t]).copied().collect())
                .collect();
            vec![(&shared, out_due, in_due, true, &both)]
        }
        _ => vec![
            (out_lane, out_due, &none, true, out_since),
            (in_lane, &none, in_due, false, in_since),
        ],
    };
    // x_t: the part of the frontier's copy out done within its own stage.
    let x: Vec<Option<Col>> = frontier
        .iter()
        .map(|f| f.map(|_| model.add_col(0.0, f64::INFINITY, 0.0, false)))
        .collect();
    for t in 0..n {
        let mut row = vec![(tau[t], 1.0)];
        row.extend(compute_lane[t].iter().map(|&(c, w)| (c, -w)));
        if let Some(xt) = x[t] {
            row.push((xt, -1.0));
        }
        model.add_row(base(t), f64::INFINITY, &row);
    }
    for (loads, out_due, in_due, has_frontier, issued) in lanes {
        let mut prev: Option<Col> = None;
        // q_t: the work the engine has done by the end of stage t, which
        // must cover every copy due by then (FIFO or not).
        let mut done_before: Option<Col> = None;
        // The work of every copy in due by stage t: each is due once (at
        // its segment's read), so they add up over the stages, in a running
        // column that keeps each deadline row short. A copy out is due at
        // every stage where its value counts absent, so only the copies due
        // at stage t itself can be summed.
        let mut fetched_by: Option<Col> = None;
        let mut done_by: Vec<Col> = Vec::with_capacity(n);
        // Σ_{t' ≤ t} τ_{t'}, for the windows' durations.
        let mut elapsed: Vec<Col> = Vec::with_capacity(n);
        for t in 0..n {
            let c = model.add_col(0.0, f64::INFINITY, 0.0, false);
            let q = model.add_col(0.0, f64::INFINITY, 0.0, false);
            done_by.push(q);
            if has_frontier {
                let e = model.add_col(0.0, f64::INFINITY, 0.0, false);
                let mut row = vec![(e, 1.0), (tau[t], -1.0)];
                if let Some(&p) = elapsed.last() {
                    row.push((p, -1.0));
                }
                model.add_row(0.0, 0.0, &row);
                elapsed.push(e);
            }
            // q_t = q_{t-1} + c_{t-1} + load_t − c_t.
            let mut qrow = vec![(q, 1.0), (c, 1.0)];
            if let Some(p) = prev {
                qrow.push((p, -1.0));
            }
            if let Some(d) = done_before {
                qrow.push((d, -1.0));
            }
            qrow.extend(loads[t].iter().map(|&(col, w)| (col, -w)));
            model.add_row(0.0, 0.0, &qrow);
            if !in_due[t].is_empty() {
                let total = model.add_col(0.0, f64::INFINITY, 0.0, false);
                let mut row = vec![(total, 1.0)];
                if let Some(f) = fetched_by {
                    row.push((f, -1.0));
                }
                row.extend(in_due[t].iter().map(|&(col, w)| (col, -w)));
                model.add_row(0.0, 0.0, &row);
                fetched_by = Some(total);
            }
            if !out_due[t].is_empty() || !in_due[t].is_empty() {
                // Copies due at stage t must be done before node t is
                // computed: by the end of stage t−1 plus y_t, the work done
                // in stage t before its frontier, which is at most the time
                // before it (recomputations come first, the frontier last,
                // its own copy out after it).
                let y = model.add_col(0.0, f64::INFINITY, 0.0, false);
                let mut before = vec![(tau[t], 1.0), (y, -1.0)];
                before.extend(compute_lane[t].iter().map(|&(col, w)| (col, -w)));
                model.add_row(base(t), f64::INFINITY, &before);
                let mut within = vec![(q, 1.0), (y, -1.0)];
                if let Some(d) = done_before {
                    within.push((d, -1.0));
                }
                if let (true, Some(xt)) = (has_frontier, x[t]) {
                    within.push((xt, -1.0));
                }
                model.add_row(0.0, f64::INFINITY, &within);
                let mut row = vec![(y, 1.0)];
                if let Some(d) = done_before {
                    row.push((d, 1.0));
                }
                row.extend(out_due[t].iter().map(|&(col, w)| (col, -w)));
                if let Some(f) = fetched_by.filter(|_| !in_due[t].is_empty()) {
                    row.push((f, -1.0));
                }
                model.add_row(0.0, f64::INFINITY, &row);
                // The copies due here that cannot be issued before stage
                // s (a copy out before its value's own stage, a copy in
                // issued in this very stage): the work done from stage s
                // on, before node t, covers them (the row above is s = 0),
                // since work done earlier went to other copies. This is
                // what makes a value computed just before its direct read
                // wait for its copy, and a reader whose input is fetched in
                // its own stage wait for it, however busy the engine was
                // earlier.
                for s in issue_stages(&issued[t]).filter(|&s| s > 0) {
                    let mut row = vec![(y, 1.0), (done_by[s - 1], -1.0)];
                    if let Some(d) = done_before {
                        row.push((d, 1.0));
                    }
                    row.extend(
                        issued[t]
                            .iter()
                            .filter(|e| e.2 >= s)
                            .map(|&(col, w, _)| (col, -w)),
                    );
                    model.add_row(0.0, f64::INFINITY, &merged(&row));
                }
                if has_frontier {
                    for s in issue_stages(&out_since[t]) {
                        let due: Vec<(Col, f64)> = out_since[t]
                            .iter()
                            .filter(|e| e.2 >= s)
                            .map(|&(col, w, _)| (col, -w))
                            .collect();
                        // The copies out fit in the time from node s's end
                        // to node t's start, whatever else the engine did:
                        // stage s's compute lane (its recomputations, node
                        // s and its direct reads) runs before, and node t's
                        // direct reads and its own copy's part after.
                        let mut row = vec![(elapsed[t], 1.0)];
                        if s > 0 {
                            row.push((elapsed[s - 1], -1.0));
                        }
                        row.extend(compute_lane[s].iter().map(|&(c, w)| (c, -w)));
                        row.extend(direct_lane[t].iter().map(|&(c, w)| (c, -w)));
                        if let Some(xt) = x[t] {
                            row.push((xt, -1.0));
                        }
                        row.extend(&due);
                        model.add_row(base(t) + base(s), f64::INFINITY, &merged(&row));
                    }
                }
            }
            done_before = Some(q);
            // τ_t ≥ c_{t-1} + load_t − c_t (the load holds the frontier's
            // copy out, issued in its stage).
            let mut row = vec![(tau[t], 1.0), (c, 1.0)];
            if let Some(p) = prev {
                row.push((p, -1.0));
            }
            row.extend(loads[t].iter().map(|&(col, w)| (col, -w)));
            if let (true, Some((o, w)), Some(xt)) = (has_frontier, frontier[t], x[t]) {
                // c_t ≥ the frontier's copy less what ran in stage t.
                model.add_row(0.0, f64::INFINITY, &[(c, 1.0), (xt, 1.0), (o, -w)]);
            }
            model.add_row(0.0, f64::INFINITY, &row);
            prev = Some(c);
        }
        // The step outlasts the compute stream by the engine's leftover.
        let mut row = vec![(step, 1.0)];
        row.extend(tau.iter().map(|&c| (c, -1.0)));
        row.push((prev.expect("a stage"), -1.0));
        model.add_row(0.0, f64::INFINITY, &row);
    }
}

/// The most columns (about) for which the staged program is built; past it
/// the whole-step program stands in. GPT-2's 295 nodes at 50% give 66,000
/// columns, whose root relaxation HiGHS solves in seconds.
pub const STAGED_MAX_COLUMNS: usize = 400_000;

/// The solver's feasibility tolerance for this program: its rows are of
/// order one (see [`Model::add_covering_row`]), and at the tighter default of the
/// Checkmate models HiGHS returned a wrong optimum on one of them.
pub const FEASIBILITY_TOLERANCE: f64 = 1e-6;

/// The most stage-row entries of the whole-step program; past it no
/// program is built and the caller keeps its closed-form bound.
pub const WHOLE_STEP_MAX_NONZEROS: usize = 5_000_000;

/// How big each program would be, counted without building: (about the
/// staged program's columns: a copy-out column per stage of each value's
/// window and a copy-in column per stage of each segment that some hot
/// stage crosses; the whole-step program's stage-row entries).
pub fn sizes(g: &Graph, budget: Bytes) -> (usize, usize) {
    let needs = stage_needs(g, budget);
    let mut hot_before = vec![0usize; g.len() + 1];
    for (t, &x) in needs.iter().enumerate() {
        hot_before[t + 1] = hot_before[t] + usize::from(x > 0.0);
    }
    let crossing = segments(g)
        .into_iter()
        .map(|s| (s, hot_before[s.last + 1] - hot_before[s.first]))
        .filter(|&(_, hot)| hot > 0);
    crossing.fold((0, 0), |(cols, nz), (s, hot)| {
        (
            cols + 2 * (s.last + 2 - s.first) + (s.first - s.value.idx()),
            nz + 3 * hot,
        )
    })
}

/// Builds and solves the program on HiGHS within `params`: the whole-step
/// form, then the staged one with what is left, keeping the higher bound;
/// `None` when both would be too big to build. Both hold for every plan.
/// The staged form is tighter where copies crowd the stages, but it grows
/// with the segments' lengths and may not close its root in a short limit;
/// the whole-step form has a column per segment and event, and proves its
/// optimum in seconds: on GPT-2 at 50% on the A100 it gives 116.69 ms in
/// 3 s, where the staged form is still at the all-fast 116.17 ms after 9 s.
/// Without the staged form it has the whole limit.
pub fn step_cover_bound(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    copies: Copies,
    params: &Params,
) -> Result<Option<StepCover>, SolverError> {
    step_cover_bounds(
        g,
        budget,
        dev,
        no_recompute,
        copies,
        params,
        params.time_limit.mul_f64(WHOLE_STEP_TIME_SHARE),
        &mut |_| {},
    )
}

/// [`step_cover_bound`] with the whole-step form's time given (when the
/// staged form follows), and each form's bound handed to `found` as soon
/// as it is known: a caller that gives the staged form a long limit on
/// another thread plans with the whole-step bound meanwhile.
#[allow(clippy::too_many_arguments)]
pub fn step_cover_bounds(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    no_recompute: bool,
    copies: Copies,
    params: &Params,
    whole_step_time: std::time::Duration,
    found: &mut dyn FnMut(&StepCover),
) -> Result<Option<StepCover>, SolverError> {
    let (staged_cols, whole) = sizes(g, budget);
    let (staged_fits, whole_fits) = (
        staged_cols <= STAGED_MAX_COLUMNS,
        whole <= WHOLE_STEP_MAX_NONZEROS,
    );
    if !staged_fits && !whole_fits {
        return Ok(None);
    }
    let all_fast = StepCover {
        bound: dev.all_fast_step(g),
        proven: true,
        seconds: 0.0,
        columns: 0,
    };
    // "Infeasible" is HiGHS's verdict within its tolerances. Below the floor
    // no plan exists and it is right; above it, with copies 10^9 times
    // slower than compute (a 10 B/s link), it called programs infeasible
    // where AutoTM had a plan, and the infinite bound passed for a proof
    // that remat-tiered's first plan was optimal. There it gives no bound.
    let floor = crate::solve::budget_floor(g, Some(dev));
    let start = std::time::Instant::now();
    let trusted = |b: StepCover| {
        let b = if b.bound.get().is_infinite() && budget >= floor {
            StepCover {
                proven: false,
                ..all_fast.clone()
            }
        } else {
            b
        };
        StepCover {
            seconds: start.elapsed().as_secs_f64(),
            ..b
        }
    };
    let mut best: Option<StepCover> = None;
    if whole_fits {
        let share = if staged_fits {
            whole_step_time.min(params.time_limit)
        } else {
            params.time_limit
        };
        best = Some(match Program::whole_step(g, budget, dev, no_recompute) {
            // Its LP relaxation came within 0.03% of the integer optimum
            // wherever measured (ResNet-50 and GPT-2 at 30–50%), in a third
            // to a fifth of the time HiGHS's MIP takes to reach it
            // (ResNet-50 at 50% on the A100: 5 s against 13 s). So the LP
            // may take the whole limit, and the MIP what is left of the
            // share.
            Some(prog) => solve_lp_first(g, dev, &prog, params, share)?,
            None => all_fast.clone(),
        });
        if let Some(b) = &best {
            found(&trusted(b.clone()));
        }
    }
    if staged_fits && !super::stop_requested(&params.stop) {
        let p = Params {
            time_limit: params.time_limit.saturating_sub(start.elapsed()),
            ..params.clone()
        };
        let whole = best.as_ref().map_or(Seconds::ZERO, |b| b.bound);
        let mut round = |c: &StepCover| {
            if c.bound >= whole {
                found(&trusted(c.clone()));
            }
        };
        let staged = match staged(g, budget, dev, no_recompute, copies) {
            Some(prog) => solve(g, dev, &prog, &p, &mut round)?,
            None => all_fast.clone(),
        };
        if best.as_ref().is_none_or(|b| staged.bound >= b.bound) {
            found(&trusted(staged.clone()));
            best = Some(staged);
        }
    }
    Ok(best.map(trusted))
}

/// The whole-step form's share of the time when the staged form follows.
const WHOLE_STEP_TIME_SHARE: f64 = 1.0 / 3.0;

/// [`solve`], after the LP relaxation (within `params`), until `share`
/// from the start: the higher of the two bounds.
fn solve_lp_first(
    g: &Graph,
    dev: &Device,
    prog: &Program,
    params: &Params,
    share: std::time::Duration,
) -> Result<StepCover, SolverError> {
    let start = std::time::Instant::now();
    let mut lp = super::highs::LpSession::new(
        &prog.model.relaxed(),
        params,
        super::highs::LpMethod::Choose,
    )?;
    let r = lp.solve()?;
    let relaxed = match r.status {
        super::LpStatus::Optimal => r.objective,
        super::LpStatus::Infeasible => f64::INFINITY,
        super::LpStatus::Stopped => 0.0,
    };
    let floor = dev.all_fast_step(g).get();
    let lp_cover = StepCover {
        bound: Seconds((relaxed * prog.scale).max(floor)),
        proven: relaxed.is_infinite(),
        seconds: r.seconds,
        columns: prog.model.num_cols(),
    };
    let rest = share.saturating_sub(start.elapsed());
    if lp_cover.proven || rest.is_zero() || super::stop_requested(&params.stop) {
        return Ok(lp_cover);
    }
    let p = Params {
        time_limit: rest,
        ..params.clone()
    };
    let mip = solve(g, dev, prog, &p, &mut |_| {})?;
    Ok(if mip.bound >= lp_cover.bound {
        mip
    } else {
        lp_cover
    })
}

/// Tolerance on a lazy row's activity (its terms are of order one).
const LAZY_TOLERANCE: f64 = 1e-6;

/// One program's dual bound, never below the all-fast step. The program's
/// lazy rows join only as its solutions break them, in rounds: each
/// round's model is a relaxation of the whole, so each round's bound holds,
/// and the answer is the highest. It is proven when a round is solved to
/// optimality and its solution breaks no lazy row. Each round that a
/// further one follows hands its bound to `round` as soon as it is known.
fn solve(
    g: &Graph,
    dev: &Device,
    prog: &Program,
    params: &Params,
    round: &mut dyn FnMut(&StepCover),
) -> Result<StepCover, SolverError> {
    let start = std::time::Instant::now();
    let floor = dev.all_fast_step(g).get();
    let (support, support_cols) = &prog.lazy_support;
    let mut rows: Vec<usize> = (0..prog.model.num_rows())
        .filter(|r| !support.contains(r))
        .collect();
    let mut joined = false;
    let mut waiting = prog.lazy.clone();
    let mut best = StepCover {
        bound: Seconds(floor),
        proven: false,
        seconds: 0.0,
        columns: prog.model.num_cols(),
    };
    loop {
        let p = Params {
            time_limit: params.time_limit.saturating_sub(start.elapsed()),
            ..params.clone()
        };
        let mut selected;
        let model = if rows.len() == prog.model.num_rows() {
            &prog.model
        } else {
            selected = prog.model.select_rows(rows.iter().copied());
            if !joined {
                for c in support_cols.clone() {
                    selected.col_upper[c] = selected.col_lower[c];
                }
            }
            &selected
        };
        let r = solve_mip(model, Backend::Highs, &p, None)?;
        let (value, proven) = match r.status {
            // The dual bound only: an incumbent's objective is no bound.
            MipStatus::Optimal => (r.bound.unwrap_or(0.0), r.bound.is_some()),
            MipStatus::Infeasible => (f64::INFINITY, true),
            MipStatus::Feasible | MipStatus::NoSolution => (r.bound.unwrap_or(0.0), false),
        };
        let bound = Seconds((value * prog.scale).max(floor));
        let broken: Vec<usize> = match (&r.x, proven && value.is_finite()) {
            (Some(x), true) => waiting
                .iter()
                .copied()
                .filter(|&row| {
                    prog.model.row_activity(row, x) < prog.model.row_lower[row] - LAZY_TOLERANCE
                })
                .collect(),
            _ => Vec::new(),
        };
        if bound >= best.bound {
            best.bound = bound;
        }
        best.proven = proven && broken.is_empty();
        best.seconds = start.elapsed().as_secs_f64();
        if broken.is_empty()
            || !proven
            || super::stop_requested(&params.stop)
            || start.elapsed() >= params.time_limit
        {
            return Ok(best);
        }
        round(&best);
        waiting.retain(|row| !broken.contains(row));
        if !joined {
            let lazy: std::collections::HashSet<usize> = prog.lazy.iter().copied().collect();
            rows.extend(support.clone().filter(|r| !lazy.contains(r)));
            joined = true;
        }
        rows.extend(broken);
    }
}
