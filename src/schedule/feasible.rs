//! Does any schedule fit the budget at all? An exact search, so that "no
//! plan" can be a proof rather than a strategy giving up.
//!
//! Why a search and not a program: on tight budgets a MILP spends its
//! whole limit on the question (random-layered-n250 at 60% of its peak:
//! no plan from any strategy in 60 s, the Checkmate LP relaxation feasible
//! after 125 s), while the answer follows from memory alone, in a few
//! hundred states.
//!
//! The search runs backwards through the frontier-advancing stages, from
//! the last node to the first, carrying `W`: the values that must be
//! resident at the current point because something later reads them. At
//! each node of a stage (highest first, the reverse of the stage's
//! order) a value of `W` is either computed there (its inputs join `W`,
//! and that moment's memory, `W`, the inputs and the output, must fit) or
//! kept from earlier; a stage's frontier is always computed. A value in
//! `W` at the start of stage `t` must have been made before it, so it is
//! below `t`. Holding exactly `W` is the least any schedule holds, so the
//! search decides the question exactly for the schedules remat can
//! express (`tests/feasible.rs` checks it against the MILP), and a failed
//! state `(stage, node, W)` is remembered: a later state at the same point
//! whose `W` holds a failed one's is not explored.
//!
//! A kernel with several outputs is one decision at its last member's
//! position, as the schedules make it (all members or none, in the stage
//! of the last one).
//!
//! What it does not cover: plans whose first computations are in another
//! order than the file's (the frontier-advancing form fixes that order, as
//! in Checkmate), and slow tiers (offloading may fit where no recompute
//! plan does).

use super::Schedule;
use crate::graph::Graph;
use crate::units::Bytes;
use fixedbitset::FixedBitSet;
use std::collections::HashMap;
use std::time::Instant;

/// The answer of [`decide`].
#[derive(Debug, Clone)]
pub enum Feasibility {
    /// A schedule whose plan fits (the simulator still checks it).
    Fits(Schedule),
    /// Proven: no frontier-advancing schedule fits. `states` is the size
    /// of the proof.
    NoSchedule { states: u64 },
    /// The search stopped at its deadline or its memory cap.
    Unknown { states: u64 },
}

/// The memo's trie and the stack's bitsets; past this many bytes the
/// search gives up rather than take the machine's memory (about 9×10⁷
/// trie nodes: random-layered-n250 at 64% of its peak reaches it after
/// 2.3×10⁷ states, 30 s, undecided).
const MAX_BYTES: usize = 3 << 29;

/// The failed states, by point (stage and node): a state fails if a
/// failed state at its point needs a subset of what it needs. Holding
/// more never helps (every choice that works for `W` works, with no more
/// memory at any moment, for a subset of it), so the test is exact, and
/// it prunes what equal keys miss: random-layered-n250 at 62% of its peak
/// took 1.18×10⁷ states with equal keys, 4.6×10⁵ with subsets.
///
/// Why a trie of sets: the failed states crowd onto a few points (under
/// 200 on n250, with up to 25,000 sets each), so a list per point made
/// every test a long scan. Each set is a path of its members from the
/// highest down (the high ones, just computed, are the ones most sets
/// share), and a test walks only the branches whose members
/// `W` holds.
#[derive(Default)]
pub(super) struct Failed {
    roots: HashMap<usize, u32>,
    nodes: Vec<TrieNode>,
}

#[derive(Clone, Copy)]
struct TrieNode {
    /// The member, and in the top bit whether a failed set ends here
    /// (kept in 16 bytes: the trie is the search's memory).
    tag: u32,
    first_child: u32,
    next_sibling: u32,
    /// The members among the 32 values below this one that every set
    /// through this node holds (bit i: `member - 32 + i`). A test stops
    /// at a node whose sets all need a value `W` lacks, rather than walk
    /// down to it: on random-layered-n250 in the node-order search's
    /// order at 60% of its peak (6.9×10⁶ states) that halves the nodes a
    /// test visits (296 → 162) and the search's time by a fifth (31.9 →
    /// 25.8 s, five runs each).
    need: u32,
}

