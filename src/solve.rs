//! The one path from a strategy's schedule to a reported answer:
//! schedule → plan → simulator → outcome. Every figure in an [`Outcome`]
//! comes from the simulator, never from a solver's objective.

use crate::graph::analysis;
use crate::graph::{Graph, NodeId};
use crate::schedule::feasible::Feasibility;
use crate::schedule::{generate_plan, simulate_on, Plan, PlanFile, Schedule, SimReport, Timing};
use crate::strategies::watch::Snapshot;
use crate::strategies::{Progress, SolveOptions, Status, Strategy, StrategyError};
use crate::units::{short_float, Bytes, Seconds};
use std::time::Instant;

/// The relative gap within which a plan is called optimal: the default
/// `--gap`, at which the MILP solvers' own optimality proofs stop.
pub const OPTIMAL_GAP: f64 = 1e-4;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub strategy: String,
    pub budget: Bytes,
    pub status: Status,
    pub plan: Option<Plan>,
    /// The schedule `plan` was generated from (on the graph as given, with
    /// its groups).
    pub schedule: Option<Schedule>,
    pub sim: Option<SimReport>,
    pub lower_bound: Option<f64>,
    pub detail: Option<String>,
    pub seconds: f64,
    /// Best cost and bound over time (see [`Progress`]); at least the final
    /// answer, at `seconds`.
    pub trace: Vec<Progress>,
    /// With a device: a lower bound on the step time of any plan within
    /// the budget (the graph's own, raised by the strategy's).
    pub step_bound: Option<Seconds>,
    /// When the plan first computes the nodes in another order than the
    /// file's (no schedule in the file's order fits): that order. The
    /// bounds then hold for plans in that order, and `schedule` is `None`
    /// (a schedule is told in one order's stages).
    pub order: Option<Vec<NodeId>>,
    /// `infeasible` proven for plans in every node order, not only the
    /// file's ([`crate::schedule::free_order::Sequences::NoneFits`]).
    pub every_order: bool,
}

impl Outcome {
    pub fn cost(&self) -> Option<f64> {
        self.sim.as_ref().map(|s| s.cost)
    }

    /// What answers are ranked by: the step time on a device (the
    /// fastest step is the point there), else the cost.
    pub fn measure(&self) -> Option<f64> {
        self.timing().map(|t| t.step.get()).or(self.cost())
    }

    pub fn peak(&self) -> Option<Bytes> {
        self.sim.as_ref().map(|s| s.peak)
    }

    /// The plan's timed replay, when solved with a device.
    pub fn timing(&self) -> Option<&Timing> {
        self.sim.as_ref()?.timing.as_ref()
    }

    /// Seconds until the first plan was known, from the trace.
    pub fn first_plan_secs(&self) -> Option<f64> {
        self.trace.iter().find(|p| p.cost.is_some()).map(|p| p.secs)
    }

    /// Seconds until the best plan was within `gap` (relative) of the best
    /// bound, from the trace.
    pub fn secs_to_gap(&self, gap: f64) -> Option<f64> {
        self.trace
            .iter()
            .find(|p| match (p.cost, p.bound) {
                (Some(c), Some(b)) => c <= 0.0 || (c - b) / c <= gap,
                _ => false,
            })
            .map(|p| p.secs)
    }

    /// Relative gap of the simulated step time over its bound, when
    /// solved on a device.
    pub fn step_gap(&self) -> Option<f64> {
        let step = self.timing()?.step.get();
        let lb = self.step_bound?.get();
        if step <= 0.0 {
            return Some(0.0);
        }
        Some(((step - lb) / step).max(0.0))
    }

    /// Relative gap (cost − bound) / cost, when both are known.
    pub fn gap(&self) -> Option<f64> {
        let c = self.cost()?;
        let lb = self.lower_bound?;
        if c <= 0.0 {
            return Some(0.0);
        }
        Some(((c - lb) / c).max(0.0))
    }

