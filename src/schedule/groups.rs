//! Multi-output kernels for strategies that only know one output per node.
//!
//! A strategy that does not model groups (see [`Graph::group`]) solves the
//! graph with each kernel merged into one node (its outputs' bytes summed,
//! freed together), and its schedule is then lifted back: the kernel's
//! stage becomes the stage of its last output, and every kept value that
//! nothing reads any more is dropped ([`trim_keeps`]), so that the plan
//! frees each output at its own last read. Lifting never raises the peak
//! or the cost, so a merged plan that fits the budget still fits; it may
//! only be cheaper in memory than the strategy believed.

use super::Schedule;
use crate::graph::{Graph, Node, NodeId};

/// The graph with every group merged into one node, and the way back.
pub struct Merged {
    /// The merged graph: node `c` is the group `span[c]` of the original.
    pub graph: Graph,
    span: Vec<(usize, usize)>,
}

impl Merged {
    pub fn of(g: &Graph) -> Merged {
        let mut span = Vec::new();
        let mut of = vec![0u32; g.len()];
        let mut t = 0;
        while t < g.len() {
            let b = g.group_end(NodeId::from(t));
            of[t..=b].fill(span.len() as u32);
            span.push((t, b));
            t = b + 1;
        }
        let nodes = span
            .iter()
            .map(|&(a, b)| {
                let first = g.node(NodeId::from(a));
                let members = (a..=b).map(|m| g.node(NodeId::from(m)));
                // Reading two outputs of one earlier kernel is one edge to
                // its merged node (solvers reject repeated edges).
                let mut deps: Vec<NodeId> = Vec::with_capacity(first.deps.len());
                for d in &first.deps {
                    let c = NodeId(of[d.idx()]);
                    if !deps.contains(&c) {
                        deps.push(c);
                    }
                }
                Node {
                    name: first.name.clone(),
                    cost: members.clone().map(|n| n.cost).sum(),
                    memory: members.clone().map(|n| n.memory).sum(),
                    deps,
                    backward: members.clone().any(|n| n.backward),
                    op: first.op.clone(),
                    group: None,
                }
            })
            .collect();
        let graph = g.with_nodes(nodes);
        Merged { graph, span }
    }

    /// The members of merged node `c`, as original indices.
    fn members(&self, c: usize) -> std::ops::RangeInclusive<usize> {
        let (a, b) = self.span[c];
        a..=b
    }

    fn expand_list(&self, row: &[u32]) -> Vec<usize> {
        row.iter().flat_map(|&c| self.members(c as usize)).collect()
    }

    /// A schedule of the merged graph as a schedule of `g` (the graph this
    /// was made from), with dead keeps dropped.
    pub fn lift(&self, g: &Graph, sch: &Schedule) -> Schedule {
        let n = g.len();
        let mut out = Schedule::identity(n);
        for (c, &(a, b)) in self.span.iter().enumerate() {
            for t in a..=b {
                out.r[t].clear();
            }
            out.r[b] = self
                .expand_list(sch.r_row(c))
                .into_iter()
                .map(|i| i as u32)
                .collect();
            for i in self.expand_list(sch.o_row(c)) {
                out.set_o(b, i, true);
            }
            for i in self.expand_list(sch.p_row(c)) {
                out.set_p(b, i, true);
            }
            // Merged stages x..=y are the original stages from the first
            // of x's span to the last of y's.
            for &(x, y) in sch.keep_intervals(c) {
                let stages = self.span[x as usize].0..=self.span[y as usize].1;
                for m in self.members(c) {
                    out.set_s_range(m, stages.clone(), true);
                }
            }
            for &(x, y) in sch.hold_intervals(c) {
                let stages = self.span[x as usize].0..=self.span[y as usize].1;
                for m in self.members(c) {
                    out.set_h_range(m, stages.clone(), true);
                }
            }
        }
        trim_keeps(g, &mut out);
        out
    }
}

