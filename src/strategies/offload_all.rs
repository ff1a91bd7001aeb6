//! `offload-all`: vDNN's `vDNN_all` policy, which MC-DLA's memory manager
//! also runs: every activation leaves fast memory after its last forward
//! read and comes back for the backward pass, whatever the budget; the
//! budget only decides how early each one may come back. `mc-dla` (in
//! [`super::mc_dla`]) is the same policy with cheap layers recomputed
//! instead, and shares this builder.
//!
//! Where the papers leave a detail open (docs/tiers.md, "offload-all"):
//! - *Activation*: a forward node's output that a gradient node reads, with
//!   at least one stage between its last forward read `f` and its first
//!   backward read `b` (otherwise a copy out and back has nowhere to run).
//!   Gradients and values only the forward pass reads stay as they are.
//! - *Offload*: the copy out runs during stage `f`, beside the last forward
//!   read (the schedule's copies run within a stage); the fast copy is
//!   freed at the end of `f`, where checkpoint-all would keep it.
//! - *Prefetch*: one copy in per activation, in a stage `p` with
//!   `f < p < b`, and no earlier than the first gradient stage unless `b`
//!   comes before it ("prefetch during backward"). Activations are placed
//!   in the order the backward pass needs them. The earliest stage the
//!   budget allows (the value then occupies its buffer from `p` to `b`) is
//!   taken if the copy engine can still hide the copy behind that stage's
//!   computation; otherwise the next such stage; if none can hide it, the
//!   budget-feasible stage it overruns least. Because a copy completes
//!   within its stage, piling every prefetch into the first stage memory
//!   allows would stall the step for their sum: the spread is how "as early
//!   as memory allows" reads with one copy engine per direction.

use super::tiered::{self, in_engine_room, Reads};
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::device::Device;
use crate::graph::{Graph, NodeId};
use crate::schedule::{generate_plan, Schedule};
use crate::units::Bytes;

pub struct OffloadAll;

impl Strategy for OffloadAll {
    fn name(&self) -> &'static str {
        "offload-all"
    }

    fn describe(&self) -> &'static str {
        "vDNN/MC-DLA: offload every activation after its last forward read, prefetch it as early as the budget allows (needs --device)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        offload_policy(g, budget, dev, self.name(), &opts.stop, |_| false)
    }
}

/// What a policy does with one value over the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Resident from its computation to its last read.
    Keep,
    /// Resident through stage `out` (which copies it out), then only in the
    /// slow tier until a copy in, resident again from stage `need`.
    Offload { out: usize, need: usize },
    /// Resident through stage `until`, then gone; recomputed in stage `at`
    /// and kept from there to its last read.
    Recompute { until: usize, at: usize },
}

/// Each value's fate and last read, given which activations are cheap
/// enough to recompute. A recomputation in stage `r` reads its inputs
/// there, which can bring an offloaded input's return forward, or make a
/// cheap input recompute there too: iterated until nothing moves.
pub(crate) fn fates(
    g: &Graph,
    rd: &[Reads],
    cheap: &dyn Fn(usize) -> bool,
) -> (Vec<Fate>, Vec<Option<usize>>) {
    let n = g.len();
    // The reads recomputations add to each value: only the first and the
    // last of them count.
    let mut extra: Vec<Option<(usize, usize)>> = vec![None; n];
    let mut fate = vec![Fate::Keep; n];
    // Rounds as before (every fate from the reads known, then the reads
    // the recomputations add), but each round re-decides only the values
    // that gained a read: on a chain the reads move back one layer per
    // round, and re-deciding every value each round was quadratic.
    let mut dirty: Vec<usize> = (0..n).collect();
    let mut queued = vec![false; n];
    while !dirty.is_empty() {
        let mut moved = Vec::new();
        for &i in &dirty {
            let b = rd[i]
                .first_backward
                .into_iter()
                .chain(extra[i].map(|e| e.0))
                .min();
            let f = rd[i].last_forward;
            let eligible = !g.node(NodeId::from(i)).backward && b.is_some_and(|b| b >= f + 2);
            let new = match b {
                Some(b) if eligible && cheap(i) => Fate::Recompute { until: f, at: b },
                Some(b) if eligible => Fate::Offload { out: f, need: b },
                _ => Fate::Keep,
            };
            if new != fate[i] {
                fate[i] = new;
                moved.push(i);
            }
        }
        let mut next = Vec::new();
        for c in moved {
            if let Fate::Recompute { at, .. } = fate[c] {
                for &d in g.deps(NodeId::from(c)) {
                    let d = d.idx();
                    let e = extra[d].map_or((at, at), |(lo, hi)| (lo.min(at), hi.max(at)));
                    if extra[d] != Some(e) {
                        extra[d] = Some(e);
                        if !queued[d] {
                            queued[d] = true;
                            next.push(d);
                        }
                    }
                }
            }
        }
        for &d in &next {
            queued[d] = false;
        }
        dirty = next;
    }
    let last = (0..n)
        .map(|i| rd[i].last().into_iter().chain(extra[i].map(|e| e.1)).max())
        .collect();
    (fate, last)
}

