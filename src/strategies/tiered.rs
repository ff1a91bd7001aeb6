//! Ground shared by the seed systems' tiered policies (docs/tiers.md):
//! the device they need, each value's reads, the per-stage memory and
//! compute profile of a schedule, and the one way they hand a schedule
//! back. They use the same plan generator and simulator as every other
//! strategy; the simulator's verdict on the peak decides whether a plan
//! fits, so no policy can claim a budget its plan does not meet.

use super::{Solution, SolveOptions, StrategyError};
use crate::device::{Device, Engines};
use crate::graph::{Graph, NodeId};
use crate::schedule::{generate_plan, simulate_on, Plan, Schedule, SimReport, Statement};
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

/// The schedule `sch` (without leads, whose plan is `plan`) with its
/// copies spanning stages (docs/format.md): every copy issued early enough
/// to hide `rule`'s multiple of its time behind the compute of the stages
/// it spans (with an infinite multiple, every copy out as early as its
/// value allows: free, since the value is resident until the copy's stage
/// anyway), fetches only as far as each of those stages has room in
/// `budget` for the buffer (the stages' peaks measured on `plan`; fetches
/// in stage order take the room first). `None` when no copy gets a lead,
/// or on a synchronous device, where a copy blocks the compute stream
/// wherever it is issued.
///
/// Why a rule and not a search: the simulator decides whether the result
/// is faster (an earlier copy can queue ahead of a more urgent one on a
/// FIFO engine: `leads_just_enough_beat_leading_every_copy`), and callers
/// keep it only then.
pub(crate) fn with_leads(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: &Schedule,
    plan: &Plan,
    rule: LeadRule,
) -> Option<Schedule> {
    if dev.slow.engines == Engines::Synchronous || !sch.has_transfers() {
        return None;
    }
    let mut led = sch.clone();
    led.clear_leads();
    let n = sch.stages();
    let compute = stage_compute(g, sch, dev);
    for t in 0..n {
        for &i in sch.o_row(t) {
            let i = i as usize;
            let max = led.max_out_lead(t, i);
            let l = if rule.out.is_finite() {
                // Just enough to hide, so that it does not queue ahead of
                // the copies issued after it.
                let need = copy_secs(g, dev, i, true) * rule.out;
                let (mut l, mut have) = (0, compute[t]);
                while l < max && have < need {
                    l += 1;
                    have += compute[t - l];
                }
                l
            } else {
                max
            };
            led.set_out_lead(t, i, l);
        }
    }
    let mut slack: Vec<f64> = stage_peaks(g, plan)
        .iter()
        .map(|p| budget.as_f64() - p.as_f64())
        .collect();
    let computes = super::local_search::Computes::of(sch);
    for t in 0..n {
        for &i in sch.p_row(t) {
            let i = i as usize;
            let m = g.memory(NodeId::from(i)).as_f64();
            let need = copy_secs(g, dev, i, false) * rule.fetch;
            let max = fetch_lead_room(&led, &computes, t, i).min(MAX_FETCH_LEAD);
            let (mut l, mut have) = (0, compute[t]);
            while l < max && have < need && slack[t - l - 1] >= m {
                l += 1;
                have += compute[t - l];
            }
            for s in &mut slack[t - l..t] {
                *s -= m;
            }
            led.set_fetch_lead(t, i, l);
        }
    }
    led.has_leads().then_some(led)
}

/// `sch` (whose plan is `plan`) with fetches deferred into their readers'
/// stages (docs/format.md) where a stage is over `budget`: in each such
/// stage, its fetches without a lead whose next stage reads them, largest
/// first, until the buffers deferred cover the stage's excess. `None` when
/// nothing is over budget, or some stage over budget cannot be brought
/// under it this way: the search then repairs the plan by its moves, and
/// does not pay a second simulation for each of the many over-budget
/// plans it weighs (MobileNet at 20% on the GH200 lost 2 ms in 20 s when
/// every one was tried deferred).
///
/// Why largest first: a deferred copy stalls its reader for about its own
/// time, which grows with its bytes, so the stall per byte saved is about
/// the same for every copy, and fewer copies pay fewer latencies. Why only
/// where over budget: a deferral never lowers the step (the copy can no
/// longer hide behind the stage before), so it is worth its stall only
/// where it makes the plan fit.
pub(crate) fn deferred_to_fit(
    g: &Graph,
    budget: Bytes,
    sch: &Schedule,
    plan: &Plan,
) -> Option<Schedule> {
    if !sch.has_transfers() {
        return None;
    }
    let peaks = stage_peaks(g, plan);
    let n = sch.stages();
    let mut late = sch.clone();
    let mut any = false;
    for (t, peak) in peaks.iter().enumerate() {
        if *peak <= budget || t + 1 >= n {
            continue;
        }
        let mut excess = (*peak - budget).as_f64();
        let mut cands: Vec<usize> = sch
            .p_row(t)
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| {
                sch.fetch_lead(t, i) == 0
                    && !sch.deferred(t, i)
                    && !sch.r(t + 1, i)
                    && !sch.o(t + 1, i)
                    && sch
                        .computed(t + 1)
                        .any(|k| g.deps(k).iter().any(|d| d.idx() == i))
            })
            .collect();
        cands.sort_by_key(|&i| std::cmp::Reverse(g.memory(NodeId::from(i))));
        for i in cands {
            if excess <= 0.0 {
                break;
            }
            late.defer_fetch(t, i);
            excess -= g.memory(NodeId::from(i)).as_f64();
            any = true;
        }
        if excess > 0.0 {
            return None;
        }
    }
    any.then_some(late)
}

