//! Simulated annealing over sequences of computations
//! ([`super::sequence`]): cheaper plans at tight budgets, in any node order.
//!
//! Why: the schedule searches change one value's interval at a time, in
//! one node order. At tight budgets on random DAGs they stall far from the
//! bound (random-layered-n100 at 60%: 58,977 in the file's order, where a
//! sequence in another order costs 55,485). A sequence may compute any
//! value again anywhere, in any order, and a walk that may cross sequences
//! over the budget (paying a penalty per byte) reaches plans that a walk
//! over fitting plans does not. What it finds is mostly an order: the
//! caller plans in the order of the best sequence's first computations as
//! well, where the order's bound applies (docs/scale.md, "Annealing
//! sequences").
//!
//! A state is any sequence that computes every node, reading only values
//! computed before; a value is freed after its last read before its next
//! computation. Moves: a recomputation inserted just before a read of its
//! value, a recomputation dropped, a computation moved a few places, and a
//! drop with an insertion. Each is priced by walking the whole sequence
//! (linear; n1000's 1,300 computations take about 3,000 moves a second).

use super::feasible::distinct_inputs;
use crate::graph::{Graph, NodeId};
use crate::solver::StopFlag;
use crate::units::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The starting temperatures of the rounds, as fractions of one pass.
/// Which one works differs by graph (measured: 0.002 on random-layered-n100
/// at 60%, 0.001 on n250 and n1000), so the rounds cycle through them,
/// each from the best sequence so far.
const TEMPERATURES: [f64; 3] = [0.002, 0.001, 0.0005];

/// Moves per round at least: a round shorter than this does not cool far
/// enough to settle (n100's rounds of 10⁵ moves found its best sequences).
const ROUND_MOVES: u64 = 2_000_000;

/// At most this many rounds are planned at once (the count is revised
/// after each round from the moves made so far).
const MAX_ROUNDS: usize = 12;

/// The penalty per byte over the budget, in passes per budget: large
/// enough that the walk returns under the budget, small enough to cross
/// it (4 was measured against 1 and 16 on n100 and n250 at 60%).
const OVER_BUDGET: f64 = 4.0;

/// The most computations one closure move inserts.
const CLOSURE_MAX: usize = 48;

/// How often at most the walk reports a new best sequence to its caller.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the walk's states are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Form {
    #[default]
    /// Any sequence: a stage (the computations up to a node's first) may
    /// compute in any order and a value twice.
    Sequences,
    /// Sequences that are schedules in their order of first computations:
    /// each stage computes its recomputations once each, in that order.
    /// Every move's result is put in that form before it is priced.
    ///
    /// Why: a schedule's bound in its order is the schedules' (moments in
    /// topological order), well above the sequences' (random-layered-n100
    /// at 60%: 53,215 against about 51,000), and the strategy can refine
    /// it there; a sequence found freely is mostly not one (its stages,
    /// put in order, go over the budget).
    Schedules,
}

/// What [`anneal`] found: the cheapest sequence that fits and its cost,
/// if cheaper than the start, and how many moves it tried.
#[derive(Debug, Clone, Default)]
pub struct Annealed {
    pub best: Option<(Vec<NodeId>, f64)>,
    pub moves: u64,
    /// The form walked in (sequences where the start is no schedule).
    pub form: Form,
    /// How many walks (rounds, or [`descend`]'s restarts) it made.
    pub walks: usize,
    /// Which of [`descend`]'s starts the best sequence was reached from.
    pub start: usize,
}

impl Annealed {
    /// Adds another walk from the same start: its moves count, and its
    /// best replaces this one's where cheaper.
    pub fn absorb(&mut self, other: Annealed) {
        self.moves += other.moves;
        self.walks += other.walks;
        self.form = other.form;
        if let Some(b) = other.best {
            if self.best.as_ref().is_none_or(|f| b.1 < f.1) {
                self.best = Some(b);
                self.start = other.start;
            }
        }
    }
}