const NONE: u32 = u32::MAX;
const END: u32 = 1 << 31;

impl TrieNode {
    fn member(&self) -> u32 {
        self.tag & !END
    }

    fn end(&self) -> bool {
        self.tag & END != 0
    }
}

impl Failed {
    fn point(t: usize, x: usize) -> usize {
        t << 32 | x
    }

    pub(super) fn bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<TrieNode>() + self.roots.len() * 24
    }

    fn new_node(&mut self, member: u32, next_sibling: u32) -> u32 {
        debug_assert!(member < END, "a trie member is below 2^31");
        self.nodes.push(TrieNode {
            tag: member,
            first_child: NONE,
            next_sibling,
            need: u32::MAX,
        });
        (self.nodes.len() - 1) as u32
    }

    /// Whether some failed state at `(t, x)` needs a subset of `w`.
    fn covers(&self, t: usize, x: usize, w: &FixedBitSet, stack: &mut Vec<u32>) -> bool {
        self.covers_at(Self::point(t, x), w, stack)
    }

    /// Whether some failed state at `point` (any key the caller chooses)
    /// needs a subset of `w`.
    pub(super) fn covers_at(&self, point: usize, w: &FixedBitSet, stack: &mut Vec<u32>) -> bool {
        let Some(&root) = self.roots.get(&point) else {
            return false;
        };
        if self.nodes[root as usize].end() {
            return true;
        }
        stack.clear();
        stack.push(self.nodes[root as usize].first_child);
        while let Some(mut c) = stack.pop() {
            while c != NONE {
                let node = self.nodes[c as usize];
                let member = node.member() as usize;
                if w.contains(member) {
                    if node.end() {
                        return true;
                    }
                    if node.first_child != NONE && node.need & !window_below(w, member) == 0 {
                        stack.push(node.first_child);
                    }
                }
                c = node.next_sibling;
            }
        }
        false
    }

    /// Records a failed state (unless a subset of it is already there).
    fn insert(&mut self, t: usize, x: usize, w: &FixedBitSet) {
        self.insert_at(Self::point(t, x), w)
    }

    /// Records a failed state at `point`.
    pub(super) fn insert_at(&mut self, point: usize, w: &FixedBitSet) {
        let root = match self.roots.get(&point) {
            Some(&r) => r,
            None => {
                // The root's member is never read.
                let r = self.new_node(0, NONE);
                self.roots.insert(point, r);
                r
            }
        };
        let mut at = root;
        let members: Vec<usize> = w.ones().collect();
        for &m in members.iter().rev() {
            if self.nodes[at as usize].end() {
                return;
            }
            // Siblings are kept highest first, so a scan stops at the
            // member's place whether it is there or not.
            let mut prev = NONE;
            let mut c = self.nodes[at as usize].first_child;
            while c != NONE && self.nodes[c as usize].member() as usize > m {
                prev = c;
                c = self.nodes[c as usize].next_sibling;
            }
            if c == NONE || self.nodes[c as usize].member() as usize != m {
                let new = self.new_node(m as u32, c);
                if prev == NONE {
                    self.nodes[at as usize].first_child = new;
                } else {
                    self.nodes[prev as usize].next_sibling = new;
                }
                c = new;
            }
            // A set found below to be covered already (and not inserted)
            // has narrowed the nodes above: that only prunes less.
            self.nodes[c as usize].need &= window_below(w, m);
            at = c;
        }
        self.nodes[at as usize].tag |= END;
    }
}

/// One open choice: whether `x` (a member of `w`, or stage `t`'s frontier)
/// is computed here, in stage `t`.
struct Frame {
    t: usize,
    x: usize,
    w: FixedBitSet,
    mem_w: u64,
    /// Options still to try, in order (`true`: compute).
    options: [Option<bool>; 2],
    trail: usize,
}

/// What the successful path did, to build its schedule.
enum Step {
    Compute { t: usize, x: usize },
    Kept { t: usize, w: FixedBitSet },
}

