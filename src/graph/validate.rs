//! Turning a graph file into a [`Graph`]: every check on user input lives
//! here, so that nothing downstream has to defend against bad numbers,
//! dangling names or cycles.

use super::backward;
use super::format::{FormatError, GraphFile, GraphKind, NodeSpec};
use super::{Graph, Node, NodeId};
use crate::units::Bytes;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;

/// A graph file that cannot be used, always naming the file and, where one
/// is to blame, the node.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct GraphError {
    pub file: String,
    pub problem: Problem,
}

#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("the graph has no nodes")]
    Empty,
    #[error("node '{}' is defined more than once", .0.escape_debug())]
    Duplicate(String),
    #[error("node '{}': unknown dependency '{}'", .node.escape_debug(), .dep.escape_debug())]
    UnknownDep { node: String, dep: String },
    #[error("node '{0}' depends on itself")]
    SelfDep(String),
    #[error("node '{node}': dependency '{dep}' is listed twice")]
    RepeatedDep { node: String, dep: String },
    #[error("{}", cycle_line(.0))]
    Cycle(Vec<String>),
    #[error("node '{node}': {field} must be a finite number >= 0, got {value}")]
    BadNumber {
        node: String,
        field: &'static str,
        value: f64,
    },
    #[error("node '{node}': {field} must be a whole number of bytes, got {value}")]
    NonInteger {
        node: String,
        field: &'static str,
        value: f64,
    },
    /// Sizes are counted exactly in floats by the solvers, so they stop at
    /// 2^53; the message must not call a whole number fractional.
    #[error("node '{node}': {field} {value} is more than 2^53 bytes (9007199254740992), the largest size remat counts exactly")]
    TooLarge {
        node: String,
        field: &'static str,
        value: String,
    },
    #[error("{0}")]
    Overflow(String),
    #[error("fixed_memory must be a whole number of bytes from 0 to 2^53 (9007199254740992), got {}", big_number(*.0))]
    BadFixed(f64),
    #[error("batch_size must be at least 1")]
    BadBatch,
    #[error("forward node '{node}' reads gradient node '{dep}'")]
    ForwardReadsBackward { node: String, dep: String },
    #[error("node '{node}': {msg}")]
    Node { node: String, msg: String },
    #[error("{0}")]
    Other(String),
}

impl GraphError {
    pub fn new(file: &str, problem: impl Into<Problem>) -> GraphError {
        GraphError {
            file: file.to_string(),
            problem: problem.into(),
        }
    }
}

pub fn load(path: &Path) -> Result<Graph, GraphError> {
    let file = path.display().to_string();
    let text = crate::input::read_text(path, crate::input::MAX_GRAPH_BYTES)
        .map_err(|e| GraphError::new(&file, FormatError::Io(e)))?;
    let parsed = GraphFile::parse(&text).map_err(|e| GraphError::new(&file, e))?;
    build(&parsed, &file)
}

/// Largest integer a float holds exactly; byte counts above it would
/// silently lose precision.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

pub(crate) fn check_cost(node: &str, field: &'static str, v: f64) -> Result<f64, Problem> {
    if !v.is_finite() || v < 0.0 {
        return Err(Problem::BadNumber {
            node: node.to_string(),
            field,
            value: v,
        });
    }
    // -0.0 passes `v < 0.0`; adding 0 makes it 0, so no total prints "-0".
    Ok(v + 0.0)
}

