//! Griewank & Walther's revolve (ACM TOMS 2000, Algorithm 799): optimal
//! binomial checkpointing of a chain for a given number of snapshots,
//! computed here from the recurrence (no precomputed tables), and applied to
//! a training graph over the chain of its articulation-point segments.
//!
//! # The chain model
//! States y_0 … y_l, step i computes y_i from y_{i-1}. Reversing step i
//! needs y_{i-1}; revolve holds at most `snaps` states in snapshot slots,
//! y_0 being one of them. With β(s, r) = C(s+r, s), the least number of
//! forward steps (advances, the first sweep included; the taped step of each
//! reversal not counted) to reverse l steps is
//!
//! t(l, s) = r·l − β(s+1, r−1)   where β(s, r−1) < l ≤ β(s, r),
//!
//! and it satisfies t(l, s) = min over 0<i<l of i + t(l−i, s−1) + t(i, s),
//! with t(1, s) = 0 and t(l, 1) = l(l−1)/2.
//!
//! # On a training graph
//! Articulation points a_1 < … < a_L of the forward graph are the states
//! (y_m = a_m); y_0 is the graph's input and costs nothing to hold, so the
//! knob, the number of snapshots, counts real values only and revolve runs
//! with one more slot. Step m computes the forward nodes of segment m (after
//! a_{m-1}, up to a_m; a trailing segment after a_L is one more step). A
//! backward node reverses the earliest step whose input it reads (an AP
//! a_m is the input of step m+1, any other forward node the input of its
//! own step); as the backward pass runs, the reversed step is the running
//! minimum of that. Revolve's actions then map onto stages:
//! - a snapshot y_m taken in the first sweep is held from the stage after
//!   a_m; one taken while restoring for the reversal of step k is held from
//!   the stage after the first stage reversing step k; each is held through
//!   the stage of its last restore;
//! - the tape of step k (its forward values and its input) is available to
//!   the stages reversing step k: for the last step it survives from the
//!   forward pass, for the others it is recomputed at the first stage of
//!   the reversal;
//! - backward values live from creation to last use, forward values while
//!   the forward pass reads them;
//! - R is the minimal recomputation for that S ([`solve_r`]): restoring a
//!   snapshot and advancing from it is exactly recomputing the nodes between.
//!
//! On a chain such as `zoo::synthetic::linear(n)` this reproduces revolve's
//! forward-step count exactly: the schedule computes the l = n+1 forward
//! steps once and recomputes t(l, s+1) − (l−1) more.

use super::candidates::{articulation_points, has_backward};
use super::knobs::{solve_by_points, KnobPoint, Points, TradeOff};
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::analysis::last_use;
use crate::graph::{Graph, NodeId};
use crate::schedule::{solve_r, Schedule};
use crate::units::Bytes;
use std::collections::HashMap;

/// β(s, r) = C(s+r, s), the most steps s snapshots can reverse with each
/// step advanced at most r times. Saturates far above any chain length.
pub fn beta(s: u64, r: u64) -> u128 {
    const CAP: u128 = 1 << 100;
    let mut v: u128 = 1;
    for j in 1..=r as u128 {
        // C(s+j, j) = C(s+j-1, j-1) * (s+j) / j, exact at each step.
        v = v * (s as u128 + j) / j;
        if v >= CAP {
            return CAP;
        }
    }
    v
}

/// Revolve's least number of forward steps to reverse `l` steps with
/// `snaps` snapshot slots (y_0's included), by the closed form.
/// `snaps` must be at least 1; `l = 0` needs nothing.
pub fn min_forward_steps(l: u64, snaps: u64) -> u64 {
    assert!(snaps >= 1, "revolve needs a slot for the initial state");
    if l <= 1 {
        return 0;
    }
    let mut r = 0u64;
    while beta(snaps, r) < l as u128 {
        r += 1;
    }
    let sub = if r == 0 { 0 } else { beta(snaps + 1, r - 1) };
    (r as u128 * l as u128 - sub) as u64
}

