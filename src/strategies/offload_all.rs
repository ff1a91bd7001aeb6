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
        // Every activation goes to the slow tier, so one of no bytes leaves
        // the policy nothing to do: its plan could only overflow it, which
        // read as "found no plan that fits" a budget checkpoint-all meets.
        if dev.slow.capacity == Bytes::ZERO {
            return Err(StrategyError::NotApplicable {
                strategy: self.name(),
                reason: format!(
                    "it moves every activation to the slow tier, and device '{}' has one of 0 bytes",
                    dev.name
                ),
            });
        }
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
/// cheap input recompute there too.
///
/// Why one pass, from the last value to the first: a value's fate depends
/// only on its own reads and on where its readers are recomputed, and every
/// reader comes after it in the order. Rounds that re-decided the values
/// whose reads moved reached the same fixed point, but on a chain of cheap
/// layers the recomputation's stage moves back one layer per round, which
/// was quadratic (22 s of mc-dla's 32 s on a 200,007-node chain).
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
    for i in (0..n).rev() {
        let b = rd[i]
            .first_backward
            .into_iter()
            .chain(extra[i].map(|e| e.0))
            .min();
        let f = rd[i].last_forward;
        let eligible = !g.node(NodeId::from(i)).backward && b.is_some_and(|b| b >= f + 2);
        fate[i] = match b {
            Some(b) if eligible && cheap(i) => Fate::Recompute { until: f, at: b },
            Some(b) if eligible => Fate::Offload { out: f, need: b },
            _ => Fate::Keep,
        };
        if let Fate::Recompute { at, .. } = fate[i] {
            for &d in g.deps(NodeId::from(i)) {
                let d = d.idx();
                extra[d] = Some(extra[d].map_or((at, at), |(lo, hi)| (lo.min(at), hi.max(at))));
            }
        }
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
    let peaks = tiered::stage_peaks(g, &plan);
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
    // Each placement asks for the earliest stage from which the value fits
    // every stage up to its need, then the first stage there whose engine
    // can hide the copy; walking the stages for both was quadratic on long
    // chains (a 200,007-node chain's placement outran its share by
    // minutes). Range-maximum trees answer each in O(log n).
    let room = |p: usize, load_in: f64| in_engine_room(dev, compute[p], load_in, load_out[p]);
    let mut peak_tree = MaxTree::new(&peaks.iter().map(|p| p.as_f64()).collect::<Vec<_>>());
    let mut room_tree = MaxTree::new(&(0..n).map(|p| room(p, 0.0)).collect::<Vec<_>>());
    for (k, i) in order.into_iter().enumerate() {
        if k % 256 == 0 && crate::solver::stop_requested(stop) {
            return Err(stopped());
        }
        let Fate::Offload { out, need } = fate[i] else {
            unreachable!()
        };
        let mem = g.memory(NodeId::from(i));
        let dur = tiered::copy_secs(g, dev, i, false);
        let lo = (out + 1).max(first_grad.min(need - 1));
        // Earliest stage from which the value fits every stage up to `need`:
        // just after the last stage before `need - 1` it would overflow.
        let limit = budget.as_f64() - mem.as_f64();
        let p_min = if lo + 1 < need {
            peak_tree
                .rightmost_above(lo, need - 2, limit)
                .map_or(lo, |j| j + 1)
        } else {
            need - 1
        };
        let p = room_tree
            .leftmost_at_least(p_min, need - 1, dur)
            .unwrap_or_else(|| room_tree.argmax(p_min, need - 1));
        if p + 1 < need {
            peak_tree.add(p, need - 2, mem.as_f64());
        }
        let before = room(p, load_in[p]);
        load_in[p] += dur;
        room_tree.add(p, p, room(p, load_in[p]) - before);
        fetch[i] = p;
    }
    let sch = build(g, &fate, &last, &fetch, stop).ok_or_else(stopped)?;
    tiered::finish(g, budget, dev, sch, name, what)
}

/// Range-maximum tree with range add: the stage peaks and the engines'
/// room of [`offload_policy`]'s prefetch placement. Values are f64; byte
/// counts below 2^53 add exactly.
struct MaxTree {
    n: usize,
    max: Vec<f64>,
    lazy: Vec<f64>,
}

impl MaxTree {
    fn new(values: &[f64]) -> MaxTree {
        let n = values.len().max(1);
        let mut t = MaxTree {
            n,
            max: vec![f64::NEG_INFINITY; 4 * n],
            lazy: vec![0.0; 4 * n],
        };
        if !values.is_empty() {
            t.build(1, 0, n - 1, values);
        }
        t
    }

