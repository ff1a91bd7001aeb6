//! Another node order, for budgets at which no schedule in the file's
//! order fits.
//!
//! Why: remat's schedules, like Checkmate's, first compute the nodes in the
//! file's order, one stage each. Where the graph has other topological
//! orders that choice can decide whether anything fits at all:
//! random-layered-n250 at 60% of its peak is proven to have no schedule in
//! its file's order ([`super::feasible`]), yet a sequence that computes in
//! another order fits, and a schedule in that order is 1.6× one pass.
//!
//! The search runs backwards through a plan's computations, without
//! stages, carrying `W` (the values that something later reads and that
//! must be resident at this point) and `C` (the nodes computed at least
//! once later). The computation placed before the current point is one of
//! `W`'s members, or a node no one reads that is still to be computed; at
//! that moment `W`, the node's inputs and its output must fit. It ends when
//! `W` is empty and every node is computed. The answer is the order in
//! which the sequence first computes each node: a topological order, since
//! a node's inputs are resident, hence computed, before it.
//!
//! A state is `W` and the sinks computed later, not all of `C`: every node
//! is a sink or an ancestor of one, and a computation puts its inputs in
//! `W`, so once every sink is computed and `W` is empty every node has
//! been. Two paths that differ only in which inner nodes they recomputed
//! are the same state. And a state that failed dooms every state at the
//! same sinks whose `W` holds its `W` (holding more never helps), as in
//! the schedule search ([`super::feasible`], whose trie of failed sets this
//! search shares). No path returns to a state (a computation replaces a
//! value of `W` by its inputs, which come before it, and sinks only
//! join), so a state taken off the stack has failed, and the failed sets
//! are all the search remembers. States are keyed exactly, so a search
//! that visits every state proves that no recompute-only plan fits in any
//! node order ([`Sequences::NoneFits`]; a test holds it to a plain walk
//! over every state). What it finds is checked downstream.
//!
//! Measured at 60% of the peak, against the search keyed by all of `W`
//! and `C` with exact matches only: random-layered-n250 finds an order in
//! 0.04 s instead of 1.2 s; n500 in 1.5 s, where 191 s and 3 GB were
//! needed; n1000 in 0.6 s, where none was found in 60 s.
//!
//! The sequence itself is rarely a schedule in that order (it may compute
//! a value twice between two first computations, or in another order than
//! the stage's), so the caller runs the exact schedule search in the new
//! order; on n250 at 60% it finds one in 10–20 s. Where it finds none, the
//! sequence itself is the plan ([`super::sequence`]).

use super::feasible::Failed;
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;
use fixedbitset::FixedBitSet;
use std::time::Instant;

/// Past this many bytes of remembered states and stack the search gives up
/// rather than take the machine's memory.
const MAX_BYTES: usize = 1 << 30;

/// The length of each heuristic's first run, in states; each round doubles
/// it.
const RUN_STATES: u64 = 1 << 23;

/// Which computation to place first, in turn: 0, the ones that shrink
/// `W` (net bytes), then the highest node; 1, the highest node, as the
/// file's order would; 2, by net bytes alone. Measured at 60% of the
/// peak: on random-layered-n250 each finds an order in 0.04–0.6 s, and the
/// schedules in them are 1.63–1.80× one pass after the local search; on
/// n500 the first two find one in 1.2–1.5 s and the third none.
pub const RULES: usize = 3;

struct Frame {
    w: FixedBitSet,
    /// The sinks computed later.
    c: FixedBitSet,
    done: usize,
    mem_w: u64,
    cands: Vec<u32>,
    next: usize,
    trail: usize,
}

/// A topological order of `g` in which some plan computing its nodes first
/// in that order fits `budget` (fixed memory included), or `None` when the
/// search found none by `deadline`. Graphs with multi-output kernels are
/// not searched (a kernel's outputs are made together, which the search
/// does not model).
pub fn search(g: &Graph, budget: Bytes, deadline: Instant) -> Option<Vec<NodeId>> {
    match search_rules(g, budget, deadline, &[0, 1, 2]) {
        Sequences::Found(seq) => Some(order_of(&seq, g.len())),
        _ => None,
    }
}