/// One revolve action on the chain y_0 … y_l.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Store the current state y_i in a free slot.
    Takeshot(usize),
    /// Compute y_{from+1} … y_to from the current state y_from, keeping
    /// only the last.
    Advance { from: usize, to: usize },
    /// Tape the last step l from y_{l-1} and reverse it.
    Firsturn(usize),
    /// Tape step i from the current state y_{i-1} and reverse it.
    Youturn(usize),
    /// Make the snapshot of y_i the current state.
    Restore(usize),
    /// Free the slot holding y_i.
    Release(usize),
}

/// Revolve's action sequence reversing `steps` steps with `snaps` slots
/// (y_0's included; at least 1). Optimal: its advances total
/// [`min_forward_steps`]. Each split point is chosen by the recurrence, the
/// furthest among the optimal ones.
pub fn revolve(steps: usize, snaps: usize) -> Vec<Action> {
    assert!(snaps >= 1, "revolve needs a slot for the initial state");
    let mut out = Vec::new();
    if steps == 0 {
        return out;
    }
    out.push(Action::Takeshot(0));
    reverse(0, steps, snaps - 1, true, &mut out);
    out.push(Action::Release(0));
    out
}

/// Reverses steps a+1 ..= b, with y_a the current state and held in a
/// slot, and `free` more slots available. The recursion of the textbook
/// form runs as deep as the chain is long (its head call keeps every slot),
/// which overflowed the solve thread's stack on a 15,000-layer chain: the
/// calls and the actions between them are a work list instead.
fn reverse(a: usize, b: usize, free: usize, first: bool, out: &mut Vec<Action>) {
    enum Work {
        Reverse {
            a: usize,
            b: usize,
            free: usize,
            first: bool,
        },
        Emit(Action),
    }
    let turn = |k: usize, first: bool| {
        if first {
            Action::Firsturn(k)
        } else {
            Action::Youturn(k)
        }
    };
    let mut work = vec![Work::Reverse { a, b, free, first }];
    while let Some(w) = work.pop() {
        let (a, b, free, first) = match w {
            Work::Emit(action) => {
                out.push(action);
                continue;
            }
            Work::Reverse { a, b, free, first } => (a, b, free, first),
        };
        let m = b - a;
        if m == 1 {
            out.push(turn(b, first));
            continue;
        }
        if free == 0 {
            // One slot: re-advance from y_a for every step, last to first.
            out.push(Action::Advance { from: a, to: b - 1 });
            out.push(turn(b, first));
            for k in (a + 1..b).rev() {
                out.push(Action::Restore(a));
                if k - 1 > a {
                    out.push(Action::Advance { from: a, to: k - 1 });
                }
                out.push(Action::Youturn(k));
            }
            continue;
        }
        let i = split(m, free);
        out.push(Action::Advance { from: a, to: a + i });
        out.push(Action::Takeshot(a + i));
        // Popped in the order written: the tail, the release, the restore,
        // then the head.
        work.push(Work::Reverse {
            a,
            b: a + i,
            free,
            first: false,
        });
        work.push(Work::Emit(Action::Restore(a)));
        work.push(Work::Emit(Action::Release(a + i)));
        work.push(Work::Reverse {
            a: a + i,
            b,
            free: free - 1,
            first,
        });
    }
}

