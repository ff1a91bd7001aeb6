//! Ground shared by the seed systems' tiered policies (docs/tiers.md):
//! the device they need, each value's reads, the per-stage memory and
//! compute profile of a schedule, and the one way they hand a schedule
//! back. They use the same plan generator and simulator as every other
//! strategy; the simulator's verdict on the peak decides whether a plan
//! fits, so no policy can claim a budget its plan does not meet.

use super::{Solution, SolveOptions, StrategyError};
use crate::device::{Device, Engines};
use crate::graph::{Graph, NodeId};
use crate::schedule::{generate_plan, simulate_on, Plan, Schedule, Statement};
use crate::units::Bytes;

/// The device a tiered policy needs. Without one there is no slow tier to
/// move anything to, so the policy does not apply (a row a sweep keeps),
/// rather than silently degenerating to checkpoint-all.
pub(crate) fn device<'a>(
    opts: &'a SolveOptions,
    strategy: &'static str,
) -> Result<&'a Device, StrategyError> {
    opts.device
        .as_deref()
        .ok_or_else(|| StrategyError::NotApplicable {
            strategy,
            reason: "it moves values to a slow tier, and no device (--device) gives one".into(),
        })
}

/// When each value is read: the stages of its readers, sorted and
/// distinct, with the last forward read and the first backward read that
/// the activation-offloading rules (vDNN, MC-DLA, TierTrain) key on.
#[derive(Debug, Clone)]
pub(crate) struct Reads {
    pub stages: Vec<usize>,
    /// The last stage that reads the value in the forward pass, or the
    /// value's own stage when no forward node reads it.
    pub last_forward: usize,
    /// The first gradient node that reads it, if any.
    pub first_backward: Option<usize>,
}

impl Reads {
    pub fn last(&self) -> Option<usize> {
        self.stages.last().copied()
    }
}

pub(crate) fn reads(g: &Graph) -> Vec<Reads> {
    g.ids()
        .map(|i| {
            let mut stages: Vec<usize> = g.users(i).iter().map(|u| u.idx()).collect();
            stages.sort_unstable();
            stages.dedup();
            let fwd = |u: &usize| !g.node(NodeId::from(*u)).backward;
            let last_forward = stages.iter().filter(|u| fwd(u)).max().copied();
            let first_backward = stages.iter().find(|u| !fwd(u)).copied();
            Reads {
                last_forward: last_forward.unwrap_or(i.idx()),
                first_backward,
                stages,
            }
        })
        .collect()
}

/// Seconds each stage computes for (recomputations included), with every
/// operand in fast memory.
pub(crate) fn stage_compute(g: &Graph, sch: &Schedule, dev: &Device) -> Vec<f64> {
    (0..sch.stages())
        .map(|t| {
            let cost: f64 = sch.computed(t).map(|k| g.cost(k)).sum();
            dev.compute_time(cost).get()
        })
        .collect()
}

/// Duration of one copy of node `i` in the given direction.
pub(crate) fn copy_secs(g: &Graph, dev: &Device, i: usize, to_slow: bool) -> f64 {
    dev.copy_time(g.memory(NodeId::from(i)), to_slow).get()
}

/// The most fast-tier bytes (fixed memory included) held at once during
/// each stage of a plan, measured on the plan's own statements. Stage `t`
/// starts after the first computation of node `t - 1`: every allocation,
/// copy-in buffer included, belongs to the stage after the last node
/// computed for the first time, and a stage's peak is always reached at
/// one of them. Policies price "keep one more value through these stages"
/// with it, exactly, instead of re-deriving the plan generator's rules.
pub(crate) fn stage_peaks(g: &Graph, plan: &Plan) -> Vec<Bytes> {
    let n = g.len();
    let mut peaks = vec![g.fixed_memory; n];
    let mut size = std::collections::HashMap::new();
    let mut done = vec![false; n];
    let mut stage = 0usize;
    let mut live = Bytes::ZERO;
    let note = |peaks: &mut Vec<Bytes>, stage: usize, live: Bytes| {
        if stage < n {
            peaks[stage] = peaks[stage].max(g.fixed_memory + live);
        }
    };
    for st in &plan.statements {
        match st {
            Statement::Allocate {
                register, bytes, ..
            } => {
                size.insert(*register, *bytes);
                live += *bytes;
                note(&mut peaks, stage, live);
            }
            Statement::CopyIn { register, src } => {
                let b = size.get(src).copied().unwrap_or(Bytes::ZERO);
                size.insert(*register, b);
                live += b;
                note(&mut peaks, stage, live);
            }
            Statement::CopyOut { register, src } => {
                // A slow register: its bytes count in the slow tier, but a
                // later copy in of it needs them.
                let b = size.get(src).copied().unwrap_or(Bytes::ZERO);
                size.insert(*register, b);
            }
            Statement::Deallocate { register } => {
                live = live - size.get(register).copied().unwrap_or(Bytes::ZERO);
            }
            Statement::Compute { node, .. } => {
                if !done[node.idx()] {
                    done[node.idx()] = true;
                    stage = node.idx() + 1;
                }
            }
            Statement::Wait { .. } | Statement::Drop { .. } => {}
        }
    }
    peaks
}

/// The time a stage's copy engine(s) can absorb before a copy in of this
/// stage delays it: the stage's computation, less what the engine that
/// takes copies in already carries. Used by the prefetch placement of
/// offload-all and mc-dla to spread copies over stages.
pub(crate) fn in_engine_room(dev: &Device, compute: f64, load_in: f64, load_out: f64) -> f64 {
    match dev.slow.engines {
        Engines::Duplex => compute - load_in,
        Engines::Shared => compute - load_in - load_out,
        // The compute stream moves the bytes itself: nothing hides.
        Engines::Synchronous => 0.0,
    }
}

/// Turns a policy's schedule into its answer: generated, simulated on the
/// device, and accepted only if the simulated fast-tier peak fits. A
/// policy that misses the budget says so with the simulator's figures, as
/// the recompute strategies do when they find no fitting plan.
pub(crate) fn finish(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    sch: Schedule,
    strategy: &'static str,
    detail: String,
) -> Result<Solution, StrategyError> {
    let plan = generate_plan(g, &sch)
        .map_err(|e| StrategyError::Other(format!("{strategy} built an invalid schedule: {e}")))?;
    match simulate_on(g, &plan, Some(dev)) {
        Ok(sim) if sim.peak <= budget => Ok(Solution::feasible(sch, Some(detail))),
        Ok(sim) => Ok(Solution::infeasible(format!(
            "{strategy}'s plan needs {} of fast memory ({detail}); the budget is {}",
            sim.peak.human(),
            budget.human()
        ))),
        // Only the slow tier's capacity can make a policy's plan invalid.
        Err(e) => Ok(Solution::infeasible(format!(
            "{strategy}'s plan does not run on {}: {e}",
            dev.name
        ))),
    }
}