/// [`deferred_to_fit`] with the deferred schedule's plan and simulation on
/// `dev`; `None` where it defers nothing or its plan is refused.
pub(crate) fn deferred_simulated(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: &Schedule,
    plan: &Plan,
) -> Option<(Schedule, Plan, SimReport)> {
    let late = deferred_to_fit(g, budget, sch, plan)?;
    let plan = generate_plan(g, &late).ok()?;
    let sim = simulate_on(g, &plan, Some(dev)).ok()?;
    Some((late, plan, sim))
}

/// `sch` simulated on `dev` if it fits `budget`, or else the same schedule
/// with fetches deferred ([`deferred_simulated`]) if that fits; `None`
/// when neither does.
pub(crate) fn fitting_form(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: Schedule,
) -> Option<(Schedule, Plan, SimReport)> {
    let plan = generate_plan(g, &sch).ok()?;
    let sim = simulate_on(g, &plan, Some(dev)).ok()?;
    let fit = if sim.peak > budget {
        deferred_simulated(g, dev, budget, &sch, &plan)?
    } else {
        (sch, plan, sim)
    };
    (fit.2.peak <= budget).then_some(fit)
}

/// The simulated step of [`fitting_form`].
pub(crate) fn fitting_step(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: &Schedule,
) -> Option<crate::units::Seconds> {
    let (_, _, sim) = fitting_form(g, dev, budget, sch.clone())?;
    sim.timing.map(|t| t.step)
}

/// How answers name [`least_memory`]'s plan as a start.
pub(crate) const LEAST_MEMORY: &str = "the least-memory offload plan";

/// The offload plan of least memory: checkpoint-all's order with every
/// value absent over every gap between two of its uses that has a stage in
/// it, copied out once (in the stage that computes it, or its first gap's
/// start), its slow copy held until its last fetch, and fetched in the
/// stage before each later read. The search ([`super::tiered_search`])
/// defers those fetches into their readers' stages where a stage is over
/// budget, which brings every stage down to what its own computations
/// read and write.
///
/// Why: on a budget below the recompute-only minimum the greedy repair
/// from checkpoint-all or the policies' plans offloads one gap at a time
/// and can run out of moves above the budget; random-layered-n100 at 50%
/// on the A100 had no plan from any of them, and from this start the
/// search finds one in seconds (docs/tiers.md).
pub(crate) fn least_memory(g: &Graph) -> Schedule {
    let n = g.len();
    let mut sch = Schedule::checkpoint_all(g);
    // Stages that read each value, in checkpoint-all: a kernel's outputs
    // are all computed in the stage of its last one.
    let mut reads: Vec<Vec<usize>> = vec![Vec::new(); n];
    for k in g.ids() {
        let at = g.group_end(k);
        for d in g.deps(k) {
            if reads[d.idx()].last() != Some(&at) {
                reads[d.idx()].push(at);
            }
        }
    }
    for (v, r) in reads.iter_mut().enumerate() {
        r.sort_unstable();
        r.dedup();
        let made = g.group_end(NodeId::from(v));
        let mut events = vec![made];
        events.extend(r.iter().copied().filter(|&t| t > made));
        let gaps: Vec<(usize, usize)> = events
            .windows(2)
            .map(|w| (w[0], w[1]))
            .filter(|&(a, c)| c >= a + 2)
            .collect();
        let (Some(&(first, _)), Some(&(_, last))) = (gaps.first(), gaps.last()) else {
            continue;
        };
        sch.set_o(first, v, true);
        sch.set_h_range(v, first + 1..=last - 1, true);
        for (a, c) in gaps {
            sch.set_s_range(v, a + 1..=c - 1, false);
            sch.set_p(c - 1, v, true);
            sch.set_s(c, v, true);
        }
    }
    sch
}

