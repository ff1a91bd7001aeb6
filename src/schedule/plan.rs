//! Execution plans: Algorithm 1 of the Checkmate paper, with deallocations
//! moved as early as is correct, and the stable JSON/text forms of a plan.

use super::{Schedule, ScheduleError};
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// A virtual register holding one value.
pub type Register = u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    Allocate {
        register: Register,
        node: NodeId,
        bytes: Bytes,
    },
    Compute {
        node: NodeId,
        register: Register,
        args: Vec<Register>,
    },
    Deallocate {
        register: Register,
    },
    /// Starts copying the fast register `src` to the slow tier, into the
    /// new slow register `register`. Runs on a copy engine.
    CopyOut {
        register: Register,
        src: Register,
    },
    /// Allocates the new fast register `register` (counted from here) and
    /// starts copying the slow register `src` into it. Runs on a copy
    /// engine; the buffer may be read only after a `Wait` on it.
    CopyIn {
        register: Register,
        src: Register,
    },
    /// Blocks the compute stream until the copy that fills `register`
    /// (either direction) has finished.
    Wait {
        register: Register,
    },
    /// Frees the slow register `register`.
    Drop {
        register: Register,
    },
}

impl Statement {
    /// True for the statements that need a device with a slow tier.
    pub fn is_transfer(&self) -> bool {
        matches!(
            self,
            Statement::CopyOut { .. }
                | Statement::CopyIn { .. }
                | Statement::Wait { .. }
                | Statement::Drop { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub statements: Vec<Statement>,
}

/// Turns a schedule into statements. FREE is not taken from any solver: it
/// is derived here from (R, S). A value is freed right after its last read
/// in the stage unless the next stage keeps it; a kept value that the stage
/// never reads and the next stage does not keep (a spurious checkpoint) is
/// freed at the start of the stage.
///
/// Transfers (O, P, H) become statements in the same pass, in the order the
/// tiered model counts them (docs/format.md gives the exact layout): copies
/// in and copies out of kept values start with the stage, a computed value's
/// copy out right after its computation; at the end of the stage every copy
/// is waited for, then the fast copies that were copied out are freed and
/// the slow copies the next stage does not hold are dropped. A schedule
/// without transfers yields exactly the plan it always did.
pub fn generate_plan(g: &Graph, sch: &Schedule) -> Result<Plan, ScheduleError> {
    sch.validate(g)?;
    let n = g.len();
    // About three statements per computation (allocate, compute, free):
    // sized once, the vector is not copied as it grows, and plan
    // generation is the local search's inner loop.
    let computations: usize = (0..n).map(|t| sch.r_row(t).len()).sum();
    let mut out = Vec::with_capacity(3 * computations + 2 * n);
    // One computation's arguments, reused: the statement gets its own copy.
    let mut args: Vec<Register> = Vec::new();
    let mut next_reg: Register = 0;
    // Register currently holding each node's value, if any.
    let mut cur: Vec<Option<Register>> = vec![None; n];
    // `cur` as pass 1 predicts it at the end of the stage. Kept equal to
    // `cur` between stages by resyncing only the entries a stage touches
    // (its kept, fetched and computed values), so a stage costs O(its
    // size), not O(n): plan generation is the local search's inner loop.
    let mut shadow: Vec<Option<Register>> = vec![None; n];
    // The node each register holds, and per node the last read of its
    // carried copy in the current stage (see `LastReads`).
    let mut reg_node: Vec<usize> = Vec::new();
    let mut carried_reads: Vec<Option<usize>> = vec![None; n];
    // The slow-tier register holding each node's slow copy (transfers only).
    let mut slow: Vec<Option<Register>> = if sch.has_transfers() {
        vec![None; n]
    } else {
        Vec::new()
    };
    // Where hold intervals end: the slow copies to drop at each stage's end.
    let hold_ends = sch.hold_events(true);

    // Where keep intervals end: a kept value that the stage neither reads
    // nor recomputes and the next stage keeps is left alone, so a stage
    // costs O(its computations, their edges and the intervals ending in
    // it), not O(values it keeps) (Θ(n) per stage on training graphs).
    let ev = sch.keep_events();
    // Copies with a lead (docs/format.md): by the stage that issues them,
    // `(node, completion stage)`; and those issued but not yet waited for,
    // by node (a fetch's buffer, or a copy out's slow register and source).
    let mut in_issue: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut out_issue: Vec<Vec<(usize, usize)>> = Vec::new();
    for (t, i, lead, fetch) in sch.leads() {
        let rows = if fetch { &mut in_issue } else { &mut out_issue };
        if rows.is_empty() {
            rows.resize(n, Vec::new());
        }
        rows[t - lead].push((i, t));
    }
    let issued_here = |rows: &[Vec<(usize, usize)>], t: usize| -> Vec<usize> {
        rows.get(t)
            .map_or_else(Vec::new, |r| r.iter().map(|&(i, _)| i).collect())
    };
    // Copies issued in stage t: those of `row` without a lead (they complete
    // here) and those of `led` whose lead starts here, in node order.
    let issued = |row: &[u32], lead: &dyn Fn(usize) -> usize, led: &[Vec<(usize, usize)>], t| {
        let mut v: Vec<usize> = row
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| lead(i) == 0)
            .chain(issued_here(led, t))
            .collect();
        v.sort_unstable();
        v
    };
    // Deferred fetches (docs/format.md), by the stage that issues them:
    // the one after their P stage.
    let mut late_at: Vec<Vec<usize>> = Vec::new();
    for (t, i) in sch.deferrals() {
        if late_at.is_empty() {
            late_at.resize(n, Vec::new());
        }
        late_at[t + 1].push(i);
    }
    let mut fetch_in_flight: rustc_hash::FxHashMap<usize, Register> = Default::default();
    let mut out_in_flight: rustc_hash::FxHashMap<usize, (Register, Register)> = Default::default();
    for t in 0..n {
        let carry_next = |i: usize| t + 1 < n && sch.s(t + 1, i);
        let order: Vec<usize> = sch.r_row(t).iter().map(|&i| i as usize).collect();
        let outs = sch.o_row(t);
        // A deferred fetch belongs to the next stage.
        let deferring = late_at.get(t + 1).is_some_and(|v| !v.is_empty());
        let fetches_owned: Vec<u32>;
        let fetches: &[u32] = if deferring {
            fetches_owned = sch
                .p_row(t)
                .iter()
                .copied()
                .filter(|&i| !sch.deferred(t, i as usize))
                .collect();
            &fetches_owned
        } else {
            sch.p_row(t)
        };
        let late: &[usize] = late_at.get(t).map_or(&[], Vec::as_slice);
        let ends: Vec<usize> = ev.ends(t).iter().map(|&i| i as usize).collect();
        // At the start of a stage only kept values are held, so the entries
        // of `cur` and `shadow` the stage can change are among these: kept
        // values whose interval ends here, the values it computes and
        // fetches, and the inputs of what it computes (whose last reads go
        // to `carried_reads`).
        let mut touched: Vec<usize> = ends
            .iter()
            .copied()
            .chain(order.iter().copied())
            .chain(fetches.iter().map(|&i| i as usize))
            .chain(late.iter().copied())
            .chain(
                order
                    .iter()
                    .flat_map(|&k| g.deps(NodeId::from(k)).iter().map(|d| d.idx())),
            )
            .collect();
        touched.sort_unstable();
        touched.dedup();
        // Registers of the stage's copies are numbered before its
        // computations, so computations keep consecutive ids from `base`
        // (which `LastReads` relies on), and a copied-in value is looked up
        // like a carried one, by node.
        let fetch_issue = issued(fetches, &|i| sch.fetch_lead(t, i), &in_issue, t);
        let issue_outs = issued(outs, &|i| sch.out_lead(t, i), &out_issue, t);
        // A copy out issued here with a lead, of a value the stage
        // computes, starts after that computation; one without a lead does
        // so only when the value was not kept into the stage.
        let led_here = issued_here(&out_issue, t);
        let after_compute =
            |i: usize| sch.r(t, i) && (led_here.contains(&i) || sch.o(t, i) && !sch.s(t, i));
        // Deferred fetches are resident (for the rules below, as a kept
        // value is) from the start of the stage, though their copy is
        // issued only after the stage's first frees and waited for before
        // their first reader.
        let mut unwaited: Vec<(usize, Register)> = Vec::with_capacity(late.len());
        for &i in late {
            unwaited.push((i, next_reg));
            cur[i] = Some(next_reg);
            shadow[i] = Some(next_reg);
            reg_node.push(i);
            next_reg += 1;
        }
        let mut new_fetches: Vec<(usize, Register)> = Vec::with_capacity(fetch_issue.len());
        for &i in &fetch_issue {
            new_fetches.push((i, next_reg));
            reg_node.push(i);
            next_reg += 1;
        }
        let slow_ids: Vec<Register> = issue_outs
            .iter()
            .map(|&i| {
                reg_node.push(i);
                next_reg += 1;
                next_reg - 1
            })
            .collect();
        let slow_id = |i: usize| slow_ids[issue_outs.binary_search(&i).expect("issued here")];
        // The fetches that complete in this stage, wherever they started.
        let fetched: Vec<(usize, Register)> = fetches
            .iter()
            .map(|&i| {
                let i = i as usize;
                let reg = match new_fetches.binary_search_by_key(&i, |&(j, _)| j) {
                    Ok(p) if sch.fetch_lead(t, i) == 0 => new_fetches[p].1,
                    _ => fetch_in_flight[&i],
                };
                (i, reg)
            })
            .collect();
        // Pass 1: find each register's last read in this stage. Registers
        // created in this stage get provisional ids above `next_reg`.
        // Registers of this stage are allocated in `order`, from `next_reg`.
        reg_node.extend(order.iter().copied());
        let mut reads = LastReads {
            base: next_reg,
            fresh: vec![None; order.len()],
            carried: &mut carried_reads,
            reg_node: &reg_node,
        };
        for (provisional, (p, &k)) in (next_reg..).zip(order.iter().enumerate()) {
            for &d in g.deps(NodeId::from(k)) {
                // No fast copy: a direct read of the slow copy, which is
                // dropped by H, not by its last read.
                if let Some(r) = shadow[d.idx()] {
                    reads.insert(r, p);
                }
            }
            shadow[k] = Some(provisional);
            // The outputs of one kernel exist together: an earlier member
            // is held at least until the last one is made (validated: the
            // members are consecutive in `order`).
            let end = g.group_end(NodeId::from(k));
            if end != k {
                reads.insert(provisional, p + end - k);
            }
        }
        // A value copied in is carried into the next stage (validated), and
        // nothing in this stage reads its buffer.
        for &(i, reg) in &fetched {
            shadow[i] = Some(reg);
        }
        // The registers that survive into the next stage.
        let survives = |r: Register, i: usize, shadow: &Vec<Option<Register>>| {
            carry_next(i) && shadow[i] == Some(r)
        };
        // Fast copies being copied out in this stage: freed only at its end,
        // after their copy is waited for (or later, with a lead).
        let mut copying: Vec<Register> = out_in_flight.values().map(|&(_, src)| src).collect();
        // Copies to wait for at the end of this stage: those issued earlier
        // that complete here, then this stage's own.
        let mut pending: Vec<Register> = fetches
            .iter()
            .filter(|&&i| sch.fetch_lead(t, i as usize) > 0)
            .map(|&i| fetched[fetches.binary_search(&i).expect("in P")].1)
            .chain(
                outs.iter()
                    .filter_map(|&i| out_in_flight.get(&(i as usize)).map(|&(r, _)| r)),
            )
            .collect();
        pending.sort_unstable();
        // Copies issued here that complete in a later stage.
        let completes_here = |i: usize, fetch: bool| {
            if fetch {
                sch.p(t, i) && sch.fetch_lead(t, i) == 0
            } else {
                sch.o(t, i) && sch.out_lead(t, i) == 0
            }
        };
        // Superseded copies whose free waits for the end of the stage.
        let mut deferred: Vec<Register> = Vec::new();

        // Values from earlier stages that this stage never reads and the next
        // does not keep are dropped before anything runs. A kept value
        // survives unless its interval ends here or the stage recomputes it.
        let mut dying: Vec<usize> = ends
            .iter()
            .copied()
            .chain(order.iter().copied().filter(|&i| sch.s(t, i)))
            .collect();
        dying.sort_unstable();
        dying.dedup();
        for i in dying {
            let r = cur[i].expect("validated: kept values exist");
            if reads.get(r).is_none() && !survives(r, i, &shadow) && !sch.o(t, i) {
                out.push(Statement::Deallocate { register: r });
                cur[i] = None;
            }
        }
        // Values alive but not kept into this stage were freed at the end of
        // the previous stage, so `cur` holds exactly the carried ones here.

        // Copies in, and copies out of kept values, start with the stage:
        // the deferred ones first, since this stage waits for them.
        for &(i, reg) in &unwaited {
            let src = slow[i].expect("validated: a deferred fetch needs H");
            out.push(Statement::CopyIn { register: reg, src });
        }
        for &(i, reg) in &new_fetches {
            let src = slow[i].expect("validated: P needs H");
            out.push(Statement::CopyIn { register: reg, src });
            if completes_here(i, true) {
                pending.push(reg);
            } else {
                fetch_in_flight.insert(i, reg);
            }
        }
        for &i in &issue_outs {
            if after_compute(i) {
                continue;
            }
            if let Some(src) = cur[i].filter(|_| sch.s(t, i)) {
                let reg = slow_id(i);
                out.push(Statement::CopyOut { register: reg, src });
                slow[i] = Some(reg);
                copying.push(src);
                if completes_here(i, false) {
                    pending.push(reg);
                } else {
                    out_in_flight.insert(i, (reg, src));
                }
            }
        }

        // Statements that would split a group's computations apart (a copy
        // out, a superseded copy's free) wait for its last member, so that
        // an executor sees one kernel's outputs made back to back.
        let mut held_back: Vec<Statement> = Vec::new();
        for (p, &k) in order.iter().enumerate() {
            let node = NodeId::from(k);
            let group_end = g.group_end(node);
            let emit = |st: Statement, out: &mut Vec<Statement>, held: &mut Vec<Statement>| {
                if group_end != k {
                    held.push(st);
                } else {
                    out.push(st);
                }
            };
            // An argument without a fast copy is a direct read of the slow
            // copy (validated: H).
            // A kernel waits for the deferred fetches any of its outputs
            // reads before its first output is made.
            if !unwaited.is_empty() && g.group_start(node) == k {
                let reads_it = |i: usize| {
                    (k..=group_end).any(|m| g.deps(NodeId::from(m)).iter().any(|d| d.idx() == i))
                };
                unwaited.retain(|&(i, r)| {
                    let now = reads_it(i);
                    if now {
                        out.push(Statement::Wait { register: r });
                    }
                    !now
                });
            }
            args.clear();
            args.extend(g.deps(node).iter().map(|d| {
                cur[d.idx()]
                    .or_else(|| slow[d.idx()])
                    .expect("validated: R, S or H")
            }));
            // A recomputation of a value still held supersedes the old copy;
            // the old one has been read for the last time if `reads` says so.
            let reg = next_reg;
            next_reg += 1;
            out.push(Statement::Allocate {
                register: reg,
                node,
                bytes: g.memory(node),
            });
            out.push(Statement::Compute {
                node,
                register: reg,
                args: args.clone(),
            });
            if group_end == k {
                out.append(&mut held_back);
            }
            if !issue_outs.is_empty() && after_compute(k) && issue_outs.binary_search(&k).is_ok() {
                let sreg = slow_id(k);
                emit(
                    Statement::CopyOut {
                        register: sreg,
                        src: reg,
                    },
                    &mut out,
                    &mut held_back,
                );
                slow[k] = Some(sreg);
                copying.push(reg);
                if completes_here(k, false) {
                    pending.push(sreg);
                } else {
                    out_in_flight.insert(k, (sreg, reg));
                }
            }
            let old = cur[k].replace(reg);
            // Free the superseded copy if nothing reads it any more.
            if let Some(o) = old {
                if reads.get(o).is_none_or(|lp| lp < p) {
                    if copying.contains(&o) {
                        deferred.push(o);
                    } else {
                        emit(
                            Statement::Deallocate { register: o },
                            &mut out,
                            &mut held_back,
                        );
                    }
                }
            }
            // Free inputs whose last read in this stage was this computation
            // and which are not carried on.
            for (&d, &r) in g.deps(node).iter().zip(&args) {
                if cur[d.idx()] != Some(r) {
                    continue; // a direct read: the slow copy goes by H
                }
                if reads.get(r) == Some(p)
                    && !survives(r, d.idx(), &shadow)
                    && !copying.contains(&r)
                {
                    out.push(Statement::Deallocate { register: r });
                    cur[d.idx()] = None;
                }
            }
            // The new value itself, if nothing reads it and nobody keeps it.
            if reads.get(reg).is_none() && !survives(reg, k, &shadow) && !copying.contains(&reg) {
                out.push(Statement::Deallocate { register: reg });
                cur[k] = None;
            }
            // The kernel's other outputs that were held only for it.
            for m in g.group(node).take_while(|&m| m < k) {
                let Some(r) = cur[m] else { continue };
                if reads.get(r) == Some(p) && !survives(r, m, &shadow) && !copying.contains(&r) {
                    out.push(Statement::Deallocate { register: r });
                    cur[m] = None;
                }
            }
        }
        // Every copy completes within its stage; then the buffers it
        // pinned are freed and slow copies the next stage does not hold
        // are dropped.
        debug_assert!(unwaited.is_empty(), "validated: a deferred fetch is read");
        for &r in &pending {
            out.push(Statement::Wait { register: r });
        }
        for &(i, reg) in &fetched {
            cur[i] = Some(reg);
            fetch_in_flight.remove(&i);
        }
        for &i in outs {
            out_in_flight.remove(&(i as usize));
        }
        for &r in &deferred {
            out.push(Statement::Deallocate { register: r });
        }
        if !slow.is_empty() {
            for &i in hold_ends.get(t).into_iter().flatten().chain(outs) {
                let i = i as usize;
                if t + 1 < n && sch.h(t + 1, i) {
                    continue;
                }
                if let Some(r) = slow[i].take() {
                    out.push(Statement::Drop { register: r });
                }
            }
        }
        // End of stage: anything still held must be carried.
        for &i in &touched {
            if let Some(r) = cur[i] {
                if !survives(r, i, &shadow) {
                    out.push(Statement::Deallocate { register: r });
                    cur[i] = None;
                }
            }
        }
        drop(reads);
        for &i in &touched {
            shadow[i] = cur[i];
            carried_reads[i] = None;
        }
    }
    Ok(Plan { statements: out })
}

/// Position of each register's last read in the current stage. A register
/// in use is either created in this stage (id ≥ `base`, at position
/// id − base) or the carried copy of a kept node (older ids): both index
/// plain vectors, where a hash map was the plan generator's hot spot.
struct LastReads<'a> {
    base: Register,
    fresh: Vec<Option<usize>>,
    carried: &'a mut [Option<usize>],
    reg_node: &'a [usize],
}

impl LastReads<'_> {
    fn slot(&mut self, r: Register) -> &mut Option<usize> {
        match r.checked_sub(self.base) {
            Some(p) => &mut self.fresh[p as usize],
            None => &mut self.carried[self.reg_node[r as usize]],
        }
    }