/// The schedule of these fates, each offloaded value copied back in stage
/// `fetch[i]`; `None` if `stop` is set while it is built.
pub(crate) fn build(
    g: &Graph,
    fate: &[Fate],
    last: &[Option<usize>],
    fetch: &[usize],
    stop: &Option<crate::solver::StopFlag>,
) -> Option<Schedule> {
    let mut sch = Schedule::identity(g.len());
    for i in 0..g.len() {
        if i % 256 == 0 && crate::solver::stop_requested(stop) {
            return None;
        }
        let Some(last) = last[i] else { continue };
        let keep = |sch: &mut Schedule, from: usize, to: usize| {
            sch.set_s_range(i, from..=to, true);
        };
        match fate[i] {
            Fate::Keep => keep(&mut sch, i + 1, last),
            Fate::Offload { out, .. } => {
                keep(&mut sch, i + 1, out);
                sch.offload(i, out, fetch[i]);
                keep(&mut sch, fetch[i] + 1, last);
            }
            Fate::Recompute { until, at } => {
                keep(&mut sch, i + 1, until);
                sch.set_r(at, i, true);
                keep(&mut sch, at + 1, last);
            }
        }
    }
    Some(sch)
}

/// offload-all and mc-dla: the fates, then each prefetch placed (see the
/// module doc), then the simulator's verdict.
pub(crate) fn offload_policy(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    name: &'static str,
    stop: &Option<crate::solver::StopFlag>,
    cheap: impl Fn(usize) -> bool,
) -> Result<Solution, StrategyError> {
    // Told to stop (abandoned at its time limit as a seed): the fates and
    // the schedule builds are linear to quadratic in the graph, so it checks
    // after the fates and within the builds.
    let stopped = || StrategyError::Other(format!("{name} stopped at its time limit"));
    let n = g.len();
    let rd = tiered::reads(g);
    let (fate, last) = fates(g, &rd, &cheap);
    if crate::solver::stop_requested(stop) {
        return Err(stopped());
    }
    // Latest return first: the least memory this set of fates can run in.
    let mut fetch: Vec<usize> = fate
        .iter()
        .map(|f| match f {
            Fate::Offload { need, .. } => need - 1,
            _ => 0,
        })
        .collect();
    let base = build(g, &fate, &last, &fetch, stop).ok_or_else(stopped)?;
    let plan = generate_plan(g, &base)
        .map_err(|e| StrategyError::Other(format!("{name} built an invalid schedule: {e}")))?;
    let mut peaks = tiered::stage_peaks(g, &plan);
    let offloaded: Vec<usize> = (0..n)
        .filter(|&i| matches!(fate[i], Fate::Offload { .. }))
        .collect();
    let recomputed = fate
        .iter()
        .filter(|f| matches!(f, Fate::Recompute { .. }))
        .count();
    let what = format!(
        "{} activations offloaded, {recomputed} recomputed",
        offloaded.len()
    );
    if peaks.iter().any(|&p| p > budget) {
        // No placement fits: the simulator says by how much, on the plan
        // that needs the least memory.
        let detail = format!("{what}, every prefetch as late as possible");
        return tiered::finish(g, budget, dev, base, name, detail);
    }
    let compute = tiered::stage_compute(g, &base, dev);
    let (mut load_in, mut load_out) = (vec![0.0; n], vec![0.0; n]);
    for &i in &offloaded {
        if let Fate::Offload { out, .. } = fate[i] {
            load_out[out] += tiered::copy_secs(g, dev, i, true);
        }
    }
    let first_grad = g.ids().position(|i| g.node(i).backward).unwrap_or(n);
    let mut order = offloaded.clone();
    order.sort_by_key(|&i| match fate[i] {
        Fate::Offload { need, .. } => (need, std::cmp::Reverse(i)),
        _ => unreachable!("only offloaded values"),
    });
    for i in order {
        let Fate::Offload { out, need } = fate[i] else {
            unreachable!()
        };
        let mem = g.memory(NodeId::from(i));
        let dur = tiered::copy_secs(g, dev, i, false);
        let lo = (out + 1).max(first_grad.min(need - 1));
        // Earliest stage from which the value fits every stage up to `need`.
        let mut p_min = need - 1;
        while p_min > lo && peaks[p_min - 1] + mem <= budget {
            p_min -= 1;
        }
        let room = |p: usize| in_engine_room(dev, compute[p], load_in[p], load_out[p]);
        let p = (p_min..need).find(|&p| room(p) >= dur).unwrap_or_else(|| {
            (p_min..need)
                .min_by(|&a, &b| (dur - room(a)).total_cmp(&(dur - room(b))))
                .expect("need - 1 is always a candidate")
        });
        for peak in &mut peaks[p..need - 1] {
            *peak += mem;
        }
        load_in[p] += dur;
        fetch[i] = p;
    }
    let sch = build(g, &fate, &last, &fetch, stop).ok_or_else(stopped)?;
    tiered::finish(g, budget, dev, sch, name, what)
}
