//! Closed-form facts about a graph that do not need a solver.

use super::{Graph, NodeId};
use crate::units::Bytes;

/// The last node (in topological order) that reads each node; a node
/// nothing reads is its own last user.
pub fn last_use(g: &Graph) -> Vec<NodeId> {
    g.ids()
        .map(|i| g.users(i).last().copied().unwrap_or(i))
        .collect()
}

/// Peak of computing every node once in order, freeing each value right
/// after its last reader, counting the output being computed. This is an
/// independent formula; the simulator must agree with it on checkpoint-all
/// plans (a tested invariant).
pub fn checkpoint_all_peak(g: &Graph) -> Bytes {
    let last = last_use(g);
    // Sweep: values become live when computed and die after their last user.
    let mut dying: Vec<Vec<NodeId>> = vec![Vec::new(); g.len()];
    for i in g.ids() {
        dying[last[i.idx()].idx()].push(i);
    }
    let mut live = Bytes::ZERO;
    let mut peak = Bytes::ZERO;
    for t in g.ids() {
        live += g.memory(t);
        peak = peak.max(live);
        for &d in &dying[t.idx()] {
            live = live - g.memory(d);
        }
    }
    g.fixed_memory + peak
}

/// No plan can run with less: computing a node needs its output and all its
/// inputs resident at once.
pub fn min_feasible_budget(g: &Graph) -> Bytes {
    let largest = g
        .ids()
        .map(|k| g.memory(k) + g.deps(k).iter().map(|&d| g.memory(d)).sum::<Bytes>())
        .max()
        .unwrap_or(Bytes::ZERO);
    g.fixed_memory + largest
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