    fn insert(&mut self, r: Register, p: usize) {
        *self.slot(r) = Some(p);
    }

    fn get(&mut self, r: Register) -> Option<usize> {
        *self.slot(r)
    }
}

/// The stable JSON interface other tools read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub model: String,
    /// The content hash of the graph the plan was made for
    /// ([`crate::graph::Fingerprint`]); readers refuse a plan for another
    /// graph. Absent in plans written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_fingerprint: Option<String>,
    pub strategy: String,
    pub budget: Option<u64>,
    pub fixed_memory: u64,
    pub cost: f64,
    pub peak_memory: u64,
    pub statements: Vec<FileStatement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum FileStatement {
    Allocate {
        register: Register,
        node: String,
        bytes: u64,
    },
    Compute {
        node: String,
        register: Register,
        args: Vec<Register>,
    },
    Deallocate {
        register: Register,
    },
    #[serde(rename = "copy_out")]
    CopyOut {
        register: Register,
        src: Register,
    },
    #[serde(rename = "copy_in")]
    CopyIn {
        register: Register,
        src: Register,
    },
    Wait {
        register: Register,
    },
    Drop {
        register: Register,
    },
}

/// A plan file that names nodes the graph does not have.
#[derive(Debug, thiserror::Error)]
#[error("statement {index}: unknown node '{node}'")]
pub struct UnknownNode {
    pub index: usize,
    pub node: String,
}