/// The furthest a fetch is led, in stages. Why a cap: a lead is walked
/// stage by stage against the memory it takes, and offload-all's plan of a
/// 200,007-node chain fetches values absent for 100,000 stages, which made
/// the walks quadratic (minutes past the search's limit). No zoo model has
/// a thousand stages between a forward and a backward read.
const MAX_FETCH_LEAD: usize = 4096;

/// [`Schedule::max_fetch_lead`] from the value's intervals instead of a
/// walk over the stages it is absent: back to the start of the slow copy's
/// hold, and no further than the last stage before `t` that keeps or
/// computes the value (`computes` is `sch`'s).
fn fetch_lead_room(
    sch: &Schedule,
    computes: &super::local_search::Computes,
    t: usize,
    i: usize,
) -> usize {
    if t == 0 || !sch.p(t, i) || sch.deferred(t, i) {
        return 0;
    }
    let held = sch.hold_intervals(i);
    let k = held.partition_point(|&(a, _)| (a as usize) < t);
    let Some(&(a, b)) = k.checked_sub(1).map(|k| &held[k]) else {
        return 0;
    };
    if (b as usize) < t - 1 {
        return 0;
    }
    let from = computes
        .last_held(sch, i, t - 1)
        .map_or(a as usize, |h| (a as usize).max(h + 1));
    t - from
}

/// How much of its own time a copy's lead should hide behind compute.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeadRule {
    pub out: f64,
    pub fetch: f64,
}

/// The lead rules tried: every copy out as early as it may, with fetches
/// led a margin over just enough or as far as memory allows; and every
/// copy led just enough, with a margin.
const LEAD_RULES: [LeadRule; 3] = [
    LeadRule {
        out: f64::INFINITY,
        fetch: 1.5,
    },
    LeadRule {
        out: f64::INFINITY,
        fetch: f64::INFINITY,
    },
    LeadRule {
        out: 1.5,
        fetch: 1.5,
    },
];

/// A schedule with leads, its plan and its simulation.
pub(crate) struct Led {
    pub sch: Schedule,
    pub plan: Plan,
    pub sim: SimReport,
    pub step: f64,
}

/// The fastest of `sch`'s lead variants ([`with_leads`]) whose simulated
/// peak fits `budget`, if it is faster than `sch` itself (simulated as
/// `sim`).
pub(crate) fn faster_with_leads(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: &Schedule,
    plan: &Plan,
    sim: &SimReport,
) -> Option<Led> {
    let mut best_step = sim.timing.as_ref()?.step.get();
    if sim.peak > budget || sch.has_leads() {
        return None;
    }
    let mut best = None;
    for rule in LEAD_RULES {
        let Some(led) = with_leads(g, dev, budget, sch, plan, rule) else {
            continue;
        };
        let Ok(lp) = generate_plan(g, &led) else {
            continue;
        };
        let Ok(ls) = simulate_on(g, &lp, Some(dev)) else {
            continue;
        };
        let step = ls.timing.as_ref().map_or(f64::INFINITY, |t| t.step.get());
        if ls.peak <= budget && step < best_step {
            best_step = step;
            best = Some(Led {
                sch: led,
                plan: lp,
                sim: ls,
                step,
            });
        }
    }
    best
}

/// The lead values a descent tries for a copy that may lead by at most
/// `max`: every short lead, then doubling ones, and the longest. Leads
/// far back differ little from each other in what they hide, and each
/// try costs a simulation.
fn lead_choices(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..=max.min(4)).collect();
    let mut l = 6;
    while l < max {
        v.push(l);
        l = l * 3 / 2;
    }
    if max > 4 {
        v.push(max);
    }
    v
}

