//! The simulator: replays any plan against a graph and checks it, knowing
//! nothing about the strategy that made it. Every cost and peak the tool
//! reports comes from here.

use super::plan::{Plan, Register, Statement};
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    /// Sum of the costs of all computations, recomputations included.
    pub cost: f64,
    /// `fixed_memory` plus the most bytes allocated at once, counting a
    /// register from its allocate statement.
    pub peak: Bytes,
    pub computations: usize,
    /// Index of the statement at which the peak was first reached.
    pub peak_statement: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("plan statement {index}: {msg}")]
pub struct SimError {
    pub index: usize,
    pub msg: String,
}

struct Reg {
    node: NodeId,
    bytes: Bytes,
    computed: bool,
    live: bool,
}

pub fn simulate(g: &Graph, plan: &Plan) -> Result<SimReport, SimError> {
    let mut regs: HashMap<Register, Reg> = HashMap::new();
    let mut computed_once = vec![false; g.len()];
    let mut live = Bytes::ZERO;
    let mut peak = Bytes::ZERO;
    let mut peak_statement = 0;
    let mut cost = 0.0;
    let mut computations = 0;
    for (index, st) in plan.statements.iter().enumerate() {
        let fail = |msg: String| SimError { index, msg };
        match st {
            Statement::Allocate {
                register,
                node,
                bytes,
            } => {
                if node.idx() >= g.len() {
                    return Err(fail(format!(
                        "allocate names node #{node}, not in the graph"
                    )));
                }
                let name = &g.node(*node).name;
                if *bytes != g.memory(*node) {
                    return Err(fail(format!(
                        "allocate %{register} for '{name}' reserves {bytes} bytes but the graph says {}",
                        g.memory(*node)
                    )));
                }
                if regs.contains_key(register) {
                    return Err(fail(format!("register %{register} is allocated twice")));
                }
                regs.insert(
                    *register,
                    Reg {
                        node: *node,
                        bytes: *bytes,
                        computed: false,
                        live: true,
                    },
                );
                live += *bytes;
                if live > peak {
                    peak = live;
                    peak_statement = index;
                }
            }
            Statement::Compute {
                node,
                register,
                args,
            } => {
                if node.idx() >= g.len() {
                    return Err(fail(format!(
                        "compute names node #{node}, not in the graph"
                    )));
                }
                let name = &g.node(*node).name;
                let deps = g.deps(*node);
                if args.len() != deps.len() {
                    return Err(fail(format!(
                        "compute '{name}' passes {} arguments but the node has {} dependencies",
                        args.len(),
                        deps.len()
                    )));
                }
                for (a, &d) in args.iter().zip(deps) {
                    let dname = &g.node(d).name;
                    match regs.get(a) {
                        None => {
                            return Err(fail(format!(
                                "compute '{name}' reads %{a}, which was never allocated"
                            )))
                        }
                        Some(r) if !r.live => {
                            return Err(fail(format!(
                                "compute '{name}' reads %{a}, which was already deallocated"
                            )))
                        }
                        Some(r) if r.node != d => {
                            return Err(fail(format!(
                                "compute '{name}' expects '{dname}' in %{a}, which holds '{}'",
                                g.node(r.node).name
                            )))
                        }
                        Some(r) if !r.computed => {
                            return Err(fail(format!(
                                "compute '{name}' reads %{a} ('{dname}') before it was computed"
                            )))
                        }
                        Some(_) => {}
                    }
                }
                match regs.get_mut(register) {
                    None => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register}, which was never allocated"
                        )))
                    }
                    Some(r) if !r.live => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register}, which was already deallocated"
                        )))
                    }
                    Some(r) if r.node != *node => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register}, which was allocated for '{}'",
                            g.node(r.node).name
                        )))
                    }
                    Some(r) if r.computed => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register} a second time"
                        )))
                    }
                    Some(r) => r.computed = true,
                }
                cost += g.cost(*node);
                computations += 1;
                computed_once[node.idx()] = true;
            }
            Statement::Deallocate { register } => match regs.get_mut(register) {
                None => {
                    return Err(fail(format!(
                        "deallocate %{register}, which was never allocated"
                    )))
                }
                Some(r) if !r.live => {
                    return Err(fail(format!("register %{register} is deallocated twice")))
                }
                Some(r) => {
                    r.live = false;
                    live = live - r.bytes;
                }
            },
        }
    }
    if let Some(missing) = computed_once.iter().position(|c| !c) {
        return Err(SimError {
            index: plan.statements.len(),
            msg: format!(
                "the plan never computes '{}'",
                g.node(NodeId::from(missing)).name
            ),
        });
    }
    Ok(SimReport {
        cost,
        peak: g.fixed_memory + peak,
        computations,
        peak_statement,
    })
}