/// What the search came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Sequences {
    /// A sequence of computations, in forward order, that fits.
    Found(Vec<NodeId>),
    /// Proven: every state was visited, and no plan that only computes
    /// and frees fits, in any node order.
    NoneFits { states: u64 },
    /// The deadline or the memory cap; or a graph the search does not
    /// model (multi-output kernels).
    Unknown,
}

/// The sequence of computations (in forward order) that [`search`] would
/// read its order from, with only `rule`'s order of options (see
/// [`RULES`]): each rule tends to find another order, and a caller whose
/// first order has no schedule tries the next (a 14-node DAG whose first
/// order was proven to have none at 96 B had a plan in another). The
/// sequence is itself a plan that fits ([`super::sequence`]).
///
/// A state fails only when every option from it was tried, and states are
/// keyed exactly, so a search that visits every state is a proof that no
/// recompute-only plan fits at all: a plan that fits computes, at each
/// moment, one of the options the search tries, and holds at least `W`.
pub fn sequence_by(g: &Graph, budget: Bytes, deadline: Instant, rule: usize) -> Sequences {
    search_rules(g, budget, deadline, &[rule % RULES])
}

fn search_rules(g: &Graph, budget: Bytes, deadline: Instant, rules: &[usize]) -> Sequences {
    let n = g.len();
    if n == 0 || g.has_groups() {
        return Sequences::Unknown;
    }
    let Some(cap) = budget.get().checked_sub(g.fixed_memory.get()) else {
        return Sequences::NoneFits { states: 0 };
    };
    let space = Space::of(g);
    // Failed states fail whatever rule reached them, so the rounds share
    // them.
    let mut memo = Memo::default();
    let mut states = 0;
    for round in 0..40usize {
        let limit = RUN_STATES << (round / rules.len()).min(20);
        match space.run(cap, rules[round % rules.len()], limit, deadline, &mut memo) {
            (Run::Found(seq), _) => {
                return Sequences::Found(seq.into_iter().map(NodeId::from).collect())
            }
            (Run::Exhausted, k) => return Sequences::NoneFits { states: states + k },
            (Run::Stopped, _) => return Sequences::Unknown,
            (Run::OutOfStates, k) => states += k,
        }
    }
    Sequences::Unknown
}

/// The failed states, by the set of sinks computed (each set its own key,
/// so that a search that visits every state proves what it says).
#[derive(Default)]
struct Memo {
    failed: Failed,
    points: std::collections::HashMap<FixedBitSet, usize>,
}

impl Memo {
    fn bytes(&self, n: usize) -> usize {
        self.failed.bytes() + self.points.len() * (n.div_ceil(8) + 48)
    }

    fn fail(&mut self, c: &FixedBitSet, w: &FixedBitSet) {
        let next = self.points.len();
        let point = *self.points.entry(c.clone()).or_insert(next);
        self.failed.insert_at(point, w);
    }

    fn covers(&self, c: &FixedBitSet, w: &FixedBitSet, walk: &mut Vec<u32>) -> bool {
        self.points
            .get(c)
            .is_some_and(|&p| self.failed.covers_at(p, w, walk))
    }
}

/// The order in which `seq` first computes each of the graph's `n` nodes:
/// a topological order when `seq` is a sequence the search found.
pub fn order_of(seq: &[NodeId], n: usize) -> Vec<NodeId> {
    let mut seen = FixedBitSet::with_capacity(n);
    let mut order = Vec::with_capacity(n);
    for &v in seq {
        if !seen.put(v.idx()) {
            order.push(v);
        }
    }
    order
}

/// How many nodes `order` puts elsewhere than the file does.
pub fn moved(order: &[NodeId]) -> usize {
    order
        .iter()
        .enumerate()
        .filter(|(k, v)| v.idx() != *k)
        .count()
}

enum Run {
    /// A sequence of computations, in forward order.
    Found(Vec<usize>),
    /// Every state from the start was visited: no sequence fits.
    Exhausted,
    /// The deadline or the memory cap.
    Stopped,
    /// The run's state limit.
    OutOfStates,
}

/// The graph as the search reads it.
struct Space {
    n: usize,
    mem: Vec<u64>,
    inputs: Vec<Vec<usize>>,
    sinks: Vec<usize>,
    is_sink: FixedBitSet,
}