    fn build(&mut self, node: usize, l: usize, r: usize, v: &[f64]) {
        if l == r {
            self.max[node] = v[l];
            return;
        }
        let m = (l + r) / 2;
        self.build(2 * node, l, m, v);
        self.build(2 * node + 1, m + 1, r, v);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
    }

    fn push(&mut self, node: usize) {
        let z = std::mem::take(&mut self.lazy[node]);
        if z != 0.0 {
            for c in [2 * node, 2 * node + 1] {
                self.max[c] += z;
                self.lazy[c] += z;
            }
        }
    }

    /// Adds `x` to every value in `a..=b`.
    fn add(&mut self, a: usize, b: usize, x: f64) {
        self.add_in(1, 0, self.n - 1, a, b, x);
    }

    fn add_in(&mut self, node: usize, l: usize, r: usize, a: usize, b: usize, x: f64) {
        if b < l || r < a {
            return;
        }
        if a <= l && r <= b {
            self.max[node] += x;
            self.lazy[node] += x;
            return;
        }
        self.push(node);
        let m = (l + r) / 2;
        self.add_in(2 * node, l, m, a, b, x);
        self.add_in(2 * node + 1, m + 1, r, a, b, x);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// The last index in `a..=b` whose value exceeds `x`.
    fn rightmost_above(&mut self, a: usize, b: usize, x: f64) -> Option<usize> {
        self.find(1, 0, self.n - 1, a, b, &|m| m > x, true)
    }

    /// The first index in `a..=b` whose value is at least `x`.
    fn leftmost_at_least(&mut self, a: usize, b: usize, x: f64) -> Option<usize> {
        self.find(1, 0, self.n - 1, a, b, &|m| m >= x, false)
    }

    /// The first index of the largest value in `a..=b`.
    fn argmax(&mut self, a: usize, b: usize) -> usize {
        let best = self.max_in(1, 0, self.n - 1, a, b);
        self.find(1, 0, self.n - 1, a, b, &|m| m >= best, false)
            .unwrap_or(a)
    }

    fn max_in(&mut self, node: usize, l: usize, r: usize, a: usize, b: usize) -> f64 {
        if b < l || r < a {
            return f64::NEG_INFINITY;
        }
        if a <= l && r <= b {
            return self.max[node];
        }
        self.push(node);
        let m = (l + r) / 2;
        self.max_in(2 * node, l, m, a, b)
            .max(self.max_in(2 * node + 1, m + 1, r, a, b))
    }

    #[allow(clippy::too_many_arguments)]
    fn find(
        &mut self,
        node: usize,
        l: usize,
        r: usize,
        a: usize,
        b: usize,
        ok: &dyn Fn(f64) -> bool,
        from_right: bool,
    ) -> Option<usize> {
        if b < l || r < a || !ok(self.max[node]) {
            return None;
        }
        if l == r {
            return Some(l);
        }
        self.push(node);
        let m = (l + r) / 2;
        let (first, second) = if from_right {
            ((2 * node + 1, m + 1, r), (2 * node, l, m))
        } else {
            ((2 * node, l, m), (2 * node + 1, m + 1, r))
        };
        self.find(first.0, first.1, first.2, a, b, ok, from_right)
            .or_else(|| self.find(second.0, second.1, second.2, a, b, ok, from_right))
    }
}

#[cfg(test)]
mod tests {
    use super::MaxTree;
    use proptest::prelude::*;

    proptest! {
        /// The tree answers as the walks it replaced: over random values
        /// and range adds, each query equals a scan of a plain vector.
        #[test]
        fn the_max_tree_answers_as_a_scan(
            values in proptest::collection::vec(-50i32..50, 1..40),
            ops in proptest::collection::vec((0usize..40, 0usize..40, -20i32..20, -60i32..60), 1..40),
        ) {
            let mut plain: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
            let mut tree = MaxTree::new(&plain);
            let n = plain.len();
            for (a, b, add, x) in ops {
                let (a, b) = (a % n, b % n);
                let (a, b) = (a.min(b), a.max(b));
                let x = f64::from(x);
                prop_assert_eq!(
                    tree.rightmost_above(a, b, x),
                    (a..=b).rev().find(|&j| plain[j] > x)
                );
                prop_assert_eq!(
                    tree.leftmost_at_least(a, b, x),
                    (a..=b).find(|&j| plain[j] >= x)
                );
                let best = (a..=b).map(|j| plain[j]).fold(f64::NEG_INFINITY, f64::max);
                prop_assert_eq!(tree.argmax(a, b), (a..=b).find(|&j| plain[j] == best).unwrap());
                tree.add(a, b, f64::from(add));
                for v in &mut plain[a..=b] {
                    *v += f64::from(add);
                }
            }
        }
    }
}
