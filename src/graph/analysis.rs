//! Closed-form facts about a graph that do not need a solver.

use super::{Graph, NodeId};
use crate::units::Bytes;
use std::collections::BTreeSet;

/// The last node (in topological order) that reads each node; a node
/// nothing reads is its own last user. A member of a multi-output kernel
/// lives at least until the kernel's last output is made, so its last use
/// is never before its group's end.
pub fn last_use(g: &Graph) -> Vec<NodeId> {
    g.ids()
        .map(|i| {
            let u = g.users(i).last().copied().unwrap_or(i);
            u.max(NodeId::from(g.group_end(i)))
        })
        .collect()
}

/// Whether the file's order is the graph's only topological order: each
/// node reads the one before it (or shares its kernel). The solvers, their
/// bounds and the feasibility search keep the file's order of first
/// computations, as Checkmate does; where another order exists, a plan in
/// it may be cheaper or fit where none in the file's order does, so every
/// claim about "every plan" must say which plans it covers.
pub fn order_is_forced(g: &Graph) -> bool {
    g.ids().skip(1).all(|i| {
        let prev = NodeId::from(i.idx() - 1);
        g.group_start(i) == g.group_start(prev) || g.deps(i).contains(&prev)
    })
}

/// Whether a plan's first computations come in the file's order, the
/// order every bound and status of `solve` is about.
pub fn first_computations_in_file_order(
    g: &Graph,
    computed: impl IntoIterator<Item = NodeId>,
) -> bool {
    let mut seen = vec![false; g.len()];
    let mut next = 0usize;
    for n in computed {
        if n.idx() >= seen.len() || seen[n.idx()] {
            continue;
        }
        seen[n.idx()] = true;
        if n.idx() != next {
            return false;
        }
        next += 1;
    }
    true
}

/// Peak of computing every node once in order, freeing each value right
/// after its last reader, counting the output being computed. This is an
/// independent formula; the simulator must agree with it on checkpoint-all
/// plans (a tested invariant).
pub fn checkpoint_all_peak(g: &Graph) -> Bytes {
    let peak = checkpoint_all_profile(g)
        .into_iter()
        .max()
        .unwrap_or(Bytes::ZERO);
    g.fixed_memory + peak
}

/// What that plan holds while each node is computed (its output and every
/// value still to be read), fixed memory aside.
pub fn checkpoint_all_profile(g: &Graph) -> Vec<Bytes> {
    let last = last_use(g);
    // Sweep: values become live when computed and die after their last user.
    let mut dying: Vec<Vec<NodeId>> = vec![Vec::new(); g.len()];
    for i in g.ids() {
        dying[last[i.idx()].idx()].push(i);
    }
    let mut live = Bytes::ZERO;
    let mut held = Vec::with_capacity(g.len());
    for t in g.ids() {
        live += g.memory(t);
        held.push(live);
        for &d in &dying[t.idx()] {
            live = live - g.memory(d);
        }
    }
    held
}

/// No plan can run with less: computing a node needs its output and all its
/// inputs resident at once.
pub fn min_feasible_budget(g: &Graph) -> Bytes {
    // A kernel with several outputs makes all of them at once.
    let outputs = |k: NodeId| g.group(k).map(|m| g.memory(NodeId::from(m))).sum::<Bytes>();
    let largest = g
        .ids()
        .map(|k| outputs(k) + g.deps(k).iter().map(|&d| g.memory(d)).sum::<Bytes>())
        .max()
        .unwrap_or(Bytes::ZERO);
    g.fixed_memory + largest
}

