//! Frontier-advancing schedules (R, S), the plans made from them, and the
//! simulator that checks any plan independently of how it was made.
//!
//! Stage `t` computes node `t` (the frontier) plus any recomputations of
//! earlier nodes; `S[t]` is what is carried into stage `t` from stage `t-1`.
//! With a slow tier, a schedule also says which values start a copy out
//! (O), which are copied back in (P), and which slow copies exist (H), per
//! stage: the tiered MILP's variables, one for one (see [`Transfers`]).

pub mod anneal;
pub mod feasible;
pub mod free_order;
pub mod groups;
pub mod plan;
pub mod profile;
pub mod sequence;
pub mod simulator;
pub mod solve_r;

use crate::graph::{Graph, NodeId};
use fixedbitset::FixedBitSet;

pub use plan::{generate_plan, Plan, PlanFile, Register, Statement};
pub use simulator::{
    simulate, simulate_on, simulate_timeline, ComputeSpan, CopySpan, Lane, MemoryPoint, SimError,
    SimReport, Timeline, Timing,
};
pub use solve_r::{solve_r, solve_r_tiered};

/// The matrices R (compute) and S (keep), stored by their content rather
/// than as n×n bits.
///
/// - R: per stage, the sorted indices of the nodes it computes. A stage
///   computes its frontier and a few recomputations, so R is O(n + number
///   of recomputations).
/// - S: per value, the sorted, disjoint and non-adjacent inclusive stage
///   intervals over which it is kept (normalised, so that equal matrices
///   compare equal). On a training graph S has Θ(n²) ones (a forward value
///   is kept from its forward stage to its backward use), but few runs:
///   checkpoint-all has one interval per value.
///
/// Why: with one bit row per stage for each of R and S, a schedule of a
/// 20,000-node chain took ~100 MB and searches hold several. Measured
/// (results/rss_schedule.csv, docs/scale.md): remat-fast on the
/// 40,001-node linear graph peaked at 1.65 GB with bit rows and 0.10 GB
/// with these, same plan; dtr-greedy and remat-fast on a 200,007-node
/// chain went from 10.2 GB to 0.64 GB, what loading the graph takes.
///
/// Whole-schedule passes (validation, plans, [`solve_r`], cost) walk the
/// stages with [`KeepEvents`] (the values whose keep interval starts or
/// ends at each stage) instead of asking every value at every stage.
#[derive(Debug, Clone, Eq)]
pub struct Schedule {
    /// `r[t]`: nodes computed in stage `t`, ascending.
    r: Vec<Vec<u32>>,
    /// `s[i]`: the stage intervals `(from, to)` (inclusive) over which value
    /// `i` is kept, ascending, disjoint and non-adjacent.
    s: Vec<Vec<(u32, u32)>>,
    /// `None` for recompute-only schedules, so that they cost nothing extra
    /// and generate exactly the plans they always did.
    tr: Option<Box<Transfers>>,
}

/// Equal content compares equal, however it was built: a schedule whose
/// transfers were all set and cleared again equals one that never had any.
impl PartialEq for Schedule {
    fn eq(&self, o: &Schedule) -> bool {
        let none = |tr: &Transfers| {
            tr.out.iter().chain(&tr.fetch).all(Vec::is_empty)
                && tr.held.iter().all(Vec::is_empty)
                && tr.out_lead.is_empty()
                && tr.fetch_lead.is_empty()
                && tr.deferred.is_empty()
        };
        self.r == o.r
            && self.s == o.s
            && match (&self.tr, &o.tr) {
                (Some(a), Some(b)) => a == b,
                (Some(x), None) | (None, Some(x)) => none(x),
                (None, None) => true,
            }
    }
}

/// Per stage, the values whose keep interval starts there (`S[t,i]` and
/// not `S[t-1,i]`) and those whose interval ends there (`S[t,i]` and not
/// `S[t+1,i]`), each list ascending. Built in O(n + intervals) by
/// [`Schedule::keep_events`]: the way whole-schedule passes follow S
/// without touching all n values per stage.
#[derive(Debug, Clone)]
pub struct KeepEvents {
    start_at: Vec<u32>,
    starts: Vec<u32>,
    end_at: Vec<u32>,
    ends: Vec<u32>,
}

impl KeepEvents {
    /// Values kept into stage `t` but not into stage `t-1`, ascending.
    pub fn starts(&self, t: usize) -> &[u32] {
        &self.starts[self.start_at[t] as usize..self.start_at[t + 1] as usize]
    }

    /// Values kept into stage `t` but not into stage `t+1`, ascending.
    pub fn ends(&self, t: usize) -> &[u32] {
        &self.ends[self.end_at[t] as usize..self.end_at[t + 1] as usize]
    }
}

/// S one stage at a time, as a dense set of n bits updated from
/// [`KeepEvents`]: O(1) membership, O(n + intervals) for a whole pass.
/// Stages must be entered in order, 0, 1, 2, …
pub struct KeptSweep {
    ev: KeepEvents,
    now: FixedBitSet,
    next: usize,
}

impl KeptSweep {
    /// Makes `S[t]` the current set. `t` must be the stage after the last
    /// one entered (0 first).
    pub fn enter(&mut self, t: usize) {
        debug_assert_eq!(t, self.next, "stages are entered in order");
        if t > 0 {
            for &i in self.ev.ends(t - 1) {
                self.now.set(i as usize, false);
            }
        }
        for &i in self.ev.starts(t) {
            self.now.insert(i as usize);
        }
        self.next = t + 1;
    }

    /// `S[t,i]` for the stage last entered.
    pub fn contains(&self, i: usize) -> bool {
        self.now.contains(i)
    }

