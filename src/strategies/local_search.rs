//! `remat-fast`: local search over the checkpoint matrix S, with
//! [`solve_r`] filling in the cheapest R for every candidate, so each move
//! is priced exactly (cascading recomputations included) and checked by the
//! plan generator and the simulator.
//!
//! Phase 1 (fit): start from checkpoint-all and, while the simulated peak is
//! over budget, look at the values resident at the peak that the peak's
//! stage does not read. Dropping one of them over its idle interval (from
//! the stage after its previous read to its next read, where it is then
//! recomputed) is a move; the move with the least extra cost per byte freed
//! wins. Phase 2 (improve): retry each dropped interval: restore it when
//! the plan still fits, which removes its recomputation.
//!
//! Why not only DTR: eviction on the fly cannot look ahead, and on branchy
//! DAGs its cascades fail to fit at budgets where plans exist. Moves on S
//! see the whole schedule.

use super::dtr;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::{Graph, NodeId};
use crate::schedule::{generate_plan, simulate, solve_r, Schedule, SimReport, Statement};
use crate::units::Bytes;
use std::time::{Duration, Instant};

pub struct RematFast;

/// Candidates fully evaluated per step, taken in order of cost per byte.
/// Measured: 8 → 48 (with 4 → 16 over-budget stages) turns n250 at 80%
/// from no plan into a plan, and n500 at 90% from none into 1.05×, at a
/// few seconds per solve.
const CANDIDATES_PER_STEP: usize = 48;

/// Escapes from a local minimum of the excess allowed per node of the
/// graph, and how many iterations an escape's inverse stays forbidden.
const MAX_ESCAPES_PER_NODE: usize = 2;
const TABU_TENURE: usize = 8;

/// Over-budget stages whose idle values are candidates, worst first.
const OVER_STAGES: usize = 16;

/// One value dropped over stages `from..=to` (recomputed at `to` when `to`
/// reads it). With `via_inputs`, its inputs are kept until `to` instead, so
/// the recomputation reads them rather than recomputing them in turn: on
/// branchy DAGs the inputs are often freed long before, and the plain drop's
/// cascade of recomputations back to the sources is what makes it costly.
#[derive(Debug, Clone, Copy)]
struct Drop {
    node: usize,
    from: usize,
    to: usize,
    via_inputs: bool,
}

struct Eval {
    sch: Schedule,
    sim: SimReport,
    /// Σ over stages of the bytes by which the stage's peak exceeds the
    /// budget: unlike the peak alone, it falls with every useful drop.
    excess: f64,
    /// Stages over budget, worst first.
    over: Vec<usize>,
}

fn eval(g: &Graph, s: &Schedule, budget: Bytes) -> Option<Eval> {
    let sch = solve_r(g, s.clone());
    let plan = generate_plan(g, &sch).ok()?;
    let sim = simulate(g, &plan).ok()?;
    // Replay: stage t ends with the compute of node t. Memory here is
    // activations only; the budget is compared net of fixed memory.
    let cap = budget.saturating_sub(g.fixed_memory).as_f64();
    let mut stage = 0;
    let mut bytes = 0.0;
    let mut stage_peak = 0.0f64;
    let mut excess = 0.0;
    let mut live: Vec<(u32, usize)> = Vec::new();
    let mut over: Vec<(f64, usize)> = Vec::new();
    for st in &plan.statements {
        match st {
            Statement::Allocate {
                register,
                node,
                bytes: b,
            } => {
                live.push((*register, node.idx()));
                bytes += b.as_f64();
                stage_peak = stage_peak.max(bytes);
            }
            Statement::Deallocate { register } => {
                if let Some(k) = live.iter().position(|(r, _)| r == register) {
                    bytes -= g.memory(NodeId::from(live[k].1)).as_f64();
                    live.swap_remove(k);
                }
            }
            Statement::Compute { node, .. } => {
                if node.idx() == stage {
                    if stage_peak > cap {
                        excess += stage_peak - cap;
                        over.push((stage_peak - cap, stage));
                    }
                    stage_peak = bytes;
                    stage += 1;
                }
            }
        }
    }
    over.sort_by(|a, b| b.0.total_cmp(&a.0));
    Some(Eval {
        sch,
        sim,
        excess,
        over: over.into_iter().map(|(_, t)| t).collect(),
    })
}

/// Whether stage `t` of `sch` reads value `v` (some node it computes uses v).
fn reads(g: &Graph, sch: &Schedule, t: usize, v: usize) -> bool {
    g.users(NodeId::from(v))
        .iter()
        .any(|u| u.idx() <= t && sch.r(t, u.idx()))
}

