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
use fixedbitset::FixedBitSet;

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
        let graph = Graph::from_ordered(
            g.name.clone(),
            g.cost_unit.clone(),
            g.batch_size,
            g.fixed_memory,
            nodes,
        );
        Merged { graph, span }
    }

    /// The members of merged node `c`, as original indices.
    fn members(&self, c: usize) -> std::ops::RangeInclusive<usize> {
        let (a, b) = self.span[c];
        a..=b
    }

    fn expand_row(&self, row: impl Iterator<Item = usize>, n: usize) -> FixedBitSet {
        let mut out = FixedBitSet::with_capacity(n);
        for c in row {
            let (a, b) = self.span[c];
            out.insert_range(a..b + 1);
        }
        out
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
            let kept = self.expand_row(sch.s_row(c).ones(), n);
            for t in a..=b {
                out.s[t] = kept.clone();
                out.r[t].clear();
            }
            out.r[b] = self.expand_row(sch.r_row(c).ones(), n);
            for t in a..=b {
                for i in self.expand_list(sch.h_row(c)) {
                    out.set_h(t, i, true);
                }
            }
            for i in self.expand_list(sch.o_row(c)) {
                out.set_o(b, i, true);
            }
            for i in self.expand_list(sch.p_row(c)) {
                out.set_p(b, i, true);
            }
        }
        trim_keeps(g, &mut out);
        out
    }
}

/// Drops every kept value that the stage does not read, copy out, or pass
/// on to a later stage that needs it. Neither the cost nor any transfer
/// changes, and memory only goes down; for a lifted schedule this is what
/// frees a kernel's outputs one by one.
pub fn trim_keeps(g: &Graph, sch: &mut Schedule) {
    let n = sch.stages();
    // Values stage t+1 needs carried in (after trimming it).
    let mut need_next = FixedBitSet::with_capacity(n);
    for t in (0..n).rev() {
        let mut need = FixedBitSet::with_capacity(n);
        for k in sch.r_row(t).ones() {
            for d in g.deps(NodeId::from(k)) {
                if !sch.r(t, d.idx()) {
                    need.insert(d.idx());
                }
            }
        }
        for &i in sch.o_row(t) {
            need.insert(i as usize);
        }
        for i in need_next.ones() {
            if !sch.r(t, i) && !sch.p(t, i) {
                need.insert(i);
            }
        }
        need.intersect_with(sch.s_row(t));
        sch.s[t] = need;
        // A value copied in during stage t-1 must be kept into stage t.
        need_next = sch.s[t].clone();
        if t > 0 {
            let fetched: Vec<usize> = sch.p_row(t - 1).iter().map(|&i| i as usize).collect();
            for i in fetched {
                need_next.insert(i);
                sch.s[t].insert(i);
            }
        }
    }
}