/// A number as a person reads it in a message: in full up to 21 digits,
/// larger ones (`1e300`, which in full is 301 digits of float noise) in
/// exponent form.
fn big_number(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e21 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

pub(crate) fn check_bytes(node: &str, field: &'static str, v: f64) -> Result<Bytes, Problem> {
    check_cost(node, field, v)?;
    if v > MAX_EXACT {
        return Err(Problem::TooLarge {
            node: node.to_string(),
            field,
            value: big_number(v),
        });
    }
    if v.fract() != 0.0 {
        return Err(Problem::NonInteger {
            node: node.to_string(),
            field,
            value: v,
        });
    }
    Ok(Bytes(v as u64))
}

pub fn build(file: &GraphFile, source: &str) -> Result<Graph, GraphError> {
    build_inner(file).map_err(|p| GraphError::new(source, p))
}

fn build_inner(file: &GraphFile) -> Result<Graph, Problem> {
    if file.nodes.is_empty() {
        return Err(Problem::Empty);
    }
    if file.batch_size == 0 {
        return Err(Problem::BadBatch);
    }
    if !file.fixed_memory.is_finite()
        || file.fixed_memory < 0.0
        || file.fixed_memory.fract() != 0.0
        || file.fixed_memory > MAX_EXACT
    {
        return Err(Problem::BadFixed(file.fixed_memory));
    }
    // The model's name labels every summary, plan and sweep row.
    if file.name.trim().is_empty() {
        return Err(Problem::Other("name: must not be empty".into()));
    }
    // CSV cells are read back trimmed (a hand-edited `a, b` stays readable),
    // so a name with a space at either end never matched its own rows
    // again: every re-run of a sweep solved and appended them anew.
    if file.name.trim() != file.name {
        return Err(Problem::Other(format!(
            "name '{}' may not begin or end with white space (CSV rows are keyed by the name, trimmed)",
            file.name.escape_debug()
        )));
    }
    // Labels are echoed in summaries, errors and plan headers: a newline or
    // an escape code in one splits or garbles them.
    let labels = [
        ("name", Some(&file.name)),
        ("cost_unit", file.cost_unit.as_ref()),
    ];
    for (key, v) in labels {
        if let Some(v) = v.filter(|v| v.chars().any(char::is_control)) {
            return Err(Problem::Other(format!(
                "{key} '{}' may not contain control characters",
                v.escape_debug()
            )));
        }
    }
    // A group's name is echoed in errors about the group ("group 'k' is
    // split"), an op's in the zoo's files: per node, naming it.
    for n in &file.nodes {
        for (key, v) in [("op", n.op.as_ref()), ("group", n.group.as_ref())] {
            if let Some(v) = v.filter(|v| v.chars().any(char::is_control)) {
                return Err(Problem::Node {
                    node: n.name.escape_debug().to_string(),
                    msg: format!(
                        "{key} '{}' may not contain control characters",
                        v.escape_debug()
                    ),
                });
            }
        }
    }
    let order = check_and_order(&file.nodes)?;
    let specs: Vec<NodeSpec> = match file.graph {
        GraphKind::Training => {
            for n in &file.nodes {
                let misplaced = if n.saves.is_some() {
                    Some("saves")
                } else if n.grad_cost.is_some() {
                    Some("grad_cost")
                } else if n.grad_memory.is_some() {
                    Some("grad_memory")
                } else if !n.requires_grad {
                    Some("requires_grad")
                } else {
                    None
                };
                if let Some(k) = misplaced {
                    return Err(Problem::Node {
                        node: n.name.clone(),
                        msg: format!("'{k}' is only meaningful in 'graph: forward' files"),
                    });
                }
            }
            order.iter().map(|&i| file.nodes[i].clone()).collect()
        }
        GraphKind::Forward => {
            if let Some(n) = file.nodes.iter().find(|n| n.group.is_some()) {
                return Err(Problem::Node {
                    node: n.name.clone(),
                    msg: "'group' is only meaningful in 'graph: training' files (a forward graph's gradients have no kernels to share)".into(),
                });
            }
            let ordered: Vec<&NodeSpec> = order.iter().map(|&i| &file.nodes[i]).collect();
            backward::generate(&ordered)?
        }
    };
    // Backward generation appends nodes in a valid order, and for training
    // files `order` is already topological, so `specs` is ordered.
    let index: HashMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    if index.len() != specs.len() {
        // Generated gradient names can collide with user names.
        let mut seen = HashSet::new();
        for n in &specs {
            if !seen.insert(n.name.as_str()) {
                if n.backward && file.graph == GraphKind::Forward {
                    return Err(Problem::Node {
                        node: n.name.escape_debug().to_string(),
                        msg: "collides with the gradient node generated for a forward node; rename it ('grad/...' names are generated in 'graph: forward' files)".into(),
                    });
                }
                return Err(Problem::Duplicate(n.name.clone()));
            }
        }
    }
    // Reserved even without a collision (docs/format.md): its gradient
    // would be 'grad/grad/a', a name that reads as a gradient's gradient.
    if file.graph == GraphKind::Forward {
        if let Some(n) = file.nodes.iter().find(|n| n.name.starts_with("grad/")) {
            return Err(Problem::Node {
                node: n.name.escape_debug().to_string(),
                msg: "'grad/...' names are the generated gradients' in 'graph: forward' files; rename it".into(),
            });
        }
    }
    let mut nodes = Vec::with_capacity(specs.len());
    for spec in &specs {
        let deps: Vec<NodeId> = spec
            .deps
            .iter()
            .map(|d| NodeId::from(index[d.as_str()]))
            .collect();
        for d in &deps {
            let dn = &specs[d.idx()];
            if !spec.backward && dn.backward {
                return Err(Problem::ForwardReadsBackward {
                    node: spec.name.clone(),
                    dep: dn.name.clone(),
                });
            }
        }
        nodes.push(Node {
            name: spec.name.clone(),
            cost: check_cost(&spec.name, "cost", spec.cost)?,
            memory: check_bytes(&spec.name, "memory", spec.memory)?,
            deps,
            backward: spec.backward,
            op: spec.op.clone(),
            group: spec.group.clone(),
        });
    }
    check_groups(&nodes)?;
    check_totals(&nodes, Bytes(file.fixed_memory as u64))?;
    Ok(Graph::from_ordered(
        file.name.clone(),
        file.cost_unit.clone(),
        file.batch_size,
        Bytes(file.fixed_memory as u64),
        nodes,
    ))
}

/// The members of a group are the outputs of one kernel: the plan computes
/// them in one go, so they must sit together in the order (after their
/// common inputs) and read exactly the same inputs, and none may read
/// another (a kernel does not read its own outputs).
fn check_groups(nodes: &[Node]) -> Result<(), Problem> {
    let mut closed: HashSet<&str> = HashSet::new();
    let mut k = 0;
    while k < nodes.len() {
        let Some(name) = nodes[k].group.as_deref() else {
            k += 1;
            continue;
        };
        let bad = |node: &Node, msg: String| Problem::Node {
            node: node.name.clone(),
            msg,
        };
        if closed.contains(name) {
            return Err(bad(
                &nodes[k],
                format!(
                    "group '{name}' is split: list its members together, after all their inputs"
                ),
            ));
        }
        let start = k;
        while k < nodes.len() && nodes[k].group.as_deref() == Some(name) {
            let n = &nodes[k];
            if let Some(d) = n.deps.iter().find(|d| d.idx() >= start) {
                return Err(bad(
                    n,
                    format!(
                        "reads '{}', a member of its own group '{name}' (outputs of one kernel cannot read each other)",
                        nodes[d.idx()].name
                    ),
                ));
            }
            // One kernel runs in one pass: a group half forward, half
            // backward passed, and then the baselines that split the graph
            // at the turn scheduled a member before its kernel could run.
            if n.backward != nodes[start].backward {
                let pass = |b: bool| if b { "backward" } else { "forward" };
                return Err(bad(
                    n,
                    format!(
                        "is a {} node but '{}' is {}: members of group '{name}' are outputs of one kernel and run in one pass",
                        pass(n.backward),
                        nodes[start].name,
                        pass(nodes[start].backward)
                    ),
                ));
            }
            if n.deps != nodes[start].deps {
                return Err(bad(
                    n,
                    format!(
                        "its deps differ from those of '{}': members of group '{name}' are outputs of one kernel and list the same inputs",
                        nodes[start].name
                    ),
                ));
            }
            k += 1;
        }
        closed.insert(name);
    }
    Ok(())
}

/// Every node finite is not enough: the solvers add costs and sizes up. A
/// plan recomputes each node at most once per stage, so its cost is at
/// most `n` times the total; that must stay a finite float. Byte totals
/// must stay within the 2^53 that floats count exactly.
pub(crate) fn check_totals(nodes: &[Node], fixed: Bytes) -> Result<(), Problem> {
    let total: f64 = nodes.iter().map(|n| n.cost).sum();
    if !(total * nodes.len() as f64).is_finite() {
        return Err(Problem::Overflow(format!(
            "the costs are too large: their total ({total:e}) times the {} nodes, the most a plan can cost, passes the largest float ({:e}); use a larger cost unit",
            nodes.len(),
            f64::MAX
        )));
    }
    let bytes = nodes
        .iter()
        .try_fold(fixed.get(), |acc, n| acc.checked_add(n.memory.get()))
        // Compared as integers: `b as f64` rounds 2^53 + 1 down to 2^53.
        .filter(|&b| b <= MAX_EXACT as u64);
    if bytes.is_none() {
        return Err(Problem::Overflow(
            "the node memories and fixed_memory add up to more than 2^53 bytes (9007199254740992), the largest total remat counts exactly".into(),
        ));
    }
    Ok(())
}

/// Checks names and edges, and returns a topological order that keeps file
/// order wherever the dependencies leave it free (Kahn's algorithm with the
/// smallest file index first).
pub(crate) fn check_and_order(nodes: &[NodeSpec]) -> Result<Vec<usize>, Problem> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if n.name.is_empty() {
            return Err(Problem::Other(format!("node #{i} has an empty name")));
        }
        // Echoed raw, a newline in a name would split an error message.
        if n.name.chars().any(char::is_control) {
            return Err(Problem::Other(format!(
                "node #{i} '{}': names may not contain control characters",
                n.name.escape_debug()
            )));
        }
        // Text plans name nodes by their trimmed words.
        if n.name.trim() != n.name {
            return Err(Problem::Other(format!(
                "node #{i} '{}': names may not start or end with white space",
                n.name.escape_debug()
            )));
        }
        if index.insert(n.name.as_str(), i).is_some() {
            return Err(Problem::Duplicate(n.name.clone()));
        }
    }
    let mut indeg = vec![0usize; nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (k, n) in nodes.iter().enumerate() {
        check_cost(&n.name, "cost", n.cost)?;
        check_bytes(&n.name, "memory", n.memory)?;
        let mut seen = HashSet::new();
        for d in &n.deps {
            if d == &n.name {
                return Err(Problem::SelfDep(n.name.clone()));
            }
            let Some(&i) = index.get(d.as_str()) else {
                return Err(Problem::UnknownDep {
                    node: n.name.clone(),
                    dep: d.clone(),
                });
            };
            if !seen.insert(i) {
                return Err(Problem::RepeatedDep {
                    node: n.name.clone(),
                    dep: d.clone(),
                });
            }
            indeg[k] += 1;
            users[i].push(k);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = indeg
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() < nodes.len() {
        return Err(Problem::Cycle(find_cycle(nodes, &index, &indeg)));
    }
    Ok(order)
}

/// Longest cycle an error lists in full; a longer one shows its first and
/// last few nodes and its length (a 300,000-node cycle made a 3.8 MB line).
const CYCLE_LISTED: usize = 12;

fn cycle_line(nodes: &[String]) -> String {
    let quoted = |ns: &[String]| {
        ns.iter()
            .map(|n| format!("'{}'", n.escape_debug()))
            .collect::<Vec<_>>()
            .join(" -> ")
    };
    if nodes.len() <= CYCLE_LISTED {
        return format!("cycle through nodes {}", quoted(nodes));
    }
    let half = CYCLE_LISTED / 2;
    // The listing closes the cycle with its first node again.
    let distinct = nodes.len() - usize::from(nodes.first() == nodes.last());
    format!(
        "cycle of {distinct} nodes through {} -> ... -> {}",
        quoted(&nodes[..half]),
        quoted(&nodes[nodes.len() - half..])
    )
}

/// Names the nodes of one cycle among those Kahn's algorithm could not
/// order: walking backwards along unordered deps must eventually revisit.
fn find_cycle(nodes: &[NodeSpec], index: &HashMap<&str, usize>, indeg: &[usize]) -> Vec<String> {
    let Some(start) = (0..nodes.len()).find(|&i| indeg[i] > 0) else {
        return Vec::new();
    };
    let mut pos: HashMap<usize, usize> = HashMap::new();
    let mut path = Vec::new();
    let mut cur = start;
    loop {
        if let Some(&p) = pos.get(&cur) {
            let mut cyc: Vec<String> = path[p..]
                .iter()
                .rev()
                .map(|&i: &usize| nodes[i].name.clone())
                .collect();
            cyc.push(cyc[0].clone());
            return cyc;
        }
        pos.insert(cur, path.len());
        path.push(cur);
        // Any dep still unordered keeps us inside the unorderable set.
        cur = match nodes[cur]
            .deps
            .iter()
            .map(|d| index[d.as_str()])
            .find(|&d| indeg[d] > 0)
        {
            Some(d) => d,
            None => return vec![nodes[cur].name.clone()],
        };
    }
}

#[cfg(test)]
mod tests {
    /// A cost of -0.0 is accepted as 0, not kept negative: `inspect`
    /// printed "total cost -0 units".
    #[test]
    fn negative_zero_costs_are_zero() {
        let c = super::check_cost("a", "cost", -0.0).unwrap();
        assert!(c == 0.0 && c.is_sign_positive());
        assert!(super::check_cost("a", "cost", -1e-300).is_err());
    }
}
