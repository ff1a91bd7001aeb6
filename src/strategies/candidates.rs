//! Checkpoint candidates for the prior-work heuristics (Checkmate §6.1,
//! Appendix B): Chen et al. and Griewank–Walther assume a chain, so on a
//! general DAG they pick checkpoints among nodes that behave like chain
//! links: articulation points, or every forward node of a linearized order.

use crate::graph::{Graph, NodeId};
use petgraph::graph::{NodeIndex, UnGraph};

/// The forward pass: nodes not marked `backward`, in topological order. A
/// plain DAG (no backward nodes at all) is all forward.
pub fn forward_nodes(g: &Graph) -> Vec<NodeId> {
    g.forward_ids().collect()
}

/// Whether the graph has a backward pass to reverse.
pub fn has_backward(g: &Graph) -> bool {
    g.nodes().iter().any(|n| n.backward)
}

/// Linearized candidates (Appendix B.2): every forward node, along the
/// topological order treated as a chain.
pub fn linearized(g: &Graph) -> Vec<NodeId> {
    forward_nodes(g)
}

/// Articulation points (cut vertices) of the undirected forward graph, in
/// topological order (Appendix B.1). A virtual source joined to every
/// forward node without forward inputs, and a virtual sink joined to every
/// forward node without forward users, make the graph's ends count: on a
/// chain every node is then a cut vertex, so AP candidates reproduce the
/// original heuristics there. With both ends attached, every cut vertex
/// separates the nodes before it (in topological order) from those after
/// it, so no forward edge crosses a chosen checkpoint.
pub fn articulation_points(g: &Graph) -> Vec<NodeId> {
    let fwd = forward_nodes(g);
    if fwd.is_empty() {
        return Vec::new();
    }
    let is_fwd = |v: NodeId| !g.node(v).backward;
    let mut ug: UnGraph<(), ()> = UnGraph::with_capacity(fwd.len() + 2, g.num_edges() + 2);
    let mut index = vec![NodeIndex::end(); g.len()];
    for &v in &fwd {
        index[v.idx()] = ug.add_node(());
    }
    let source = ug.add_node(());
    let sink = ug.add_node(());
    for &v in &fwd {
        let mut has_fwd_dep = false;
        for &u in g.deps(v) {
            if is_fwd(u) {
                has_fwd_dep = true;
                ug.add_edge(index[u.idx()], index[v.idx()], ());
            }
        }
        if !has_fwd_dep {
            ug.add_edge(source, index[v.idx()], ());
        }
        if !g.users(v).iter().any(|&w| is_fwd(w)) {
            ug.add_edge(index[v.idx()], sink, ());
        }
    }
    let cut = petgraph::algo::articulation_points::articulation_points(&ug);
    fwd.into_iter()
        .filter(|v| cut.contains(&index[v.idx()]))
        .collect()
}

/// Why the graph is not a chain in Chen et al.'s sense, if it is not: the
/// forward nodes must form a path (each reads exactly the previous forward
/// node) and the backward nodes another path (each reads at most the
/// previous backward node among backward values).
pub fn not_linear_reason(g: &Graph) -> Option<String> {
    for pass in [false, true] {
        let what = if pass { "backward" } else { "forward" };
        let mut prev: Option<NodeId> = None;
        for v in g.ids().filter(|&v| g.node(v).backward == pass) {
            let mut same: Vec<NodeId> = g
                .deps(v)
                .iter()
                .copied()
                .filter(|&u| g.node(u).backward == pass)
                .collect();
            same.sort_unstable();
            same.dedup();
            let ok = match prev {
                None => same.is_empty(),
                Some(p) => same == [p],
            };
            if !ok {
                let names: Vec<String> = same
                    .iter()
                    .map(|&u| format!("'{}'", g.node(u).name))
                    .collect();
                let expected = match prev {
                    None => "none".to_string(),
                    Some(p) => format!("only '{}'", g.node(p).name),
                };
                return Some(format!(
                    "the {what} pass is not a chain: {what} node '{}' reads {} {what} node(s) [{}], expected {expected}",
                    g.node(v).name,
                    same.len(),
                    names.join(", ")
                ));
            }
            prev = Some(v);
        }
    }
    None
}