/// A sequence cheaper than `start` that fits `budget` (fixed memory
/// included), found by annealing until `deadline`, `max_moves` moves or
/// `stop`; none when
/// none was found or `start` is not a sequence that fits. Deterministic
/// for a given `seed` and number of moves; the time decides how many.
/// Each new best is passed to `report` (with the form walked in) at the
/// end of each round and at most once a second within one.
#[allow(clippy::too_many_arguments)]
pub fn anneal(
    g: &Graph,
    start: &[NodeId],
    budget: Bytes,
    form: Form,
    (deadline, max_moves): (Instant, u64),
    seed: u64,
    stop: Option<&StopFlag>,
    report: &mut dyn FnMut(&[NodeId], f64, Form),
) -> Annealed {
    let Some(cap) = budget.get().checked_sub(g.fixed_memory.get()) else {
        return Annealed::default();
    };
    if g.has_groups() || g.is_empty() || cap == 0 {
        return Annealed::default();
    }
    let mut walk = Walk::new(g, cap as f64, form);
    let Some((_, c0, true)) = walk.energy(start) else {
        return Annealed::default();
    };
    // A start that is no schedule, and over the budget as one (the
    // node-order search's sequences recompute a value several times in a
    // stage): the walk rarely gets back under the budget in schedule form,
    // so it walks over sequences.
    let mut formed = start.to_vec();
    walk.put_in_form(&mut formed);
    if !walk.energy(&formed).is_some_and(|e| e.2) {
        walk.form = Form::Sequences;
    }
    let stopped = || Instant::now() >= deadline || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let began = Instant::now();
    let mut best = (c0, start.to_vec());
    let mut moves = 0u64;
    let mut round = 0usize;
    while !stopped() && moves < max_moves {
        // Rounds of equal length, at least ROUND_MOVES each: estimated
        // from the moves made so far (the first round gets all the time
        // until the first estimate) and the moves left.
        let per_sec = moves as f64 / began.elapsed().as_secs_f64().max(1e-3);
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let moves_left = max_moves - moves;
        let rounds_left = if moves == 0 && max_moves == u64::MAX {
            MAX_ROUNDS
        } else {
            let can = if moves == 0 {
                moves_left as f64
            } else {
                (per_sec * left).min(moves_left as f64)
            };
            (can / ROUND_MOVES as f64).floor().max(1.0) as usize
        }
        .min(MAX_ROUNDS);
        let length = (left / rounds_left as f64, moves_left / rounds_left as u64);
        let t0 = TEMPERATURES[round % TEMPERATURES.len()] * walk.pass;
        let from = best.1.clone();
        let seed = seed.wrapping_mul(1 << 20).wrapping_add(round as u64);
        moves += walk.round(&from, t0, length, seed, &mut best, &stopped, report);
        round += 1;
    }
    let cheaper = best.0 < c0 - 1e-9 * c0.abs().max(1.0);
    Annealed {
        best: cheaper.then_some((best.1, best.0)),
        moves,
        form: walk.form,
        walks: round,
        start: 0,
    }
}

/// A sequence that fits `budget`, walked down to it from one of `starts`
/// (each over the budget: one pass in the file's order fits only the
/// checkpoint-all peak) by annealing under a budget that falls from the
/// start's peak to [`BELOW`] under `budget` over [`FALL`] of a walk, and
/// stays there for the rest; what fits `budget` once the budget has passed
/// it answers. Over the budget, the walk pays for every moment over it, not
/// only for the peak ([`SPREAD`]), and evicts values held across those
/// moments ([`Walk::evict_over_budget`]). A walk lasts [`WALK_MOVES`] moves
/// per computation of its start, or until `deadline` if that comes first;
/// one that misses is followed by another with the next seed, from the
/// next start in turn (walk `w` of `seed` from `starts[(seed + w) % n]`,
/// so threads with consecutive seeds begin from different starts), until
/// one reaches `budget` (and, while [`MORE_WALKS`] of the time is not
/// spent, more: the cheapest reached wins) or the time is up. `None` (in
/// [`Annealed::best`]) where no walk reached `budget`; what one reaches is
/// a start for [`anneal`] at `budget`, and [`Annealed::start`] says from
/// which start. Starts that fit `budget` already are skipped.
///
/// Why: at the tightest budgets of the random DAGs every search that
/// starts at the budget fails (random-layered-n500 at 60%: the file's
/// order undecided, the node-order search's sequence 6.2× one pass, and
/// 8×10⁶ moves of annealing from it found nothing cheaper), while a walk
/// whose budget falls slowly repairs, at each moment, a sequence that
/// nearly fits (docs/scale.md, "A falling budget"). Whether a walk reaches
/// the budget is decided by its path, not by its length (n500 at 60%:
/// a third to a half of the walks of 6 to 8 million moves; one of 74
/// million missed), so long time limits go to restarts. Several starts,
/// because which one a walk reaches the budget from differs by graph
/// (random-layered-n250 at 60%: 0 of 9 walks of 20–25 s from one pass, 3
/// of 9 from the node-order search's sequence put in schedule form, 15%
/// over).
pub fn descend(
    g: &Graph,
    starts: &[&[NodeId]],
    budget: Bytes,
    deadline: Instant,
    seed: u64,
    stop: Option<&StopFlag>,
) -> Annealed {
    let Some(cap) = budget.get().checked_sub(g.fixed_memory.get()) else {
        return Annealed::default();
    };
    if g.has_groups() || g.is_empty() || cap == 0 {
        return Annealed::default();
    }
    let cap = cap as f64;
    // (index in `starts`, the start, its peak over the fixed memory)
    let over: Vec<(usize, &[NodeId], f64)> = starts
        .iter()
        .enumerate()
        .filter_map(|(k, s)| {
            let top = super::sequence::peak(g, s)?;
            let top = top.get().saturating_sub(g.fixed_memory.get()) as f64;
            (top > cap).then_some((k, *s, top))
        })
        .collect();
    let Some(&(_, _, first_top)) = over.first() else {
        return Annealed::default();
    };
    let stopped = || Instant::now() >= deadline || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let mut walk = Walk::new(g, first_top, Form::Sequences);
    // The penalty per byte is the final budget's throughout.
    walk.per_byte = OVER_BUDGET * walk.pass / cap;
    walk.spread = SPREAD;
    let mut best = (f64::INFINITY, Vec::new());
    let mut from = 0;
    let t0 = TEMPERATURES[1] * walk.pass;
    let (mut moves, mut walks) = (0u64, 0usize);
    let began = Instant::now();
    let more = deadline
        .saturating_duration_since(began)
        .mul_f64(MORE_WALKS);
    while !stopped() && (!best.0.is_finite() || began.elapsed() < more) {
        let secs = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let (k, start, top) = over[(seed as usize).wrapping_add(walks) % over.len()];
        walk.cap = top;
        walk.falling = Some(Falling {
            from: top,
            to: cap * (1.0 - BELOW),
            answer: cap,
        });
        let length = WALK_MOVES.saturating_mul(start.len() as u64).max(1);
        let before = best.0;
        let seed = seed.wrapping_mul(1 << 20).wrapping_add(walks as u64);
        moves += walk.round(
            start,
            t0,
            (secs, length),
            seed,
            &mut best,
            &stopped,
            &mut |_, _, _| {},
        );
        if best.0 < before {
            from = k;
        }
        walks += 1;
    }
    Annealed {
        best: best.0.is_finite().then_some((best.1, best.0)),
        moves,
        form: Form::Sequences,
        walks,
        start: from,
    }
}

