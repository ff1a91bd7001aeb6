//! Backward-pass generation for `graph: forward` files (rule in
//! `docs/format.md`). Gradients are appended in reverse forward order, which
//! is a valid topological order: `grad/v` reads only forward values and the
//! gradients of v's users, all of which come earlier.

use super::format::NodeSpec;
use super::validate::{check_bytes, check_cost, Problem};
use std::collections::{HashMap, HashSet};

pub const GRAD_PREFIX: &str = "grad/";

/// `forward` must already be in topological order.
pub fn generate(forward: &[&NodeSpec]) -> Result<Vec<NodeSpec>, Problem> {
    let index: HashMap<&str, usize> = forward
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); forward.len()];
    for (k, n) in forward.iter().enumerate() {
        if n.backward {
            return Err(Problem::Node {
                node: n.name.clone(),
                msg: "'backward: true' is not allowed in a 'graph: forward' file; \
                      use 'graph: training' to list gradient nodes yourself"
                    .into(),
            });
        }
        for d in &n.deps {
            users[index[d.as_str()]].push(k);
        }
    }
    // Gradient keys are checked on every node, not only on those that end
    // up with a gradient: on the loss, on a `requires_grad: false` input or
    // on a node no gradient reaches they would otherwise be ignored
    // silently, typos and all (`saves: [fc11]` on the loss).
    for n in forward {
        for item in n.saves.iter().flatten() {
            // `self` is the node's own output, so a node named 'self'
            // cannot be saved by name: which one was meant is unknowable.
            if item == "self" && index.contains_key("self") && n.name != "self" {
                return Err(Problem::Node {
                    node: n.name.clone(),
                    msg: "saves 'self', which is ambiguous here: 'self' means this node's own output, and another node is named 'self'; rename that node".into(),
                });
            }
            if item != "self" && !index.contains_key(item.as_str()) {
                return Err(Problem::Node {
                    node: n.name.clone(),
                    msg: format!(
                        "saves unknown value '{}' (use 'self' or a forward node's name)",
                        item.escape_debug()
                    ),
                });
            }
        }
        if let Some(c) = n.grad_cost {
            check_cost(&n.name, "grad_cost", c)?;
        }
        if let Some(m) = n.grad_memory {
            check_bytes(&n.name, "grad_memory", m)?;
        }
    }
    let sinks: Vec<usize> = (0..forward.len())
        .filter(|&i| users[i].is_empty())
        .collect();
    if sinks.len() != 1 {
        let names: Vec<String> = sinks
            .iter()
            .take(5)
            .map(|&i| format!("'{}'", forward[i].name))
            .collect();
        return Err(Problem::Other(format!(
            "a forward graph must end in exactly one node, the loss; found {} nodes that nothing reads: {}{}",
            sinks.len(),
            names.join(", "),
            if sinks.len() > 5 { ", ..." } else { "" }
        )));
    }
    let loss = sinks[0];

    // A node gets a gradient if it asks for one and some gradient reaches it.
    let mut has_grad = vec![false; forward.len()];
    for v in (0..forward.len()).rev() {
        if v == loss || !forward[v].requires_grad {
            continue;
        }
        has_grad[v] = users[v].iter().any(|&u| u == loss || has_grad[u]);
    }

    let mut out: Vec<NodeSpec> = forward.iter().map(|n| (*n).clone()).collect();
    for n in &mut out {
        // Gradient-only keys are consumed here; the training graph is plain.
        n.saves = None;
        n.grad_cost = None;
        n.grad_memory = None;
        n.requires_grad = true;
    }
    for v in (0..forward.len()).rev() {
        if !has_grad[v] {
            continue;
        }
        let node = forward[v];
        let mut deps: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut push = |name: String, deps: &mut Vec<String>| {
            if seen.insert(name.clone()) {
                deps.push(name);
            }
        };
        for &u in &users[v] {
            if u == loss {
                push(forward[loss].name.clone(), &mut deps);
            } else if has_grad[u] {
                push(format!("{GRAD_PREFIX}{}", forward[u].name), &mut deps);
            }
        }
        let saved: Vec<String> = match &node.saves {
            None => std::iter::once(node.name.clone())
                .chain(node.deps.iter().cloned())
                .collect(),
            Some(list) => {
                let mut s = Vec::new();
                for item in list {
                    if item == "self" {
                        s.push(node.name.clone());
                    } else if index.contains_key(item.as_str()) {
                        s.push(item.clone());
                    } else {
                        return Err(Problem::Node {
                            node: node.name.clone(),
                            msg: format!(
                                "saves unknown value '{item}' (use 'self' or a forward node's name)"
                            ),
                        });
                    }
                }
                s
            }
        };
        for s in saved {
            push(s, &mut deps);
        }
        let cost = match node.grad_cost {
            Some(c) => check_cost(&node.name, "grad_cost", c)?,
            // Named here: past half the largest float the doubled cost is
            // infinite, and the error would name the generated node.
            None if !(2.0 * node.cost).is_finite() => {
                return Err(Problem::Node {
                    node: node.name.clone(),
                    msg: format!(
                        "cost {:e}: its gradient's default cost, twice that, is not a finite number; give grad_cost, or use a larger cost unit",
                        node.cost
                    ),
                })
            }
            None => 2.0 * node.cost,
        };
        let memory = match node.grad_memory {
            Some(m) => check_bytes(&node.name, "grad_memory", m)?.as_f64(),
            None => node.memory,
        };
        out.push(NodeSpec {
            backward: true,
            op: node.op.as_ref().map(|o| format!("{o}_grad")),
            ..NodeSpec::new(
                format!("{GRAD_PREFIX}{}", node.name),
                cost,
                memory as u64,
                deps,
            )
        });
    }
    Ok(out)
}