    pub fn plan_file(&self, g: &Graph) -> Option<PlanFile> {
        let (plan, sim) = (self.plan.as_ref()?, self.sim.as_ref()?);
        Some(PlanFile {
            model: g.name.clone(),
            graph_fingerprint: Some(g.fingerprint().to_string()),
            strategy: self.strategy.clone(),
            budget: Some(self.budget.get()),
            fixed_memory: g.fixed_memory.get(),
            cost: sim.cost,
            peak_memory: sim.peak.get(),
            statements: plan.to_file_statements(g),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("infeasible: needs at least {need} bytes ({}, {:.1}% of the checkpoint-all peak), {}; the budget is {budget} bytes", .need.human_up(), (.need.as_f64() * 1000.0 / .peak.as_f64().max(1.0)).ceil() / 10.0, if *.direct_reads { "the largest value plus fixed memory (the device's kernels may read their inputs from the slow tier)" } else { "the largest node with all its inputs plus fixed memory" })]
    BelowMinimum {
        budget: Bytes,
        need: Bytes,
        peak: Bytes,
        /// The floor is a value alone: the device reads inputs directly.
        direct_reads: bool,
    },
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    /// A strategy produced something the shared machinery rejects: a bug,
    /// reported loudly with the numbers.
    #[error("internal error in strategy {strategy}: {msg}")]
    Bug { strategy: String, msg: String },
}

/// The least memory any plan needs: the largest node with all its inputs,
/// plus fixed memory. Kernels that may read their operands from the slow
/// tier need only their output in fast memory, so a device with direct reads
/// lowers it to the largest node.
pub fn budget_floor(g: &Graph, device: Option<&crate::device::Device>) -> Bytes {
    if reads_directly(device) {
        g.fixed_memory + g.ids().map(|i| g.memory(i)).max().unwrap_or(Bytes(0))
    } else {
        analysis::min_feasible_budget(g)
    }
}

fn reads_directly(device: Option<&crate::device::Device>) -> bool {
    device.is_some_and(|d| d.slow.direct_read.is_some())
}

/// Runs one strategy at one budget and checks its answer.
pub fn run(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Outcome, SolveError> {
    let start = Instant::now();
    match slow_tier_in_another_order(g, strategy, budget, opts)? {
        Some(out) => Ok(out),
        None => {
            // What the proof there took comes off the limit.
            let mut rest = opts.clone();
            rest.time_limit = opts.time_limit.saturating_sub(start.elapsed());
            run_in_file_order(g, strategy, budget, &rest)
        }
    }
}

/// With a slow tier, the strategies plan in the file's node order (where
/// offloading may fit what no recompute schedule does). Where no recompute
/// schedule in that order fits but the graph has other orders, a plan in
/// another order may be much faster than any that copies: on
/// tests/data/order/f2 at 72 B on the GH200, remat-fast's plan stalled
/// 20 µs on copies, where recomputing in another order takes 1.3e-12 s. So
/// there the strategy runs on a third of the time in the order the
/// node-order search finds (device and all), and on the rest in the
/// file's, and the faster step answers.
fn slow_tier_in_another_order(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Option<Outcome>, SolveError> {
    let slow = opts
        .device
        .as_ref()
        .is_some_and(|d| d.slow.capacity > Bytes::ZERO);
    if !slow
        || opts.no_recompute
        || !strategy.may_reorder()
        || g.has_groups()
        || analysis::order_is_forced(g)
        || budget < budget_floor(g, opts.device.as_deref())
    {
        return Ok(None);
    }
    let start = Instant::now();
    let plain = SolveOptions {
        device: None,
        ..opts.clone()
    };
    let Proof::NothingFits(why, true) = prove_nothing_fits(g, budget, &plain) else {
        return Ok(None);
    };
    // A third, not half: the file's order is where copies may help, and a
    // tiered strategy needs its seed policies' time there (remat-tiered
    // with a 1 s limit ran none of them on random-layered-n100 at 45%).
    let mut third = opts.clone();
    third.time_limit = opts.time_limit.saturating_sub(start.elapsed()) / 3;
    let other = match in_another_order(g, strategy, budget, &third, Instant::now(), &why)? {
        Reordered::Answer(out) => *out,
        _ => return Ok(None),
    };
    let mut rest = opts.clone();
    rest.time_limit = opts.time_limit.saturating_sub(start.elapsed());
    let file = match run_in_file_order(g, strategy, budget, &rest) {
        Ok(out) => Some(out),
        Err(e @ SolveError::Bug { .. }) => return Err(e),
        Err(_) => None,
    };
    let seconds = start.elapsed().as_secs_f64();
    let noted = |out: Outcome, note: String| Outcome {
        detail: with_note(out.detail, note),
        seconds,
        ..out
    };
    let shown = |o: &Outcome| match o.timing() {
        Some(t) => format!("a step of {}", t.step),
        None => format!("cost {}", o.cost().map_or("none".into(), short_float)),
    };
    Ok(Some(match file {
        Some(f)
            if f.measure()
                .is_some_and(|s| other.measure().is_none_or(|o| s <= o)) =>
        {
            let note = format!("another node order's best plan had {}", shown(&other));
            noted(f, note)
        }
        Some(f) => {
            let note = match f.cost() {
                Some(_) => format!("the file's order's best plan had {}", shown(&f)),
                None => "no plan in the file's order".into(),
            };
            noted(other, note)
        }
        None => noted(other, "no plan in the file's order".into()),
    }))
}

fn run_in_file_order(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
) -> Result<Outcome, SolveError> {
    let need = budget_floor(g, opts.device.as_deref());
    if budget < need {
        return Err(SolveError::BelowMinimum {
            budget,
            need,
            peak: analysis::checkpoint_all_peak(g),
            direct_reads: reads_directly(opts.device.as_deref()),
        });
    }
    let start = Instant::now();
    let proved;
    let mut undecided_proof = false;
    let opts = match prove_nothing_fits(g, budget, opts) {
        Proof::NothingFits(why, in_order) => {
            let mut why = why;
            // A sequence in another order that fits shows that plans
            // exist: then the answer is that none was found, not that
            // none fits.
            let mut status = Status::Infeasible;
            let mut every_order = false;
            if in_order && reorderable(g, strategy, opts) {
                match in_another_order(g, strategy, budget, opts, start, &why)? {
                    Reordered::Answer(out) => return Ok(*out),
                    Reordered::NotTried => {}
                    Reordered::NoneFits(proof) => {
                        why = format!("{why}; {proof}");
                        every_order = true;
                    }
                    Reordered::NoneFound(note, plans_exist) => {
                        why = format!("{why}; {note}");
                        if plans_exist {
                            status = Status::NoSolution;
                        }
                    }
                }
            }
            return Ok(without_plan(
                strategy,
                budget,
                status,
                why,
                start,
                every_order,
            ));
        }
        Proof::Open(rest, undecided) => {
            proved = rest;
            undecided_proof = undecided;
            &proved
        }
        Proof::NotTried => opts,
    };
    let searched = Instant::now();
    // Undecided: no schedule in the file's order may fit. A sequence in
    // another order, found now, answers if the strategy finds no plan, or
    // a costlier one.
    let fallback = if undecided_proof && reorderable(g, strategy, opts) {
        sequence_fallback(g, budget, searched + opts.time_limit / 10)
    } else {
        Fallback::None
    };
    if let Fallback::NoneFits(proof) = fallback {
        let infeasible = Status::Infeasible;
        return Ok(without_plan(
            strategy, budget, infeasible, proof, start, true,
        ));
    }
    // Where the file's order is undecided, the strategy may find nothing
    // there in all its time (random-layered-n500 at 60%: no plan in 60 s).
    // It gets a quarter first; where it found a plan cheaper than the
    // fallback sequence the rest goes to the usual course, from that plan,
    // and else to a falling budget.
    let end = start + opts.time_limit;
    let left = || end.saturating_duration_since(Instant::now());
    let fallback: Option<SearchSequence> = match fallback {
        Fallback::Plan(order, seq, found) => Some((order, seq, found)),
        _ => None,
    };
    let mut rest = opts.clone();
    let mut probe = None;
    if let Some(fell) = fallback.as_ref() {
        let cost = crate::schedule::sequence::cost(g, &fell.1);
        rest.time_limit = left() / 4;
        let first = checked(g, strategy, budget, &rest, start)?;
        if first.cost().is_some_and(|c| c <= cost) {
            rest.warm_start = first
                .schedule
                .clone()
                .map(|s| ("its plan in the first quarter of the time".into(), s));
            rest.known_bound = first.lower_bound;
            probe = Some(first);
        } else {
            let why = strategy_lost(&first);
            return tightest(g, strategy, budget, opts, start, fell, &why);
        }
    }
    rest.time_limit = left();
    let out = match both_orders(g, strategy, budget, &rest, start)? {
        Some(out) => out,
        None => {
            // A node-order search that found no other order took its time.
            rest.time_limit = left();
            checked(g, strategy, budget, &rest, start)?
        }
    };
    let out = match probe {
        Some(p) if p.cost().is_some_and(|c| out.cost().is_none_or(|o| c < o)) => p,
        _ => out,
    };
    let Some((order, seq, found)) = fallback else {
        return Ok(out);
    };
    let cost = crate::schedule::sequence::cost(g, &seq);
    if out.cost().is_some_and(|c| c <= cost) {
        return Ok(out);
    }
    let what = search_sequence(g, &order, &seq, found, &strategy_lost(&out));
    sequence_outcome(g, strategy, budget, opts, start, &what, &order, &seq, None)
}

/// Why a sequence answers instead of the strategy's plan `out`.
fn strategy_lost(out: &Outcome) -> String {
    match out.cost() {
        Some(c) => format!("the strategy's best plan cost {}", short_float(c)),
        None => format!(
            "the strategy found no plan in the file's node order ({})",
            out.detail.as_deref().unwrap_or("no plan")
        ),
    }
}

/// Where the node-order search's sequence `seq` (in `order`, shortened from
/// `found` computations) is the best plan so far: the file's order has no
/// plan from the strategy, or a costlier one, or none at all, and no
/// schedule was found in the sequence's own order. The rest of the time
/// goes to a falling budget ([`descended`]) and to polishing what it
/// reaches, or the sequence where it reaches nothing cheaper; `why` says
/// why the sequence stands.
fn tightest(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    (order, seq, found): &SearchSequence,
    why: &str,
) -> Result<Outcome, SolveError> {
    let end = start + opts.time_limit;
    let cost = crate::schedule::sequence::cost(g, seq);
    let mut starts = Vec::new();
    if let Some(formed) = schedule_form(g, seq) {
        starts.push(("the node-order search's sequence in schedule form", formed));
    }
    starts.push(("one pass in the file's order", g.ids().collect()));
    let why = match descended(g, budget, opts, end, &starts) {
        Ok((down, c, what)) if c < cost => {
            let order = crate::schedule::free_order::order_of(&down, g.len());
            let what = format!(
                "{what}, because {why} and the node-order search's sequence cost {}",
                short_float(cost)
            );
            let out =
                sequence_outcome(g, strategy, budget, opts, start, &what, &order, &down, None)?;
            let out = polished(g, strategy, budget, opts, start, out, end)?;
            // A plan refined from it names the walk only as "the plan costing".
            if out.detail.as_deref().is_some_and(|d| d.contains(&what)) {
                return Ok(out);
            }
            let detail = with_note(out.detail, format!("the plan annealed from: {what}"));
            return Ok(Outcome { detail, ..out });
        }
        Ok(_) => why.to_string(),
        Err(missed) => format!("{why}; {missed}"),
    };
    let what = search_sequence(g, order, seq, *found, &why);
    let out = sequence_outcome(g, strategy, budget, opts, start, &what, order, seq, None)?;
    polished(g, strategy, budget, opts, start, out, end)
}

/// `seq` as a schedule in its order of first computations (each stage
/// recomputing what the values it carries force, once each), as a sequence
/// in `g`'s ids; mostly over the budget `seq` fits (random-layered-n250 at
/// 60%: the node-order search's sequence, 88,040 bytes, is 101,550 so), and
/// so a start for [`descended`] that is near a plan.
fn schedule_form(g: &Graph, seq: &[NodeId]) -> Option<Vec<NodeId>> {
    let (order, gp, sch) = as_schedule(g, seq)?;
    computations_of(&gp, &order, &sch)
}

/// `seq` as a schedule in its order of first computations, with that
/// order and the graph in it; `None` where it is not one.
fn as_schedule(g: &Graph, seq: &[NodeId]) -> Option<(Vec<NodeId>, Graph, Schedule)> {
    let order = crate::schedule::free_order::order_of(seq, g.len());
    let gp = g.reordered(&order)?;
    let sch = crate::schedule::sequence::schedule_in(g, &gp, seq, &order)?;
    Some((order, gp, sch))
}

/// The computations of `sch`, a schedule of `gp` (the graph in `order`),
/// in the file's ids.
fn computations_of(gp: &Graph, order: &[NodeId], sch: &Schedule) -> Option<Vec<NodeId>> {
    let plan = generate_plan(gp, sch).ok()?.renumbered(order);
    Some(plan.computed().collect())
}

/// A sequence that fits `budget`, reached from one of `starts` (named, for
/// the detail) under a falling budget ([`crate::schedule::anneal::descend`])
/// in five sixths of the time to `end`, the rest left for polishing it;
/// with its cost and how it was found, or the words for a walk that missed.
fn descended(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    end: Instant,
    starts: &[(&str, Vec<NodeId>)],
) -> Result<(Vec<NodeId>, f64, String), String> {
    let began = Instant::now();
    let until = began + end.saturating_duration_since(began) * 5 / 6;
    let seqs: Vec<&[NodeId]> = starts.iter().map(|(_, s)| s.as_slice()).collect();
    // One run of walks per thread, each from its own seed (and so its own
    // first start): whether a walk reaches the budget is decided by its
    // path, so threads add walks.
    let runs: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..opts.threads.max(1) as u64)
            .map(|seed| {
                let seqs = &seqs;
                s.spawn(move || {
                    crate::schedule::anneal::descend(
                        g,
                        seqs,
                        budget,
                        until,
                        seed,
                        opts.stop.as_ref(),
                    )
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut found = crate::schedule::anneal::Annealed::default();
    for r in runs {
        found.absorb(r);
    }
    let Some((seq, cost)) = found.best else {
        let names: Vec<&str> = starts.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "annealing under a budget falling from {} did not reach it ({} walks, {} moves in {:.1} s)",
            names.join(" or "),
            found.walks,
            found.moves,
            began.elapsed().as_secs_f64()
        ));
    };
    watched(g, &seq, budget, opts, "a falling budget");
    let what = format!(
        "a sequence of computations annealed under a budget falling from {} ({} moves in {:.1} s, walk {})",
        starts[found.start].0,
        found.moves,
        began.elapsed().as_secs_f64(),
        found.walks
    );
    Ok((seq, cost, what))
}

/// An answer without a plan, settled before (or instead of) the strategy.
fn without_plan(
    strategy: &dyn Strategy,
    budget: Bytes,
    status: Status,
    detail: String,
    start: Instant,
    every_order: bool,
) -> Outcome {
    let seconds = start.elapsed().as_secs_f64();
    Outcome {
        strategy: strategy.name().to_string(),
        budget,
        status,
        plan: None,
        schedule: None,
        sim: None,
        lower_bound: None,
        detail: Some(detail),
        seconds,
        trace: vec![Progress {
            secs: seconds,
            cost: None,
            bound: None,
        }],
        step_bound: None,
        order: None,
        every_order,
    }
}

/// A sequence of computations that fits `budget` in another node order,
/// shortened by `deadline` ([`crate::schedule::sequence`]): the order, the
/// sequence, and how many computations the search's own sequence had. Or
/// the proof that none fits in any order. Rules 0 and 1 of the search only;
/// the third is slow on large graphs and its sequences are the longest.
fn sequence_fallback(g: &Graph, budget: Bytes, deadline: Instant) -> Fallback {
    use crate::schedule::free_order::{self, Sequences};
    use crate::schedule::sequence;
    let began = Instant::now();
    for rule in 0..2 {
        match free_order::sequence_by(g, budget, deadline, rule) {
            Sequences::Found(seq) => {
                let short = sequence::shortened(g, &seq, budget, deadline);
                return Fallback::Plan(free_order::order_of(&short, g.len()), short, seq.len());
            }
            Sequences::NoneFits { states } => {
                return Fallback::NoneFits(every_order_proof(states, began))
            }
            Sequences::Unknown => {}
        }
    }
    Fallback::None
}

/// The node-order search's sequence as a plan: its order of first
/// computations, the sequence (shortened), and how many computations the
/// search's own sequence had.
type SearchSequence = (Vec<NodeId>, Vec<NodeId>, usize);

/// What [`sequence_fallback`] found.
enum Fallback {
    Plan(Vec<NodeId>, Vec<NodeId>, usize),
    NoneFits(String),
    None,
}

/// The words of a proof that no plan fits in any node order.
fn every_order_proof(states: u64, since: Instant) -> String {
    format!(
        "no plan fits in any node order: proven by an exhaustive search over sequences of computations ({states} states in {:.2} s)",
        since.elapsed().as_secs_f64()
    )
}

/// The strategy's answer through the plan generator and the simulator,
/// with the bounds that hold for it; `start` is when the solve began.
fn checked(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
) -> Result<Outcome, SolveError> {
    let mut sol = crate::strategies::solve_groups(strategy, g, budget, opts)?;
    let seconds = start.elapsed().as_secs_f64();
    let direct = opts
        .device
        .as_ref()
        .is_some_and(|d| d.slow.direct_read.is_some());
    if direct && sol.status == Status::Infeasible {
        // A recompute strategy's proof covers plans without the slow tier;
        // with direct reads, a placement there may still fit.
        sol.status = Status::NoFit;
        sol.detail = Some(format!(
            "no plan without the slow tier fits; tiered strategies may ({})",
            sol.detail.as_deref().unwrap_or("proof by the strategy")
        ));
    }
    let bug = |msg: String| SolveError::Bug {
        strategy: strategy.name().to_string(),
        msg,
    };
    let (plan, sim) = match (&sol.schedule, sol.status.has_plan()) {
        (Some(sch), true) => {
            let plan = generate_plan(g, sch).map_err(|e| bug(format!("invalid schedule: {e}")))?;
            if sch.has_transfers() && opts.device.is_none() {
                return Err(bug(
                    "returned a schedule with transfers but no device was given".into(),
                ));
            }
            let sim = simulate_on(g, &plan, opts.device.as_deref())
                .map_err(|e| bug(format!("plan rejected: {e}")))?;
            if sim.peak > budget {
                return Err(bug(format!(
                    "simulated peak {} exceeds the budget {}",
                    sim.peak, budget
                )));
            }
            if let Some(sp) = sol.solver_peak {
                // Allow solver round-off of one part in 10^6.
                if sim.peak.as_f64() > sp * (1.0 + 1e-6) + 1.0 {
                    return Err(bug(format!(
                        "the simulator measured a peak of {} bytes but the solver's memory (U) promised at most {:.0}",
                        sim.peak, sp
                    )));
                }
            }
            if let (Some(lb), Some(t)) = (sol.step_bound, &sim.timing) {
                if t.step.get() < lb.get() * (1.0 - 1e-6) - 1e-12 {
                    return Err(bug(format!(
                        "simulated step time {} is below the claimed bound {lb}",
                        t.step
                    )));
                }
            }
            if let Some(lb) = sol.lower_bound {
                if sim.cost < lb * (1.0 - 1e-6) - 1e-9 {
                    return Err(bug(format!(
                        "simulated cost {} is below the claimed lower bound {}",
                        sim.cost, lb
                    )));
                }
            }
            (Some(plan), Some(sim))
        }
        (None, true) => return Err(bug("reported a plan but returned no schedule".into())),
        _ => (None, None),
    };
    // A bound from the graph alone (every node once, plus what the tightest
    // stage must evict) holds for every plan, so no plan is reported
    // without a gap. A plan below it would be a bug in the bound: checked.
    // The graph's bounds are on recomputation alone: a plan that offloads
    // may compute less, so they are neither checked nor reported for it.
    let offloads = sol.schedule.as_ref().is_some_and(|s| s.has_transfers());
    let lower_bound = match (&sim, sol.lower_bound) {
        (Some(_), lb) if offloads => lb,
        (Some(s), lb) => {
            let floor = analysis::eviction_bound(g, budget);
            if s.cost < floor * (1.0 - 1e-9) - 1e-9 {
                return Err(bug(format!(
                    "simulated cost {} is below the eviction bound {floor}",
                    s.cost
                )));
            }
            Some(lb.unwrap_or(0.0).max(floor))
        }
        // No plan found, but plans may exist: the bound still says how
        // much any of them must cost.
        (None, lb) if sol.status == Status::NoSolution => {
            Some(lb.unwrap_or(0.0).max(analysis::eviction_bound(g, budget)))
        }
        (None, lb) => lb,
    };
    // Whole costs make whole plan costs, so the bound rounds up past the
    // solver's noise (the sweep's rows do the same), never past the plan.
    let lower_bound = lower_bound.map(|b| {
        let t = g.tidy_bound(b);
        match &sim {
            Some(s) if !offloads => t.min(s.cost),
            _ => t,
        }
    });
    // `optimal` is a promise: within OPTIMAL_GAP of a bound, or by the
    // solver's own proof at the default gap. A looser --gap lets a strategy
    // stop early, and the answer then says `feasible` with its gap.
    let (mut status, mut detail) = (sol.status, sol.detail);
    if status == Status::Optimal && opts.gap > OPTIMAL_GAP {
        let cost = sim.as_ref().map_or(0.0, |s| s.cost);
        let proven = lower_bound.is_some_and(|lb| cost <= 0.0 || (cost - lb) / cost <= OPTIMAL_GAP);
        if !proven {
            status = Status::Feasible;
            let note = format!(
                "stopped within the requested gap of {}%, not proven optimal",
                opts.gap * 100.0
            );
            detail = with_note(detail, note);
        }
    }
    // Every answer on a device carries a step-time bound: the graph's own
    // (every node once, raised by the tightest stage), which holds for
    // every plan, raised by the strategy's where it has one.
    let timing = sim.as_ref().and_then(|s| s.timing.as_ref());
    let mut dropped: Option<Seconds> = None;
    let step_bound = opts.device.as_deref().map(|d| {
        let graph = crate::solver::tiered::step_bound(g, budget, d, false);
        let own = sol.step_bound.map_or(graph, |b| b.max(graph));
        match timing {
            // Above a simulated plan, the graph's bound is wrong (the
            // strategy's own was checked above): clipping it to the plan
            // would call the plan optimal.
            Some(t) if own.get() > t.step.get() * (1.0 + 1e-6) => {
                dropped = Some(own);
                d.all_fast_step(g).min(t.step)
            }
            Some(t) => own.min(t.step),
            None => own,
        }
    });
    let note = |detail: &mut Option<String>, note: String| {
        *detail = with_note(detail.take(), note);
    };
    if let Some(b) = dropped {
        note(
            &mut detail,
            format!("the graph's step bound of {b} lies above the plan and was dropped"),
        );
    }
    // `optimal` says the same everywhere: within OPTIMAL_GAP of a bound that
    // holds for every plan. On a device that is the step bound: a policy's
    // MILP is optimal within its own model (AutoTM's said `optimal` 11.6%
    // above the step bound), and a recompute-only optimum may be beaten by
    // offloading. A heuristic that meets its bound is optimal too.
    let rel = |x: f64, lb: f64| if x <= 0.0 { 0.0 } else { (x - lb) / x };
    let gap_now = match (opts.device.is_some(), timing, step_bound) {
        (true, Some(t), Some(lb)) => Some(rel(t.step.get(), lb.get())),
        (true, ..) => None,
        (false, ..) => sim.as_ref().zip(lower_bound).map(|(s, lb)| rel(s.cost, lb)),
    };
    match (status, gap_now) {
        (Status::Optimal, Some(gap)) if opts.device.is_some() && gap > OPTIMAL_GAP => {
            status = Status::Feasible;
            note(
                &mut detail,
                "optimal among this strategy's plans, not proven against every plan on the device"
                    .into(),
            );
        }
        (Status::Feasible, Some(gap)) if gap <= OPTIMAL_GAP => status = Status::Optimal,
        _ => {}
    }
    let mut trace = sol.trace;
    trace.push(Progress {
        secs: seconds,
        cost: sim.as_ref().map(|s| s.cost),
        bound: lower_bound,
    });
    let schedule = plan.as_ref().and(sol.schedule);
    Ok(Outcome {
        strategy: strategy.name().to_string(),
        budget,
        status,
        plan,
        schedule,
        sim,
        lower_bound,
        detail,
        seconds,
        trace,
        step_bound,
        order: None,
        every_order: false,
    })
}

/// What [`in_another_order`] came to.
enum Reordered {
    Answer(Box<Outcome>),
    /// The strategy keeps the file's order, or the graph has no other.
    NotTried,
    /// Searched, no plan: what to add to the proof's words, and whether
    /// the search found a sequence that fits (so plans exist).
    NoneFound(String, bool),
    /// Proven: no plan fits in any order (the words of the proof).
    NoneFits(String),
}

/// Whether `strategy` may answer `g` in another node order: remat's own
/// strategies ([`Strategy::may_reorder`]), on a graph with another
/// topological order and no multi-output kernels (the node-order search
/// does not model kernels), and recompute-only (the search knows no slow
/// tier).
fn reorderable(g: &Graph, strategy: &dyn Strategy, opts: &SolveOptions) -> bool {
    strategy.may_reorder()
        && !g.has_groups()
        && opts
            .device
            .as_ref()
            .is_none_or(|d| d.slow.capacity == Bytes::ZERO)
        && !analysis::order_is_forced(g)
}

/// Where no schedule in the file's order fits, a plan in another order:
/// the node-order search ([`crate::schedule::free_order`]) picks an order
/// in a quarter of the time left, the exact schedule search finds a
/// schedule in it in half of the rest, and the strategy runs on the
/// reordered graph from that schedule with what remains.
///
/// Why here and not in a strategy: the proof that the file's order has no
/// schedule comes first, and every command (solve, sweep, max-batch)
/// passes through here.
fn in_another_order(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    why: &str,
) -> Result<Reordered, SolveError> {
    let left = || opts.time_limit.saturating_sub(start.elapsed());
    let searched = Instant::now();
    let none = |what: &str, plans_exist: bool| {
        Ok(Reordered::NoneFound(
            format!("{what} ({:.2} s)", searched.elapsed().as_secs_f64()),
            plans_exist,
        ))
    };
    // The node-order search's rules in turn while the order found is
    // proven to have no schedule (a 14-node DAG's first order at 96 B had
    // none, another had a plan); an undecided order ends the search, as
    // the next would get less time.
    use crate::schedule::free_order::{order_of, sequence_by, Sequences, RULES};
    // (order, the sequence it was read from, why no schedule in it)
    let mut tried: Vec<(Vec<NodeId>, Vec<NodeId>, String)> = Vec::new();
    let mut found = None;
    for rule in 0..RULES {
        let seq = match sequence_by(g, budget, Instant::now() + left() / 4, rule) {
            Sequences::Found(seq) => seq,
            Sequences::NoneFits { states } => {
                return Ok(Reordered::NoneFits(every_order_proof(states, searched)))
            }
            Sequences::Unknown => continue,
        };
        let order = order_of(&seq, g.len());
        if tried.iter().any(|(o, _, _)| *o == order) {
            continue;
        }
        let gp = reordered(g, strategy, &order)?;
        let decided = Instant::now();
        let took = || decided.elapsed().as_secs_f64();
        // Half of what is left: random-layered-n250 at 60% needs 37.6 s
        // here, under 30 s on a faster machine; what is left after an
        // undecided order goes to the falling budget from its sequence.
        match crate::schedule::feasible::decide(&gp, budget, Instant::now() + left() / 2) {
            Feasibility::Fits(s) => {
                found = Some((order, gp, s, took()));
                break;
            }
            Feasibility::NoSchedule { states } => tried.push((
                order,
                seq,
                format!("proven: {states} states in {:.2} s", took()),
            )),
            Feasibility::Unknown { states } => {
                tried.push((
                    order,
                    seq,
                    format!("undecided after {states} states in {:.2} s", took()),
                ));
                break;
            }
        }
    }
    let Some((order, gp, schedule, decided_in)) = found else {
        if tried.is_empty() {
            return none(
                "a search over other node orders found none that fits",
                false,
            );
        }
        // The search's sequence, shortened, is a plan; the time left goes
        // to a falling budget and polishing.
        let Some((fell, no_schedule)) = cheapest_sequence(g, budget, opts, start, &tried) else {
            return Ok(Reordered::NotTried);
        };
        let why = format!(
            "{why}; no schedule in the order of the node-order search's sequence was found ({no_schedule})"
        );
        let out = tightest(g, strategy, budget, opts, start, &fell, &why)?;
        return Ok(Reordered::Answer(Box::new(out)));
    };
    // Half is kept for polishing a plan far from its bound: plans in
    // these orders are the tight budgets' (random-layered-n250 at 60%:
    // remat-fast's 189,850 at 30 s is 188,200 at 60 s, where 20 s of
    // annealing from it found 170,414).
    let mut o = opts.clone();
    let end = start + opts.time_limit;
    o.time_limit = left() / 2;
    o.warm_start = Some(("the node-order search's schedule".into(), schedule));
    let because = format!("found by a search over orders, because {why}");
    // Said whichever plan wins: polishing's answer names only its own
    // walk, and this search and the first plan take most of the limit
    // (random-layered-n250 at 60%: 13-17 s and 23 s of 60), which the
    // detail must account for.
    let searched_for = searched.elapsed().as_secs_f64();
    let planned = Instant::now();
    match in_order(g, &gp, &order, strategy, budget, &o, start, &because)? {
        Some(out) => {
            let note = format!(
                "the search over orders took {searched_for:.2} s (its order proven to have a schedule in {decided_in:.2} s), the strategy's first plan in that order {:.2} s, polishing the rest",
                planned.elapsed().as_secs_f64()
            );
            let out = polished(g, strategy, budget, opts, start, out, end)?;
            let detail = with_note(out.detail, note);
            Ok(Reordered::Answer(Box::new(Outcome { detail, ..out })))
        }
        None => none(
            "plans exist: a search over other node orders found one with a schedule, but the strategy found no plan in it",
            true,
        ),
    }
}

/// Where no schedule was found in any order the search found, the
/// search's own sequences are plans that fit ([`crate::schedule::sequence`]):
/// the cheapest of them, shortened with the time left, as (order, sequence,
/// computations the search's own sequence had), and why its order has no
/// schedule.
fn cheapest_sequence(
    g: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    tried: &[(Vec<NodeId>, Vec<NodeId>, String)],
) -> Option<(SearchSequence, String)> {
    use crate::schedule::sequence;
    let mut best: Option<(f64, usize, Vec<NodeId>)> = None;
    for (k, (_, seq, _)) in tried.iter().enumerate() {
        let left = opts.time_limit.saturating_sub(start.elapsed());
        let share = left / (tried.len() - k) as u32;
        let short = sequence::shortened(g, seq, budget, Instant::now() + share);
        let cost = sequence::cost(g, &short);
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((cost, k, short));
        }
    }
    let (_, k, short) = best?;
    let (order, found, no_schedule) = &tried[k];
    Some(((order.clone(), short, found.len()), no_schedule.clone()))
}

/// How the node-order search's sequence `seq` (shortened from `found`
/// computations) came to be the answer, for its detail line.
fn search_sequence(g: &Graph, order: &[NodeId], seq: &[NodeId], found: usize, why: &str) -> String {
    format!(
        "a sequence of computations that no schedule expresses, found by a search over other node orders ({}): {} computations ({} dropped where holding the value fits), because {why}",
        moved_words(g, order),
        seq.len(),
        found - seq.len(),
    )
}

/// How far `order` is from the file's, in words.
fn moved_words(g: &Graph, order: &[NodeId]) -> String {
    match crate::schedule::free_order::moved(order) {
        0 => "its first computations in the file's order".to_string(),
        k => format!("{k} of {} nodes move", g.len()),
    }
}

/// The answer whose plan is `seq`, a sequence of computations in another
/// node order, simulated on the graph as given; `what` says how it was
/// found. Its bound is `bound`, where given (the cover program's for
/// sequences in its order, [`crate::solver::cover::sequence_bound`]), or
/// one pass: the strategies' bounds hold for schedules, and a sequence
/// need not be one.
#[allow(clippy::too_many_arguments)]
fn sequence_outcome(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    what: &str,
    order: &[NodeId],
    seq: &[NodeId],
    bound: Option<crate::solver::cover::GraphBound>,
) -> Result<Outcome, SolveError> {
    let bug = |msg: String| SolveError::Bug {
        strategy: strategy.name().to_string(),
        msg,
    };
    let plan = crate::schedule::sequence::plan_of(g, seq)
        .ok_or_else(|| bug("a sequence reads a value it never computed".into()))?;
    let sim = simulate_on(g, &plan, opts.device.as_deref())
        .map_err(|e| bug(format!("the sequence's plan is rejected: {e}")))?;
    if sim.peak > budget {
        return Err(bug(format!(
            "the sequence's plan peaks at {}, over the budget",
            sim.peak
        )));
    }
    let one_pass = g.total_cost();
    // A bound above the plan's cost would be a bug in the bound's
    // argument: then it is not claimed.
    let (lower_bound, said) = match bound {
        Some(b) if b.value > one_pass && b.value <= sim.cost => (
            b.value,
            format!(
                "bound: {}, for every sequence whose first computations are in its order",
                b.note
            ),
        ),
        _ => (
            one_pass,
            "the bound is one pass, which every plan computes".to_string(),
        ),
    };
    let detail = format!("{what}; {said}");
    let seconds = start.elapsed().as_secs_f64();
    let lower_bound = Some(lower_bound);
    Ok(Outcome {
        strategy: strategy.name().to_string(),
        budget,
        status: Status::Feasible,
        plan: Some(plan),
        schedule: None,
        trace: vec![Progress {
            secs: seconds,
            cost: Some(sim.cost),
            bound: lower_bound,
        }],
        sim: Some(sim),
        lower_bound,
        detail: Some(detail),
        seconds,
        step_bound: opts.device.as_deref().map(|d| d.all_fast_step(g)),
        order: Some(order.to_vec()),
        every_order: false,
    })
}

/// `g` in `order`, or a bug: the search's orders are topological.
fn reordered(g: &Graph, strategy: &dyn Strategy, order: &[NodeId]) -> Result<Graph, SolveError> {
    g.reordered(order).ok_or_else(|| SolveError::Bug {
        strategy: strategy.name().to_string(),
        msg: "the node-order search returned no topological order".into(),
    })
}

/// With `--search-orders`: the strategy in the file's order with half of
/// what is left, then in the node-order search's order (at this budget)
/// with the rest, from the schedule search's schedule in it; the cheaper
/// plan is the answer, the file's on a tie. Where the file's plan is far
/// from its bound ([`POLISH_GAP`]), the other order gets half of the rest
/// and the cheaper plan is polished in any order with the last quarter
/// ([`polished`]); without another order the file's order gets three
/// quarters. `None` where the option is off or does not apply.
fn both_orders(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
) -> Result<Option<Outcome>, SolveError> {
    if !opts.search_orders || !reorderable(g, strategy, opts) {
        return Ok(None);
    }
    // `opts.time_limit` is what is left from here.
    let (limit, begin) = (opts.time_limit, Instant::now());
    let left = || limit.saturating_sub(begin.elapsed());
    let other = other_order(g, strategy, budget, || Instant::now() + left() / 20)?;
    let mut o = opts.clone();
    o.time_limit = match other {
        Some(_) => left() / 2,
        None => left() * 3 / 4,
    };
    let file = checked(g, strategy, budget, &o, start)?;
    let far = far_from_bound(&file);
    let best = match other {
        None => file,
        Some((order, gp, schedule)) => {
            o.time_limit = if far { left() / 2 } else { left() };
            o.warm_start = Some(("the schedule search in that order".into(), schedule));
            let because = "found by a search over orders (--search-orders)";
            let other = in_order(g, &gp, &order, strategy, budget, &o, start, because)?;
            cheaper_of(file, other, start)
        }
    };
    polished(g, strategy, budget, opts, start, best, begin + limit).map(Some)
}

/// The node-order search's order at `budget`, the graph in it, and a
/// schedule in it, each search ending at `deadline()`. Only where a
/// schedule in it is known: at 60% of their peaks, random-layered-n500 and
/// n1000 have orders whose schedule search is undecided after seconds, and
/// the strategy found no plan in them, while the file's order lost half
/// its time (n1000: 611,431 → 612,500). At 70% it finds one in 0.13 s or
/// less on every public random DAG.
fn other_order(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    deadline: impl Fn() -> Instant,
) -> Result<Option<(Vec<NodeId>, Graph, Schedule)>, SolveError> {
    let Some(order) = crate::schedule::free_order::search(g, budget, deadline()) else {
        return Ok(None);
    };
    if crate::schedule::free_order::moved(&order) == 0 {
        return Ok(None);
    }
    let gp = reordered(g, strategy, &order)?;
    Ok(
        match crate::schedule::feasible::decide(&gp, budget, deadline()) {
            Feasibility::Fits(schedule) => Some((order, gp, schedule)),
            _ => None,
        },
    )
}

/// The cheaper of the file's order's answer and another order's, the
/// file's on a tie, noting the other's cost.
fn cheaper_of(file: Outcome, other: Option<Outcome>, start: Instant) -> Outcome {
    let seconds = start.elapsed().as_secs_f64();
    let note = |out: Outcome, note: String| Outcome {
        detail: with_note(out.detail, note),
        seconds,
        ..out
    };
    match (file.cost(), other) {
        (Some(c), Some(o)) if o.cost().is_some_and(|oc| oc < c) => note(
            o,
            format!("the file's order's best plan cost {}", short_float(c)),
        ),
        (_, Some(o)) if file.cost().is_none() => note(o, "no plan in the file's order".into()),
        (_, Some(o)) => note(
            file,
            format!(
                "another node order's best plan cost {}",
                short_float(o.cost().unwrap_or(f64::NAN))
            ),
        ),
        (_, None) => note(file, "no plan in another node order".into()),
    }
}

/// How far from its bound a plan must be for [`polished`] to run: where
/// the schedule searches have stalled (remat-fast's iterated local search
/// starts at the same 3%).
const POLISH_GAP: f64 = 0.03;

/// Whether `out` is a recompute plan more than [`POLISH_GAP`] from its bound.
fn far_from_bound(out: &Outcome) -> bool {
    out.plan.is_some() && out.timing().is_none() && out.gap().is_some_and(|g| g > POLISH_GAP)
}

/// Moves per computation of its start that one try of [`polished`]'s
/// annealing makes at most; a longer share goes to more tries from the
/// same start. Why: where a walk ends depends on its path more than on its
/// length (random-layered-n250 at 60%: 60 s solves, whose walks have about
/// 3×10⁴ moves per computation, ended between 140,554 and 162,465; one
/// walk of 2.2×10⁸ moves in a 600 s solve ended at 162,481).
const TRY_MOVES: u64 = 20_000;

/// `out` polished in any node order until `deadline` where it is far from
/// its bound ([`far_from_bound`]; else `out` as it is): three fifths of the
/// time anneal from its plan over schedules in any order
/// ([`crate::schedule::anneal`], [`Form::Schedules`]), in tries of at most
/// [`TRY_MOVES`] moves per computation, each from the plan. The cheapest one
/// found is a schedule in the order of its first computations: five sixths
/// of the rest bound the schedules in that order, and the strategy refines
/// it there with the rest and that bound. The answer is the cheaper of
/// `out` and the strategy's.
///
/// Where `out`'s plan is no schedule (the node-order search's sequences),
/// the walk is over sequences, and a third of the rest bounds every
/// sequence in the cheapest one's order; the answer is the cheapest of
/// `out`, the strategy's plan in that order (with its bound), and the
/// sequence (with the sequences').
///
/// Why schedules: what the annealing finds is mostly an order, and a
/// schedule in it carries the schedules' bound there and is refined by the
/// strategy (random-layered-n250 at 60%: annealing over sequences found
/// 169,037 against a bound of 130,694 for sequences; over schedules
/// 157,597, refined by remat-fast to 148,314, bound 130,188).
///
/// [`Form::Schedules`]: crate::schedule::anneal::Form::Schedules
#[allow(clippy::too_many_arguments)]
fn polished(
    g: &Graph,
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    out: Outcome,
    deadline: Instant,
) -> Result<Outcome, SolveError> {
    let Some(plan) = out.plan.as_ref().filter(|_| far_from_bound(&out)) else {
        return Ok(out);
    };
    let seq: Vec<NodeId> = plan.computed().collect();
    let began = Instant::now();
    let share = began + deadline.saturating_duration_since(began) * 3 / 5;
    let try_moves = TRY_MOVES.saturating_mul(seq.len() as u64);
    // Tries from the same start with other seeds while the share lasts;
    // the cheapest wins.
    let (mut found, mut tries) = tries_until(opts, share, |k| {
        annealed_and_kicked(g, &seq, budget, (share, try_moves), k, opts)
    });
    // Nothing cheaper: no new order to plan in, so the rest of the time
    // anneals again, from another seed.
    if found.best.is_none() {
        found.absorb(annealed_and_kicked(
            g,
            &seq,
            budget,
            (deadline, u64::MAX),
            tries,
            opts,
        ));
        tries += 1;
    }
    let bounded = match out.lower_bound {
        Some(b) if b <= g.total_cost() => ", bound one pass".to_string(),
        Some(b) if out.order.is_some() => {
            format!(", bound {} for plans in its order", short_float(b))
        }
        Some(b) => format!(", bound {} for plans in the file's order", short_float(b)),
        None => String::new(),
    };
    let over = match found.form {
        crate::schedule::anneal::Form::Schedules => "schedules in any node order",
        crate::schedule::anneal::Form::Sequences => "sequences of computations",
    };
    let annealed = format!(
        "annealed over {over} from the plan costing {}{bounded} ({} moves in {:.1} s, {tries} {})",
        short_float(out.cost().unwrap_or(f64::NAN)),
        found.moves,
        began.elapsed().as_secs_f64(),
        if tries == 1 { "try" } else { "tries" }
    );
    let noted = |o: Outcome, note: String| Outcome {
        detail: with_note(o.detail, note),
        seconds: start.elapsed().as_secs_f64(),
        ..o
    };
    let Some((best, cost)) = found.best else {
        return Ok(noted(out, format!("{annealed}: nothing cheaper")));
    };
    let order = crate::schedule::free_order::order_of(&best, g.len());
    let gp = reordered(g, strategy, &order)?;
    // Most annealed sequences are schedules in their order (random-layered-
    // n100 at 60%: 57,248 as a sequence and as a schedule), whose bound is
    // the schedules' (53,215 there, where the sequences' is about 51,000):
    // then the strategy refines that schedule in its order with all the
    // rest, and its answer is never costlier.
    let as_schedule = crate::schedule::sequence::schedule_in(g, &gp, &best, &order)
        .filter(|s| fits(&gp, s, budget));
    // The schedules' bound gets five sixths of the rest, the sequences' one
    // third. The strategy then starts from a kicked schedule and the bound,
    // and in no run measured (random-layered n100, n250, n1000 at 60%)
    // found a cheaper plan, while the bound gains with time: remat-fast's
    // own quarter stopped the moments program at 51,136 on n100, where
    // solved (3.7 s) it gives 52,458.
    let rest = deadline.saturating_duration_since(Instant::now());
    let bound = match &as_schedule {
        Some(s) => order_bound(
            &gp,
            budget,
            opts,
            cost,
            Some(s),
            Instant::now() + rest * 5 / 6,
        ),
        None => order_bound(&gp, budget, opts, cost, None, Instant::now() + rest / 3),
    };
    let same = match &out.order {
        Some(o) => *o == order,
        None => crate::schedule::free_order::moved(&order) == 0,
    };
    let replan = if same && as_schedule.is_none() {
        None
    } else {
        let mut o = opts.clone();
        o.time_limit = deadline.saturating_duration_since(Instant::now());
        if as_schedule.is_some() {
            o.known_bound = bound.as_ref().map(|b| b.value);
        }
        o.warm_start = as_schedule
            .as_ref()
            .map(|s| ("the annealed schedule".to_string(), s.clone()));
        if crate::schedule::free_order::moved(&order) == 0 {
            // The file's own order: the strategy's answer stands as it is.
            let r = checked(g, strategy, budget, &o, start)?;
            r.plan.is_some().then_some(r)
        } else {
            let because = "the order of the first computations of a sequence found by annealing";
            in_order(g, &gp, &order, strategy, budget, &o, start, because)?
        }
    };
    let replanned = replan.as_ref().and_then(Outcome::cost);
    let base = out.cost().unwrap_or(f64::INFINITY);
    let trace = |o: Outcome| {
        let mut trace = out.trace.clone();
        trace.extend(o.trace.last().cloned());
        Outcome { trace, ..o }
    };
    let in_its_order = replanned.map_or(String::new(), |rc| {
        format!("; the strategy in its order found {}", short_float(rc))
    });
    Ok(match replan {
        Some(r) if replanned.is_some_and(|rc| rc < base && rc <= cost) => {
            let what = match &as_schedule {
                Some(_) => "a schedule",
                None => "a sequence",
            };
            // The strategy was handed the bound: say which program it is.
            let which = match (&as_schedule, &bound) {
                (Some(_), Some(b)) => format!("; the bound in that order: {}", b.note),
                _ => String::new(),
            };
            let note = format!(
                "{annealed}: {what} costing {}, whose order this is{which}",
                short_float(cost)
            );
            trace(noted(r, note))
        }
        _ if cost < base => {
            let what = format!(
                "a sequence of computations ({}), {annealed}{in_its_order}",
                moved_words(g, &order),
            );
            trace(sequence_outcome(
                g,
                strategy,
                budget,
                opts,
                start,
                &what,
                &order,
                &best,
                // A schedules' bound does not hold for the sequence.
                bound.filter(|_| as_schedule.is_none()),
            )?)
        }
        _ => {
            let note = format!(
                "{annealed}: a sequence costing {}{in_its_order}",
                short_float(cost),
            );
            noted(out, note)
        }
    })
}

/// `run(k)` for the tries k = 0, 1, … on `opts.threads` threads while
/// `until` lasts and no stop is asked (the first try always runs), until a
/// try makes no move; with the number of tries run. The tries are absorbed
/// in their order, so the cheapest wins and, on a tie, the first: with one
/// thread this is one loop of tries, as before, and each further thread
/// adds tries in the same time (the tries are independent walks, and where
/// a walk ends depends on its seed more than on its length; see
/// [`TRY_MOVES`]).
fn tries_until(
    opts: &SolveOptions,
    until: Instant,
    run: impl Fn(u64) -> crate::schedule::anneal::Annealed + Sync,
) -> (crate::schedule::anneal::Annealed, u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let next = AtomicU64::new(0);
    let idle = AtomicBool::new(false);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..opts.threads.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let over = Instant::now() >= until
                    || crate::solver::stop_requested(&opts.stop)
                    || idle.load(Ordering::Relaxed);
                if k > 0 && over {
                    break;
                }
                let a = run(k);
                if a.moves == 0 {
                    idle.store(true, Ordering::Relaxed);
                }
                done.lock().unwrap_or_else(|e| e.into_inner()).push((k, a));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(k, _)| *k);
    let tries = done.len() as u64;
    let mut found = crate::schedule::anneal::Annealed::default();
    for (_, a) in done {
        found.absorb(a);
    }
    (found, tries)
}

/// Rounds of annealing within `until` ([`crate::schedule::anneal`], over
/// schedules in any order where `start` is one), each from the best
/// sequence so far, and each best schedule then kicked at its costliest
/// stages in its order ([`crate::strategies::local_search::kick_costliest_stages`])
/// for the last fifth of the round.
///
/// Why: the kicks change many recomputations at once, where the walk
/// changes one, and what they reach the walk can leave again in another
/// order (random-layered-n250 at 60%: a schedule annealed to 157,597 was
/// kicked to 148,314 in its order).
fn annealed_and_kicked(
    g: &Graph,
    start: &[NodeId],
    budget: Bytes,
    (until, max_moves): (Instant, u64),
    seed: u64,
    opts: &SolveOptions,
) -> crate::schedule::anneal::Annealed {
    use crate::schedule::anneal::{anneal, Annealed, Form};
    // Three rounds: on random-layered-n250 at 60%, 141,142 and 140,554
    // (gaps 8.1% and 7.8%) where one round (annealing, then kicks) gave
    // 162,196 and 162,065 (19%).
    const ROUNDS: u32 = 3;
    let mut cur = start.to_vec();
    let mut out = Annealed::default();
    for r in 0..ROUNDS {
        let now = Instant::now();
        let stopped = opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        if now >= until || stopped {
            break;
        }
        let round_end = now + until.saturating_duration_since(now) / (ROUNDS - r);
        let walk_end = now + round_end.saturating_duration_since(now) * 4 / 5;
        let seed = seed.wrapping_mul(ROUNDS as u64).wrapping_add(r as u64);
        let mut report = |seq: &[NodeId], _: f64, form: Form| {
            if form == Form::Schedules {
                watched(
                    g,
                    seq,
                    budget,
                    opts,
                    "annealing over schedules in any node order",
                );
            }
        };
        let a = anneal(
            g,
            &cur,
            budget,
            Form::Schedules,
            (walk_end, max_moves / ROUNDS as u64),
            seed,
            opts.stop.as_ref(),
            &mut report,
        );
        // A round cut short by its moves kicks for a quarter of its walk.
        let round_end = round_end.min(Instant::now() + now.elapsed() / 4);
        out.moves += a.moves;
        out.form = a.form;
        let Some((seq, cost)) = a.best else {
            continue;
        };
        let kicked = (a.form == Form::Schedules)
            .then(|| kicked_in_its_order(g, &seq, budget, round_end))
            .flatten()
            .filter(|k| k.1 < cost);
        if let Some(k) = &kicked {
            watched(
                g,
                &k.0,
                budget,
                opts,
                "annealing over schedules, then kicks",
            );
        }
        let best = kicked.unwrap_or((seq, cost));
        cur.clone_from(&best.0);
        out.best = Some(best);
    }
    out
}

/// `seq`, a schedule in its order of first computations that fits, as
/// that order's plan in the watch (an interrupt answers with it, told back
/// in the file's ids and simulated); nothing where it is not one.
fn watched(g: &Graph, seq: &[NodeId], budget: Bytes, opts: &SolveOptions, origin: &str) {
    let Some(w) = opts.watch.as_ref() else {
        return;
    };
    if let Some((order, gp, sch)) = schedule_in_its_order(g, seq, budget) {
        w.plan_in_other_order(&gp, &order, sch.cost(&gp), &sch, origin);
    }
}

/// `seq` as a schedule in its order of first computations
/// ([`crate::schedule::sequence::schedule_in`]), with that order and the
/// graph in it, where it is one that fits `budget`.
fn schedule_in_its_order(
    g: &Graph,
    seq: &[NodeId],
    budget: Bytes,
) -> Option<(Vec<NodeId>, Graph, Schedule)> {
    let (order, gp, sch) = as_schedule(g, seq)?;
    fits(&gp, &sch, budget).then_some((order, gp, sch))
}

/// Whether `s` is a schedule of `gp` whose plan fits `budget`.
fn fits(gp: &Graph, s: &Schedule, budget: Bytes) -> bool {
    s.validate(gp).is_ok()
        && crate::strategies::portfolio::evaluate(gp, s).is_some_and(|r| r.peak <= budget)
}

/// `seq` (a schedule in its order of first computations) kicked at its
/// costliest stages in that order until `deadline`, as a sequence in
/// `g`'s ids with its cost; `None` where it is not a schedule that fits.
fn kicked_in_its_order(
    g: &Graph,
    seq: &[NodeId],
    budget: Bytes,
    deadline: Instant,
) -> Option<(Vec<NodeId>, f64)> {
    let (order, gp, sch) = schedule_in_its_order(g, seq, budget)?;
    let kicked = crate::strategies::local_search::kick_costliest_stages(&gp, sch, budget, deadline);
    if !fits(&gp, &kicked, budget) {
        return None;
    }
    Some((computations_of(&gp, &order, &kicked)?, kicked.cost(&gp)))
}

/// The cover program's bound for sequences whose first computations are
/// in `gp`'s order ([`crate::solver::cover::sequence_bound`]), or with
/// `schedule` (a plan in hand) for schedules in it (the strategies' own
/// programs), by `deadline`: on a thread abandoned then, since HiGHS's
/// setup does not poll the clock, with what it had by then.
fn order_bound(
    gp: &Graph,
    budget: Bytes,
    opts: &SolveOptions,
    enough: f64,
    schedule: Option<&Schedule>,
    deadline: Instant,
) -> Option<crate::solver::cover::GraphBound> {
    let stop = crate::solver::StopFlag::default();
    // HiGHS stops at its own limit with its dual bound, a fifth before the
    // thread is abandoned, so that the bound comes back rather than being
    // lost with the thread (the moments program on n100 at 60% was).
    let params = crate::solver::Params {
        time_limit: deadline.saturating_duration_since(Instant::now()) * 4 / 5,
        gap: opts.gap,
        threads: opts.threads,
        stop: Some(stop.clone()),
        ..crate::solver::Params::default()
    };
    // What finished before an abandoned program is kept (the eviction
    // bound at least).
    let progress = std::sync::Arc::new(std::sync::Mutex::new(crate::solver::cover::eviction(
        gp, budget,
    )));
    let (tx, rx) = std::sync::mpsc::channel();
    let (gp, shared, known) = (gp.clone(), progress.clone(), schedule.cloned());
    std::thread::spawn(move || {
        use crate::solver::cover;
        let b = match known {
            Some(s) => cover::raise_bound(
                &gp,
                budget,
                &params,
                Some(&s),
                Some(enough),
                cover::eviction(&gp, budget),
                &cover::cover_programs_past_the_caps(&gp, budget, params.time_limit),
                Some(&shared),
            ),
            None => cover::sequence_bound(&gp, budget, &params, enough, Some(&shared)),
        };
        let _ = tx.send(b);
    });
    let got = rx
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .ok();
    // Abandoned: told to stop, so that it does not hold a core.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    got.or_else(|| progress.lock().ok().map(|b| b.clone()))
}

fn with_note(detail: Option<String>, note: String) -> Option<String> {
    Some(match detail {
        Some(d) => format!("{d}; {note}"),
        None => note,
    })
}

/// The strategy on `gp` (`g` with its nodes in `order`), its plan told
/// back in `g`'s ids and simulated again on `g`. `None` when it found no
/// plan. Its bounds hold for plans in that order, so it is never
/// `optimal`; its schedule is not kept (it is in `gp`'s stages); the
/// watch is not passed (its snapshots would be read in the file's order).
#[allow(clippy::too_many_arguments)]
fn in_order(
    g: &Graph,
    gp: &Graph,
    order: &[NodeId],
    strategy: &dyn Strategy,
    budget: Bytes,
    opts: &SolveOptions,
    start: Instant,
    because: &str,
) -> Result<Option<Outcome>, SolveError> {
    let bug = |msg: String| SolveError::Bug {
        strategy: strategy.name().to_string(),
        msg,
    };
    let mut o = opts.clone();
    o.watch = opts.watch.as_ref().map(|w| w.in_other_order(gp, order));
    // The caller's schedule is a plan in hand from the start: an interrupt
    // before the strategy reports it answers with it, not with less (the
    // annealed schedule that polishing hands over).
    if let (Some(w), Some((name, s))) = (&o.watch, &o.warm_start) {
        if fits(gp, s, budget) {
            w.plan(s.cost(gp), s, name);
        }
    }
    let out = checked(gp, strategy, budget, &o, start)?;
    let (Some(plan), Some(inner)) = (out.plan, out.sim) else {
        return Ok(None);
    };
    let plan = plan.renumbered(order);
    let sim = simulate_on(g, &plan, opts.device.as_deref())
        .map_err(|e| bug(format!("the reordered plan is rejected: {e}")))?;
    if sim.peak > budget || (sim.cost - inner.cost).abs() > 1e-9 * inner.cost.abs().max(1.0) {
        return Err(bug(format!(
            "the reordered plan simulates to cost {} and peak {}, where its own order gave {} and {}",
            sim.cost, sim.peak, inner.cost, inner.peak
        )));
    }
    let moved = crate::schedule::free_order::moved(order);
    let note = format!(
        "computes in another node order than the file's ({moved} of {} nodes move), {because}; the bound holds for plans in that order",
        g.len()
    );
    // Optimal in its order is no promise about the other orders, which
    // the search did not bound; one pass is, since every plan in every
    // order computes each node (random-layered-n250 at 90% of its peak
    // recomputes nothing in another order).
    let one_pass = g.total_cost();
    let (status, note) = match out.status {
        _ if sim.cost <= one_pass + OPTIMAL_GAP * one_pass.abs() => (
            Status::Optimal,
            format!("{note}; it computes every node once, so no plan in any order is cheaper"),
        ),
        Status::Optimal => (
            Status::Feasible,
            format!("{note}; optimal among plans in that order"),
        ),
        s => (s, note),
    };
    let detail = with_note(out.detail, note);
    Ok(Some(Outcome {
        strategy: out.strategy,
        budget,
        status,
        plan: Some(plan),
        schedule: None,
        sim: Some(sim),
        lower_bound: out.lower_bound,
        detail,
        seconds: out.seconds,
        trace: out.trace,
        step_bound: out.step_bound,
        order: Some(order.to_vec()),
        every_order: false,
    }))
}

/// What [`prove_nothing_fits`] settled.
enum Proof {
    /// No plan fits: why, for the detail line, and whether the proof is
    /// only for the file's node order.
    NothingFits(String, bool),
    /// Undecided (`true`), or some schedule fits: the options with the
    /// search's time taken off the strategy's limit.
    Open(SolveOptions, bool),
    NotTried,
}

/// A short exhaustive search before any strategy runs
/// ([`crate::schedule::feasible`]): on a budget that nothing fits, every
/// strategy would spend its whole limit to report "no plan" (random-layered-n250
/// at 60% of its peak: 60 s), while the proof takes a few hundred states.
/// It gets a fiftieth of the limit, at most a second, so that a budget
/// where it is undecided loses little.
///
/// Only where recomputation is the whole plan space: with a slow tier,
/// offloading may fit where no recompute schedule does. Not above the
/// checkpoint-all peak (checkpoint-all fits), and not on graphs so large
/// that one state's bitset is kilobytes.
fn prove_nothing_fits(g: &Graph, budget: Bytes, opts: &SolveOptions) -> Proof {
    let recompute_only = opts
        .device
        .as_ref()
        .is_none_or(|d| d.slow.capacity == Bytes::ZERO);
    let peak = analysis::checkpoint_all_peak(g);
    if !recompute_only || budget >= peak {
        return Proof::NotTried;
    }
    // Neither recomputation nor a slow tier: checkpoint-all is the only
    // plan (this said "no-fit ... try a longer --time-limit").
    if opts.no_recompute {
        return Proof::NothingFits(
            format!(
                "without recomputation (--no-recompute) and with no slow tier to offload to, the only plan is checkpoint-all, whose peak is {} ({peak} bytes)",
                peak.human()
            ),
            false,
        );
    }
    if g.len() > 20_000 {
        return Proof::NotTried;
    }
    let start = Instant::now();
    let slice = (opts.time_limit / 50).min(std::time::Duration::from_secs(1));
    match crate::schedule::feasible::decide(g, budget, start + slice) {
        Feasibility::NoSchedule { states } => Proof::NothingFits(
            format!(
                "no schedule in the file's node order fits: proven by an exhaustive search ({states} states in {:.2} s)",
                start.elapsed().as_secs_f64()
            ),
            true,
        ),
        answer => {
            let mut rest = opts.clone();
            rest.time_limit = rest.time_limit.saturating_sub(start.elapsed());
            Proof::Open(rest, matches!(answer, Feasibility::Unknown { .. }))
        }
    }
}

/// The answer of a solve stopped from outside (an interrupt): the cheapest
/// schedule the strategy had reported, through the same plan generator and
/// simulator as any answer, with the best bound known by then; or, where
/// the solve also planned in another node order and that order's plan is
/// faster, that plan. A schedule that does not fit in simulation is not
/// offered.
pub fn from_snapshot(
    g: &Graph,
    strategy: &str,
    budget: Bytes,
    snap: &Snapshot,
    seconds: f64,
    device: Option<&crate::device::Device>,
) -> Outcome {
    let file = file_order_snapshot(g, strategy, budget, snap, seconds, device);
    match other_order_snapshot(g, strategy, budget, snap, seconds, device) {
        Some(o)
            if file
                .measure()
                .is_none_or(|f| o.measure().is_some_and(|m| m < f)) =>
        {
            o
        }
        _ => file,
    }
}

/// The plan of an interrupted solve's other node order
/// (`Watch::in_other_order`), told back in `g`'s ids and simulated on
/// `g`: its bounds were for that order, so it carries none.
fn other_order_snapshot(
    g: &Graph,
    strategy: &str,
    budget: Bytes,
    snap: &Snapshot,
    seconds: f64,
    device: Option<&crate::device::Device>,
) -> Option<Outcome> {
    let (gp, order, inner) = snap.other.as_ref()?;
    let (_, sch, origin) = inner.plan.as_ref()?;
    let plan = generate_plan(gp, sch).ok()?.renumbered(order);
    let sim = simulate_on(g, &plan, device).ok()?;
    if sim.peak > budget {
        return None;
    }
    let moved = crate::schedule::free_order::moved(order);
    Some(Outcome {
        strategy: strategy.to_string(),
        budget,
        status: Status::Feasible,
        trace: vec![Progress {
            secs: seconds,
            cost: Some(sim.cost),
            bound: None,
        }],
        plan: Some(plan),
        schedule: None,
        sim: Some(sim),
        lower_bound: None,
        detail: Some(format!(
            "interrupted after {seconds:.1} s; the best plan so far, from {origin}, computes in another node order than the file's ({moved} of {} nodes move)",
            g.len()
        )),
        seconds,
        step_bound: None,
        order: Some(order.clone()),
        every_order: false,
    })
}

fn file_order_snapshot(
    g: &Graph,
    strategy: &str,
    budget: Bytes,
    snap: &Snapshot,
    seconds: f64,
    device: Option<&crate::device::Device>,
) -> Outcome {
    let floor = analysis::eviction_bound(g, budget);
    let bound = snap.bound.map_or(floor, |b| b.max(floor));
    let checked = snap.plan.as_ref().and_then(|(_, sch, origin)| {
        // A strategy that solved the merged graph reported its schedules.
        let lifted;
        let sch = if sch.stages() == g.len() {
            sch
        } else {
            let merged = crate::schedule::groups::Merged::of(g);
            if sch.stages() != merged.graph.len() {
                return None;
            }
            lifted = merged.lift(g, sch);
            &lifted
        };
        let plan = generate_plan(g, sch).ok()?;
        let sim = simulate_on(g, &plan, device).ok()?;
        (sim.peak <= budget).then(|| (plan, sim, origin.clone(), sch.clone()))
    });
    // A plan with transfers is not bounded by the recompute bounds: it is
    // reported with the graph's step bound only.
    let offloads = checked.as_ref().is_some_and(|c| c.3.has_transfers());
    // The MILP's bound covers only plans with a stage per kernel.
    let bound = match &checked {
        Some(c) if g.has_groups() && crate::schedule::groups::outside_kernel_stages(g, &c.3) => {
            floor
        }
        _ => bound,
    };
    let (status, plan, sim, schedule, detail) = match checked {
        Some((plan, sim, origin, sch)) => {
            let proven =
                !offloads && (sim.cost <= 0.0 || (sim.cost - bound) / sim.cost <= OPTIMAL_GAP);
            (
                if proven {
                    Status::Optimal
                } else {
                    Status::Feasible
                },
                Some(plan),
                Some(sim),
                Some(sch),
                format!("interrupted after {seconds:.1} s; the best plan so far, from {origin}"),
            )
        }
        None => (
            Status::NoSolution,
            None,
            None,
            None,
            format!("interrupted after {seconds:.1} s, before any plan was found"),
        ),
    };
    let bound = g.tidy_bound(bound);
    let lower_bound = (!offloads).then(|| sim.as_ref().map_or(bound, |s| bound.min(s.cost)));
    let step_bound = device.map(|d| {
        let b = crate::solver::tiered::step_bound(g, budget, d, false);
        match sim.as_ref().and_then(|s| s.timing.as_ref()) {
            Some(t) => b.min(t.step),
            None => b,
        }
    });
    Outcome {
        strategy: strategy.to_string(),
        budget,
        status,
        trace: vec![Progress {
            secs: seconds,
            cost: sim.as_ref().map(|s| s.cost),
            bound: lower_bound,
        }],
        plan,
        schedule,
        sim,
        lower_bound,
        detail: Some(detail),
        seconds,
        step_bound,
        order: None,
        every_order: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::anneal::Annealed;
    use std::time::Duration;

    /// A try that walks until try 5, which makes no move; tries 3 and 4
    /// tie for the cheapest.
    fn fake_try(k: u64) -> Annealed {
        let cost = if k == 3 || k == 4 {
            1.0
        } else {
            2.0 + k as f64
        };
        Annealed {
            best: Some((vec![NodeId::from(k as usize)], cost)),
            moves: u64::from(k < 5),
            walks: 1,
            ..Annealed::default()
        }
    }

    #[test]
    fn tries_on_any_number_of_threads_answer_the_first_cheapest() {
        for threads in [1, 2, 4] {
            let opts = SolveOptions {
                threads,
                ..SolveOptions::default()
            };
            let far = Instant::now() + Duration::from_secs(3600);
            let (found, tries) = tries_until(&opts, far, fake_try);
            let (seq, cost) = found.best.expect("a best try");
            assert_eq!(
                (seq, cost),
                (vec![NodeId::from(3)], 1.0),
                "{threads} threads"
            );
            // Tries 0..=5 always run (the idle one, 5, ends them); other
            // threads may have fetched one more each before it did.
            assert!((6..=5 + threads as u64).contains(&tries), "{tries} tries");
            assert_eq!(found.walks as u64, tries);
        }
    }

    #[test]
    fn the_first_try_runs_even_past_the_deadline() {
        let opts = SolveOptions {
            threads: 2,
            ..SolveOptions::default()
        };
        let past = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let (found, tries) = tries_until(&opts, past, fake_try);
        assert_eq!(tries, 1);
        assert_eq!(found.best.map(|b| b.1), Some(2.0));
    }
}