    /// The events the sweep follows.
    pub fn events(&self) -> &KeepEvents {
        &self.ev
    }
}

/// A dense bitset of `n` bits holding `ids`: for callers that need set
/// operations on one stage of a small graph (the MILP decoders).
pub fn dense(ids: impl IntoIterator<Item = usize>, n: usize) -> FixedBitSet {
    let mut b = FixedBitSet::with_capacity(n);
    b.extend(ids);
    b
}

/// Sets (`v`) or clears the inclusive stage range `a..=b` in a normalised
/// interval list.
fn intervals_set(ivs: &mut Vec<(u32, u32)>, a: u32, b: u32, v: bool) {
    debug_assert!(a <= b);
    if v {
        // Intervals that overlap or touch [a, b] merge with it.
        let lo = ivs.partition_point(|iv| iv.1 as u64 + 1 < a as u64);
        let hi = ivs.partition_point(|iv| iv.0 as u64 <= b as u64 + 1);
        if lo < hi {
            let from = a.min(ivs[lo].0);
            let to = b.max(ivs[hi - 1].1);
            ivs.splice(lo..hi, std::iter::once((from, to)));
        } else {
            ivs.insert(lo, (a, b));
        }
    } else {
        let lo = ivs.partition_point(|iv| iv.1 < a);
        let hi = ivs.partition_point(|iv| iv.0 <= b);
        if lo >= hi {
            return;
        }
        let left = (ivs[lo].0 < a).then(|| (ivs[lo].0, a - 1));
        let right = (ivs[hi - 1].1 > b).then(|| (b + 1, ivs[hi - 1].1));
        ivs.splice(lo..hi, left.into_iter().chain(right));
    }
}

fn intervals_has(ivs: &[(u32, u32)], t: usize) -> bool {
    let p = ivs.partition_point(|iv| (iv.1 as usize) < t);
    p < ivs.len() && ivs[p].0 as usize <= t
}

/// Transfer decisions, sparse (most values never leave the fast tier):
/// per stage, sorted node indices.
///
/// - `O[t]`: values whose copy to the slow tier starts in stage `t`. The
///   source is the fast copy held in the stage (kept, `S[t,i]`, or
///   computed, `R[t,i]`); the copy completes within the stage, and the fast
///   copy is not freed before the stage ends.
/// - `P[t]`: values copied back during stage `t` from their slow copy into
///   a newly allocated fast buffer, counted from the start of the stage;
///   like a copy out, the copy runs alongside the stage's computations and
///   completes within it, so the value is resident from stage `t+1`
///   (`S[t+1,i]`, which must be set), not readable in stage `t`.
/// - `H[t]`: values with a slow copy at the start of stage `t`. A slow copy
///   that stage `t+1` does not hold is dropped at the end of stage `t`.
///
/// Rules (checked by [`Schedule::validate`]): `H[t+1,i] ≤ H[t,i] + O[t,i]`,
/// `O[t,i] ≤ S[t,i] + R[t,i]`, `P[t,i] ≤ H[t,i]`, `P[t,i] ≤ S[t+1,i]`,
/// `S[t+1,i] ≤ S[t,i] + R[t,i] + P[t,i]`; no copy out of a value that
/// already has a slow copy, no copy in of a value already in fast memory.
/// A computation's inputs come from R or S, or, as a direct read of the
/// slow copy, from H.
///
/// Because every copy of stage `t` starts with the stage (a copy out of a
/// value computed in the stage: right after that computation) and is waited
/// for at its end, the simulated time of stage `t` is the larger of its
/// compute time and each copy engine's load, the tiered MILP's `τ_t`,
/// exactly when copies out are of kept values.
///
/// *Leads* let a copy span stages. A copy-out or fetch of stage `t` with
/// lead `l > 0` is issued `l` stages earlier, in stage `t - l`, and still
/// waited for at the end of stage `t`, so O, P and H keep their meaning
/// (what is resident or held when) and only the copy's start moves. Why:
/// a ResNet-50 activation takes 2.3 ms to cross NVLink-C2C against about
/// 0.1 ms of one layer's compute; bounded by its stage, such a copy stalls
/// it, while real offloading systems let it run behind many layers. A
/// copy-out's lead costs no memory (the value is resident until `t`
/// anyway); a fetch's lead holds its buffer from stage `t - l`. Rules:
/// over the lead stages a copied-out value is held (S, or R at the issue
/// stage only, since a recomputation would replace the buffer being
/// copied) and has no slow copy yet; a fetched value is absent (neither S
/// nor R) and its slow copy exists (H).
///
/// *Deferred* fetches go the other way. A fetch `P[t,i]` that is deferred
/// is issued at the start of stage `t + 1`, after stage `t` has freed what
/// it no longer needs, and waited for just before the first computation of
/// stage `t + 1` that reads it; S, P and H keep their meaning (the value
/// is resident in `t + 1`). Why: a fetch within stage `t` holds its buffer
/// beside everything stage `t` reads, and on a tight budget that stage is
/// the peak (random-layered-n100 on the A100 at 50% had no plan at all for
/// that reason); deferred, the buffer shares memory with stage `t + 1`
/// only, at the price of a stall the copy can no longer hide. Rules: the
/// fetch has no lead, stage `t + 1` reads the value and does not compute
/// it, and the slow copy is still held there (`H[t+1,i]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transfers {
    out: Vec<Vec<u32>>,
    fetch: Vec<Vec<u32>>,
    /// H per node, as stage intervals like S: a slow copy is held over a
    /// long run of stages (offload-all holds every activation from its copy
    /// out to its last read), so rows per stage grew with the square of the
    /// graph.
    held: Vec<Vec<(u32, u32)>>,
    /// Leads of copies out and of fetches, by (completion stage, node);
    /// absent means 0.
    out_lead: std::collections::BTreeMap<(u32, u32), u32>,
    fetch_lead: std::collections::BTreeMap<(u32, u32), u32>,
    /// Deferred fetches, by (fetch stage, node).
    deferred: std::collections::BTreeSet<(u32, u32)>,
}