/// A lower bound on the cost of every plan within `budget`, from the
/// graph alone, in O(n log n): no LP, so it scales to any size.
///
/// Why it holds: stage `t` ends by computing node `t`, with its inputs and
/// output resident and, beside them, every value the next stage keeps. A
/// value `v < t` that some node after `t` reads (it "crosses" `t`) and that
/// is not an input of `t` is therefore either resident at that moment or
/// computed again later, at least once more than the one computation every
/// node gets. So the values dropped at `t` must free at least
/// `need_t = mem(t) + mem(inputs) + mem(crossing) − (budget − fixed)` bytes,
/// and cost at least the fractional min-cost cover of `need_t`, taken
/// cheapest per byte first. One recomputation may serve several stages, so
/// the stages are not summed: the bound is every node once plus the largest
/// stage's cover. On CNN training graphs it is within 0.01–0.03% of the
/// best plans found (ResNet-50 and MobileNet at 90–60%); on random DAGs it
/// adds 0.7–1.1% over every-node-once at 80%.
pub fn eviction_bound(g: &Graph, budget: Bytes) -> f64 {
    // Each stage's cover is one O(log n) descent of a Fenwick tree
    // ([`for_each_forced_cover`]). Walking the crossing set cheapest first
    // (`for_each_forced_eviction`) is O(crossing values) per stage: on a
    // 200,007-node operator chain at 50% that was 190 s of remat-fast's 228.
    // A need past the crossing bytes costs all of them here.
    let mut worst = 0.0f64;
    for_each_forced_cover(g, budget, |_, need, crossing, cover| {
        worst = worst.max(cover(need.min(crossing)));
    });
    g.total_cost() + worst
}

/// One event of [`walk_forced`].
enum Walk<'a> {
    /// Value `v` starts crossing the stages (computed, read later).
    Cross(usize),
    /// Value `v` stops crossing (its last reader ran).
    Leave(usize),
    /// Stage `t` must give up `need` bytes among the crossing values,
    /// except `excluded` (crossing, but inputs of `t` or earlier outputs
    /// of its kernel, so resident at `t`).
    Need {
        stage: NodeId,
        need: f64,
        excluded: &'a [usize],
    },
}

/// The stages in order with what crosses them: the bookkeeping of
/// [`eviction_bound`] and [`for_each_forced_eviction`], which keep the
/// crossing values in different orders.
fn walk_forced(g: &Graph, budget: Bytes, mut on: impl FnMut(Walk)) {
    let avail = budget.saturating_sub(g.fixed_memory).as_f64();
    let last = last_use(g);
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); g.len()];
    for i in g.ids() {
        dying[last[i.idx()].idx()].push(i.idx());
    }
    let mut crossing = vec![false; g.len()];
    let mut crossing_bytes = 0.0;
    for t in g.ids() {
        let deps = g.deps(t);
        // A group is made in the stage of its last member, with the earlier
        // members among the crossing values: they must all be resident then.
        let first = g.group_start(t);
        let frontier = g.group_end(t) == t.idx();
        let mut need = g.memory(t).as_f64() + crossing_bytes - avail;
        for d in deps {
            if !crossing[d.idx()] {
                need += g.memory(*d).as_f64();
            }
        }
        if frontier && need > 0.0 {
            let mut excluded: Vec<usize> = deps
                .iter()
                .map(|d| d.idx())
                .chain(first..t.idx())
                .filter(|&v| crossing[v])
                .collect();
            excluded.sort_unstable();
            excluded.dedup();
            on(Walk::Need {
                stage: t,
                need,
                excluded: &excluded,
            });
        }
        // Node t crosses the stages after it until its last reader.
        if last[t.idx()] != t && g.memory(t).get() > 0 {
            crossing[t.idx()] = true;
            crossing_bytes += g.memory(t).as_f64();
            on(Walk::Cross(t.idx()));
        }
        for &v in &dying[t.idx()] {
            if crossing[v] {
                crossing[v] = false;
                crossing_bytes -= g.memory(NodeId::from(v)).as_f64();
                on(Walk::Leave(v));
            }
        }
    }
}

/// Bytes and costs of values by rank (cheapest per byte first), as prefix
/// sums: the fractional min-cost cover of a need is the longest prefix
/// whose bytes stay below it, plus a fraction of the next value. Bytes are
/// summed as integers, so inserting and removing leaves no drift.
struct CoverTree {
    bytes: Vec<i128>,
    cost: Vec<f64>,
    present: Vec<bool>,
}

impl CoverTree {
    fn new(n: usize) -> CoverTree {
        CoverTree {
            bytes: vec![0; n + 1],
            cost: vec![0.0; n + 1],
            present: vec![false; n],
        }
    }

