//! The training graph: nodes in one fixed topological order, which is also
//! the stage order of every schedule (node `t` is the frontier of stage `t`).

pub mod analysis;
pub mod backward;
pub mod fingerprint;
pub mod format;
pub mod validate;

use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

pub use fingerprint::Fingerprint;
pub use format::{GraphFile, GraphKind, NodeSpec};
pub use validate::GraphError;

/// Index of a node in the graph's topological order. Because the order is
/// fixed, a `NodeId` is also the stage at which the node is first computed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl From<usize> for NodeId {
    fn from(i: usize) -> NodeId {
        NodeId(i as u32)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub cost: f64,
    pub memory: Bytes,
    /// Dependencies in the order the file lists them; a compute statement
    /// passes its arguments in this order. Every dep precedes the node.
    pub deps: Vec<NodeId>,
    pub backward: bool,
    pub op: Option<String>,
    /// The kernel this node is one output of, when the kernel has several
    /// (see [`Graph::group`]).
    pub group: Option<String>,
}

/// A validated training graph. Construction goes through validation, so
/// every `Graph` is acyclic, topologically ordered and has sane numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub name: String,
    pub cost_unit: Option<String>,
    pub batch_size: u32,
    pub fixed_memory: Bytes,
    nodes: Vec<Node>,
    users: Vec<Vec<NodeId>>,
    index: HashMap<String, NodeId>,
    /// Per node, the first and last member of its group (itself when it is
    /// alone); empty when the graph has no groups, so that the common case
    /// costs nothing.
    groups: Vec<(u32, u32)>,
}