/// Moves per computation of its start that one [`descend`] walk makes at
/// most (random-layered-n500 from one pass at 60%: walks of 40 s, 6.3 to
/// 8.0 million moves, reached the budget in 2 of 4 runs, and 6 of 11
/// walks of 30 s).
const WALK_MOVES: u64 = 12_000;

/// The share of [`descend`]'s time within which a walk that reached the
/// budget is followed by more, the cheapest sequence reached winning.
/// Measured once: random-layered-n500 at 60% with 600 s reached 311,134
/// in five walks against the first walk's 311,584, polished to 305,208
/// (11.6%) against 306,679 (12.1%) twice.
const MORE_WALKS: f64 = 0.4;

/// How far below the budget [`descend`]'s walk lets its budget fall, as a
/// share of the budget; a sequence answers once it fits the budget itself.
/// Why: a walk that ends at the budget ends mostly just over it
/// (random-layered-n500 from one pass at 60%, runs of 150 s: 1 of 6
/// reached it, in one walk of 22; n1000 in 120 s: 0 of 2), while one aimed
/// 3% below it reached it in 4 of 4 (at 5%: 2 of 3; n1000: 2 of 2), and
/// what it reached annealed further at the budget, having room there
/// (n500, 60 s: 299,756–301,270 against 307,827).
const BELOW: f64 = 0.03;

/// The share of a [`descend`] walk over which its budget falls (measured
/// on random-layered-n500 from one pass to 60% in 30 s: 0.8 reached it in
/// 4 runs of 6, 0.6 with twice the penalty per moment in 2 of 4).
const FALL: f64 = 0.8;

/// What [`descend`]'s walk pays for each byte over the budget at each
/// moment, as a fraction of what it pays for each byte of the peak over it.
/// Why: a sequence that nearly fits is over at many moments, and lowering
/// one of them does not lower the peak; without this a ladder of budgets
/// reached 60% on random-layered-n500 in 3 of 6 runs of 40 s, with it in
/// 3 of 4 (0.5: 1 of 4).
const SPREAD: f64 = 0.1;

/// The annealing's state shared by its rounds: the graph's costs, sizes
/// and inputs in flat arrays (the walk's inner loop reads them per
/// computation), and buffers reused by every pricing.
struct Walk<'a> {
    g: &'a Graph,
    cap: f64,
    pass: f64,
    per_byte: f64,
    costs: Vec<f64>,
    mems: Vec<f64>,
    /// The distinct inputs of node `v`: `inputs[offsets[v]..offsets[v + 1]]`.
    offsets: Vec<usize>,
    inputs: Vec<u32>,
    current: Vec<u32>,
    end: Vec<u32>,
    delta: Vec<f64>,
    form: Form,
    /// Per node: its place in the order of first computations (scratch of
    /// [`Walk::put_in_form`]).
    place: Vec<u32>,
    /// [`descend`]'s falling budget.
    falling: Option<Falling>,
    /// The penalty per byte over the budget at each moment, as a fraction
    /// of [`Walk::per_byte`] ([`SPREAD`] for [`descend`], else none).
    spread: f64,
}

/// [`descend`]'s budget: it falls from `from` to `to` over [`FALL`] of a
/// walk; a sequence answers where it fits `answer` (above `to`, by
/// [`BELOW`]) once the falling budget has passed it.
#[derive(Clone, Copy)]
struct Falling {
    from: f64,
    to: f64,
    answer: f64,
}