fn set_lead(m: &mut std::collections::BTreeMap<(u32, u32), u32>, t: usize, i: usize, lead: usize) {
    if lead == 0 {
        m.remove(&(t as u32, i as u32));
    } else {
        m.insert((t as u32, i as u32), lead as u32);
    }
}

fn row_has(row: &[u32], i: usize) -> bool {
    row.binary_search(&(i as u32)).is_ok()
}

fn row_set(row: &mut Vec<u32>, i: usize, v: bool) {
    match (row.binary_search(&(i as u32)), v) {
        (Err(p), true) => row.insert(p, i as u32),
        (Ok(p), false) => {
            row.remove(p);
        }
        _ => {}
    }
}

/// A schedule that breaks the rules every strategy must follow. Reaching
/// this is a strategy bug, so the message says exactly where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("schedule has {got} stages but the graph has {want} nodes")]
    Size { got: usize, want: usize },
    #[error("stage {t} does not compute its frontier node {t}")]
    NoFrontier { t: usize },
    #[error("stage {t} computes node {k} but not node {i}, another output of the same kernel (a kernel's outputs are computed together)")]
    PartialGroup { t: usize, i: usize, k: usize },
    #[error("stage {t} computes or keeps node {i}, which is not yet reachable (i must be < t for S, <= t for R)")]
    Ahead { t: usize, i: usize },
    #[error("stage {t} keeps node {i}, which was neither computed nor kept in stage {}", t - 1)]
    KeptFromNothing { t: usize, i: usize },
    #[error("stage {t} computes node {k} but its dependency {i} is neither computed, kept, nor held in the slow tier in that stage")]
    MissingDep { t: usize, i: usize, k: usize },
    #[error("stage {t} holds a slow copy of node {i}, which stage {} neither held nor copied out", t - 1)]
    HeldFromNothing { t: usize, i: usize },
    #[error("stage {t} copies node {i} out, but the stage neither keeps nor computes it")]
    OutWithoutValue { t: usize, i: usize },
    #[error("stage {t} copies node {i} out, but a slow copy of it already exists")]
    OutTwice { t: usize, i: usize },
    #[error(
        "stage {t} copies node {i} in, but no slow copy of it exists at the start of the stage"
    )]
    FetchWithoutCopy { t: usize, i: usize },
    #[error("stage {t} copies node {i} in, but the stage already keeps or computes it")]
    FetchPresent { t: usize, i: usize },
    #[error("stage {t} copies node {i} in, but stage {} does not keep it", t + 1)]
    FetchUnused { t: usize, i: usize },
    #[error("the copy of node {i} out by stage {t} is issued in stage {u}, where the value is not held, is recomputed, or already has a slow copy")]
    OutLead { t: usize, i: usize, u: usize },
    #[error("the copy of node {i} in by stage {t} is issued in stage {u}, where the value is still resident or has no slow copy")]
    FetchLead { t: usize, i: usize, u: usize },
    #[error("the fetch of node {i} in stage {t} is deferred to stage {}, but it is not a fetch without a lead, or that stage does not read the value, computes it, or holds no slow copy of it", t + 1)]
    Deferred { t: usize, i: usize },
}

impl Schedule {
    /// R = I, S = 0: each stage computes only its frontier. Not correct by
    /// itself for any graph with edges; a starting point for strategies.
    pub fn identity(n: usize) -> Schedule {
        Schedule {
            r: (0..n as u32).map(|t| vec![t]).collect(),
            s: vec![Vec::new(); n],
            tr: None,
        }
    }

    /// Each stage computes its frontier only, as [`Schedule::identity`],
    /// except that a kernel with several outputs computes all of them in
    /// the stage of its last one, and the stages of the others compute
    /// nothing (see [`Graph::group`]).
    pub fn frontiers(g: &Graph) -> Schedule {
        let mut sch = Schedule::identity(g.len());
        if g.has_groups() {
            for t in g.ids() {
                let (a, b) = (g.group_start(t), g.group_end(t));
                sch.r[t.idx()] = if b != t.idx() {
                    Vec::new()
                } else {
                    (a as u32..=b as u32).collect()
                };
            }
        }
        sch
    }

    /// Every value is computed once and kept while anything later reads it:
    /// the schedule frameworks run by default.
    pub fn checkpoint_all(g: &Graph) -> Schedule {
        let mut sch = Schedule::frontiers(g);
        let last = crate::graph::analysis::last_use(g);
        for i in g.ids() {
            let (a, b) = (g.group_end(i) + 1, last[i.idx()].idx());
            if a <= b {
                sch.set_s_range(i.idx(), a..=b, true);
            }
        }
        sch
    }

    pub fn stages(&self) -> usize {
        self.r.len()
    }

    /// R[t,i]: O(log) in the stage's size.
    pub fn r(&self, t: usize, i: usize) -> bool {
        row_has(&self.r[t], i)
    }

    /// S[t,i] (false past the last stage): O(log) in the number of keep
    /// intervals of `i`.
    pub fn s(&self, t: usize, i: usize) -> bool {
        t < self.stages() && self.s.get(i).is_some_and(|ivs| intervals_has(ivs, t))
    }