/// Where to split `m` steps with `free` slots beside the one holding the
/// segment's start (`free >= 1`, `m >= 2`): advance `i` steps, snapshot,
/// reverse the tail with one slot fewer, then the head with the slot back,
/// for `c(i) = i + t(m-i, free) + t(i, free+1)` forward steps, where `t`
/// counts slots including the one holding the segment's start. The furthest
/// of the optimal splits.
///
/// `t(l, s)` is convex in `l` (its slope is the repetition number, which
/// only grows), so `c` is convex and its differences only grow: the
/// furthest minimum is where the first positive difference is, found by
/// bisection in O(log m) evaluations. The scan of every split was quadratic
/// over a reversal with a middling number of snapshots.
fn split(m: usize, free: usize) -> usize {
    // With a slot for every state of the tail, every step runs once and
    // i = 1 is the one optimal split (cost m + i - 2).
    if free + 1 >= m {
        return 1;
    }
    let cost = |i: usize| {
        i as u64
            + min_forward_steps((m - i) as u64, free as u64)
            + min_forward_steps(i as u64, free as u64 + 1)
    };
    // The first i in 1..m-1 with c(i+1) > c(i); m-1 when there is none.
    let (mut lo, mut hi) = (1, m - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cost(mid + 1) > cost(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Forward steps (advances) in an action sequence.
pub fn advances(actions: &[Action]) -> u64 {
    actions
        .iter()
        .map(|a| match a {
            Action::Advance { from, to } => (to - from) as u64,
            _ => 0,
        })
        .sum()
}

/// The chain of articulation-point segments of a training graph.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Number of steps l.
    pub steps: usize,
    /// a_1 … a_L: the node holding state y_m is `states[m-1]`.
    pub states: Vec<NodeId>,
    /// For each forward node, the step (1-based) that computes it; 0 for
    /// backward nodes.
    pub step_of: Vec<usize>,
    /// For each node, the step it is an input of (APs feed the next step).
    input_of: Vec<usize>,
}

impl Chain {
    pub fn of(g: &Graph) -> Chain {
        let states = articulation_points(g);
        let mut step_of = vec![0usize; g.len()];
        let mut input_of = vec![0usize; g.len()];
        let mut is_state = vec![false; g.len()];
        for &a in &states {
            is_state[a.idx()] = true;
        }
        let mut step = 1;
        let mut any_tail = false;
        for v in g.forward_ids() {
            step_of[v.idx()] = step;
            input_of[v.idx()] = step + usize::from(is_state[v.idx()]);
            if is_state[v.idx()] {
                step += 1;
            } else if step > states.len() {
                any_tail = true;
            }
        }
        let steps = states.len() + usize::from(any_tail);
        for s in &mut input_of {
            *s = (*s).min(steps);
        }
        Chain {
            steps,
            states,
            step_of,
            input_of,
        }
    }

    /// The node holding y_m (m ≥ 1).
    pub fn state(&self, m: usize) -> NodeId {
        self.states[m - 1]
    }

    /// Snapshot counts worth trying: beyond l−2 nothing is recomputed.
    pub fn snapshot_range(&self) -> std::ops::RangeInclusive<usize> {
        0..=self.steps.saturating_sub(2)
    }
}

/// Keeps value `i` in S over stages `from ..= until` (never before i+1).
fn keep_range(sch: &mut Schedule, i: usize, from: usize, until: usize) {
    let until = until.min(sch.stages().saturating_sub(1));
    sch.set_s_range(i, from.max(i + 1)..=until, true);
}

/// Revolve with `snapshots` real snapshots (y_0 is free) on `g`'s
/// articulation-point chain, as a frontier-advancing schedule.
pub fn revolve_schedule(g: &Graph, chain: &Chain, snapshots: usize) -> Schedule {
    let n = g.len();
    let l = chain.steps;
    let mut sch = Schedule::identity(n);
    // Base lifetimes: backward values to their last use, forward values
    // while the forward pass reads them.
    let last = last_use(g);
    for v in g.ids() {
        let until = if g.node(v).backward {
            last[v.idx()].idx()
        } else {
            g.users(v)
                .iter()
                .filter(|&&u| !g.node(u).backward)
                .map(|u| u.idx())
                .max()
                .unwrap_or(v.idx())
        };
        keep_range(&mut sch, v.idx(), v.idx() + 1, until);
    }
    if l == 0 {
        return solve_r(g, sch);
    }

    // Which step each backward stage reverses, and where each reversal starts.
    let mut reversing = vec![0usize; n];
    let mut start: Vec<Option<usize>> = vec![None; l + 1];
    let mut level = l;
    let mut lowest_started = l + 1;
    for t in g.ids().filter(|&t| g.node(t).backward) {
        for &u in g.deps(t) {
            if !g.node(u).backward {
                level = level.min(chain.input_of[u.idx()]);
            }
        }
        reversing[t.idx()] = level;
        while lowest_started > level {
            lowest_started -= 1;
            start[lowest_started] = Some(t.idx());
        }
    }

    // Snapshots, by revolve's actions.
    let actions = revolve(l, snapshots + 1);
    let mut group = vec![l; actions.len()];
    let mut next_turn = l;
    for (idx, a) in actions.iter().enumerate().rev() {
        if let Action::Youturn(k) | Action::Firsturn(k) = *a {
            next_turn = k;
        }
        group[idx] = next_turn;
    }
    let mut in_sweep = true;
    // state -> (stage from which it is held, stage of its last restore)
    let mut open: HashMap<usize, (Option<usize>, Option<usize>)> = HashMap::new();
    for (idx, a) in actions.iter().enumerate() {
        let here = if in_sweep { None } else { start[group[idx]] };
        match *a {
            Action::Firsturn(_) => in_sweep = false,
            Action::Takeshot(m) if m > 0 => {
                let taken = if in_sweep {
                    Some(chain.state(m).idx())
                } else {
                    here
                };
                open.insert(m, (taken, None));
            }
            Action::Restore(m) if m > 0 => {
                if let Some(e) = open.get_mut(&m) {
                    e.1 = e.1.max(here);
                }
            }
            Action::Release(m) if m > 0 => {
                if let Some((Some(taken), Some(used))) = open.remove(&m) {
                    keep_range(&mut sch, chain.state(m).idx(), taken + 1, used);
                }
            }
            _ => {}
        }
    }

    // Tapes: step k's forward values and its input, for the stages that
    // reverse step k.
    let mut tape_until: HashMap<(usize, usize), usize> = HashMap::new();
    for t in g.ids().filter(|&t| g.node(t).backward) {
        let k = reversing[t.idx()];
        for &u in g.deps(t) {
            let ui = u.idx();
            let in_tape = !g.node(u).backward
                && (chain.step_of[ui] == k || (k >= 2 && chain.state(k - 1) == u));
            if in_tape {
                tape_until.insert((ui, k), t.idx());
            }
        }
    }
    for ((v, k), until) in tape_until {
        let from = if k == l {
            v + 1
        } else {
            start[k].map_or(n, |s| s + 1)
        };
        keep_range(&mut sch, v, from, until);
    }
    solve_r(g, sch)
}

/// The `griewank-logn` strategy: revolve over the articulation-point chain,
/// the snapshot count as its knob.
#[derive(Debug, Clone, Copy)]
pub struct Griewank;

impl Strategy for Griewank {
    fn name(&self) -> &'static str {
        "griewank-logn"
    }

    fn describe(&self) -> &'static str {
        "Griewank & Walther revolve: optimal binomial checkpointing over the articulation-point chain, snapshot count swept"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        solve_by_points(self, g, budget, opts)
    }

    /// The knob machinery merges each multi-output kernel itself, and
    /// judges every setting by its plan lifted back to the graph
    /// (`knobs::solve_by_points`).
    fn handles_groups(&self) -> bool {
        true
    }
}