impl Plan {
    /// The nodes the plan computes, in order: its sequence of
    /// computations ([`super::sequence`]).
    pub fn computed(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.statements.iter().filter_map(|s| match s {
            Statement::Compute { node, .. } => Some(*node),
            _ => None,
        })
    }

    /// The same statements with each node `v` renamed `map[v]`: a plan
    /// made on a reordered graph ([`Graph::reordered`]), told in the
    /// original graph's ids.
    pub fn renumbered(&self, map: &[NodeId]) -> Plan {
        let mut plan = self.clone();
        for s in &mut plan.statements {
            if let Statement::Allocate { node, .. } | Statement::Compute { node, .. } = s {
                *node = map[node.idx()];
            }
        }
        plan
    }

    pub fn to_file_statements(&self, g: &Graph) -> Vec<FileStatement> {
        self.statements
            .iter()
            .map(|s| match s {
                Statement::Allocate {
                    register,
                    node,
                    bytes,
                } => FileStatement::Allocate {
                    register: *register,
                    node: g.node(*node).name.clone(),
                    bytes: bytes.get(),
                },
                Statement::Compute {
                    node,
                    register,
                    args,
                } => FileStatement::Compute {
                    node: g.node(*node).name.clone(),
                    register: *register,
                    args: args.clone(),
                },
                Statement::Deallocate { register } => FileStatement::Deallocate {
                    register: *register,
                },
                Statement::CopyOut { register, src } => FileStatement::CopyOut {
                    register: *register,
                    src: *src,
                },
                Statement::CopyIn { register, src } => FileStatement::CopyIn {
                    register: *register,
                    src: *src,
                },
                Statement::Wait { register } => FileStatement::Wait {
                    register: *register,
                },
                Statement::Drop { register } => FileStatement::Drop {
                    register: *register,
                },
            })
            .collect()
    }