impl Graph {
    /// Builds a graph from nodes already in topological order. Validation
    /// code is the only caller that may skip checks; everyone else should
    /// go through [`Graph::from_file`] or [`Graph::load`].
    pub(crate) fn from_ordered(
        name: String,
        cost_unit: Option<String>,
        batch_size: u32,
        fixed_memory: Bytes,
        nodes: Vec<Node>,
    ) -> Graph {
        let mut users = vec![Vec::new(); nodes.len()];
        for (k, n) in nodes.iter().enumerate() {
            for &d in &n.deps {
                debug_assert!(d.idx() < k);
                users[d.idx()].push(NodeId::from(k));
            }
        }
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), NodeId::from(i)))
            .collect();
        let mut groups = Vec::new();
        if nodes.iter().any(|n| n.group.is_some()) {
            groups = (0..nodes.len() as u32).map(|i| (i, i)).collect();
            let mut start = 0;
            for k in 1..=nodes.len() {
                let same = k < nodes.len()
                    && nodes[k].group.is_some()
                    && nodes[k].group == nodes[start].group;
                if !same {
                    groups[start..k].fill((start as u32, (k - 1) as u32));
                    start = k;
                }
            }
        }
        Graph {
            name,
            cost_unit,
            batch_size,
            fixed_memory,
            nodes,
            users,
            index,
            groups,
        }
    }

    /// Reads, validates and (for forward graphs) differentiates a file.
    pub fn load(path: &Path) -> Result<Graph, GraphError> {
        validate::load(path)
    }

    /// Validates an in-memory file; `source` names it in error messages.
    pub fn from_file(file: &GraphFile, source: &str) -> Result<Graph, GraphError> {
        validate::build(file, source)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + ExactSizeIterator {
        (0..self.nodes.len()).map(NodeId::from)
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.idx()]
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn deps(&self, id: NodeId) -> &[NodeId] {
        &self.nodes[id.idx()].deps
    }

    /// Users in increasing topological order.
    pub fn users(&self, id: NodeId) -> &[NodeId] {
        &self.users[id.idx()]
    }

    pub fn cost(&self, id: NodeId) -> f64 {
        self.nodes[id.idx()].cost
    }

    pub fn memory(&self, id: NodeId) -> Bytes {
        self.nodes[id.idx()].memory
    }

    /// True when some kernel has several outputs (see [`Graph::group`]).
    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }

    /// The members of `id`'s group, first to last: the outputs of one
    /// kernel, consecutive in the order and with the same inputs. A plan
    /// computes them together, in the stage of the last one (which is the
    /// group's frontier), and frees each on its own. A node that is alone
    /// is a group of one.
    pub fn group(&self, id: NodeId) -> std::ops::RangeInclusive<usize> {
        match self.groups.get(id.idx()) {
            Some(&(a, b)) => a as usize..=b as usize,
            None => id.idx()..=id.idx(),
        }
    }

    /// The first member of `id`'s group.
    pub fn group_start(&self, id: NodeId) -> usize {
        self.groups.get(id.idx()).map_or(id.idx(), |g| g.0 as usize)
    }

    /// The last member of `id`'s group: the stage that computes it first.
    pub fn group_end(&self, id: NodeId) -> usize {
        self.groups.get(id.idx()).map_or(id.idx(), |g| g.1 as usize)
    }

    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.index.get(name).copied()
    }

    pub fn num_edges(&self) -> usize {
        self.nodes.iter().map(|n| n.deps.len()).sum()
    }

    /// Edges `(i, k)`: `k` reads `i`, always with `i < k`.
    pub fn edges(&self) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(k, n)| n.deps.iter().map(move |&i| (i, NodeId::from(k))))
    }

    /// Every node computed exactly once.
    pub fn total_cost(&self) -> f64 {
        self.nodes.iter().map(|n| n.cost).sum()
    }

    /// A bound from a solver's objective, rid of its float noise. Where
    /// every cost is a whole number so is every plan's, so the bound rounds
    /// up to one (past a relative slack for the solver's tolerance): a
    /// sweep wrote 13.000000000000004 as the bound of a plan costing 13.
    pub fn tidy_bound(&self, b: f64) -> f64 {
        let whole = self
            .nodes
            .iter()
            .all(|n| n.cost.fract() == 0.0 && n.cost.abs() < 9.0e15);
        if whole && b.is_finite() && self.total_cost() < 9.0e15 {
            (b - 1e-7 * b.abs().max(1.0)).ceil().max(0.0)
        } else {
            b
        }
    }

    /// A plan's cost as a multiple of checkpoint-all's. On a graph that
    /// costs nothing every plan costs what checkpoint-all does, so 1
    /// (`simulate` said 0.0000x where `solve` said 1.0000x).
    pub fn overhead(&self, cost: f64) -> f64 {
        let base = self.total_cost();
        if base > 0.0 {
            cost / base
        } else {
            1.0
        }
    }

    pub fn forward_cost(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| !n.backward)
            .map(|n| n.cost)
            .sum()
    }

    pub fn backward_cost(&self) -> f64 {
        self.total_cost() - self.forward_cost()
    }

    pub fn forward_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.ids().filter(|&i| !self.node(i).backward)
    }

    /// The content hash plans and sweep rows are tied to.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(self)
    }

    /// The explicit training graph as a file, e.g. for `remat graph`.
    pub fn to_file(&self) -> GraphFile {
        GraphFile {
            meta: Default::default(),
            name: self.name.clone(),
            graph: GraphKind::Training,
            batch_size: self.batch_size,
            cost_unit: self.cost_unit.clone(),
            fixed_memory: self.fixed_memory.as_f64(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeSpec {
                    backward: n.backward,
                    op: n.op.clone(),
                    group: n.group.clone(),
                    ..NodeSpec::new(
                        n.name.clone(),
                        n.cost,
                        n.memory.get(),
                        n.deps.iter().map(|d| self.node(*d).name.clone()).collect(),
                    )
                })
                .collect(),
        }
    }

    /// This graph's name, cost unit, batch and fixed memory over other
    /// nodes, already in topological order.
    pub(crate) fn with_nodes(&self, nodes: Vec<Node>) -> Graph {
        Graph::from_ordered(
            self.name.clone(),
            self.cost_unit.clone(),
            self.batch_size,
            self.fixed_memory,
            nodes,
        )
    }

    /// The same graph with its nodes in `order`, another topological order
    /// (the `k`-th node of the result is `order[k]`), or `None` when
    /// `order` is not one: not a permutation, or a node before an input.
    /// Groups stay only if each kernel's outputs stay together, in order.
    pub fn reordered(&self, order: &[NodeId]) -> Option<Graph> {
        let n = self.len();
        let mut pos = vec![u32::MAX; n];
        for (k, v) in order.iter().enumerate() {
            let slot = pos.get_mut(v.idx())?;
            if *slot != u32::MAX {
                return None;
            }
            *slot = k as u32;
        }
        if order.len() != n {
            return None;
        }
        let mut nodes = Vec::with_capacity(n);
        for (k, v) in order.iter().enumerate() {
            let mut node = self.node(*v).clone();
            for d in &mut node.deps {
                let p = pos[d.idx()];
                if p as usize >= k {
                    return None;
                }
                *d = NodeId(p);
            }
            nodes.push(node);
        }
        let g = self.with_nodes(nodes);
        let kept = self.ids().all(|i| {
            let r = g.group(NodeId(pos[i.idx()]));
            self.group(i).map(|m| pos[m] as usize).eq(r)
        });
        kept.then_some(g)
    }

    /// [`Graph::at_batch`] when the scaled graph keeps the limits every
    /// validated graph keeps (node and total bytes within 2^53, costs
    /// whose most expensive plan is a finite float), else `None`. A
    /// max-batch search probing batch 2^24 of a graph with petabyte values
    /// scaled them past u64, where they saturated, and reported a fit.
    pub fn at_batch_within_limits(&self, batch: u32) -> Option<Graph> {
        let g = self.at_batch(batch);
        validate::check_totals(&g.nodes, g.fixed_memory)
            .ok()
            .map(|()| g)
    }

    /// The same graph at another batch size: activation memory and costs
    /// scale linearly from the file's `batch_size`, `fixed_memory` does not.
    pub fn at_batch(&self, batch: u32) -> Graph {
        let from = self.batch_size.max(1) as u128;
        let to = batch as u128;
        let nodes = self
            .nodes
            .iter()
            .map(|n| Node {
                cost: n.cost * to as f64 / from as f64,
                memory: n.memory.scale_ceil(to, from),
                ..n.clone()
            })
            .collect();
        Graph::from_ordered(
            self.name.clone(),
            self.cost_unit.clone(),
            batch,
            self.fixed_memory,
            nodes,
        )
    }
}