    pub fn set_r(&mut self, t: usize, i: usize, v: bool) {
        assert!(i < self.s.len(), "node {i} out of range");
        row_set(&mut self.r[t], i, v);
    }

    pub fn set_s(&mut self, t: usize, i: usize, v: bool) {
        self.set_s_range(i, t..=t, v);
    }

    /// Sets S[t,i] to `v` for every `t` in `stages`: one interval update,
    /// however long the run.
    pub fn set_s_range(&mut self, i: usize, stages: std::ops::RangeInclusive<usize>, v: bool) {
        let (a, b) = stages.into_inner();
        if a > b {
            return;
        }
        assert!(
            b < self.stages(),
            "stage {b} out of range ({} stages)",
            self.stages()
        );
        intervals_set(&mut self.s[i], a as u32, b as u32, v);
    }

    /// The nodes stage `t` computes, ascending.
    pub fn r_row(&self, t: usize) -> &[u32] {
        &self.r[t]
    }

    /// R[t] as a dense bitset of n bits: O(n), for small-graph callers
    /// that need set operations on a stage (the MILP decoders).
    pub fn r_dense(&self, t: usize) -> FixedBitSet {
        dense(self.r[t].iter().map(|&i| i as usize), self.s.len())
    }

    /// S[t] as a dense bitset of n bits: O(n log), as [`Schedule::kept`].
    pub fn kept_dense(&self, t: usize) -> FixedBitSet {
        dense(self.kept(t).map(|i| i.idx()), self.s.len())
    }

    /// The stage intervals `(from, to)`, inclusive, over which value `i` is
    /// kept: ascending, disjoint and non-adjacent.
    pub fn keep_intervals(&self, i: usize) -> &[(u32, u32)] {
        &self.s[i]
    }

    /// Where each keep interval starts and ends, per stage: O(n +
    /// intervals).
    pub fn keep_events(&self) -> KeepEvents {
        let n = self.stages();
        let mut start_at = vec![0u32; n + 2];
        let mut end_at = vec![0u32; n + 2];
        for ivs in &self.s {
            for &(a, b) in ivs {
                start_at[a as usize + 2] += 1;
                end_at[b as usize + 2] += 1;
            }
        }
        for t in 2..n + 2 {
            start_at[t] += start_at[t - 1];
            end_at[t] += end_at[t - 1];
        }
        let total = start_at[n + 1] as usize;
        let (mut starts, mut ends) = (vec![0u32; total], vec![0u32; total]);
        for (i, ivs) in self.s.iter().enumerate() {
            for &(a, b) in ivs {
                let sa = &mut start_at[a as usize + 1];
                starts[*sa as usize] = i as u32;
                *sa += 1;
                let eb = &mut end_at[b as usize + 1];
                ends[*eb as usize] = i as u32;
                *eb += 1;
            }
        }
        start_at.pop();
        end_at.pop();
        KeepEvents {
            start_at,
            starts,
            end_at,
            ends,
        }
    }

    /// A sweep over S, stage by stage (see [`KeptSweep`]).
    pub fn kept_sweep(&self) -> KeptSweep {
        KeptSweep {
            ev: self.keep_events(),
            now: FixedBitSet::with_capacity(self.s.len()),
            next: 0,
        }
    }

    fn transfers_mut(&mut self) -> &mut Transfers {
        let n = self.stages();
        self.tr.get_or_insert_with(|| {
            Box::new(Transfers {
                out: vec![Vec::new(); n],
                fetch: vec![Vec::new(); n],
                held: vec![Vec::new(); n],
                ..Transfers::default()
            })
        })
    }

    /// True when any transfer decision is set: the plan needs a device.
    pub fn has_transfers(&self) -> bool {
        self.tr.as_ref().is_some_and(|tr| {
            tr.out.iter().any(|r| !r.is_empty())
                || tr.fetch.iter().any(|r| !r.is_empty())
                || tr.held.iter().any(|r| !r.is_empty())
        })
    }

    /// O[t,i]: a copy of node `i` to the slow tier starts in stage `t`.
    pub fn o(&self, t: usize, i: usize) -> bool {
        self.tr.as_ref().is_some_and(|tr| row_has(&tr.out[t], i))
    }

    /// P[t,i]: node `i` is copied back into fast memory in stage `t`.
    pub fn p(&self, t: usize, i: usize) -> bool {
        self.tr.as_ref().is_some_and(|tr| row_has(&tr.fetch[t], i))
    }

    /// H[t,i]: a slow copy of node `i` exists at the start of stage `t`.
    pub fn h(&self, t: usize, i: usize) -> bool {
        t < self.stages()
            && self
                .tr
                .as_ref()
                .is_some_and(|tr| tr.held.get(i).is_some_and(|ivs| intervals_has(ivs, t)))
    }

    pub fn set_o(&mut self, t: usize, i: usize, v: bool) {
        let tr = self.transfers_mut();
        row_set(&mut tr.out[t], i, v);
        if !v {
            tr.out_lead.remove(&(t as u32, i as u32));
        }
    }

    pub fn set_p(&mut self, t: usize, i: usize, v: bool) {
        let tr = self.transfers_mut();
        row_set(&mut tr.fetch[t], i, v);
        if !v {
            tr.fetch_lead.remove(&(t as u32, i as u32));
            tr.deferred.remove(&(t as u32, i as u32));
        }
    }

    /// Whether the fetch P[t,i] is deferred to stage `t + 1` (see
    /// [`Transfers`]).
    pub fn deferred(&self, t: usize, i: usize) -> bool {
        self.tr
            .as_ref()
            .is_some_and(|tr| tr.deferred.contains(&(t as u32, i as u32)))
    }