    pub fn from_file_statements(g: &Graph, st: &[FileStatement]) -> Result<Plan, UnknownNode> {
        let find = |index: usize, name: &str| {
            g.find(name).ok_or_else(|| UnknownNode {
                index,
                node: name.to_string(),
            })
        };
        let statements = st
            .iter()
            .enumerate()
            .map(|(index, s)| {
                Ok(match s {
                    FileStatement::Allocate {
                        register,
                        node,
                        bytes,
                    } => Statement::Allocate {
                        register: *register,
                        node: find(index, node)?,
                        bytes: Bytes(*bytes),
                    },
                    FileStatement::Compute {
                        node,
                        register,
                        args,
                    } => Statement::Compute {
                        node: find(index, node)?,
                        register: *register,
                        args: args.clone(),
                    },
                    FileStatement::Deallocate { register } => Statement::Deallocate {
                        register: *register,
                    },
                    FileStatement::CopyOut { register, src } => Statement::CopyOut {
                        register: *register,
                        src: *src,
                    },
                    FileStatement::CopyIn { register, src } => Statement::CopyIn {
                        register: *register,
                        src: *src,
                    },
                    FileStatement::Wait { register } => Statement::Wait {
                        register: *register,
                    },
                    FileStatement::Drop { register } => Statement::Drop {
                        register: *register,
                    },
                })
            })
            .collect::<Result<Vec<_>, UnknownNode>>()?;
        Ok(Plan { statements })
    }