impl Space {
    fn of(g: &Graph) -> Space {
        let sinks: Vec<usize> = g
            .ids()
            .filter(|&i| g.users(i).is_empty())
            .map(|i| i.idx())
            .collect();
        Space {
            n: g.len(),
            is_sink: sinks.iter().copied().collect(),
            mem: g.ids().map(|i| g.memory(i).get()).collect(),
            inputs: super::feasible::distinct_inputs(g),
            sinks,
        }
    }

    /// The bytes `W` gains by computing `v` here: its inputs that `W` does
    /// not hold, less `v` itself when `W` holds it.
    fn net(&self, v: usize, w: &FixedBitSet) -> i64 {
        let add: u64 = self.inputs[v]
            .iter()
            .filter(|&&d| !w.contains(d))
            .map(|&d| self.mem[d])
            .sum();
        add as i64 - if w.contains(v) { self.mem[v] as i64 } else { 0 }
    }

    /// The computations that may come just before this point and fit, in
    /// the order `heuristic` tries them.
    fn candidates(
        &self,
        w: &FixedBitSet,
        c: &FixedBitSet,
        mem_w: u64,
        cap: u64,
        heuristic: usize,
    ) -> Vec<u32> {
        let mut cands: Vec<(i64, usize)> = w
            .ones()
            .chain(self.sinks.iter().copied().filter(|&v| !c.contains(v)))
            .filter_map(|v| {
                let net = self.net(v, w);
                // The moment's memory: W, the new inputs and the output.
                let out = if w.contains(v) { 0 } else { self.mem[v] };
                let added = net + if w.contains(v) { self.mem[v] as i64 } else { 0 };
                (mem_w as i64 + added + out as i64 <= cap as i64).then_some((net, v))
            })
            .collect();
        match heuristic {
            0 => cands.sort_unstable_by_key(|&(net, v)| (net > 0, std::cmp::Reverse(v))),
            1 => cands.sort_unstable_by_key(|&(_, v)| std::cmp::Reverse(v)),
            _ => cands.sort_unstable_by_key(|&(net, v)| (net, std::cmp::Reverse(v))),
        }
        cands.into_iter().map(|(_, v)| v as u32).collect()
    }

    fn run(
        &self,
        cap: u64,
        heuristic: usize,
        limit: u64,
        deadline: Instant,
        memo: &mut Memo,
    ) -> (Run, u64) {
        let n = self.n;
        let frame_bytes = 2 * (n.div_ceil(8) + 32) + 64;
        let mut trail: Vec<usize> = Vec::new();
        let w0 = FixedBitSet::with_capacity(n);
        let c0 = FixedBitSet::with_capacity(n);
        let mut walk = Vec::new();
        let cands = self.candidates(&w0, &c0, 0, cap, heuristic);
        let mut stack = vec![Frame {
            w: w0,
            c: c0,
            done: 0,
            mem_w: 0,
            cands,
            next: 0,
            trail: 0,
        }];
        let mut states = 0u64;
        while !stack.is_empty() {
            if states.is_multiple_of(1024) {
                if Instant::now() >= deadline
                    || stack.len() * frame_bytes + memo.bytes(n) > MAX_BYTES
                {
                    return (Run::Stopped, states);
                }
                if states >= limit {
                    return (Run::OutOfStates, states);
                }
            }
            let top = stack.last_mut().expect("non-empty");
            let Some(&v) = top.cands.get(top.next) else {
                memo.fail(&top.c, &top.w);
                stack.pop();
                continue;
            };
            let v = v as usize;
            top.next += 1;
            states += 1;
            trail.truncate(top.trail);
            let mut w = top.w.clone();
            let mut c = top.c.clone();
            let mut done = top.done;
            let mut mem_w = top.mem_w;
            if w.contains(v) {
                mem_w -= self.mem[v];
                w.set(v, false);
            }
            for &d in &self.inputs[v] {
                if !w.put(d) {
                    mem_w += self.mem[d];
                }
            }
            if self.is_sink.contains(v) && !c.put(v) {
                done += 1;
            }
            trail.push(v);
            if w.is_clear() && done == self.sinks.len() {
                trail.reverse();
                return (Run::Found(trail), states);
            }
            if memo.covers(&c, &w, &mut walk) {
                continue;
            }
            let cands = self.candidates(&w, &c, mem_w, cap, heuristic);
            let len = trail.len();
            stack.push(Frame {
                w,
                c,
                done,
                mem_w,
                cands,
                next: 0,
                trail: len,
            });
        }
        (Run::Exhausted, states)
    }
}