    /// Defers the existing fetch P[t,i] (validated with the schedule), or
    /// undoes that.
    pub fn set_deferred(&mut self, t: usize, i: usize, v: bool) {
        let tr = self.transfers_mut();
        if v {
            tr.deferred.insert((t as u32, i as u32));
        } else {
            tr.deferred.remove(&(t as u32, i as u32));
        }
    }

    /// Every deferred fetch, `(fetch stage, node)`, by stage then node.
    pub fn deferrals(&self) -> Vec<(usize, usize)> {
        self.tr.as_ref().map_or_else(Vec::new, |tr| {
            tr.deferred
                .iter()
                .map(|&(t, i)| (t as usize, i as usize))
                .collect()
        })
    }

    /// Defers the fetch P[t,i] into stage `t + 1`, holding the slow copy
    /// there for it.
    pub fn defer_fetch(&mut self, t: usize, i: usize) {
        self.set_h(t + 1, i, true);
        self.set_deferred(t, i, true);
    }

    pub fn has_deferrals(&self) -> bool {
        self.tr.as_ref().is_some_and(|tr| !tr.deferred.is_empty())
    }

    /// Undoes every deferral: each fetch runs within its stage again.
    pub fn clear_deferrals(&mut self) {
        if let Some(tr) = &mut self.tr {
            tr.deferred.clear();
        }
    }

    /// How many stages before `t` the copy out O[t,i] is issued (see
    /// [`Transfers`]); 0 when it starts in its own stage or does not exist.
    pub fn out_lead(&self, t: usize, i: usize) -> usize {
        self.tr.as_ref().map_or(0, |tr| {
            tr.out_lead
                .get(&(t as u32, i as u32))
                .map_or(0, |&l| l as usize)
        })
    }

    /// How many stages before `t` the fetch P[t,i] is issued.
    pub fn fetch_lead(&self, t: usize, i: usize) -> usize {
        self.tr.as_ref().map_or(0, |tr| {
            tr.fetch_lead
                .get(&(t as u32, i as u32))
                .map_or(0, |&l| l as usize)
        })
    }

    /// Sets the lead of the existing copy out O[t,i] (validated with the
    /// schedule).
    pub fn set_out_lead(&mut self, t: usize, i: usize, lead: usize) {
        set_lead(&mut self.transfers_mut().out_lead, t, i, lead);
    }

    /// Sets the lead of the existing fetch P[t,i].
    pub fn set_fetch_lead(&mut self, t: usize, i: usize, lead: usize) {
        set_lead(&mut self.transfers_mut().fetch_lead, t, i, lead);
    }

    /// True when some copy spans stages (a lead above 0). The tiered MILP
    /// and the staged stage times describe only schedules without.
    pub fn has_leads(&self) -> bool {
        self.tr
            .as_ref()
            .is_some_and(|tr| !tr.out_lead.is_empty() || !tr.fetch_lead.is_empty())
    }

    /// Every copy with a lead: `(completion stage, node, lead, is_fetch)`,
    /// copies out first, each by stage then node.
    pub fn leads(&self) -> Vec<(usize, usize, usize, bool)> {
        let Some(tr) = &self.tr else {
            return Vec::new();
        };
        let f = |m: &std::collections::BTreeMap<(u32, u32), u32>, fetch: bool| {
            m.iter()
                .map(move |(&(t, i), &l)| (t as usize, i as usize, l as usize, fetch))
                .collect::<Vec<_>>()
        };
        let mut v = f(&tr.out_lead, false);
        v.extend(f(&tr.fetch_lead, true));
        v
    }

    /// The longest lead the copy out O[t,i] may take: back over the stages
    /// that keep the value, to the stage that last computed it (or the
    /// first that keeps it), and none into a stage with a slow copy.
    pub fn max_out_lead(&self, t: usize, i: usize) -> usize {
        if !self.o(t, i) || self.r(t, i) {
            return 0;
        }
        let mut u = t;
        while u > 0 && self.s(u, i) {
            let p = u - 1;
            if self.h(p, i) || self.o(p, i) || !(self.s(p, i) || self.r(p, i)) {
                break;
            }
            u = p;
            if self.r(p, i) {
                break;
            }
        }
        t - u
    }

    /// The longest lead the fetch P[t,i] may take: back over the stages
    /// where the value is absent and its slow copy exists.
    pub fn max_fetch_lead(&self, t: usize, i: usize) -> usize {
        if !self.p(t, i) || self.deferred(t, i) {
            return 0;
        }
        let mut u = t;
        while u > 0 && !self.s(u - 1, i) && !self.r(u - 1, i) && self.h(u - 1, i) {
            u -= 1;
        }
        t - u
    }

    /// Drops every lead: each copy runs within its stage again.
    pub fn clear_leads(&mut self) {
        if let Some(tr) = &mut self.tr {
            tr.out_lead.clear();
            tr.fetch_lead.clear();
        }
    }

    pub fn set_h(&mut self, t: usize, i: usize, v: bool) {
        self.set_h_range(i, t..=t, v);
    }

    /// Sets H[t,i] to `v` for every `t` in `stages`: one interval update.
    pub fn set_h_range(&mut self, i: usize, stages: std::ops::RangeInclusive<usize>, v: bool) {
        let (a, b) = stages.into_inner();
        if a > b {
            return;
        }
        let n = self.stages();
        assert!(i < n && b < n, "H[{b},{i}] out of range ({n} stages)");
        if !v && self.tr.is_none() {
            return;
        }
        intervals_set(&mut self.transfers_mut().held[i], a as u32, b as u32, v);
    }