/// The interval over which `v` can stop being kept around stage `t`: from
/// the stage after its previous read (or computation) to its next read (or
/// the last stage it is kept), where it is then recomputed. When stage `t`
/// itself reads `v`, the interval ends at `t`: `v` is recomputed inside the
/// stage, from inputs that may be smaller.
fn drop_interval(g: &Graph, sch: &Schedule, v: usize, t: usize) -> Option<Drop> {
    if sch.r(t, v) || !sch.s(t, v) {
        return None;
    }
    let mut from = t;
    while from > v + 1 && !reads(g, sch, from - 1, v) && !sch.r(from - 1, v) {
        from -= 1;
    }
    let n = sch.stages();
    let mut to = t;
    while !reads(g, sch, to, v) && to + 1 < n && sch.s(to + 1, v) {
        to += 1;
    }
    Some(Drop {
        node: v,
        from,
        to,
        via_inputs: false,
    })
}

/// Sets S for `d.node` over the drop's interval. Dropping `via_inputs` also
/// keeps each input from the last stage that holds it through `d.to`.
/// `resolved` (the current schedule, with R) says where an input is held.
fn apply(g: &Graph, s: &mut Schedule, resolved: &Schedule, d: Drop, keep: bool) {
    for t in d.from..=d.to {
        if t > d.node {
            s.set_s(t, d.node, keep);
        }
    }
    if keep || !d.via_inputs {
        return;
    }
    for dep in g.deps(NodeId::from(d.node)) {
        let dep = dep.idx();
        let mut t = d.to;
        while t > dep && !resolved.r(t, dep) {
            let held = s.s(t, dep);
            s.set_s(t, dep, true);
            if held {
                break;
            }
            t -= 1;
        }
    }
}

/// Local search from checkpoint-all; `None` if no fitting plan was found
/// before the deadline.
pub fn search(g: &Graph, budget: Bytes, deadline: Instant) -> Option<Schedule> {
    search_from(g, Schedule::checkpoint_all(g), budget, deadline)
}

