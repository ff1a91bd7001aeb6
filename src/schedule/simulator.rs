//! The simulator: replays any plan against a graph and checks it, knowing
//! nothing about the strategy that made it. Every cost, peak and step time
//! the tool reports comes from here.
//!
//! Without a device it measures cost units and one memory, as it always
//! did, and rejects transfer statements. With a device it also times the
//! plan: one compute stream runs the statements in order, copies run on the
//! device's copy engines (each in issue order), and a `wait` holds the
//! compute stream until its copy is done. docs/format.md states the rules.

use super::plan::{Plan, Register, Statement};
use crate::device::{Device, Engines, Throughput};
use crate::graph::{Graph, NodeId};
use crate::units::{Bytes, Seconds};
use rustc_hash::FxHashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    /// Sum of the costs of all computations, recomputations included.
    pub cost: f64,
    /// `fixed_memory` plus the most bytes allocated at once in the fast
    /// tier, counting a register from its allocate (or copy_in) statement.
    pub peak: Bytes,
    pub computations: usize,
    /// Index of the statement at which the peak was first reached.
    pub peak_statement: usize,
    /// The timed replay, when simulated on a device.
    pub timing: Option<Timing>,
}

/// What a plan costs in time on a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub device: String,
    /// Makespan: when the last statement on any stream has finished.
    pub step: Seconds,
    /// Time the compute stream spends computing (direct slow reads
    /// included).
    pub compute: Seconds,
    /// Time the compute stream spends not computing: waiting for copies,
    /// or moving bytes itself on a synchronous device.
    pub stall: Seconds,
    pub bytes_to_slow: Bytes,
    pub bytes_to_fast: Bytes,
    pub copies: usize,
    /// The most bytes held in the slow tier at once.
    pub slow_peak: Bytes,
}

/// Where a timed replay spent its time, for drawing it (`plot-plan
/// --device`): recorded only when asked for, by [`simulate_timeline`], so
/// that the replay every solve runs allocates nothing extra. Every time is
/// the simulator's own clock, so the figure and the report cannot disagree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Each computation on the compute stream, in order.
    pub computes: Vec<ComputeSpan>,
    /// Each copy, on the lane that ran it.
    pub copies: Vec<CopySpan>,
    /// Both tiers' occupancy after each statement, at the compute stream's
    /// time when it was issued: a step function of time. `fast` includes
    /// fixed memory, like the peak.
    pub memory: Vec<MemoryPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComputeSpan {
    pub node: NodeId,
    pub start: Seconds,
    pub end: Seconds,
    /// A second or later computation of the node.
    pub recompute: bool,
}