    /// Puts the value at `rank` in (`sign` 1) or takes it out (-1).
    fn set(&mut self, rank: usize, (bytes, cost): (u64, f64), sign: i8) {
        self.present[rank] = sign > 0;
        let (b, c) = (i128::from(bytes) * i128::from(sign), cost * f64::from(sign));
        let mut i = rank + 1;
        while i < self.bytes.len() {
            self.bytes[i] += b;
            self.cost[i] += c;
            i += i & i.wrapping_neg();
        }
    }

    /// The cheapest cost of `need` bytes, taken cheapest per byte first and
    /// the last value fractionally; all of it when there are fewer bytes.
    /// `entry(rank)` gives the (bytes, cost) of the value at a rank.
    fn cover(&self, need: f64, entry: impl Fn(usize) -> (u64, f64)) -> f64 {
        let n = self.bytes.len() - 1;
        let (mut pos, mut bytes, mut cost) = (0usize, 0i128, 0.0);
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && ((bytes + self.bytes[next]) as f64) < need {
                pos = next;
                bytes += self.bytes[next];
                cost += self.cost[next];
            }
            step /= 2;
        }
        // The first `pos` ranks hold less than `need`; the first value in
        // the tree after them covers the rest. Every value in the tree has
        // bytes (only values with memory cross), so it is the first rank
        // whose prefix passes `bytes`: a second descent, where scanning the
        // ranks for it was linear in the values not crossing.
        let (mut r, mut before) = (0usize, 0i128);
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = r + step;
            if next <= n && before + self.bytes[next] <= bytes {
                r = next;
                before += self.bytes[next];
            }
            step /= 2;
        }
        if r < n {
            debug_assert!(self.present[r], "rank {r} has bytes but is not in the tree");
            let (m, c) = entry(r);
            cost + c * ((need - bytes as f64) / m as f64).min(1.0)
        } else {
            cost
        }
    }

    /// Bytes of every value in the tree.
    fn total(&self) -> i128 {
        let (mut i, mut sum) = (self.bytes.len() - 1, 0i128);
        while i > 0 {
            sum += self.bytes[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// The stages where the budget forces values out, as [`eviction_bound`]
/// walks them: `visit(t, need_t, crossing_t, cover)` for each stage with
/// `need_t > 0` bytes to give up, where `crossing_t` is the bytes of the
/// values that cross `t` (not its inputs) and `cover(y)` the least cost of
/// dropping `y` bytes of them, cheapest per byte first and the last
/// fractionally, and infinite past `crossing_t`. Each `cover` is
/// O(log n), where walking the candidates ([`for_each_forced_eviction`])
/// is linear in what a stage must give up: quadratic on long graphs at
/// tight budgets.
pub fn for_each_forced_cover(
    g: &Graph,
    budget: Bytes,
    mut visit: impl FnMut(NodeId, f64, f64, &dyn Fn(f64) -> f64),
) {
    let n = g.len();
    let key = |v: usize| {
        let id = NodeId::from(v);
        ((g.cost(id) / g.memory(id).as_f64()).to_bits(), v)
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&v| key(v));
    let mut rank = vec![0usize; n];
    for (r, &v) in order.iter().enumerate() {
        rank[v] = r;
    }
    let entry = |v: usize| {
        let id = NodeId::from(v);
        (g.memory(id).get(), g.cost(id))
    };
    let mut tree = CoverTree::new(n);
    walk_forced(g, budget, |step| match step {
        Walk::Cross(v) => tree.set(rank[v], entry(v), 1),
        Walk::Leave(v) => tree.set(rank[v], entry(v), -1),
        Walk::Need {
            stage,
            need,
            excluded,
        } => {
            for &v in excluded {
                tree.set(rank[v], entry(v), -1);
            }
            let total = tree.total() as f64;
            let cover = |y: f64| {
                if y <= 0.0 {
                    0.0
                } else if y > total {
                    f64::INFINITY
                } else {
                    tree.cover(y, |r| entry(order[r]))
                }
            };
            visit(stage, need, total, &cover);
            for &v in excluded {
                tree.set(rank[v], entry(v), 1);
            }
        }
    });
}

/// The stages where the budget forces values out, for the bounds built on
/// [`eviction_bound`]'s argument: `visit(need_t, candidates)` for each stage
/// with `need_t > 0` bytes to give up, the candidates being the values that
/// cross `t` (and are not its inputs) as (bytes, cost), cheapest per byte
/// first. The candidates are produced lazily: a caller that stops once it
/// has `need_t` bytes keeps the walk O(n log n + Σ evictions).
pub fn for_each_forced_eviction(
    g: &Graph,
    budget: Bytes,
    mut visit: impl FnMut(f64, &mut dyn Iterator<Item = (f64, f64)>),
) {
    // Crossing values, cheapest bytes first. Costs and sizes are
    // non-negative, so the ratio's bit pattern orders like the ratio.
    let key = |v: usize| {
        let id = NodeId::from(v);
        ((g.cost(id) / g.memory(id).as_f64()).to_bits(), v)
    };
    let mut crossing: BTreeSet<(u64, usize)> = BTreeSet::new();
    walk_forced(g, budget, |step| match step {
        Walk::Cross(v) => {
            crossing.insert(key(v));
        }
        Walk::Leave(v) => {
            crossing.remove(&key(v));
        }
        Walk::Need { need, excluded, .. } => {
            let mut cands = crossing
                .iter()
                .map(|&(_, v)| v)
                .filter(|v| excluded.binary_search(v).is_err())
                .map(|v| {
                    let id = NodeId::from(v);
                    (g.memory(id).as_f64(), g.cost(id))
                });
            visit(need, &mut cands);
        }
    });
}

/// Bytes the plan must have freed at the end of each stage `t`, beyond
/// what it may hold: `t`'s output, plus every value computed before `t`
/// that `t` or a later node reads, minus the budget's room for values
/// (budget − fixed). Positive entries are the stages where something that
/// crosses `t` without being read by it must be absent, and so computed
/// again (see [`eviction_bound`]).
pub fn stage_needs(g: &Graph, budget: Bytes) -> Vec<f64> {
    let avail = budget.saturating_sub(g.fixed_memory).as_f64();
    let last = last_use(g);
    let mut dying: Vec<Bytes> = vec![Bytes::ZERO; g.len()];
    for i in g.ids() {
        if last[i.idx()] != i {
            dying[last[i.idx()].idx()] += g.memory(i);
        }
    }
    let mut live = Bytes::ZERO;
    g.ids()
        .map(|t| {
            let need = (live + g.memory(t)).as_f64() - avail;
            if last[t.idx()] != t {
                live += g.memory(t);
            }
            live = live - dying[t.idx()];
            need
        })
        .collect()
}

/// Stages `first..=last` between two consecutive computations that read
/// `value` (or its own computation and its first reader): the stages in
/// which it may be absent at the cost of one more computation before the
/// read that closes the segment, in stage `last + 1`. Between reads in
/// consecutive stages the range is empty (`first == last + 1`), yet the
/// value may still be absent for part of the closing stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub value: NodeId,
    pub first: usize,
    pub last: usize,
}

/// Every segment of every value, value by value, empty ones included.
pub fn segments(g: &Graph) -> Vec<Segment> {
    let mut out = Vec::with_capacity(g.num_edges());
    for v in g.ids() {
        let mut prev = v.idx();
        for &u in g.users(v) {
            if u.idx() > prev {
                out.push(Segment {
                    value: v,
                    first: prev + 1,
                    last: u.idx() - 1,
                });
            }
            prev = prev.max(u.idx());
        }
    }
    out
}

/// Summary for `remat inspect`.
#[derive(Debug, Clone)]
pub struct Summary {
    pub nodes: usize,
    pub edges: usize,
    pub forward: usize,
    pub backward: usize,
    pub total_cost: f64,
    pub forward_cost: f64,
    pub fixed_memory: Bytes,
    pub checkpoint_all_peak: Bytes,
    pub min_budget: Bytes,
}

pub fn summarize(g: &Graph) -> Summary {
    let forward = g.forward_ids().count();
    Summary {
        nodes: g.len(),
        edges: g.num_edges(),
        forward,
        backward: g.len() - forward,
        total_cost: g.total_cost(),
        forward_cost: g.forward_cost(),
        fixed_memory: g.fixed_memory,
        checkpoint_all_peak: checkpoint_all_peak(g),
        min_budget: min_feasible_budget(g),
    }
}