/// Local search from any schedule's S (its R is re-derived): used to repair
/// a rounded LP solution that overshoots the budget, which starts far
/// closer to the optimum than checkpoint-all does on branchy DAGs.
pub fn search_from(
    g: &Graph,
    start: Schedule,
    budget: Bytes,
    deadline: Instant,
) -> Option<Schedule> {
    let mut s = start;
    let mut cur = eval(g, &s, budget)?;
    let mut drops: Vec<Drop> = Vec::new();
    // Tabu list for escapes: a move's inverse may not be made again until
    // the given iteration, so an escape is not undone at once.
    let mut tabu: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut escapes = 0;
    let mut iter = 0;
    // Phase 1: fit.
    while cur.sim.peak > budget {
        iter += 1;
        if Instant::now() > deadline {
            return None;
        }
        let mut cands: Vec<Drop> = Vec::new();
        for &t in cur.over.iter().take(OVER_STAGES) {
            for v in cur.sch.s_row(t).ones() {
                if g.memory(NodeId::from(v)).get() == 0 {
                    continue;
                }
                if let Some(d) = drop_interval(g, &cur.sch, v, t) {
                    if !cands.iter().any(|c| c.node == d.node && c.from == d.from) {
                        cands.push(d);
                    }
                }
            }
        }
        cands.sort_by(|a, b| {
            let r = |d: &Drop| {
                let id = NodeId::from(d.node);
                g.cost(id) / g.memory(id).as_f64()
            };
            r(a).total_cmp(&r(b))
        });
        // Undoing an earlier drop whose recomputation lands in an
        // over-budget stage can remove a whole cascade of recomputations.
        let undo: Vec<usize> = (0..drops.len())
            .filter(|&i| cur.over.iter().take(OVER_STAGES).any(|&t| t == drops[i].to))
            .collect();
        let twins = |d: &Drop| {
            let via = Drop {
                via_inputs: true,
                ..*d
            };
            let has_inputs = !g.deps(NodeId::from(d.node)).is_empty();
            std::iter::once(*d).chain(has_inputs.then_some(via))
        };
        let moves = undo.iter().map(|&i| (Some(i), drops[i])).chain(
            cands
                .iter()
                .take(CANDIDATES_PER_STEP)
                .flat_map(twins)
                .map(|d| (None, d)),
        );
        let mut best: Option<(f64, Option<usize>, Drop, Eval)> = None;
        // The least-bad move, for when nothing improves.
        let mut escape: Option<(f64, Option<usize>, Drop, Eval)> = None;
        for (undo_of, d) in moves {
            if tabu
                .iter()
                .any(|&(v, f, t, until)| until > iter && (v, f, t) == (d.node, d.from, d.to))
            {
                continue;
            }
            let mut trial = s.clone();
            apply(g, &mut trial, &cur.sch, d, undo_of.is_some());
            let Some(e) = eval(g, &trial, budget) else {
                continue;
            };
            // Progress is less total excess.
            let freed = cur.excess - e.excess;
            if freed <= 0.0 {
                if escape.as_ref().is_none_or(|(x, ..)| e.excess < *x) {
                    escape = Some((e.excess, undo_of, d, e));
                }
                continue;
            }
            let score = (e.sim.cost - cur.sim.cost) / freed;
            if best.as_ref().is_none_or(|(b, ..)| score < *b) {
                best = Some((score, undo_of, d, e));
            }
        }
        if best.is_none() {
            // Stuck: take the least-bad move and forbid its inverse for a
            // while (tabu search), a bounded number of times.
            escapes += 1;
            if escapes > MAX_ESCAPES_PER_NODE * g.len() {
                return None;
            }
            if let Some((_, _, d, _)) = &escape {
                tabu.push((d.node, d.from, d.to, iter + TABU_TENURE));
            }
            best = escape;
        }
        let (_, undo_of, d, e) = best?;
        match undo_of {
            Some(i) => {
                apply(g, &mut s, &cur.sch, d, true);
                drops.swap_remove(i);
            }
            None => {
                apply(g, &mut s, &cur.sch, d, false);
                drops.push(d);
            }
        }
        cur = e;
    }
    // Phase 2: remove recomputations while the plan still fits. Every
    // recomputation of v at stage t is a candidate: keep v instead, from
    // the last stage before t that holds or computes it. This covers the
    // drops phase 1 made and whatever the start schedule recomputes.
    let mut improved = true;
    while improved && Instant::now() < deadline {
        improved = false;
        let mut cands: Vec<Drop> = Vec::new();
        for t in 1..cur.sch.stages() {
            for v in cur.sch.r_row(t).ones().filter(|&v| v < t) {
                let mut from = t;
                while from > v + 1 && !cur.sch.r(from - 1, v) && !cur.sch.s(from - 1, v) {
                    from -= 1;
                }
                cands.push(Drop {
                    node: v,
                    from,
                    to: t,
                    via_inputs: false,
                });
            }
        }
        // Costliest recomputation first: the largest saving if it fits.
        cands.sort_by(|a, b| {
            g.cost(NodeId::from(b.node))
                .total_cmp(&g.cost(NodeId::from(a.node)))
        });
        for d in cands {
            if Instant::now() >= deadline {
                break;
            }
            let mut trial = s.clone();
            apply(g, &mut trial, &cur.sch, d, true);
            if let Some(e) = eval(g, &trial, budget) {
                if e.sim.peak <= budget && e.sim.cost < cur.sim.cost {
                    s = trial;
                    cur = e;
                    improved = true;
                    break;
                }
            }
        }
    }
    Some(cur.sch)
}

impl Strategy for RematFast {
    fn name(&self) -> &'static str {
        "remat-fast"
    }

    fn describe(&self) -> &'static str {
        "fast plan, no solver: local search on S (solve_r prices each move) and DTR eviction, cheapest wins"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let deadline = Instant::now() + opts.time_limit.min(Duration::from_secs(60));
        let mut best: Option<(f64, Schedule, &str)> = None;
        if let Some(sch) = search(g, budget, deadline) {
            let c = sch.cost(g);
            best = Some((c, sch, "local search on S"));
        }
        if let Some((c, sch, _)) = dtr::best(g, budget) {
            if best.as_ref().is_none_or(|(b, _, _)| c < *b) {
                best = Some((c, sch, "DTR eviction"));
            }
        }
        Ok(match best {
            // Every node is computed at least once: a bound that costs
            // nothing, so even the fastest answer states its gap.
            Some((_, sch, how)) => Solution {
                lower_bound: Some(g.total_cost()),
                ..Solution::feasible(sch, Some(format!("{how}; bound: every node computed once")))
            },
            None => Solution {
                status: super::Status::NoSolution,
                ..Solution::infeasible(
                    "neither local search nor DTR eviction found a plan that fits",
                )
            },
        })
    }
}