/// Decides whether some schedule of `g` fits `budget`, or gives up at
/// `deadline`.
pub fn decide(g: &Graph, budget: Bytes, deadline: Instant) -> Feasibility {
    let n = g.len();
    if n == 0 {
        return Feasibility::Unknown { states: 0 };
    }
    let Some(cap) = budget.get().checked_sub(g.fixed_memory.get()) else {
        return Feasibility::NoSchedule { states: 0 };
    };
    let mem: Vec<u64> = g.ids().map(|i| g.memory(i).get()).collect();
    let inputs = distinct_inputs(g);
    // A kernel with several outputs is computed whole, at its last
    // member's position; `group[x]` is its first and last member.
    let group: Vec<(usize, usize)> = g
        .ids()
        .map(|i| (g.group_start(i), g.group_end(i)))
        .collect();
    let per_state = 8 * (n.div_ceil(64) + 1) + 40;
    let mut failed = Failed::default();
    let mut walk: Vec<u32> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut trail: Vec<Step> = Vec::new();
    let mut states = 0u64;

    // The walk from a point to the next choice: (t, j) is "stage t, nodes
    // j and above handled". Returns the next open choice, `Ok(None)` when
    // the first stage's start is reached with nothing left to hold, or
    // `Err(())` for a dead end.
    let next_choice = |mut t: usize,
                       mut j: usize,
                       w: &FixedBitSet,
                       trail: &mut Vec<Step>|
     -> Result<Option<(usize, usize)>, ()> {
        loop {
            // A stage's frontier is its node, or the kernel it ends.
            if j == t + 1 && group[t].1 == t {
                return Ok(Some((t, t)));
            }
            // The highest value of W below j.
            if let Some(x) = highest_below(w, j) {
                return Ok(Some((t, x)));
            }
            // Stage t's start: W is what stage t - 1 hands on.
            if w.ones().any(|i| group[i].1 >= t) {
                return Err(());
            }
            trail.push(Step::Kept { t, w: w.clone() });
            if t == 0 {
                return if w.is_clear() { Ok(None) } else { Err(()) };
            }
            t -= 1;
            j = t + 1;
        }
    };

    // The bytes a kernel's computation adds to W's: its inputs and its
    // outputs that W does not hold; and the bytes of W it makes.
    let costs = |x: usize, w: &FixedBitSet| -> (u64, u64, u64) {
        let (a, b) = group[x];
        let extra: u64 = inputs[x]
            .iter()
            .filter(|&&d| !w.contains(d))
            .map(|&d| mem[d])
            .sum();
        let (new, held) = (a..=b).fold((0, 0), |(new, held), m| {
            if w.contains(m) {
                (new, held + mem[m])
            } else {
                (new + mem[m], held)
            }
        });
        (extra, new, held)
    };
    // Which option first. Any order gives the same proofs (a failed state
    // fails whatever found it); the order decides how soon a fit is found,
    // and no one order finds them all (random-layered-n250: bytes alone
    // finds one at 74% of the peak and none at 70%, byte-stages the
    // reverse), so the search restarts with each in turn, keeping the
    // failed states.
    let compute_first = |order: usize, t: usize, x: usize, w: &FixedBitSet, extra, held| -> bool {
        if order == 0 {
            // Compute where that adds fewer bytes than it frees.
            return extra <= held;
        }
        // Bytes times the stages they must be held back to their first
        // computation, at the least.
        let span = |v: usize| (t - v.min(t)) as u64 + 1;
        let keep: u64 = (group[x].0..=group[x].1)
            .filter(|&m| w.contains(m))
            .map(|m| mem[m] * span(m))
            .sum();
        let compute: u64 = inputs[x]
            .iter()
            .filter(|&&d| !w.contains(d))
            .map(|&d| mem[d] * span(d))
            .sum();
        compute <= keep * order as u64
    };
    let open =
        |order: usize, t: usize, x: usize, w: FixedBitSet, mem_w: u64, trail_len: usize| -> Frame {
            let frontier = x == t;
            let (extra, new, held) = costs(x, &w);
            let fits = mem_w + extra + new <= cap;
            let compute = fits.then_some(true);
            let keep = (!frontier).then_some(false);
            let options = if compute_first(order, t, x, &w, extra, held) {
                [compute, keep]
            } else {
                [keep, compute]
            };
            Frame {
                t,
                x,
                w,
                mem_w,
                options,
                trail: trail_len,
            }
        };

    let start = FixedBitSet::with_capacity(n);
    let root = match next_choice(n - 1, n, &start, &mut trail) {
        Ok(Some(tx)) => tx,
        Ok(None) => return Feasibility::Fits(build(g, &trail)),
        Err(()) => return Feasibility::NoSchedule { states },
    };
    let root_trail = trail.len();
    // Rounds of the three orders, each round's runs twice as long as the
    // last one's.
    for round in 0u32.. {
        let order = round as usize % ORDERS;
        let run_limit = states + (RUN_STATES << (round as usize / ORDERS).min(40));
        trail.truncate(root_trail);
        stack.clear();
        stack.push(open(order, root.0, root.1, start.clone(), 0, root_trail));
        while !stack.is_empty() {
            if states.is_multiple_of(1024)
                && (Instant::now() >= deadline
                    || failed.bytes() + stack.len() * per_state > MAX_BYTES)
            {
                return Feasibility::Unknown { states };
            }
            if states >= run_limit {
                break;
            }
            let top = stack.last_mut().expect("non-empty");
            let Some(choice) = top.options.iter_mut().find_map(|o| o.take()) else {
                let f = stack.pop().expect("non-empty");
                failed.insert(f.t, f.x, &f.w);
                continue;
            };
            states += 1;
            trail.truncate(top.trail);
            let (t, x) = (top.t, top.x);
            let mut w = top.w.clone();
            let mut mem_w = top.mem_w;
            // Whether the kernel is computed here or held, its other
            // members are settled with it: computing it again below would
            // make a second copy of a held member.
            let first = group[x].0;
            if choice {
                trail.push(Step::Compute { t, x });
                let (extra, _, held) = costs(x, &w);
                mem_w = mem_w + extra - held;
                for m in first..=group[x].1 {
                    w.set(m, false);
                }
                for &d in &inputs[x] {
                    w.insert(d);
                }
            }
            match next_choice(t, first, &w, &mut trail) {
                Ok(None) => return Feasibility::Fits(build(g, &trail)),
                Err(()) => {}
                Ok(Some((t2, x2))) => {
                    if !failed.covers(t2, x2, &w, &mut walk) {
                        let len = trail.len();
                        stack.push(open(order, t2, x2, w, mem_w, len));
                    }
                }
            }
        }
        if stack.is_empty() {
            // The run went through every option from the root.
            return Feasibility::NoSchedule { states };
        }
    }
    unreachable!("the rounds end by an answer or the deadline")
}