impl TradeOff for Griewank {
    fn not_applicable(&self, g: &Graph) -> Option<String> {
        (!has_backward(g))
            .then(|| "revolve reverses a forward pass, and this graph has no backward nodes".into())
    }

    fn points<'a>(&'a self, g: &'a Graph) -> Result<Points<'a>, StrategyError> {
        if let Some(reason) = self.not_applicable(g) {
            return Err(StrategyError::NotApplicable {
                strategy: self.name(),
                reason,
            });
        }
        let chain = Chain::of(g);
        let range = chain.snapshot_range();
        Ok(Points {
            len: range.clone().count(),
            at: Box::new(move |i| {
                let s = range.start() + i;
                KnobPoint {
                    knob: format!("snapshots={s} (chain of {} steps)", chain.steps),
                    value: s as f64,
                    schedule: revolve_schedule(g, &chain, s),
                }
            }),
            monotone: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bisection picks what the scan of every split picked: the
    /// furthest of the optimal ones.
    #[test]
    fn the_split_is_the_furthest_optimal_one() {
        for free in 1..10usize {
            for m in 2..300usize {
                let cost = |i: usize| {
                    i as u64
                        + min_forward_steps((m - i) as u64, free as u64)
                        + min_forward_steps(i as u64, free as u64 + 1)
                };
                let best = (1..m).map(cost).min().unwrap();
                let furthest = (1..m).rev().find(|&i| cost(i) == best).unwrap();
                let want = if free + 1 >= m { 1 } else { furthest };
                assert_eq!(split(m, free), want, "m = {m}, free = {free}");
            }
        }
    }
}