    /// The stage intervals `(from, to)`, inclusive, over which a slow copy
    /// of `i` is held: ascending, disjoint and non-adjacent.
    pub fn hold_intervals(&self, i: usize) -> &[(u32, u32)] {
        self.tr.as_ref().map_or(&[], |tr| &tr.held[i])
    }

    /// Per stage, ascending, the nodes whose hold interval starts there
    /// (`ends` false: not held in the stage before) or ends there (`ends`
    /// true: not held in the next, where plans drop slow copies). O(n +
    /// intervals).
    pub fn hold_events(&self, ends: bool) -> Vec<Vec<u32>> {
        let mut at = vec![Vec::new(); self.stages()];
        if let Some(tr) = &self.tr {
            for (i, ivs) in tr.held.iter().enumerate() {
                for &(a, b) in ivs {
                    at[if ends { b } else { a } as usize].push(i as u32);
                }
            }
        }
        at
    }

    /// H of every stage as sorted node indices: O(n + intervals) at once,
    /// for callers that walk all stages.
    pub fn h_rows(&self) -> Vec<Vec<u32>> {
        let mut rows = vec![Vec::new(); self.stages()];
        if let Some(tr) = &self.tr {
            for (i, ivs) in tr.held.iter().enumerate() {
                for &(a, b) in ivs {
                    for row in &mut rows[a as usize..=b as usize] {
                        row.push(i as u32);
                    }
                }
            }
        }
        rows
    }

    /// O, P and H of stage `t` as sorted node indices (empty without
    /// transfers).
    pub fn o_row(&self, t: usize) -> &[u32] {
        self.tr.as_ref().map_or(&[], |tr| &tr.out[t])
    }

    pub fn p_row(&self, t: usize) -> &[u32] {
        self.tr.as_ref().map_or(&[], |tr| &tr.fetch[t])
    }

    /// The common offload pattern in one call: copy `i` out during stage
    /// `out`, hold the slow copy through stage `fetch`, copy it back during
    /// stage `fetch`, and keep no fast copy in between (stages
    /// `out+1..=fetch`): the value is resident again from stage `fetch+1`.
    /// How long it stays (S after `fetch+1`) and whether the slow copy is
    /// kept for a second fetch (H after `fetch`) stay the caller's choice.
    pub fn offload(&mut self, i: usize, out: usize, fetch: usize) {
        assert!(
            out < fetch && fetch + 1 < self.stages(),
            "offload of node {i}: stages {out} and {fetch} do not leave a stage to read it in"
        );
        self.set_o(out, i, true);
        self.set_h_range(i, out + 1..=fetch, true);
        self.set_s_range(i, out + 1..=fetch, false);
        self.set_p(fetch, i, true);
        self.set_s(fetch + 1, i, true);
    }