    /// The text form's statements (without the header a plan file adds).
    pub fn to_text(&self, g: &Graph) -> String {
        statements_text(&self.to_file_statements(g))
    }
}

/// One statement per line, the text form's body: `%3 = allocate conv1_1`,
/// `compute conv1_1, %3 <- %1`, `deallocate %3`, `%9 = copy_out %3`,
/// `%10 = copy_in %9`, `wait %10`, `drop %9`. Allocation sizes are left
/// out: a reader takes them from the graph.
pub fn statements_text(statements: &[FileStatement]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for st in statements {
        let _ = match st {
            FileStatement::Allocate { register, node, .. } => {
                writeln!(s, "%{register} = allocate {node}")
            }
            FileStatement::Compute {
                node,
                register,
                args,
            } if args.is_empty() => writeln!(s, "compute {node}, %{register}"),
            FileStatement::Compute {
                node,
                register,
                args,
            } => {
                let a: Vec<String> = args.iter().map(|r| format!("%{r}")).collect();
                writeln!(s, "compute {node}, %{register} <- {}", a.join(", "))
            }
            FileStatement::Deallocate { register } => writeln!(s, "deallocate %{register}"),
            FileStatement::CopyOut { register, src } => {
                writeln!(s, "%{register} = copy_out %{src}")
            }
            FileStatement::CopyIn { register, src } => writeln!(s, "%{register} = copy_in %{src}"),
            FileStatement::Wait { register } => writeln!(s, "wait %{register}"),
            FileStatement::Drop { register } => writeln!(s, "drop %{register}"),
        };
    }
    s
}