/// What runs a copy: a copy engine (0: the only one, or the one toward the
/// slow tier on a duplex device; 1: toward the fast tier), or the compute
/// stream itself on a synchronous device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Engine(usize),
    Compute,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopySpan {
    pub node: NodeId,
    pub to_slow: bool,
    pub lane: Lane,
    pub start: Seconds,
    pub end: Seconds,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryPoint {
    pub time: Seconds,
    pub fast: Bytes,
    pub slow: Bytes,
}

/// What a tier holds once `bytes` more are allocated. Sums of sizes
/// saturated, and frees subtracted from the saturated figure: 4,097
/// registers of 2^52 bytes, freed again, left a plan "fitting" u64::MAX
/// bytes. No plan can hold 2^64 bytes, so past that it is refused.
fn held_with(live: Bytes, bytes: Bytes) -> Result<Bytes, String> {
    live.get()
        .checked_add(bytes.get())
        .map(Bytes)
        .ok_or_else(|| "the plan holds more than 2^64 bytes at once".to_string())
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("plan statement {index}: {msg}")]
pub struct SimError {
    pub index: usize,
    pub msg: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tier {
    Fast,
    Slow,
}

/// A copy that fills a register, until it is waited for.
#[derive(Clone, Copy)]
struct Transfer {
    src: Register,
    done: Seconds,
    waited: bool,
}

struct Reg {
    node: NodeId,
    bytes: Bytes,
    tier: Tier,
    /// Written by a compute (fast) or by a waited copy.
    ready: bool,
    live: bool,
    /// Set for registers filled by a copy.
    copy: Option<Transfer>,
    /// Copies reading this register that are not yet waited for.
    readers: u32,
}

/// The compute stream's clock. Kept as whole seconds plus cost units not
/// yet divided by the throughput, so a plan without stalls ends at exactly
/// its cost over the throughput, bit for bit.
struct Clock {
    base: Seconds,
    units: f64,
    per_second: Option<f64>,
}

impl Clock {
    fn now(&self) -> Seconds {
        match self.per_second {
            Some(r) => Seconds(self.base.0 + self.units / r),
            None => Seconds(self.base.0 + self.units),
        }
    }

    fn set(&mut self, t: Seconds) {
        self.base = t;
        self.units = 0.0;
    }
}

/// Replays a plan without a device: cost units and one memory.
pub fn simulate(g: &Graph, plan: &Plan) -> Result<SimReport, SimError> {
    simulate_on(g, plan, None)
}

/// Replays a plan, timed on `device` when one is given.
pub fn simulate_on(g: &Graph, plan: &Plan, device: Option<&Device>) -> Result<SimReport, SimError> {
    replay(g, plan, device, None)
}

/// [`simulate_on`] with a device, also recording the [`Timeline`]. The
/// report is the same as `simulate_on`'s, figure for figure.
pub fn simulate_timeline(
    g: &Graph,
    plan: &Plan,
    device: &Device,
) -> Result<(SimReport, Timeline), SimError> {
    let mut tl = Timeline::default();
    let report = replay(g, plan, Some(device), Some(&mut tl))?;
    Ok((report, tl))
}

fn replay(
    g: &Graph,
    plan: &Plan,
    device: Option<&Device>,
    mut timeline: Option<&mut Timeline>,
) -> Result<SimReport, SimError> {
    // Looked up at every read, allocation and free: SipHash's resistance to
    // chosen keys buys nothing for register numbers and cost a tenth of
    // remat-fast's time on random-layered-n1000 at 60% (profiled).
    let mut regs: FxHashMap<Register, Reg> = FxHashMap::default();
    let mut computed_once = vec![false; g.len()];
    let mut live = Bytes::ZERO;
    let mut peak = Bytes::ZERO;
    let mut peak_statement = 0;
    let mut cost = 0.0;
    let mut computations = 0;
    // Timing state (meaningful only with a device).
    let mut clock = Clock {
        base: Seconds::ZERO,
        units: 0.0,
        per_second: device.and_then(|d| match d.throughput {
            Throughput::PerSecond(r) => Some(r),
            Throughput::CostIsSeconds => None,
        }),
    };
    let mut engine_free = [Seconds::ZERO; 2];
    let mut last_done = Seconds::ZERO;
    let mut direct_time = Seconds::ZERO;
    let mut stall = Seconds::ZERO;
    let (mut to_slow, mut to_fast, mut copies) = (Bytes::ZERO, Bytes::ZERO, 0usize);
    let (mut slow_live, mut slow_peak) = (Bytes::ZERO, Bytes::ZERO);

    // The member of the kernel being computed that must come next.
    let mut kernel_next: Option<usize> = None;
    for (index, st) in plan.statements.iter().enumerate() {
        let fail = |msg: String| SimError { index, msg };
        if st.is_transfer() && device.is_none() {
            let op = op_name(st);
            let msg =
                "is a transfer statement, which needs a device with a slow tier (pass --device)";
            return Err(fail(format!("{op} {msg}")));
        }
        // A kernel's members are computed back to back, in member order,
        // with only their allocations in between (docs/format.md): its cost
        // sits on the first member, so a later member computed on its own
        // would be charged nothing for running the whole kernel again.
        let member = |i: usize| g.node(NodeId::from(i)).name.as_str();
        match st {
            Statement::Compute { node, .. } if node.idx() < g.len() => {
                let i = node.idx();
                let members = g.group(*node);
                match kernel_next {
                    Some(next) if next != i => {
                        return Err(fail(format!(
                            "computes '{}' inside a kernel whose next member is '{}' (a group's members are computed back to back, in order)",
                            member(i),
                            member(next)
                        )));
                    }
                    None if i != *members.start() => {
                        return Err(fail(format!(
                            "computes '{}' apart from its kernel: a group is computed from its first member '{}', the others right after it",
                            member(i),
                            member(*members.start())
                        )));
                    }
                    _ => {}
                }
                kernel_next = (i < *members.end()).then_some(i + 1);
            }
            Statement::Allocate { .. } => {}
            _ => {
                if let Some(next) = kernel_next {
                    return Err(fail(format!(
                        "{} between the members of a kernel: '{}' is computed with it first",
                        op_name(st),
                        member(next)
                    )));
                }
            }
        }
        let dev = device;
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
                        tier: Tier::Fast,
                        ready: false,
                        live: true,
                        copy: None,
                        readers: 0,
                    },
                );
                live = held_with(live, *bytes).map_err(&fail)?;
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
                let mut slow_bytes = Bytes::ZERO;
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
                                "compute '{name}' reads %{a}, which was already {}",
                                if r.tier == Tier::Slow { "dropped" } else { "deallocated" }
                            )))
                        }
                        Some(r) if r.node != d => {
                            return Err(fail(format!(
                                "compute '{name}' expects '{dname}' in %{a}, which holds '{}'",
                                g.node(r.node).name
                            )))
                        }
                        Some(r) if r.copy.is_some_and(|c| !c.waited) => {
                            return Err(fail(format!(
                                "compute '{name}' reads %{a} ('{dname}') mid-copy: no wait %{a} before it"
                            )))
                        }
                        Some(r) if !r.ready => {
                            return Err(fail(format!(
                                "compute '{name}' reads %{a} ('{dname}') before it was computed"
                            )))
                        }
                        Some(r) if r.tier == Tier::Slow => {
                            let d = dev.expect("slow registers exist only with a device");
                            if d.slow.direct_read.is_none() {
                                return Err(fail(format!(
                                    "compute '{name}' reads %{a} ('{dname}') in the slow tier, but device '{}' does not let kernels read the slow tier",
                                    d.name
                                )));
                            }
                            slow_bytes += r.bytes;
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
                    Some(r) if r.tier == Tier::Slow || r.copy.is_some() => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register}, which a copy fills, not an allocate"
                        )))
                    }
                    Some(r) if r.node != *node => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register}, which was allocated for '{}'",
                            g.node(r.node).name
                        )))
                    }
                    Some(r) if r.ready => {
                        return Err(fail(format!(
                            "compute '{name}' writes %{register} a second time"
                        )))
                    }
                    Some(r) => r.ready = true,
                }
                cost += g.cost(*node);
                computations += 1;
                let recompute = std::mem::replace(&mut computed_once[node.idx()], true);
                let start = clock.now();
                clock.units += g.cost(*node);
                if let Some(d) = dev {
                    if slow_bytes > Bytes::ZERO {
                        let extra = d.direct_read_time(slow_bytes).expect("checked above");
                        direct_time += extra;
                        let now = clock.now();
                        clock.set(now + extra);
                    }
                }
                if let Some(tl) = timeline.as_deref_mut() {
                    tl.computes.push(ComputeSpan {
                        node: *node,
                        start,
                        end: clock.now(),
                        recompute,
                    });
                }
            }
            Statement::Deallocate { register } => match regs.get_mut(register) {
                None => {
                    return Err(fail(format!(
                        "deallocate %{register}, which was never allocated"
                    )))
                }
                Some(r) if r.tier == Tier::Slow => {
                    return Err(fail(format!(
                        "deallocate %{register}, which is a slow copy (use drop)"
                    )))
                }
                Some(r) if !r.live => {
                    return Err(fail(format!("register %{register} is deallocated twice")))
                }
                Some(r) if r.readers > 0 => {
                    return Err(fail(format!(
                        "deallocate %{register} while it is still being copied out: wait for its copy first"
                    )))
                }
                Some(r) if r.copy.is_some_and(|c| !c.waited) => {
                    return Err(fail(format!(
                        "deallocate %{register} while it is still being copied in: wait %{register} first"
                    )))
                }
                Some(r) => {
                    r.live = false;
                    live = live - r.bytes;
                }
            },
            Statement::CopyOut { register, src } | Statement::CopyIn { register, src } => {
                let d = dev.expect("checked above");
                let outward = matches!(st, Statement::CopyOut { .. });
                let op = op_name(st);
                // A copy makes a new register (`%0 = copy_out %0` said
                // "allocated twice", as if an allocate were repeated).
                if regs.contains_key(register) {
                    return Err(fail(format!(
                        "%{register} = {op} %{src}: register %{register} already exists; a copy makes a new register"
                    )));
                }
                let (node, bytes) = {
                    let Some(s) = regs.get(src) else {
                        return Err(fail(if outward {
                            format!("{op} %{src}, which was never allocated")
                        } else {
                            format!(
                                "{op} from %{src}, which was never copied out: no slow copy to prefetch"
                            )
                        }));
                    };
                    let want = if outward { Tier::Fast } else { Tier::Slow };
                    if s.tier != want {
                        return Err(fail(if outward {
                            format!("{op} %{src}, which is already a slow copy")
                        } else {
                            format!(
                                "{op} from %{src}, a fast register that was never copied out: no slow copy to prefetch"
                            )
                        }));
                    }
                    if !s.live {
                        return Err(fail(format!(
                            "{op} from %{src}, which was already {}",
                            if outward { "deallocated" } else { "dropped" }
                        )));
                    }
                    if s.copy.is_some_and(|c| !c.waited) {
                        return Err(fail(format!(
                            "{op} from %{src} mid-copy: wait %{src} first"
                        )));
                    }
                    if !s.ready {
                        return Err(fail(format!(
                            "{op} from %{src} before it was computed"
                        )));
                    }
                    (s.node, s.bytes)
                };
                let dur = d.copy_time(bytes, outward);
                let now = clock.now();
                let (start, done, lane) = match d.slow.engines {
                    Engines::Synchronous => {
                        stall += dur;
                        clock.set(now + dur);
                        (now, now + dur, Lane::Compute)
                    }
                    engines => {
                        let e = usize::from(engines == Engines::Duplex && !outward);
                        let start = now.max(engine_free[e]);
                        let done = start + dur;
                        engine_free[e] = done;
                        (start, done, Lane::Engine(e))
                    }
                };
                if let Some(tl) = timeline.as_deref_mut() {
                    tl.copies.push(CopySpan {
                        node,
                        to_slow: outward,
                        lane,
                        start,
                        end: done,
                    });
                }
                last_done = last_done.max(done);
                copies += 1;
                if outward {
                    to_slow += bytes;
                    let before = slow_live;
                    slow_live = held_with(slow_live, bytes).map_err(&fail)?;
                    if slow_live > d.slow.capacity {
                        return Err(fail(format!(
                            "{op} of '{}' ({bytes} bytes) exceeds the slow tier: {before} bytes already held there, {slow_live} with this copy, capacity {}",
                            g.node(node).name,
                            d.slow.capacity
                        )));
                    }
                    slow_peak = slow_peak.max(slow_live);
                } else {
                    to_fast += bytes;
                    live = held_with(live, bytes).map_err(&fail)?;
                    if live > peak {
                        peak = live;
                        peak_statement = index;
                    }
                }
                regs.get_mut(src).expect("checked").readers += 1;
                regs.insert(
                    *register,
                    Reg {
                        node,
                        bytes,
                        tier: if outward { Tier::Slow } else { Tier::Fast },
                        ready: false,
                        live: true,
                        copy: Some(Transfer {
                            src: *src,
                            done,
                            waited: false,
                        }),
                        readers: 0,
                    },
                );
            }
            Statement::Wait { register } => {
                let Some(r) = regs.get_mut(register) else {
                    return Err(fail(format!("wait %{register}, which was never allocated")));
                };
                let Some(c) = r.copy.as_mut() else {
                    return Err(fail(format!("wait %{register}, which no copy fills")));
                };
                if c.waited {
                    return Err(fail(format!("wait %{register} a second time")));
                }
                c.waited = true;
                r.ready = true;
                let (src, done) = (c.src, c.done);
                if let Some(s) = regs.get_mut(&src) {
                    s.readers -= 1;
                }
                let now = clock.now();
                if done > now {
                    stall += done - now;
                    clock.set(done);
                }
            }
            Statement::Drop { register } => match regs.get_mut(register) {
                None => return Err(fail(format!("drop %{register}, which was never allocated"))),
                Some(r) if r.tier == Tier::Fast => {
                    return Err(fail(format!(
                        "drop %{register}, which is a fast register (use deallocate)"
                    )))
                }
                Some(r) if !r.live => {
                    return Err(fail(format!("register %{register} is dropped twice")))
                }
                Some(r) if r.copy.is_some_and(|c| !c.waited) => {
                    return Err(fail(format!(
                        "drop %{register} while it is still being copied out: wait %{register} first"
                    )))
                }
                Some(r) if r.readers > 0 => {
                    return Err(fail(format!(
                        "drop %{register} while it is still being copied in: wait for that copy first"
                    )))
                }
                Some(r) => {
                    r.live = false;
                    slow_live = slow_live - r.bytes;
                }
            },
        }
        if let Some(tl) = timeline.as_deref_mut() {
            tl.memory.push(MemoryPoint {
                time: clock.now(),
                fast: g.fixed_memory + live,
                slow: slow_live,
            });
        }
    }
    if let Some(next) = kernel_next {
        return Err(SimError {
            index: plan.statements.len(),
            msg: format!(
                "the plan ends inside a kernel: '{}' is never computed with it",
                g.node(NodeId::from(next)).name
            ),
        });
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
    let timing = device.map(|d| {
        let end = clock.now();
        Timing {
            device: d.name.clone(),
            step: end.max(last_done),
            compute: d.compute_time(cost) + direct_time,
            stall,
            bytes_to_slow: to_slow,
            bytes_to_fast: to_fast,
            copies,
            slow_peak,
        }
    });
    Ok(SimReport {
        cost,
        peak: g.fixed_memory + peak,
        computations,
        peak_statement,
        timing,
    })
}

fn op_name(st: &Statement) -> &'static str {
    match st {
        Statement::Allocate { .. } => "allocate",
        Statement::Compute { .. } => "compute",
        Statement::Deallocate { .. } => "deallocate",
        Statement::CopyOut { .. } => "copy_out",
        Statement::CopyIn { .. } => "copy_in",
        Statement::Wait { .. } => "wait",
        Statement::Drop { .. } => "drop",
    }
}