    /// Nodes computed in stage `t`, in topological order.
    pub fn computed(&self, t: usize) -> impl Iterator<Item = NodeId> + '_ {
        self.r[t].iter().map(|&i| NodeId::from(i as usize))
    }

    /// Nodes that stage `t` computes again (below its frontier), as
    /// indices: the recomputations searches try to remove.
    pub fn recomputed(&self, t: usize) -> impl Iterator<Item = usize> + '_ {
        self.r[t]
            .iter()
            .map(|&i| i as usize)
            .filter(move |&i| i < t)
    }

    /// Nodes carried into stage `t`, ascending. This asks every value
    /// (O(n log) per stage), for callers that look at a few stages; passes
    /// over all stages use [`Schedule::keep_events`] or
    /// [`Schedule::kept_sweep`] instead.
    pub fn kept(&self, t: usize) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.s.len())
            .filter(move |&i| intervals_has(&self.s[i], t))
            .map(NodeId::from)
    }

    /// Total compute cost implied by R. Strategies use it to compare
    /// candidates; reported figures always come from the simulator.
    pub fn cost(&self, g: &Graph) -> f64 {
        self.r
            .iter()
            .map(|row| {
                row.iter()
                    .map(|&i| g.cost(NodeId::from(i as usize)))
                    .sum::<f64>()
            })
            .sum()
    }

    /// Each stage's time on `device` as the tiered model counts it: the
    /// larger of the stage's compute time and each copy engine's load (both
    /// directions on a shared engine; everything in sequence on a
    /// synchronous device). Their sum is the simulated step time whenever
    /// every copy out is of a kept value, no copy has a lead or is
    /// deferred, and nothing is
    /// read directly from the slow tier (tested). For strategies to
    /// rank candidates, as [`Schedule::cost`]; reported figures always come
    /// from the simulator.
    pub fn stage_times(
        &self,
        g: &Graph,
        device: &crate::device::Device,
    ) -> Vec<crate::units::Seconds> {
        use crate::device::Engines;
        let load = |row: &[u32], to_slow: bool| {
            row.iter()
                .map(|&i| {
                    device
                        .copy_time(g.memory(NodeId::from(i as usize)), to_slow)
                        .get()
                })
                .sum::<f64>()
        };
        (0..self.stages())
            .map(|t| {
                let cost: f64 = self.computed(t).map(|k| g.cost(k)).sum();
                let compute = device.compute_time(cost).get();
                let (out, inn) = (load(self.o_row(t), true), load(self.p_row(t), false));
                crate::units::Seconds(match device.slow.engines {
                    Engines::Duplex => compute.max(out).max(inn),
                    Engines::Shared => compute.max(out + inn),
                    Engines::Synchronous => compute + out + inn,
                })
            })
            .collect()
    }

    /// How many computations beyond one per node.
    pub fn recomputations(&self) -> usize {
        self.r.iter().map(Vec::len).sum::<usize>() - self.r.len()
    }

    /// Checks the frontier-advancing structure and the correctness
    /// constraints (1b) S[t+1,i] <= S[t,i] + R[t,i] + P[t,i] and
    /// (1c) R[t,k] <= R[t,i] + S[t,i] + H[t,i] for every edge (i, k), and
    /// the transfer rules of [`Transfers`]. A dependency
    /// available only as a slow copy (H) is read directly from the slow
    /// tier, which the simulator accepts only on a device that allows it.
    pub fn validate(&self, g: &Graph) -> Result<(), ScheduleError> {
        let n = g.len();
        if self.r.len() != n || self.s.len() != n {
            return Err(ScheduleError::Size {
                got: self.r.len().min(self.s.len()),
                want: n,
            });
        }
        // Stage by stage, in the order the checks were always made, so the
        // first error reported is the same. S is followed by its interval
        // ends: a kept value can only break a rule where its interval
        // starts (it is ahead from its first stage on, and within an
        // interval it is carried from the stage before).
        let mut kept = self.kept_sweep();
        let hold_starts = self.hold_events(false);
        for (t, hold_starts) in hold_starts.iter().enumerate() {
            kept.enter(t);
            let row = &self.r[t];
            // A group's frontier is its last member (the others are made
            // with it): see `Graph::group`.
            if !row_has(row, t) && g.group_end(NodeId::from(t)) == t {
                return Err(ScheduleError::NoFrontier { t });
            }
            if g.has_groups() {
                for &k in row {
                    let k = k as usize;
                    if let Some(i) = g.group(NodeId::from(k)).find(|&i| !row_has(row, i)) {
                        return Err(ScheduleError::PartialGroup { t, i, k });
                    }
                }
            }
            if let Some(&i) = row.iter().find(|&&i| i as usize > t) {
                return Err(ScheduleError::Ahead { t, i: i as usize });
            }
            let starts = kept.events().starts(t);
            if let Some(&i) = starts.iter().find(|&&i| i as usize >= t) {
                return Err(ScheduleError::Ahead { t, i: i as usize });
            }
            if t > 0 {
                for &i in starts {
                    let i = i as usize;
                    if !row_has(&self.r[t - 1], i) && !self.p(t - 1, i) {
                        return Err(ScheduleError::KeptFromNothing { t, i });
                    }
                }
            }
            for &k in row {
                let k = k as usize;
                for &i in g.deps(NodeId::from(k)) {
                    let i = i.idx();
                    if !row_has(row, i) && !kept.contains(i) && !self.h(t, i) {
                        return Err(ScheduleError::MissingDep { t, i, k });
                    }
                }
            }
            self.validate_transfers(t, hold_starts)?;
        }
        self.validate_leads(g)
    }

    /// The lead and deferral rules of [`Transfers`], for the few copies
    /// that have one.
    fn validate_leads(&self, g: &Graph) -> Result<(), ScheduleError> {
        for (t, i, lead, fetch) in self.leads() {
            if fetch && !self.p(t, i) || !fetch && !self.o(t, i) || lead > t {
                let u = t.saturating_sub(lead);
                return Err(if fetch {
                    ScheduleError::FetchLead { t, i, u }
                } else {
                    ScheduleError::OutLead { t, i, u }
                });
            }
            for u in t - lead..t {
                let ok = if fetch {
                    !self.s(u, i) && !self.r(u, i) && self.h(u, i)
                } else {
                    // Held over the lead, computed at most at its issue,
                    // never recomputed under the copy, no slow copy yet.
                    let held = self.s(u, i) || (u == t - lead && self.r(u, i));
                    let recomputed = u > t - lead && self.r(u, i);
                    held && !recomputed && !self.h(u, i) && !self.o(u, i)
                };
                if !ok {
                    return Err(if fetch {
                        ScheduleError::FetchLead { t, i, u }
                    } else {
                        ScheduleError::OutLead { t, i, u }
                    });
                }
            }
            if !fetch && self.r(t, i) {
                return Err(ScheduleError::OutLead { t, i, u: t });
            }
        }
        for (t, i) in self.deferrals() {
            let u = t + 1;
            let ok = self.p(t, i)
                && self.fetch_lead(t, i) == 0
                && u < self.stages()
                && self.h(u, i)
                && !self.r(u, i)
                && self.r[u].iter().any(|&k| {
                    g.deps(NodeId::from(k as usize))
                        .iter()
                        .any(|d| d.idx() == i)
                });
            if !ok {
                return Err(ScheduleError::Deferred { t, i });
            }
        }
        Ok(())
    }

    /// The transfer rules of stage `t`. A held value can break its rules
    /// only where its hold interval starts (`hold_starts`): it is ahead from
    /// its first stage on, and within an interval it is held from the stage
    /// before.
    fn validate_transfers(&self, t: usize, hold_starts: &[u32]) -> Result<(), ScheduleError> {
        let Some(tr) = &self.tr else { return Ok(()) };
        for &i in hold_starts {
            let i = i as usize;
            if i >= t {
                return Err(ScheduleError::Ahead { t, i });
            }
            if !self.o(t - 1, i) {
                return Err(ScheduleError::HeldFromNothing { t, i });
            }
        }
        for &i in &tr.out[t] {
            let i = i as usize;
            if !self.s(t, i) && !self.r(t, i) {
                return Err(ScheduleError::OutWithoutValue { t, i });
            }
            if self.h(t, i) {
                return Err(ScheduleError::OutTwice { t, i });
            }
        }
        for &i in &tr.fetch[t] {
            let i = i as usize;
            if !self.h(t, i) {
                return Err(ScheduleError::FetchWithoutCopy { t, i });
            }
            if self.s(t, i) || self.r(t, i) {
                return Err(ScheduleError::FetchPresent { t, i });
            }
            if !self.s(t + 1, i) {
                return Err(ScheduleError::FetchUnused { t, i });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Applies `ops` (value, from, to, set) to a schedule and to dense
    /// reference rows, then checks every query against the reference.
    fn check_against_dense(n: usize, ops: &[(usize, usize, usize, bool)]) {
        let mut sch = Schedule::identity(n);
        let mut dense_s = vec![vec![false; n]; n];
        for &(i, a, b, v) in ops {
            let (a, b) = ((a % n).min(b % n), (a % n).max(b % n));
            if a == b && v {
                sch.set_s(a, i % n, v);
            } else {
                sch.set_s_range(i % n, a..=b, v);
            }
            // The same operations on H, transposed, so H differs from S.
            let j = n - 1 - i % n;
            if a == b {
                sch.set_h(a, j, v);
            } else {
                sch.set_h_range(j, a..=b, v);
            }
            for row in dense_s.iter_mut().take(b + 1).skip(a) {
                row[i % n] = v;
            }
        }
        // H as dense rows: S's rows with the values mirrored.
        let dense_h: Vec<Vec<bool>> = dense_s
            .iter()
            .map(|row| row.iter().rev().copied().collect())
            .collect();
        let (h_rows, h_starts, h_ends) =
            (sch.h_rows(), sch.hold_events(false), sch.hold_events(true));
        for (t, row) in dense_h.iter().enumerate() {
            let want: Vec<u32> = (0..n).filter(|&i| row[i]).map(|i| i as u32).collect();
            assert_eq!(h_rows[t], want, "H[{t}]");
            for (i, &v) in row.iter().enumerate() {
                assert_eq!(sch.h(t, i), v, "H[{t},{i}]");
            }
            let starts: Vec<u32> = (0..n)
                .filter(|&i| row[i] && (t == 0 || !dense_h[t - 1][i]))
                .map(|i| i as u32)
                .collect();
            let ends: Vec<u32> = (0..n)
                .filter(|&i| row[i] && (t + 1 == n || !dense_h[t + 1][i]))
                .map(|i| i as u32)
                .collect();
            assert_eq!(h_starts[t], starts, "hold starts at {t}");
            assert_eq!(h_ends[t], ends, "hold ends at {t}");
        }
        assert_eq!(sch.has_transfers(), dense_h.iter().flatten().any(|&v| v));
        for i in 0..n {
            let ivs = sch.keep_intervals(i);
            for w in ivs.windows(2) {
                assert!(w[0].1 + 1 < w[1].0, "normalised: {ivs:?}");
            }
            assert!(ivs.iter().all(|iv| iv.0 <= iv.1));
        }
        let ev = sch.keep_events();
        let mut sweep = sch.kept_sweep();
        for (t, row) in dense_s.iter().enumerate() {
            sweep.enter(t);
            let want: Vec<usize> = (0..n).filter(|&i| row[i]).collect();
            let got: Vec<usize> = sch.kept(t).map(|i| i.idx()).collect();
            assert_eq!(got, want, "S[{t}]");
            for (i, &v) in row.iter().enumerate() {
                assert_eq!(sch.s(t, i), v);
                assert_eq!(sweep.contains(i), v);
            }
            let starts: Vec<u32> = (0..n)
                .filter(|&i| row[i] && (t == 0 || !dense_s[t - 1][i]))
                .map(|i| i as u32)
                .collect();
            let ends: Vec<u32> = (0..n)
                .filter(|&i| row[i] && (t + 1 == n || !dense_s[t + 1][i]))
                .map(|i| i as u32)
                .collect();
            assert_eq!(ev.starts(t), &starts[..]);
            assert_eq!(ev.ends(t), &ends[..]);
        }
        // Equal content compares equal, however it was built.
        let mut again = Schedule::identity(n);
        for (t, row) in dense_s.iter().enumerate() {
            for (i, &v) in row.iter().enumerate() {
                if v {
                    again.set_s(t, i, true);
                }
                if dense_h[t][i] {
                    again.set_h(t, i, true);
                }
            }
        }
        assert_eq!(sch, again);
    }

    proptest! {
        #[test]
        fn intervals_match_dense_rows(
            n in 1usize..24,
            ops in prop::collection::vec((0usize..24, 0usize..24, 0usize..24, any::<bool>()), 0..40),
        ) {
            let ops: Vec<_> = ops
                .into_iter()
                .map(|(i, a, b, v)| (i, a.min(b), a.max(b), v))
                .collect();
            check_against_dense(n, &ops);
        }
    }

    #[test]
    fn set_s_splits_and_merges() {
        let mut sch = Schedule::identity(10);
        sch.set_s_range(0, 1..=8, true);
        sch.set_s(4, 0, false);
        assert_eq!(sch.keep_intervals(0), &[(1, 3), (5, 8)]);
        sch.set_s(4, 0, true);
        assert_eq!(sch.keep_intervals(0), &[(1, 8)]);
        sch.set_s_range(0, 0..=9, false);
        assert!(sch.keep_intervals(0).is_empty());
        sch.set_s(2, 1, true);
        sch.set_s(4, 1, true);
        sch.set_s(3, 1, true);
        assert_eq!(sch.keep_intervals(1), &[(2, 4)]);
    }
}