impl<'a> Walk<'a> {
    fn new(g: &'a Graph, cap: f64, form: Form) -> Walk<'a> {
        let pass = g.total_cost();
        let distinct = distinct_inputs(g);
        let mut offsets = vec![0];
        let mut inputs = Vec::new();
        for d in &distinct {
            inputs.extend(d.iter().map(|&u| u as u32));
            offsets.push(inputs.len());
        }
        Walk {
            g,
            cap,
            pass,
            per_byte: OVER_BUDGET * pass / cap,
            costs: g.ids().map(|v| g.cost(v)).collect(),
            mems: g.ids().map(|v| g.memory(v).get() as f64).collect(),
            offsets,
            inputs,
            current: vec![u32::MAX; g.len()],
            end: Vec::new(),
            delta: Vec::new(),
            form,
            place: vec![u32::MAX; g.len()],
            falling: None,
            spread: 0.0,
        }
    }

    /// `seq` in the walk's form, in place. For [`Form::Schedules`]: each
    /// stage's recomputations sorted by their first computations' places
    /// (a topological order, so every read still follows its value's
    /// computation), a value computed twice in a stage once, and what
    /// follows the last first computation dropped (nothing reads it).
    fn put_in_form(&mut self, seq: &mut Vec<NodeId>) {
        if self.form == Form::Sequences {
            return;
        }
        self.place.fill(u32::MAX);
        let (mut next, mut stage, mut kept) = (0u32, 0usize, 0usize);
        for k in 0..seq.len() {
            let v = seq[k];
            if self.place[v.idx()] != u32::MAX {
                seq[kept] = v;
                kept += 1;
                continue;
            }
            let place = &self.place;
            seq[stage..kept].sort_unstable_by_key(|x| place[x.idx()]);
            let mut w = stage;
            for r in stage..kept {
                if w == stage || seq[w - 1] != seq[r] {
                    seq[w] = seq[r];
                    w += 1;
                }
            }
            self.place[v.idx()] = next;
            next += 1;
            seq[w] = v;
            kept = w + 1;
            stage = kept;
        }
        seq.truncate(stage);
    }

    /// (energy, cost, fits) of `seq`; `None` when it reads a value before
    /// computing it. The same peak as [`super::sequence::peak`].
    fn energy(&mut self, seq: &[NodeId]) -> Option<(f64, f64, bool)> {
        let len = seq.len();
        self.current.fill(u32::MAX);
        self.end.clear();
        self.end.extend(0..len as u32);
        let mut cost = 0.0;
        for (k, &v) in seq.iter().enumerate() {
            let v = v.idx();
            cost += self.costs[v];
            for &d in &self.inputs[self.offsets[v]..self.offsets[v + 1]] {
                let q = self.current[d as usize];
                if q == u32::MAX {
                    return None;
                }
                self.end[q as usize] = k as u32;
            }
            self.current[v] = k as u32;
        }
        self.delta.clear();
        self.delta.resize(len + 1, 0.0);
        for (k, &v) in seq.iter().enumerate() {
            let m = self.mems[v.idx()];
            self.delta[k] += m;
            self.delta[self.end[k] as usize + 1] -= m;
        }
        let (mut live, mut peak, mut over) = (0.0f64, 0.0f64, 0.0f64);
        for d in &self.delta[..len] {
            live += d;
            peak = peak.max(live);
            over += (live - self.cap).max(0.0);
        }
        Some((
            cost + self.per_byte * ((peak - self.cap).max(0.0) + self.spread * over),
            cost,
            peak <= self.falling.map_or(self.cap, |f| f.answer),
        ))
    }

    /// One round from `from`, cooling from `t0` as (1 − p)², where p is the
    /// round's progress: the larger of the share of its seconds and the
    /// share of its moves (`(seconds, moves)`) spent; every cheaper fitting
    /// sequence replaces `best`. Returns the moves tried.
    #[allow(clippy::too_many_arguments)]
    fn round(
        &mut self,
        from: &[NodeId],
        t0: f64,
        (seconds, length): (f64, u64),
        seed: u64,
        best: &mut (f64, Vec<NodeId>),
        stopped: &dyn Fn() -> bool,
        report: &mut dyn FnMut(&[NodeId], f64, Form),
    ) -> u64 {
        let n = self.g.len();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut seq = from.to_vec();
        self.put_in_form(&mut seq);
        let mut count = vec![0usize; n];
        for v in &seq {
            count[v.idx()] += 1;
        }
        let Some((mut e, mut cost, _)) = self.energy(&seq) else {
            return 0;
        };
        let began = Instant::now();
        let mut tries = 0u64;
        let mut cand = Vec::with_capacity(seq.len() + 2);
        let (mut unreported, mut reported) = (false, began);
        let progress = |tries: u64| {
            (began.elapsed().as_secs_f64() / seconds).max(tries as f64 / length as f64)
        };
        loop {
            // The clock is read every 64 moves: a move takes microseconds.
            if tries.is_multiple_of(64) {
                // A new best is reported at the end of the round and at
                // most once a second before it: an interrupt answers
                // with what was reported.
                let over = stopped() || progress(tries) >= 1.0;
                if unreported && (over || reported.elapsed() >= REPORT_EVERY) {
                    report(&best.1, best.0, self.form);
                    (unreported, reported) = (false, Instant::now());
                }
                if over {
                    return tries;
                }
                if let Some(f) = self.falling {
                    let frac = (progress(tries) / FALL).min(1.0);
                    let cap = f.from - (f.from - f.to) * frac;
                    if cap != self.cap {
                        self.cap = cap;
                        e = self.energy(&seq).map_or(e, |x| x.0);
                    }
                }
            }
            tries += 1;
            let frac = progress(tries).min(1.0);
            let temp = t0 * (1.0 - frac).powi(2) + 1e-12 * self.pass.max(1.0);
            cand.clear();
            cand.extend_from_slice(&seq);
            let over = e > cost + 1e-9 * self.pass.abs();
            let Some(change) = self.propose(&mut cand, &count, over, &mut rng) else {
                continue;
            };
            // Metropolis: accepted iff the energy is at most `limit`. The
            // energy is at least the cost, known from the move alone, so a
            // move whose cost is over the limit is rejected unpriced (most
            // insertions, once the walk has cooled).
            let limit = e - temp * rng.random::<f64>().ln();
            let moved: f64 = change
                .iter()
                .map(|&(v, up)| if up { self.costs[v] } else { -self.costs[v] })
                .sum();
            // (In schedule form the move can only lose a computation that
            // duplicates one in its stage, which undoes an insertion.)
            if cost + moved > limit + 1e-9 * self.pass.abs() {
                continue;
            }
            self.put_in_form(&mut cand);
            let Some((ce, cc, fits)) = self.energy(&cand) else {
                continue;
            };
            if ce <= limit {
                std::mem::swap(&mut seq, &mut cand);
                cost = cc;
                if self.form == Form::Schedules {
                    count.fill(0);
                    seq.iter().for_each(|v| count[v.idx()] += 1);
                } else {
                    for (v, up) in change {
                        if up {
                            count[v] += 1;
                        } else {
                            count[v] -= 1;
                        }
                    }
                }
                e = ce;
                let answers = self.falling.is_none_or(|f| self.cap <= f.answer);
                if fits && answers && cc < best.0 {
                    *best = (cc, seq.clone());
                    unreported = true;
                }
            }
        }
    }

    /// Changes `cand` by one random move; the counts it changes (node,
    /// up), or `None` where the move drawn does not apply.
    fn propose(
        &mut self,
        cand: &mut Vec<NodeId>,
        count: &[usize],
        over: bool,
        rng: &mut ChaCha8Rng,
    ) -> Option<Vec<(usize, bool)>> {
        // The closure and eviction moves are the falling budget's: in the
        // polishing walks at the budget they showed no gain
        // (random-layered-n250 at 60%: 140,821–162,465 with or without
        // them, run to run), so those walks keep the moves they were
        // measured with.
        let falling = self.falling.is_some();
        if falling && over && rng.random_range(0..4) == 0 {
            return self.evict_over_budget(cand, rng);
        }
        let n = self.g.len();
        let len = cand.len();
        let insert = |cand: &mut Vec<NodeId>, rng: &mut ChaCha8Rng| {
            let v = NodeId(rng.random_range(0..n) as u32);
            let p = self.before_a_read(cand, v, rng)?;
            cand.insert(p, v);
            Some((v.idx(), true))
        };
        // A node's only computation stays.
        let drop = |cand: &mut Vec<NodeId>, rng: &mut ChaCha8Rng| {
            let k = rng.random_range(0..cand.len());
            (count[cand[k].idx()] >= 2).then(|| (cand.remove(k).idx(), false))
        };
        match rng.random_range(0..if falling { 5 } else { 4 }) {
            4 => self.insert_closure(cand, rng),
            0 => insert(cand, rng).map(|c| vec![c]),
            1 => drop(cand, rng).map(|c| vec![c]),
            2 => {
                let k = rng.random_range(0..len);
                let v = cand.remove(k);
                let p = (k as i64 + rng.random_range(-8..=8)).clamp(0, len as i64 - 1);
                cand.insert(p as usize, v);
                Some(Vec::new())
            }
            _ => {
                let d = drop(cand, rng)?;
                let i = insert(cand, rng)?;
                Some(vec![d, i])
            }
        }
    }

    /// A recomputation of a random value just before one of its reads,
    /// with its inputs' recomputations before it wherever an input's
    /// current interval ends before that place (reading the old one would
    /// hold it longer), recursively.
    ///
    /// Why: a single insertion holds its inputs until the new read, so at
    /// a tight budget it rarely lowers the peak; recomputing a value far
    /// from where its inputs were made needs its ancestors made again too
    /// (random-layered-n500 below 64%: 8×10⁶ single moves never got a
    /// sequence 0.5% over the budget back under it).
    fn insert_closure(
        &self,
        cand: &mut Vec<NodeId>,
        rng: &mut ChaCha8Rng,
    ) -> Option<Vec<(usize, bool)>> {
        let v = NodeId(rng.random_range(0..self.g.len()) as u32);
        let p = self.before_a_read(cand, v, rng)?;
        self.insert_closure_at(cand, v.idx(), p)
    }

    /// A value held across a random moment over the budget, and not read
    /// there, recomputed (with [`Walk::insert_closure`]'s inputs) just
    /// before its first read after it: it is then not held at that moment.
    ///
    /// Why: a walk over the budget must lower every moment over it, and
    /// random insertions rarely touch the moments that matter
    /// (random-layered-n500 from one pass: a ladder of budgets reached 60%
    /// in none of 5 runs of 48 s without this move, in 3 of 5 with it).
    fn evict_over_budget(
        &mut self,
        cand: &mut Vec<NodeId>,
        rng: &mut ChaCha8Rng,
    ) -> Option<Vec<(usize, bool)>> {
        self.energy(cand)?;
        // A moment over the budget, drawn uniformly (reservoir sampling).
        let (mut live, mut seen, mut at) = (0.0, 0u32, None);
        for k in 0..cand.len() {
            live += self.delta[k];
            if live > self.cap {
                seen += 1;
                if rng.random_range(0..seen) == 0 {
                    at = Some(k);
                }
            }
        }
        let p = at?;
        let here = self.g.deps(cand[p]);
        let (mut seen, mut held) = (0u32, None);
        for (k, v) in cand[..p].iter().enumerate() {
            if self.end[k] as usize > p && !here.contains(v) {
                seen += 1;
                if rng.random_range(0..seen) == 0 {
                    held = Some(k);
                }
            }
        }
        let k = held?;
        let v = cand[k];
        let users = self.g.users(v);
        let r = (p + 1..=self.end[k] as usize).find(|&q| users.contains(&cand[q]))?;
        self.insert_closure_at(cand, v.idx(), r)
    }

    /// `v` recomputed just before place `p`, with every input not held
    /// across `p` recomputed before it, recursively (at most
    /// [`CLOSURE_MAX`] computations), in node order.
    fn insert_closure_at(
        &self,
        cand: &mut Vec<NodeId>,
        v: usize,
        p: usize,
    ) -> Option<Vec<(usize, bool)>> {
        let mut chosen = vec![v];
        let mut k = 0;
        while k < chosen.len() {
            let w = chosen[k];
            k += 1;
            for &u in &self.inputs[self.offsets[w]..self.offsets[w + 1]] {
                let u = u as usize;
                if chosen.contains(&u) || self.held_across(cand, u, p) {
                    continue;
                }
                if chosen.len() >= CLOSURE_MAX {
                    return None;
                }
                chosen.push(u);
            }
        }
        // In node order, which is topological, every input before its reader.
        chosen.sort_unstable();
        let change = chosen.iter().map(|&u| (u, true)).collect();
        cand.splice(p..p, chosen.into_iter().map(|u| NodeId(u as u32)));
        Some(change)
    }

    /// Whether `u`'s computation in effect at `p` has a read at or after
    /// `p` (before its next computation): reading it at `p` holds it no
    /// longer. A value not computed before `p` counts as held (the move is
    /// then rejected by the pricing, which finds the read before it).
    fn held_across(&self, seq: &[NodeId], u: usize, p: usize) -> bool {
        if !seq[..p].iter().any(|x| x.idx() == u) {
            return true;
        }
        let users = self.g.users(NodeId(u as u32));
        for x in &seq[p..] {
            if x.idx() == u {
                return false;
            }
            if users.contains(x) {
                return true;
            }
        }
        false
    }

    /// A position just before a read of `v` that follows its first
    /// computation: the only places where a recomputation can shorten
    /// what is held.
    fn before_a_read(&self, seq: &[NodeId], v: NodeId, rng: &mut ChaCha8Rng) -> Option<usize> {
        let first = seq.iter().position(|&x| x == v)?;
        let users = self.g.users(v);
        // Counted, then walked to the one drawn: no list on the hot path.
        let reads = || (first + 1..seq.len()).filter(|&k| users.contains(&seq[k]));
        let count = reads().count();
        if count == 0 {
            return None;
        }
        let r = reads().nth(rng.random_range(0..count))?;
        Some(r.saturating_sub(rng.random_range(0..3usize)).max(first + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::sequence;
    use crate::zoo::synthetic::{self, Dist, RandomDag};
    use std::time::Duration;

    /// A small random DAG and a budget `1/part` of the way from its
    /// smallest to its checkpoint-all peak.
    fn tight(nodes: usize, seed: u64, forward: bool, part: u64) -> (Graph, Bytes) {
        let g = synthetic::random_layered(&RandomDag {
            nodes,
            seed,
            width: 4,
            cost: Dist::Uniform(1, 9),
            memory: Dist::Uniform(1, 20),
            forward,
            ..RandomDag::default()
        });
        let lo = crate::graph::analysis::min_feasible_budget(&g).get();
        let hi = crate::graph::analysis::checkpoint_all_peak(&g).get();
        (g, Bytes(lo + (hi - lo) / part))
    }

    /// The node-order search's first sequence that fits `budget`.
    fn a_sequence_that_fits(g: &Graph, budget: Bytes) -> Vec<NodeId> {
        let far = Instant::now() + Duration::from_secs(20);
        match crate::schedule::free_order::sequence_by(g, budget, far, 0) {
            crate::schedule::free_order::Sequences::Found(seq) => seq,
            _ => panic!("{}: no sequence fits", g.name),
        }
    }

    /// `seq` computes every node, and its plan fits `budget` in the
    /// simulator, which costs it at `cost`.
    fn a_plan_that_fits(g: &Graph, seq: &[NodeId], cost: f64, budget: Bytes) {
        let mut seen = vec![false; g.len()];
        seq.iter().for_each(|v| seen[v.idx()] = true);
        assert!(
            seen.iter().all(|&s| s),
            "{}: a node is never computed",
            g.name
        );
        let plan = sequence::plan_of(g, seq).unwrap();
        let sim = crate::schedule::simulate(g, &plan).unwrap();
        assert!(sim.peak <= budget, "{}: {} over {budget}", g.name, sim.peak);
        assert_eq!(sim.cost, cost, "{}", g.name);
    }

    /// From one pass in node order, far over a budget halfway down to the
    /// smallest, the falling budget reaches it: every sequence it returns computes every node,
    /// fits in the simulator, and costs what it reports. A start within the
    /// budget is not its business.
    #[test]
    fn a_falling_budget_reaches_budgets_one_pass_is_far_over() {
        let (mut reached, mut tried) = (0, 0);
        for seed in 0..4u64 {
            let (g, budget) = tight(40 + 8 * seed as usize, seed, true, 2);
            let one_pass: Vec<NodeId> = g.ids().collect();
            let top = sequence::peak(&g, &one_pass).unwrap();
            assert!(top > budget, "{}: one pass fits", g.name);
            let far = Instant::now() + Duration::from_secs(5);
            assert!(descend(&g, &[&one_pass], top, far, seed, None)
                .best
                .is_none());
            // Only where a sequence is known to fit.
            let crate::schedule::free_order::Sequences::Found(_) =
                crate::schedule::free_order::sequence_by(&g, budget, far, 0)
            else {
                continue;
            };
            tried += 1;
            // 0.3 s reached all four here; the margin is for loaded machines.
            let deadline = Instant::now() + Duration::from_secs(3);
            let found = descend(&g, &[&one_pass], budget, deadline, seed, None);
            assert!(found.moves > 0, "{}", g.name);
            // Each walk stops at its moves (checked every 64).
            let walk = WALK_MOVES * g.len() as u64 + 64;
            assert!(found.moves <= found.walks as u64 * walk, "{}", g.name);
            let Some((seq, cost)) = found.best else {
                continue;
            };
            a_plan_that_fits(&g, &seq, cost, budget);
            assert!(cost >= g.total_cost(), "{}", g.name);
            reached += 1;
        }
        assert!(tried == 4 && reached >= 3, "{reached} of {tried}");
    }

    /// With several starts, those that fit already are skipped, and the
    /// walks take the others in turn from the seed's: where only one start
    /// is over the budget, every walk is from it and the answer says so;
    /// where none is, nothing walks.
    #[test]
    fn a_falling_budget_walks_from_the_starts_over_the_budget() {
        let (g, budget) = tight(40, 1, true, 2);
        let far = Instant::now() + Duration::from_secs(5);
        let fits = a_sequence_that_fits(&g, budget);
        let one_pass: Vec<NodeId> = g.ids().collect();
        let none = descend(&g, &[&fits, &fits], budget, far, 0, None);
        assert!(none.best.is_none() && none.moves == 0 && none.walks == 0);
        let mut reached = 0;
        for seed in 0..3u64 {
            let deadline = Instant::now() + Duration::from_secs(3);
            let found = descend(&g, &[&fits, &one_pass], budget, deadline, seed, None);
            assert!(found.moves > 0, "{}", g.name);
            if let Some((seq, cost)) = &found.best {
                a_plan_that_fits(&g, seq, *cost, budget);
                assert_eq!(found.start, 1, "{}: seed {seed}", g.name);
                reached += 1;
            }
        }
        assert!(reached >= 2, "{reached} of 3");
    }

    /// A cap on moves ends the annealing long before its deadline, with
    /// each round stopped at its share of the moves.
    #[test]
    fn annealing_stops_at_its_moves() {
        let (g, budget) = tight(48, 3, true, 8);
        let start = a_sequence_that_fits(&g, budget);
        let far = Instant::now() + Duration::from_secs(20);
        let began = Instant::now();
        let max = ROUND_MOVES / 2;
        let found = anneal(
            &g,
            &start,
            budget,
            Form::Sequences,
            (far, max),
            0,
            None,
            &mut |_, _, _| {},
        );
        assert!(
            found.moves >= max && found.moves <= max + 64,
            "{}",
            found.moves
        );
        assert_eq!(found.walks, 1);
        assert!(Instant::now() < far, "{:?}", began.elapsed());
    }

    /// From the node-order search's sequences (which fit but recompute
    /// freely), the annealing finds cheaper ones at tight budgets; each
    /// computes every node, its plan fits in the simulator, and the
    /// simulator's cost is the one reported.
    #[test]
    fn annealed_sequences_are_cheaper_plans_that_fit() {
        let mut cheaper = 0;
        for seed in 0..6u64 {
            let (g, budget) = tight(40 + 4 * seed as usize, seed, seed % 2 == 0, 8);
            let far = Instant::now() + Duration::from_secs(20);
            let crate::schedule::free_order::Sequences::Found(start) =
                crate::schedule::free_order::sequence_by(&g, budget, far, 0)
            else {
                continue;
            };
            let before = sequence::cost(&g, &start);
            let deadline = Instant::now() + Duration::from_secs(2);
            let found = anneal(
                &g,
                &start,
                budget,
                Form::Sequences,
                (deadline, u64::MAX),
                seed,
                None,
                &mut |_, _, _| {},
            );
            assert!(found.moves > 0, "{}", g.name);
            let Some((seq, cost)) = found.best else {
                continue;
            };
            assert!(cost < before, "{}: {cost} against {before}", g.name);
            a_plan_that_fits(&g, &seq, cost, budget);
            cheaper += 1;
        }
        assert!(cheaper >= 4, "{cheaper}");
    }

    /// In schedule form, what the annealing finds is a schedule in its
    /// order of first computations: as cheap, and within the budget when
    /// the plan generator runs it (its stages in that order).
    #[test]
    fn sequences_annealed_in_schedule_form_are_schedules_that_fit() {
        let mut found = 0;
        for seed in 0..12u64 {
            let (g, budget) = tight(36 + 2 * seed as usize, 100 + seed, seed % 2 == 1, 6);
            let far = Instant::now() + Duration::from_secs(20);
            let crate::schedule::feasible::Feasibility::Fits(sch) =
                crate::schedule::feasible::decide(&g, budget, far)
            else {
                continue;
            };
            let plan = crate::schedule::generate_plan(&g, &sch).unwrap();
            let start: Vec<NodeId> = plan.computed().collect();
            let deadline = Instant::now() + Duration::from_millis(1500);
            let annealed = anneal(
                &g,
                &start,
                budget,
                Form::Schedules,
                (deadline, u64::MAX),
                seed,
                None,
                &mut |_, _, _| {},
            );
            assert_eq!(annealed.form, Form::Schedules, "{}", g.name);
            let Some((seq, cost)) = annealed.best else {
                continue;
            };
            let order = crate::schedule::free_order::order_of(&seq, g.len());
            let gp = g.reordered(&order).unwrap();
            let sch = sequence::schedule_in(&g, &gp, &seq, &order).unwrap();
            sch.validate(&gp).unwrap();
            let sim = crate::strategies::portfolio::evaluate(&gp, &sch).unwrap();
            assert!(
                sim.cost <= cost + 1e-9,
                "{}: {} against {cost}",
                g.name,
                sim.cost
            );
            assert!(sim.peak <= budget, "{}: {} over {budget}", g.name, sim.peak);
            found += 1;
        }
        assert!(found >= 5, "{found}");
    }

    /// The walk's peak is the sequence module's, on sequences that fit and
    /// sequences that do not.
    #[test]
    fn the_walks_peak_is_the_sequences_peak() {
        let g = synthetic::random_layered(&RandomDag {
            nodes: 40,
            seed: 3,
            width: 4,
            memory: Dist::Uniform(1, 20),
            ..RandomDag::default()
        });
        let order: Vec<NodeId> = g.ids().collect();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut walk = Walk::new(&g, 1e9, Form::Sequences);
        for _ in 0..200 {
            let mut seq = order.clone();
            for _ in 0..10 {
                let v = NodeId(rng.random_range(0..g.len()) as u32);
                if let Some(p) = walk.before_a_read(&seq, v, &mut rng) {
                    seq.insert(p, v);
                }
            }
            let (_, cost, _) = walk.energy(&seq).unwrap();
            assert_eq!(cost, sequence::cost(&g, &seq));
            let peak = sequence::peak(&g, &seq).unwrap().get() as f64;
            walk.cap = peak;
            assert!(walk.energy(&seq).unwrap().2);
            walk.cap = peak - 1.0;
            assert!(!walk.energy(&seq).unwrap().2);
        }
    }
}
