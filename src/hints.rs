//! CachedArrays-style hints: the per-step stream of `will_read`,
//! `will_write`, `archive` and `retire` a runtime that manages the tiers
//! itself consumes, in place of explicit copies. Derived from any plan that
//! passes the simulator, so the hints say what the plan does, not what a
//! strategy meant.
//!
//! Objects are values as the runtime sees them: one per computation (a
//! recomputation is a new object), shared by every copy of it in either
//! tier. docs/format.md gives the format.
//!
//! Works from the plan file alone (statements name their nodes and sizes),
//! so a runtime's hints need no graph file; `remat simulate` checks a plan.

use crate::schedule::plan::{FileStatement, PlanFile, Register};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One value as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    pub id: u32,
    pub node: String,
    pub bytes: u64,
}

/// The hints to issue before one kernel runs (or, for the last step, after
/// the last kernel: `node` is then `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub step: usize,
    pub node: Option<String>,
    /// Objects the coming kernel reads, and objects prefetched for later
    /// kernels: the runtime should have them in fast memory.
    pub will_read: Vec<u32>,
    /// The object the coming kernel writes: allocate it in fast memory.
    pub will_write: Vec<u32>,
    /// Objects not needed in fast memory for a while: move them to the slow
    /// tier.
    pub archive: Vec<u32>,
    /// Objects no kernel reads again: free them in every tier.
    pub retire: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hints {
    pub model: String,
    pub objects: Vec<Object>,
    pub steps: Vec<Step>,
}

fn push_once(v: &mut Vec<u32>, id: u32) {
    if !v.contains(&id) {
        v.push(id);
    }
}

/// A plan whose registers do not add up: one used before it exists or
/// after it is freed, or created twice. Hints of such a plan would tell a
/// runtime to read memory it already retired.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("statement {index}: register %{register} {what}")]
pub struct HintError {
    pub index: usize,
    pub register: Register,
    pub what: String,
}

/// Builds the hint stream of a plan file.
pub fn hints(plan: &PlanFile) -> Result<Hints, HintError> {
    // Object of each register, and how many live copies each object has.
    let mut object: HashMap<Register, u32> = HashMap::new();
    let mut copies: Vec<u32> = Vec::new();
    let mut objects: Vec<Object> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut cur = Step::default();
    for (index, st) in plan.statements.iter().enumerate() {
        let err = |r: &Register, what: &str| HintError {
            index,
            register: *r,
            what: what.to_string(),
        };
        let of = |r: &Register, object: &HashMap<Register, u32>| {
            object.get(r).copied().ok_or_else(|| {
                err(
                    r,
                    "is used but is not live (never created, or freed before)",
                )
            })
        };
        let fresh = |r: &Register, object: &HashMap<Register, u32>| {
            if object.contains_key(r) {
                Err(err(r, "is created again while it is live"))
            } else {
                Ok(())
            }
        };
        match st {
            FileStatement::Allocate {
                register,
                node,
                bytes,
            } => {
                fresh(register, &object)?;
                let id = objects.len() as u32;
                objects.push(Object {
                    id,
                    node: node.clone(),
                    bytes: *bytes,
                });
                copies.push(1);
                object.insert(*register, id);
            }
            FileStatement::Compute {
                node,
                register,
                args,
            } => {
                for a in args {
                    push_once(&mut cur.will_read, of(a, &object)?);
                }
                let o = of(register, &object)?;
                // The hint names the object by its allocation: a compute
                // of another node into it would hint the wrong value.
                let held = &objects[o as usize].node;
                if held != node {
                    return Err(err(
                        register,
                        &format!(
                            "holds '{}' but is computed as '{}'",
                            held.escape_debug(),
                            node.escape_debug()
                        ),
                    ));
                }
                push_once(&mut cur.will_write, o);
                cur.step = steps.len();
                cur.node = Some(node.clone());
                steps.push(std::mem::take(&mut cur));
            }
            FileStatement::CopyOut { register, src } => {
                let o = of(src, &object)?;
                fresh(register, &object)?;
                object.insert(*register, o);
                copies[o as usize] += 1;
                push_once(&mut cur.archive, o);
            }
            FileStatement::CopyIn { register, src } => {
                let o = of(src, &object)?;
                fresh(register, &object)?;
                object.insert(*register, o);
                copies[o as usize] += 1;
                push_once(&mut cur.will_read, o);
            }
            FileStatement::Deallocate { register } | FileStatement::Drop { register } => {
                let o = of(register, &object)?;
                object.remove(register);
                let left = &mut copies[o as usize];
                *left = left.saturating_sub(1);
                if *left == 0 {
                    push_once(&mut cur.retire, o);
                }
            }
            FileStatement::Wait { register } => {
                of(register, &object)?;
            }
        }
    }
    cur.step = steps.len();
    steps.push(cur);
    Ok(Hints {
        model: plan.model.clone(),
        objects,
        steps,
    })
}