/// Each node's inputs, sorted, each once (a node may read a value
/// twice, and holds it once).
pub(super) fn distinct_inputs(g: &Graph) -> Vec<Vec<usize>> {
    g.ids()
        .map(|k| {
            let mut d: Vec<usize> = g.deps(k).iter().map(|d| d.idx()).collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect()
}

/// How many option orders the rounds cycle through (see `compute_first`).
const ORDERS: usize = 3;

/// The length of each order's first run, in states.
const RUN_STATES: u64 = 1 << 16;

/// The members of `w` among the 32 values below `m` (bit i: `m - 32 + i`;
/// the bits of values below 0 are clear).
fn window_below(w: &FixedBitSet, m: usize) -> u32 {
    const BITS: usize = usize::BITS as usize;
    let blocks = w.as_slice();
    let lo = m.saturating_sub(32);
    let (b, o) = (lo / BITS, lo % BITS);
    let mut v = blocks.get(b).copied().unwrap_or(0) >> o;
    if o > 0 {
        v |= blocks.get(b + 1).copied().unwrap_or(0) << (BITS - o);
    }
    let len = m - lo;
    let v = v as u64 & ((1u64 << len) - 1);
    (v << (32 - len)) as u32
}

/// The highest member of `w` below `j`.
fn highest_below(w: &FixedBitSet, j: usize) -> Option<usize> {
    const BITS: usize = usize::BITS as usize;
    if j == 0 {
        return None;
    }
    let blocks = w.as_slice();
    let mut b = (j - 1) / BITS;
    let mut mask = if j.is_multiple_of(BITS) {
        usize::MAX
    } else {
        (1usize << (j % BITS)) - 1
    };
    loop {
        let v = blocks.get(b).copied().unwrap_or(0) & mask;
        if v != 0 {
            return Some(b * BITS + BITS - 1 - v.leading_zeros() as usize);
        }
        if b == 0 {
            return None;
        }
        b -= 1;
        mask = usize::MAX;
    }
}

/// The schedule of a successful path: what each stage computes, and what
/// is held into it.
fn build(g: &Graph, trail: &[Step]) -> Schedule {
    let n = g.len();
    let mut sch = Schedule::identity(n);
    for t in 0..n {
        sch.set_r(t, t, false);
    }
    for step in trail {
        match step {
            Step::Compute { t, x } => {
                for m in g.group(crate::graph::NodeId::from(*x)) {
                    sch.set_r(*t, m, true);
                }
            }
            Step::Kept { t, w } => {
                for i in w.ones() {
                    sch.set_s(*t, i, true);
                }
            }
        }
    }
    sch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_below_crosses_block_boundaries() {
        let mut w = FixedBitSet::with_capacity(200);
        for i in [0, 63, 64, 65, 127, 128, 199] {
            w.insert(i);
        }
        let want = |j: usize| w.ones().rfind(|&i| i < j);
        for j in 0..=200 {
            assert_eq!(highest_below(&w, j), want(j), "below {j}");
        }
        assert_eq!(highest_below(&FixedBitSet::with_capacity(70), 70), None);
    }

    #[test]
    fn window_below_reads_the_32_values_below() {
        let mut w = FixedBitSet::with_capacity(200);
        for i in [0, 5, 31, 32, 63, 64, 65, 100, 127, 128, 160, 199] {
            w.insert(i);
        }
        for m in 0..=200 {
            let want = (0..32).fold(0u32, |acc, i| {
                let v = m as i64 - 32 + i as i64;
                if v >= 0 && w.contains(v as usize) {
                    acc | 1 << i
                } else {
                    acc
                }
            });
            assert_eq!(window_below(&w, m), want, "below {m}");
        }
    }

    fn bits(n: usize, members: &[usize]) -> FixedBitSet {
        let mut w = FixedBitSet::with_capacity(n);
        for &m in members {
            w.insert(m % n);
        }
        w
    }

    proptest::proptest! {
        /// The trie answers "is a subset of `w` recorded at this point"
        /// exactly as a scan of every recorded set would.
        ///
        /// Dense sets on few values (`dense`) share members within the
        /// 32 below a node, where a test stops early.
        #[test]
        fn the_failed_trie_finds_exactly_the_recorded_subsets(
            dense in proptest::bool::ANY,
            sets in proptest::collection::vec(
                (0usize..3, proptest::collection::vec(0usize..130, 0..6)), 0..40),
            queries in proptest::collection::vec(
                (0usize..3, proptest::collection::vec(0usize..130, 0..12)), 1..40),
        ) {
            let n = if dense { 40 } else { 130 };
            let mut failed = Failed::default();
            let mut plain: Vec<(usize, FixedBitSet)> = Vec::new();
            for (x, m) in &sets {
                let w = bits(n, m);
                failed.insert(7, *x, &w);
                plain.push((*x, w));
            }
            let mut walk = Vec::new();
            for (x, m) in &queries {
                let w = bits(n, m);
                let want = plain.iter().any(|(y, f)| y == x && f.is_subset(&w));
                proptest::prop_assert_eq!(failed.covers(7, *x, &w, &mut walk), want);
                proptest::prop_assert!(!failed.covers(8, *x, &w, &mut walk));
            }
        }
    }
}