/// `sch` with each copy's lead chosen in turn by simulation (coordinate
/// descent: a copy's lead is set to the value of least simulated step,
/// the others held, until a pass changes nothing or `deadline` passes),
/// from the faster of `sch` and its rule-led form ([`faster_with_leads`]);
/// `None` unless the result is faster than `sch` and fits `budget`.
///
/// Why a descent after the rules of [`with_leads`]: the rules lead every
/// copy alike, and on a FIFO engine a long copy issued early can queue
/// ahead of a short, urgent one (`leads_chosen_one_by_one_beat_both_rules`).
/// On U-Net at 50% on the GH200 it takes remat-fast's plan from 105.992
/// to 104.546 ms, with no stall left.
pub(crate) fn descend_leads(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    sch: &Schedule,
    deadline: std::time::Instant,
) -> Option<Led> {
    if dev.slow.engines == Engines::Synchronous || !sch.has_transfers() {
        return None;
    }
    let run = |s: &Schedule| -> Option<(Plan, SimReport, f64)> {
        let plan = generate_plan(g, s).ok()?;
        let sim = simulate_on(g, &plan, Some(dev)).ok()?;
        let step = sim.timing.as_ref()?.step.get();
        (sim.peak <= budget).then_some((plan, sim, step))
    };
    let (plan, sim, start_step) = run(sch)?;
    // From the better of the schedule and the rules' leads.
    let mut best = faster_with_leads(g, dev, budget, sch, &plan, &sim);
    let (mut cur, mut cur_step) = match &best {
        Some(led) => (led.sch.clone(), led.step),
        None => (sch.clone(), start_step),
    };
    // Every copy: (stage, node, is a fetch, its longest lead).
    let computes = &super::local_search::Computes::of(sch);
    let copies: Vec<(usize, usize, bool, usize)> = (0..sch.stages())
        .flat_map(|t| {
            let outs = sch
                .o_row(t)
                .iter()
                .map(move |&i| (t, i as usize, false, sch.max_out_lead(t, i as usize)));
            let ins = sch.p_row(t).iter().map(move |&i| {
                (
                    t,
                    i as usize,
                    true,
                    fetch_lead_room(sch, computes, t, i as usize),
                )
            });
            outs.chain(ins).collect::<Vec<_>>()
        })
        .filter(|c| c.3 > 0)
        .collect();
    loop {
        let mut changed = false;
        for &(t, i, fetch, max) in &copies {
            let now = if fetch {
                cur.fetch_lead(t, i)
            } else {
                cur.out_lead(t, i)
            };
            for l in lead_choices(max) {
                if std::time::Instant::now() >= deadline {
                    return best;
                }
                if l == now {
                    continue;
                }
                let mut s = cur.clone();
                if fetch {
                    s.set_fetch_lead(t, i, l);
                } else {
                    s.set_out_lead(t, i, l);
                }
                let Some((plan, sim, step)) = run(&s) else {
                    continue;
                };
                // A strict gain, beyond the simulator's rounding, so that
                // the descent ends.
                if step < cur_step * (1.0 - 1e-9) {
                    cur_step = step;
                    cur = s.clone();
                    changed = true;
                    best = Some(Led {
                        sch: s,
                        plan,
                        sim,
                        step,
                    });
                }
            }
        }
        if !changed {
            return best;
        }
    }
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
        Ok(sim) => Ok(Solution::no_fit(format!(
            "{strategy}'s plan needs {} of fast memory ({detail}); the budget is {}",
            sim.peak.human(),
            budget.human()
        ))),
        // Only the slow tier's capacity can make a policy's plan invalid.
        Err(e) => Ok(Solution::no_fit(format!(
            "{strategy}'s plan does not run on {}: {e}",
            dev.name
        ))),
    }
}

/// The most (value, stage) pairs of live values the AutoTM models may
/// list. Why: their memory rows list every value live in their stage, so
/// the model grows with the square of a long graph: on a 20,009-node chain
/// the build reached 3.2 GB before it was abandoned at its limit, and on a
/// 200,007-node one (10^10 pairs) it could never finish. ResNet-50's
/// training graph has about 10^5.
const AUTOTM_MAX_LIVE: usize = 20_000_000;