/// True when some stage before a kernel's last output computes anything.
/// The group-aware Checkmate MILP has one stage per kernel (at its last
/// output), so such a schedule lies outside its model: its optimum, bound
/// and infeasibility say nothing about it. `remat-fast` works with a stage
/// per output and can use those extra stages to compute a value twice
/// between two kernels, which at tight budgets can be cheaper.
pub fn outside_kernel_stages(g: &Graph, sch: &Schedule) -> bool {
    (0..sch.stages()).any(|t| g.group_end(NodeId::from(t)) != t && !sch.r_row(t).is_empty())
}

/// Drops every kept value that the stage does not read, copy out, or pass
/// on to a later stage that needs it. Neither the cost nor any transfer
/// changes, and memory only goes down; for a lifted schedule this is what
/// frees a kernel's outputs one by one.
///
/// Backwards along each keep interval, a value is needed in stage `t` if
/// the stage reads it (a computation's input it does not compute) or copies
/// it out, or if stage `t+1` needs it and stage `t` neither computes nor
/// fetches it; a value fetched during `t-1` is kept into `t` regardless.
/// Only stages with such an event change the answer, so this walks the
/// events of each value: O(R + edges read + transfers + intervals), not
/// O(n) per stage.
pub fn trim_keeps(g: &Graph, sch: &mut Schedule) {
    const USE: u8 = 1;
    const BREAK: u8 = 2;
    const FORCE: u8 = 4;
    let n = sch.stages();
    // (value, stage, what happens to it there)
    let mut ev: Vec<(u32, u32, u8)> = Vec::new();
    for t in 0..n {
        let row = sch.r_row(t);
        for &k in row {
            ev.push((k, t as u32, BREAK));
            for d in g.deps(NodeId::from(k as usize)) {
                if !super::row_has(row, d.idx()) {
                    ev.push((d.idx() as u32, t as u32, USE));
                }
            }
        }
        for &i in sch.o_row(t) {
            ev.push((i, t as u32, USE));
        }
        for &i in sch.p_row(t) {
            ev.push((i, t as u32, BREAK));
            if t + 1 < n {
                ev.push((i, t as u32 + 1, FORCE));
            }
        }
    }
    for &(i, t, f) in &ev {
        if f == FORCE {
            super::intervals_set(&mut sch.s[i as usize], t, t, true);
        }
    }
    ev.sort_unstable_by_key(|&(i, t, _)| (i, std::cmp::Reverse(t)));
    let mut k = 0;
    for (i, ivs) in sch.s.iter_mut().enumerate() {
        let lo = k;
        while k < ev.len() && ev[k].0 as usize == i {
            k += 1;
        }
        if ivs.is_empty() {
            continue;
        }
        let evs = &ev[lo..k];
        // New intervals, last first.
        let mut out: Vec<(u32, u32)> = Vec::new();
        let mut push = |lo: u32, hi: u32| match out.last_mut() {
            Some(last) if hi + 1 == last.0 => last.0 = lo,
            _ => out.push((lo, hi)),
        };
        let mut e = 0;
        for &(a, b) in ivs.iter().rev() {
            while e < evs.len() && evs[e].1 > b {
                e += 1;
            }
            // Stage b+1 does not keep the value (intervals do not touch).
            let (mut alive, mut top) = (false, b);
            while e < evs.len() && evs[e].1 >= a {
                let st = evs[e].1;
                let mut flags = 0;
                while e < evs.len() && evs[e].1 == st {
                    flags |= evs[e].2;
                    e += 1;
                }
                // Between events the answer carries down unchanged.
                if alive && st < top {
                    push(st + 1, top);
                }
                alive = flags & (USE | FORCE) != 0 || (alive && flags & BREAK == 0);
                top = st;
            }
            if alive {
                push(a, top);
            }
        }
        out.reverse();
        *ivs = out;
    }
}