/// The AutoTM strategies' common run: build the model, start from the
/// least-memory placement when it fits, solve, and hand the schedule to
/// the simulator. `exact` says whether the model's objective is the
/// simulated step time on this device; only then is an optimum reported
/// as optimal (otherwise it is optimal for AutoTM's model, not for the
/// device, and reported as feasible).
///
/// The model's memory rows list every value live in their stage, so on long
/// graphs the build and HiGHS's presolve (which does not poll its clock)
/// take minutes: all of it runs where it can be abandoned at the time
/// limit, and the least-memory placement, once built, is the answer then.
pub(crate) fn solve_autotm(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    opts: &SolveOptions,
    moves: crate::solver::autotm::Moves,
    exact: bool,
    name: &'static str,
) -> Result<Solution, StrategyError> {
    let live: usize = crate::graph::analysis::last_use(g)
        .iter()
        .enumerate()
        .filter(|&(v, _)| g.memory(NodeId::from(v)).get() > 0)
        .map(|(v, l)| l.idx().saturating_sub(v))
        .sum();
    if live > AUTOTM_MAX_LIVE {
        return Ok(Solution::no_fit(format!(
            "{name}: its model would list {live} live values over the stages (more than {AUTOTM_MAX_LIVE}); not built"
        )));
    }
    let start = std::time::Instant::now();
    let stop: crate::solver::StopFlag = Default::default();
    let warm_plan: std::sync::Arc<std::sync::Mutex<Option<Schedule>>> = Default::default();
    let worker = {
        let (g, dev, warm_plan) = (
            std::sync::Arc::new(g.clone()),
            dev.clone(),
            warm_plan.clone(),
        );
        let opts = SolveOptions {
            stop: Some(stop.clone()),
            watch: None,
            ..opts.clone()
        };
        move || autotm_run(&g, budget, &dev, &opts, moves, exact, name, &warm_plan)
    };
    let deadline = start + opts.time_limit + std::time::Duration::from_millis(100);
    if let Some(r) = super::abandonable(deadline, &stop, opts.stop.as_ref(), worker) {
        return r;
    }
    let note = format!(
        "the model build or HiGHS's setup did not stop at the time limit and was abandoned after {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let warm = warm_plan.lock().ok().and_then(|mut w| w.take());
    match warm {
        Some(sch) => finish(
            g,
            budget,
            dev,
            sch,
            name,
            format!("the least-memory placement; {note}"),
        ),
        None => Ok(Solution {
            status: super::Status::NoSolution,
            ..Solution::infeasible(format!("{name}: {note}"))
        }),
    }
}

/// [`solve_autotm`]'s work, on its worker: `warm_plan` gets the
/// least-memory placement's schedule as soon as it is known.
#[allow(clippy::too_many_arguments)]
fn autotm_run(
    g: &Graph,
    budget: Bytes,
    dev: &Device,
    opts: &SolveOptions,
    moves: crate::solver::autotm::Moves,
    exact: bool,
    name: &'static str,
    warm_plan: &std::sync::Mutex<Option<Schedule>>,
) -> Result<Solution, StrategyError> {
    use crate::solver::{autotm, solve_mip, MipStatus, Params};
    let Some(am) = autotm::build(g, dev, budget, moves, &opts.stop) else {
        return Err(StrategyError::Other(format!("{name}: stopped")));
    };
    let direct = dev.slow.direct_read.is_some();
    let warm = [direct, false]
        .into_iter()
        .map(|d| am.least_memory(d))
        .find(|x| am.model.max_violation(x) <= 1e-9);
    if let (Some(x), Ok(mut w)) = (&warm, warm_plan.lock()) {
        *w = Some(am.schedule(x));
    }
    let params = Params {
        time_limit: opts.time_limit,
        gap: opts.gap,
        threads: opts.threads,
        stop: opts.stop.clone(),
        ..Params::default()
    };
    let res = solve_mip(&am.model, opts.backend, &params, warm.as_deref())
        .map_err(|e| StrategyError::Solver(e.to_string()))?;
    let size = format!(
        "{} columns, {} rows",
        am.model.num_cols(),
        am.model.num_rows()
    );
    let no_plan = |status: super::Status, why: &str| {
        let mut s = Solution::infeasible(format!("{name}: {why} ({size})"));
        s.status = status;
        s
    };
    let stopped_by = res.stopped_by();
    let x = match (res.status, res.x) {
        // AutoTM's model has no recomputation, so its infeasibility
        // proves only that this policy cannot fit, not that no plan can.
        (MipStatus::Infeasible, _) => {
            return Ok(no_plan(
                super::Status::NoFit,
                "no placement fits the budget",
            ))
        }
        (_, None) => {
            return Ok(no_plan(
                super::Status::NoSolution,
                "the time limit ran out before a placement was found",
            ))
        }
        (_, Some(x)) => x,
    };
    let sch = am.schedule(&x);
    let proven = res.status == MipStatus::Optimal;
    let how = match (proven, exact) {
        (true, true) => "MILP optimal".to_string(),
        (true, false) => {
            "optimal for AutoTM's model, which prices copies as blocking; the device overlaps them"
                .to_string()
        }
        (false, _) => {
            let gap = match (res.objective, res.bound) {
                (Some(o), Some(b)) if o > 0.0 => {
                    format!(", solver gap {:.2}%", 100.0 * (o - b) / o)
                }
                _ => String::new(),
            };
            format!("MILP {stopped_by}{gap}")
        }
    };
    let mut sol = finish(g, budget, dev, sch, name, format!("{how}; {size}"))?;
    if !sol.status.has_plan() {
        return Err(StrategyError::Other(format!(
            "{name}: the MILP's placement does not fit in the simulator: {}",
            sol.detail.unwrap_or_default()
        )));
    }
    if proven && exact {
        sol.status = super::Status::Optimal;
    }
    Ok(sol)
}

/// Cases worked by hand: a graph from its text, a device whose costs are
/// seconds, and a schedule's simulated step and peak.
#[cfg(test)]
pub(crate) mod hand {
    use super::*;

    pub(crate) fn graph(text: &str) -> Graph {
        Graph::from_file(&crate::graph::GraphFile::parse(text).unwrap(), "hand.yaml").unwrap()
    }

    /// 100 B in each tier, duplex engines moving `bytes_per_s` each way,
    /// and direct reads at `direct` (a rate, or `none`).
    pub(crate) fn device(bytes_per_s: u32, direct: &str) -> Device {
        Device::parse(&format!(
            "name: test\ncompute: {{cost_is_seconds: true}}\nfast: {{capacity: 100}}\n\
             slow: {{capacity: 100, to_slow: {bytes_per_s}, to_fast: {bytes_per_s}, latency: 0, \
             engines: duplex, direct_read: {direct}}}\n"
        ))
        .unwrap()
    }

    /// The simulated step (seconds) and fast-tier peak of `sch`.
    pub(crate) fn run(g: &Graph, dev: &Device, sch: &Schedule) -> (f64, Bytes) {
        let plan = generate_plan(g, sch).unwrap();
        let sim = simulate_on(g, &plan, Some(dev)).unwrap();
        (sim.timing.unwrap().step.get(), sim.peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategies::Strategy;
    use std::path::Path;

    /// The least-memory plan with every fetch deferred holds, in each
    /// stage, only what the stage's kernel reads and writes: its peak is
    /// the floor no plan can go below (the largest node with its inputs),
    /// on two zoo models and a random DAG. Without deferral it is higher
    /// on GPT-2 and the random DAG (on ResNet-50 the floor is reached at a
    /// stage that fetches nothing).
    #[test]
    fn the_least_memory_plan_deferred_peaks_at_the_floor() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dev = Device::load(&root.join("devices/a100-40gb-pcie4.yaml")).unwrap();
        let mut graphs: Vec<Graph> = ["resnet50", "gpt2"]
            .iter()
            .map(|m| Graph::load(&root.join(format!("models/{m}.yaml"))).unwrap())
            .collect();
        graphs.push(crate::zoo::synthetic::random_layered(
            &crate::zoo::synthetic::RandomDag {
                nodes: 60,
                seed: 7,
                forward: true,
                ..Default::default()
            },
        ));
        let mut higher = 0;
        for g in &graphs {
            let sch = least_memory(g);
            assert_eq!(sch.validate(g), Ok(()));
            let mut late = sch.clone();
            for t in 0..sch.stages() {
                for &i in sch.p_row(t) {
                    late.defer_fetch(t, i as usize);
                }
            }
            assert_eq!(late.validate(g), Ok(()));
            let peak = |s: &Schedule| {
                simulate_on(g, &generate_plan(g, s).unwrap(), Some(&dev))
                    .unwrap()
                    .peak
            };
            let floor = crate::graph::analysis::min_feasible_budget(g);
            assert_eq!(peak(&late), floor, "{}", g.name);
            higher += usize::from(peak(&sch) > floor);
        }
        assert!(higher >= 2, "deferral lowered {higher} peaks");
    }

    /// The fetch leads read from intervals are the ones the stage walk
    /// (`Schedule::max_fetch_lead`, the rule's definition) finds, on the
    /// policies' plans of two models and on devices with and without
    /// direct reads, after the offload search has reshaped them.
    #[test]
    fn fetch_lead_room_is_the_walked_lead() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for file in ["gh200.yaml", "a100-40gb-pcie4.yaml"] {
            let dev = Device::load(&root.join("devices").join(file)).unwrap();
            let opts = SolveOptions {
                device: Some(std::sync::Arc::new(dev.clone())),
                ..SolveOptions::default()
            };
            for model in ["resnet50", "gpt2"] {
                let g = Graph::load(&root.join(format!("models/{model}.yaml"))).unwrap();
                let budget = crate::graph::analysis::checkpoint_all_peak(&g).scale_ceil(50, 100);
                let sol = super::super::offload_all::OffloadAll
                    .solve(&g, Bytes(u64::MAX / 2), &opts)
                    .unwrap();
                let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
                let searched = super::super::tiered_search::improve(
                    &g,
                    budget,
                    &dev,
                    sol.schedule.clone().unwrap(),
                    end,
                    true,
                    &mut |_, _| {},
                );
                for sch in sol.schedule.into_iter().chain(searched.map(|s| s.0)) {
                    let computes = super::super::local_search::Computes::of(&sch);
                    for t in 0..sch.stages() {
                        for &i in sch.p_row(t) {
                            let i = i as usize;
                            assert_eq!(
                                fetch_lead_room(&sch, &computes, t, i),
                                sch.max_fetch_lead(t, i),
                                "{model} on {file}: fetch of {i} in stage {t}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100, "only {checked} fetches checked");
    }

    /// The per-stage peaks the heuristics price their moves with agree with
    /// the simulator's peak, on plans with copies and recomputations.
    #[test]
    fn stage_peaks_reach_the_simulated_peak() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dev = Device::load(&root.join("devices/optane-pmm.yaml")).unwrap();
        let opts = SolveOptions {
            device: Some(std::sync::Arc::new(dev.clone())),
            ..SolveOptions::default()
        };
        for model in ["resnet50", "unet"] {
            let g = Graph::load(&root.join(format!("models/{model}.yaml"))).unwrap();
            let policies: [&dyn Strategy; 2] = [
                &super::super::offload_all::OffloadAll,
                &super::super::mc_dla::McDla,
            ];
            let mut schedules = vec![Schedule::checkpoint_all(&g)];
            for p in policies {
                let sol = p.solve(&g, Bytes(u64::MAX / 2), &opts).unwrap();
                schedules.push(sol.schedule.unwrap());
            }
            for sch in schedules {
                let plan = generate_plan(&g, &sch).unwrap();
                let peaks = stage_peaks(&g, &plan);
                let sim = simulate_on(&g, &plan, Some(&dev)).unwrap();
                assert_eq!(peaks.iter().max().copied().unwrap(), sim.peak, "{model}");
            }
        }
    }

    /// Leading each copy just enough to hide finds what leading every copy
    /// out as far as it may cannot: a long copy led far enough to hide, but
    /// not so far that it queues ahead of a short, urgent one on the same
    /// FIFO engine. Every figure by hand.
    #[test]
    fn leads_just_enough_beat_leading_every_copy() {
        // A chain a → … → j, every node 1 s; i also reads b, j also reads
        // a. a is 6 B (3 s each way at 2 B/s), b 2 B (1 s), the rest 1 B.
        let text = "name: ten\ngraph: training\nnodes:\n\
            - {name: a, cost: 1, memory: 6}\n\
            - {name: b, cost: 1, memory: 2, deps: [a]}\n\
            - {name: c, cost: 1, memory: 1, deps: [b]}\n\
            - {name: d, cost: 1, memory: 1, deps: [c]}\n\
            - {name: e, cost: 1, memory: 1, deps: [d]}\n\
            - {name: f, cost: 1, memory: 1, deps: [e]}\n\
            - {name: g, cost: 1, memory: 1, deps: [f]}\n\
            - {name: h, cost: 1, memory: 1, deps: [g]}\n\
            - {name: i, cost: 1, memory: 1, deps: [h, b]}\n\
            - {name: j, cost: 1, memory: 1, deps: [i, a]}\n";
        let g = hand::graph(text);
        let dev = hand::device(2, "none");
        let budget = Bytes(100);
        // b is copied out in stage 2 and fetched in stage 7; a is kept
        // through stage 6, copied out there and fetched in stage 8.
        let mut sch = Schedule::checkpoint_all(&g);
        sch.offload(1, 2, 7);
        sch.offload(0, 6, 8);
        let step = |s: &Schedule| {
            let (step, peak) = hand::run(&g, &dev, s);
            assert!(peak <= budget);
            step
        };
        // Within their stages: b's copy out hides behind c (2 → 3); a's,
        // issued with g (6 → 9), stalls 2 s; b's fetch hides behind h
        // (9 → 10); a's, issued with i (10 → 13), stalls 2 s; j 13 → 14.
        assert_eq!(step(&sch), 14.0);
        // Leading every copy out to its value's computation (each fetch by
        // the one stage it may): a's copy out runs 1 → 4, b's queues
        // behind it (4 → 5) and stalls stage 2 by 2 s; b's fetch hides;
        // a's (with h, 9 → 12) ends 1 s after i: 13 s.
        let plan = generate_plan(&g, &sch).unwrap();
        let sim = simulate_on(&g, &plan, Some(&dev)).unwrap();
        let every = with_leads(&g, &dev, budget, &sch, &plan, LEAD_RULES[0]).unwrap();
        assert_eq!(every.out_lead(6, 0), 6);
        assert_eq!(step(&every), 13.0);
        // The third rule leads each copy just enough to hide 1.5 times its
        // time: b's copy out by 1 (2 → 3, after b), a's by 4 (issued with
        // c, behind b's: 3 → 6, done before g ends); b's fetch by 1 (6 →
        // 7), a's by its one stage (7 → 10): i waits 1 s, 11 s.
        let enough = with_leads(&g, &dev, budget, &sch, &plan, LEAD_RULES[2]).unwrap();
        assert_eq!((enough.out_lead(6, 0), enough.out_lead(2, 1)), (4, 1));
        assert_eq!(step(&enough), 11.0);
        let rules = faster_with_leads(&g, &dev, budget, &sch, &plan, &sim).unwrap();
        assert_eq!(rules.step, 11.0);
        // The descent, from the plain schedule, finds the same 11 s (a's
        // fetch may lead by one stage only: a is resident through stage
        // 6), whatever lead of a's copy out it settles on.
        let far = std::time::Instant::now() + std::time::Duration::from_secs(600);
        let led = descend_leads(&g, &dev, budget, &sch, far).unwrap();
        assert_eq!(led.step, 11.0);
        assert_eq!(step(&led.sch), 11.0);
    }

    /// Where every rule queues a long copy ahead of an urgent one, the
    /// descent leads it by just the stages that let it start after the
    /// urgent one and still hide. Every figure by hand.
    #[test]
    fn leads_chosen_one_by_one_beat_both_rules() {
        // A chain n0 → … → n8, every node 1 s; z reads n8 and, from the
        // slow tier, n0 (6 B: 3 s each way at 2 B/s) and n1 (2 B: 1 s).
        let text = "name: two\ngraph: training\nnodes:\n\
            - {name: n0, cost: 1, memory: 6}\n\
            - {name: n1, cost: 1, memory: 2, deps: [n0]}\n\
            - {name: n2, cost: 1, memory: 1, deps: [n1]}\n\
            - {name: n3, cost: 1, memory: 1, deps: [n2]}\n\
            - {name: n4, cost: 1, memory: 1, deps: [n3]}\n\
            - {name: n5, cost: 1, memory: 1, deps: [n4]}\n\
            - {name: n6, cost: 1, memory: 1, deps: [n5]}\n\
            - {name: n7, cost: 1, memory: 1, deps: [n6]}\n\
            - {name: n8, cost: 1, memory: 1, deps: [n7]}\n\
            - {name: z, cost: 1, memory: 1, deps: [n8, n0, n1]}\n";
        let g = hand::graph(text);
        let dev = hand::device(2, "2");
        let budget = Bytes(100);
        // n0 kept through stage 5 and copied out there; n1 kept into stage
        // 2 and copied out there; z reads both directly (4 s).
        let mut sch = Schedule::checkpoint_all(&g);
        sch.set_s_range(0, 6..=9, false);
        sch.set_o(5, 0, true);
        sch.set_s_range(1, 3..=9, false);
        sch.set_o(2, 1, true);
        for t in 3..=9 {
            sch.set_h(t, 1, true);
            if t >= 6 {
                sch.set_h(t, 0, true);
            }
        }
        let sch = crate::schedule::solve_r_tiered(&g, sch, true);
        let step = |s: &Schedule| hand::run(&g, &dev, s).0;
        // Within their stages: n1's copy 2 → 3 hides behind n2; n0's,
        // issued with n5 (5 → 8), stalls 2 s; n6 … n8 end at 11, z at 16.
        assert_eq!(step(&sch), 16.0);
        // Leading n0's copy to its computation (issued at 1) or by the 4
        // stages that hide 1.5 times its 3 s (issued with n1, at 1): it
        // runs 1 → 4, n1's (issued after n1, at 2) queues 4 → 5 and stage
        // 2 waits 2 s for it: 16 s again, so no rule is kept.
        let plan = generate_plan(&g, &sch).unwrap();
        let sim = simulate_on(&g, &plan, Some(&dev)).unwrap();
        for rule in LEAD_RULES {
            let led = with_leads(&g, &dev, budget, &sch, &plan, rule).unwrap();
            assert_eq!(step(&led), 16.0, "{rule:?}");
        }
        assert!(faster_with_leads(&g, &dev, budget, &sch, &plan, &sim).is_none());
        // The descent issues n0's copy with n3 (lead 2: 3 → 6) or with n2
        // (lead 3: behind n1's, 3 → 6), done as n5 ends: no stall, 14 s.
        let far = std::time::Instant::now() + std::time::Duration::from_secs(600);
        let led = descend_leads(&g, &dev, budget, &sch, far).unwrap();
        assert_eq!(led.step, 14.0);
        assert_eq!(step(&led.sch), 14.0);
        assert!([2, 3].contains(&led.sch.out_lead(5, 0)));
    }
}
