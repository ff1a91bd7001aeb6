//! A recompute-only schedule's memory, stage by stage, without its plan.
//!
//! Why: remat-fast prices every candidate move by the peak of the plan the
//! move leads to, and building that plan and replaying it in the simulator
//! was three quarters of its time on random-layered-n1000 (docs/scale.md).
//! For a schedule without transfers and without multi-output kernels, a
//! stage's memory depends only on what it computes (R[t]), what it is
//! handed (S[t]) and what it hands on (S[t+1]): the plan generator frees a
//! value after its last read in the stage unless the next stage keeps it,
//! and a handed value the stage never reads at once. So each stage can be
//! walked on its own, with no statements and no registers, and a move
//! re-walks only the stages it touches ([`Profile::stage`]).
//!
//! The figures are those of the plan: `the_profile_is_the_plan_replayed`
//! holds them to [`super::generate_plan`] and [`super::simulate`] on random
//! schedules. Nothing reported comes from here: the pipeline still
//! simulates every plan a strategy answers with.

use super::{KeepEvents, Schedule};
use crate::graph::{Graph, NodeId};
use fixedbitset::FixedBitSet;

/// Per stage: the bytes held when it starts, its highest allocation, the
/// bytes right after its frontier is allocated, and its compute cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub kept: Vec<u64>,
    pub inner: Vec<u64>,
    pub frontier: Vec<u64>,
    pub cost: Vec<f64>,
    /// The windows ([`Profile::window`]), for finding the stages over a
    /// level without visiting the others.
    tree: MaxTree,
}

/// A maximum tree over a row of values: the positions in a range at or
/// above a level in O((hits + 1) log n).
#[derive(Debug, Clone, PartialEq, Default)]
struct MaxTree {
    size: usize,
    node: Vec<u64>,
}

impl MaxTree {
    fn new(vals: &[u64]) -> MaxTree {
        let size = vals.len().next_power_of_two().max(1);
        let mut node = vec![0; 2 * size];
        node[size..size + vals.len()].copy_from_slice(vals);
        for i in (1..size).rev() {
            node[i] = node[2 * i].max(node[2 * i + 1]);
        }
        MaxTree { size, node }
    }

    /// Calls `f` with each position in `a..b` whose value is at least
    /// `level`, ascending.
    fn at_least(&self, a: usize, b: usize, level: u64, f: &mut dyn FnMut(usize)) {
        self.visit(1, 0, self.size, a, b, level, f);
    }

    #[allow(clippy::too_many_arguments)]
    fn visit(
        &self,
        i: usize,
        lo: usize,
        hi: usize,
        a: usize,
        b: usize,
        level: u64,
        f: &mut dyn FnMut(usize),
    ) {
        if hi <= a || b <= lo || self.node[i] < level {
            return;
        }
        if hi - lo == 1 {
            f(lo);
            return;
        }
        let mid = (lo + hi) / 2;
        self.visit(2 * i, lo, mid, a, b, level, f);
        self.visit(2 * i + 1, mid, hi, a, b, level, f);
    }
}

/// One stage's figures (see [`Profile`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageMemory {
    pub inner: u64,
    pub frontier: u64,
    pub cost: f64,
}

/// Scratch for [`Walker::stage`]: each value's last read in the stage
/// being walked, stamped so that it is never cleared; and for a stage's
/// computations when [`Profile::price`] closes them again.
pub struct Walker {
    stamp: Vec<u32>,
    last: Vec<u32>,
    now: u32,
    in_row: FixedBitSet,
    row: Vec<u32>,
    stack: Vec<usize>,
}

/// A change of S: value `v` kept (`keep`) or not over stages `from..=to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub v: usize,
    pub from: usize,
    pub to: usize,
    pub keep: bool,
}

/// A last read that has already freed its value.
const FREED: u32 = u32::MAX;

impl Walker {
    pub fn new(n: usize) -> Walker {
        Walker {
            stamp: vec![0; n],
            last: vec![0; n],
            now: 0,
            in_row: FixedBitSet::with_capacity(n),
            row: Vec::new(),
            stack: Vec::new(),
        }
    }

    fn read(&self, v: usize) -> Option<u32> {
        (self.stamp[v] == self.now).then_some(self.last[v])
    }

    /// Walks stage `t`: `order` is R[t] (ascending), `kept` the bytes of
    /// S[t], `ends` the values of S[t] that S[t+1] does not hold, and
    /// `next(i)` is S[t+1,i]. Mirrors the plan generator: handed values
    /// never read here and not handed on are freed first; each
    /// computation allocates its output (the moment a peak is counted),
    /// then frees the inputs it read last and do not go on, and its own
    /// output if nothing reads it and it does not go on.
    pub fn stage(
        &mut self,
        g: &Graph,
        t: usize,
        order: &[u32],
        kept: u64,
        ends: impl Iterator<Item = usize>,
        next: impl Fn(usize) -> bool,
    ) -> StageMemory {
        self.now = self.now.wrapping_add(1);
        if self.now == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.now = 1;
        }
        for (p, &k) in order.iter().enumerate() {
            for &d in g.deps(NodeId::from(k as usize)) {
                self.stamp[d.idx()] = self.now;
                self.last[d.idx()] = p as u32;
            }
        }
        let mem = |v: usize| g.memory(NodeId::from(v)).get();
        let mut bytes = kept;
        for i in ends {
            if self.read(i).is_none() {
                bytes -= mem(i);
            }
        }
        let (mut inner, mut frontier, mut cost) = (0u64, 0u64, 0.0f64);
        for (p, &k) in order.iter().enumerate() {
            let k = k as usize;
            bytes += mem(k);
            inner = inner.max(bytes);
            if k == t {
                frontier = bytes;
            }
            cost += g.cost(NodeId::from(k));
            for &d in g.deps(NodeId::from(k)) {
                let d = d.idx();
                if self.read(d) == Some(p as u32) && !next(d) {
                    bytes -= mem(d);
                    self.last[d] = FREED;
                }
            }
            if self.read(k).is_none() && !next(k) {
                bytes -= mem(k);
            }
        }
        StageMemory {
            inner,
            frontier,
            cost,
        }
    }
}

impl Profile {
    /// Whether [`Profile::of`] describes `sch`'s plan: no transfers and no
    /// multi-output kernels (whose members the plan generator holds for
    /// each other and whose stages the frontier rule merges).
    pub fn applies(g: &Graph, sch: &Schedule) -> bool {
        !g.has_groups() && !sch.has_transfers()
    }

    /// Every stage of `sch`, which must be complete (R closed under S, as
    /// [`super::solve_r`] makes it) and satisfy [`Profile::applies`];
    /// `None` when it keeps a value from before it is made (the one rule
    /// [`super::solve_r`] leaves to its caller).
    pub fn of(g: &Graph, sch: &Schedule) -> Option<Profile> {
        let n = sch.stages();
        let mut sweep = sch.kept_sweep();
        let mem = |v: u32| g.memory(NodeId::from(v as usize)).get();
        let mut walker = Walker::new(n);
        let mut p = Profile {
            kept: vec![0; n],
            inner: vec![0; n],
            frontier: vec![0; n],
            cost: vec![0.0; n],
            tree: MaxTree::default(),
        };
        if n == 0 {
            return Some(p);
        }
        sweep.enter(0);
        let mut kept: u64 = sweep.events().starts(0).iter().map(|&i| mem(i)).sum();
        for t in 0..n {
            if sweep.events().starts(t).iter().any(|&i| i as usize >= t) {
                return None;
            }
            if t > 0 {
                let ev = sweep.events();
                let gone: u64 = ev.ends(t - 1).iter().map(|&i| mem(i)).sum();
                let come: u64 = ev.starts(t).iter().map(|&i| mem(i)).sum();
                kept = kept - gone + come;
            }
            p.kept[t] = kept;
            // S[t+1] is what the sweep holds once it has entered t+1; the
            // ends of stage t are read from the events before that.
            let ends: Vec<usize> = sweep.events().ends(t).iter().map(|&i| i as usize).collect();
            if t + 1 < n {
                sweep.enter(t + 1);
            }
            let last = t + 1 == n;
            let m = walker.stage(g, t, sch.r_row(t), kept, ends.into_iter(), |i| {
                !last && sweep.contains(i)
            });
            p.inner[t] = m.inner;
            p.frontier[t] = m.frontier;
            p.cost[t] = m.cost;
        }
        let windows: Vec<u64> = (0..n).map(|t| p.window(t)).collect();
        p.tree = MaxTree::new(&windows);
        Some(p)
    }

    /// Stage `t`'s peak as the local search counts it: from the frontier
    /// of stage `t-1` (the bytes held when it was computed) to its own.
    pub fn window(&self, t: usize) -> u64 {
        let before = if t == 0 { 0 } else { self.frontier[t - 1] };
        before.max(self.inner[t])
    }

    /// The highest allocation of the plan, in activation bytes.
    pub fn peak(&self) -> u64 {
        self.inner.iter().copied().max().unwrap_or(0)
    }

    pub fn total_cost(&self) -> f64 {
        self.cost.iter().sum()
    }

    /// What `changes` (applied in order) do to the plan of `sch`, which
    /// this profiles, re-walking only the stages they touch: the change of
    /// its cost, and of Σ over stages of the bytes by which the stage's
    /// [`Profile::window`] exceeds `cap`. `ev` is `sch`'s keep events and
    /// `at[k]` the stages that compute node `k`, ascending. `None` when a
    /// value has changes both ways (the caller then evaluates the schedule
    /// whole).
    ///
    /// Why it is exact: R[t] (the least one, [`super::solve_r`]) and the
    /// stage's memory depend only on S[t] and S[t+1]. A stage inside a
    /// changed run of a value that neither computes nor reads it keeps the
    /// same R and holds that value from its start to its end, so all its
    /// figures move by the value's bytes; every other stage the changes
    /// reach is closed and walked again.
    #[allow(clippy::too_many_arguments)]
    pub fn price(
        &self,
        g: &Graph,
        sch: &Schedule,
        ev: &KeepEvents,
        at: &[Vec<u32>],
        changes: &[Change],
        cap: u64,
        w: &mut Walker,
    ) -> Option<(f64, i64)> {
        let n = sch.stages();
        // Per changed value, the runs where S differs from `sch` after all
        // changes: (value, first, last, kept now).
        let mut runs: Vec<(usize, usize, usize, bool)> = Vec::new();
        let mut values: Vec<usize> = changes.iter().map(|c| c.v).collect();
        values.sort_unstable();
        values.dedup();
        for &v in &values {
            let mine = || changes.iter().filter(move |c| c.v == v);
            let keep = mine().next()?.keep;
            if mine().any(|c| c.keep != keep) {
                return None;
            }
            let mut spans: Vec<(usize, usize)> = mine().map(|c| (c.from, c.to)).collect();
            spans.sort_unstable();
            let mut merged: Vec<(usize, usize)> = Vec::new();
            for (a, b) in spans {
                match merged.last_mut() {
                    Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            for (a, b) in merged {
                // Where S[., v] is not already `keep` within a..=b.
                let mut t = a;
                for &(x, y) in sch.keep_intervals(v) {
                    let (x, y) = (x as usize, y as usize);
                    if y < t {
                        continue;
                    }
                    if x > b {
                        break;
                    }
                    if keep && x > t {
                        runs.push((v, t, x - 1, true));
                    }
                    if !keep {
                        runs.push((v, t.max(x), y.min(b), false));
                    }
                    t = y + 1;
                    if t > b {
                        break;
                    }
                }
                if keep && t <= b {
                    runs.push((v, t, b, true));
                }
            }
        }
        if runs.is_empty() {
            return Some((0.0, 0));
        }
        // Kept from before it is made: no plan (see `Profile::of`).
        if runs.iter().any(|&(v, a, _, keep)| keep && a <= v) {
            return None;
        }
        let s_new = |t: usize, i: usize| -> bool {
            if t >= n {
                return false;
            }
            for &(v, a, b, keep) in &runs {
                if v == i && a <= t && t <= b {
                    return keep;
                }
            }
            sch.s(t, i)
        };
        let mem = |v: usize| g.memory(NodeId::from(v)).get() as i64;
        // The change of the bytes handed to each stage, piecewise constant:
        // (first stage, change from there on), ascending.
        let mut steps: Vec<(usize, i64)> = Vec::with_capacity(2 * runs.len());
        for &(v, a, b, keep) in &runs {
            let m = if keep { mem(v) } else { -mem(v) };
            steps.push((a, m));
            steps.push((b + 1, -m));
        }
        steps.sort_unstable();
        let mut segs: Vec<(usize, i64)> = Vec::with_capacity(steps.len());
        for (t, m) in steps {
            let level = segs.last().map_or(0, |s| s.1) + m;
            match segs.last_mut() {
                Some(last) if last.0 == t => last.1 = level,
                _ => segs.push((t, level)),
            }
        }
        let dk = |t: usize| {
            let i = segs.partition_point(|s| s.0 <= t);
            if i == 0 {
                0
            } else {
                segs[i - 1].1
            }
        };
        // The stages walked again: those whose S[t+1] or S[t] alone changes
        // (a run's ends), and those of a run that compute or read its value.
        let mut walked: Vec<usize> = Vec::new();
        for &(v, a, b, _) in &runs {
            if a > 0 {
                walked.push(a - 1);
            }
            walked.push(b);
            let users = g.users(NodeId::from(v)).iter().map(|u| u.idx());
            for k in users.chain(std::iter::once(v)) {
                let st = &at[k];
                let lo = st.partition_point(|&x| (x as usize) < a);
                walked.extend(st[lo..].iter().map(|&x| x as usize).take_while(|&x| x <= b));
            }
        }
        walked.sort_unstable();
        walked.dedup();
        let changed = |i: usize| runs.iter().any(|r| r.0 == i);
        let mut new: Vec<StageMemory> = Vec::with_capacity(walked.len());
        let mut d_cost = 0.0;
        for &t in &walked {
            let kept = (self.kept[t] as i64 + dk(t)) as u64;
            // S[t+1] \ S[t], then R[t]: the frontier, what stage t+1 is
            // handed that t was not, and what they need that S[t] lacks.
            w.row.clear();
            w.row.push(t as u32);
            if t + 1 < n {
                let starts = ev.starts(t + 1).iter().map(|&i| i as usize);
                w.row
                    .extend(starts.filter(|&i| !changed(i)).map(|i| i as u32));
            }
            for &(v, ..) in &runs {
                if s_new(t + 1, v) && !s_new(t, v) {
                    w.row.push(v as u32);
                }
            }
            // The frontier is handed on from the stage that makes it, so
            // it is often among the starts too.
            w.row.sort_unstable();
            w.row.dedup();
            for &k in &w.row {
                w.in_row.insert(k as usize);
                w.stack.push(k as usize);
            }
            while let Some(k) = w.stack.pop() {
                for &u in g.deps(NodeId::from(k)) {
                    let u = u.idx();
                    if !w.in_row.contains(u) && !s_new(t, u) {
                        w.in_row.insert(u);
                        w.row.push(u as u32);
                        w.stack.push(u);
                    }
                }
            }
            let mut row = std::mem::take(&mut w.row);
            row.sort_unstable();
            for &k in &row {
                w.in_row.set(k as usize, false);
            }
            let mut ends: Vec<usize> = ev
                .ends(t)
                .iter()
                .map(|&i| i as usize)
                .filter(|&i| !changed(i))
                .collect();
            for &(v, ..) in &runs {
                if s_new(t, v) && !s_new(t + 1, v) && !ends.contains(&v) {
                    ends.push(v);
                }
            }
            let m = w.stage(g, t, &row, kept, ends.into_iter(), |i| s_new(t + 1, i));
            w.row = row;
            d_cost += m.cost - self.cost[t];
            new.push(m);
        }
        // The windows: a stage between two that are not walked, with the
        // same change before it, moves by that change; the others (walked,
        // after a walked one, or where the change steps) are computed.
        let shifted = |x: u64, t: usize| (x as i64 + dk(t)) as u64;
        let inner = |t: usize| match walked.binary_search(&t) {
            Ok(i) => new[i].inner,
            Err(_) => shifted(self.inner[t], t),
        };
        let frontier = |t: usize| match walked.binary_search(&t) {
            Ok(i) => new[i].frontier,
            Err(_) => shifted(self.frontier[t], t),
        };
        let over = |x: u64| x.saturating_sub(cap) as i64;
        let mut special: Vec<usize> = walked
            .iter()
            .flat_map(|&t| [t, t + 1])
            .chain(segs.iter().map(|s| s.0))
            .filter(|&t| t < n)
            .collect();
        special.sort_unstable();
        special.dedup();
        let mut d_excess = 0i64;
        for &t in &special {
            let before = if t == 0 { 0 } else { frontier(t - 1) };
            d_excess += over(before.max(inner(t))) - over(self.window(t));
        }
        // The stages in between, segment by segment: only those over `cap`
        // before or after the change contribute.
        for (i, &(s0, level)) in segs.iter().enumerate() {
            if level == 0 {
                continue;
            }
            let s1 = segs.get(i + 1).map_or(n, |s| s.0).min(n);
            // A stage contributes when over `cap` before or after.
            let floor = (cap as i64 + 1 - level.max(0)).max(0) as u64;
            let mut x = s0;
            let lo = special.partition_point(|&t| t < s0);
            for &sp in special[lo..].iter().take_while(|&&t| t < s1).chain([&s1]) {
                if x < sp {
                    self.tree.at_least(x, sp, floor, &mut |t| {
                        let w0 = self.window(t);
                        d_excess += over((w0 as i64 + level) as u64) - over(w0);
                    });
                }
                x = sp + 1;
            }
        }
        Some((d_cost, d_excess))
    }

    /// Σ over stages of the bytes by which [`Profile::window`] exceeds
    /// `cap`.
    pub fn excess(&self, cap: u64) -> u64 {
        (0..self.inner.len())
            .map(|t| self.window(t).saturating_sub(cap))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analysis::checkpoint_all_peak;
    use crate::schedule::{generate_plan, simulate, solve_r, Statement};
    use crate::zoo::synthetic::{self, RandomDag};
    use proptest::prelude::*;

    /// Each stage's peak as the local search's replay of the plan found
    /// it: the window from the previous frontier's computation to this
    /// one's.
    fn windows_from_plan(g: &Graph, sch: &Schedule) -> (Vec<u64>, u64, f64) {
        let plan = generate_plan(g, sch).expect("a valid schedule");
        let sim = simulate(g, &plan).expect("a valid plan");
        let mut live: Vec<Option<u64>> = Vec::new();
        let (mut bytes, mut peak, mut stage) = (0u64, 0u64, 0usize);
        let mut out = vec![0u64; g.len()];
        for st in &plan.statements {
            match st {
                Statement::Allocate {
                    register, bytes: b, ..
                } => {
                    let r = *register as usize;
                    if live.len() <= r {
                        live.resize(r + 1, None);
                    }
                    live[r] = Some(b.get());
                    bytes += b.get();
                    peak = peak.max(bytes);
                }
                Statement::Deallocate { register } => {
                    bytes -= live[*register as usize].take().unwrap();
                }
                Statement::Compute { node, .. } if node.idx() == stage => {
                    out[stage] = peak;
                    peak = bytes;
                    stage += 1;
                }
                _ => {}
            }
        }
        (out, sim.peak.get() - g.fixed_memory.get(), sim.cost)
    }

    /// A random S on `g` (each value kept over a few random runs), closed
    /// by solve_r.
    fn random_schedule(g: &Graph, seed: u64) -> Schedule {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n = g.len();
        let mut s = Schedule::checkpoint_all(g);
        for v in 0..n {
            for _ in 0..rng.random_range(0..3usize) {
                let a = rng.random_range(0..n);
                let b = rng.random_range(a..n);
                if a.max(v + 1) <= b {
                    s.set_s_range(v, a.max(v + 1)..=b, rng.random_bool(0.4));
                }
            }
        }
        solve_r(g, s)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_profile_is_the_plan_replayed(n in 2usize..50, seed in 0u64..1_000_000, forward in any::<bool>()) {
            let g = synthetic::random_layered(&RandomDag {
                nodes: n,
                seed,
                skip_prob: 0.5,
                skip_span: 4,
                forward,
                ..RandomDag::default()
            });
            prop_assume!(Profile::applies(&g, &Schedule::frontiers(&g)));
            for k in 0..4 {
                let sch = random_schedule(&g, seed * 7 + k);
                let p = Profile::of(&g, &sch).unwrap();
                let (windows, peak, cost) = windows_from_plan(&g, &sch);
                let ours: Vec<u64> = (0..g.len()).map(|t| p.window(t)).collect();
                prop_assert_eq!(ours, windows);
                prop_assert_eq!(p.peak(), peak);
                prop_assert_eq!(p.total_cost(), cost);
            }
            // Changes priced stage by stage, against the schedule rebuilt.
            use rand::{RngExt, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let n = g.len();
            let sch = random_schedule(&g, seed);
            let p = Profile::of(&g, &sch).unwrap();
            let ev = sch.keep_events();
            let mut at = vec![Vec::new(); n];
            for t in 0..n {
                for &k in sch.r_row(t) {
                    at[k as usize].push(t as u32);
                }
            }
            let mut w = Walker::new(n);
            for _ in 0..8 {
                let cap = rng.random_range(0..=p.peak() + 1);
                let mut changes = Vec::new();
                for _ in 0..rng.random_range(1..4usize) {
                    let v = rng.random_range(0..n);
                    let from = rng.random_range(v + 1..=n);
                    if from >= n {
                        continue;
                    }
                    let to = rng.random_range(from..n);
                    changes.push(Change { v, from, to, keep: rng.random_bool(0.5) });
                }
                let Some((d_cost, d_excess)) = p.price(&g, &sch, &ev, &at, &changes, cap, &mut w) else {
                    continue;
                };
                let mut s2 = sch.clone();
                for c in &changes {
                    s2.set_s_range(c.v, c.from..=c.to, c.keep);
                }
                let q = Profile::of(&g, &solve_r(&g, s2)).unwrap();
                prop_assert_eq!(d_cost, q.total_cost() - p.total_cost());
                prop_assert_eq!(d_excess, q.excess(cap) as i64 - p.excess(cap) as i64);
            }
            // Checkpoint-all's peak is the published definition's.
            let all = Profile::of(&g, &solve_r(&g, Schedule::checkpoint_all(&g))).unwrap();
            prop_assert_eq!(all.peak() + g.fixed_memory.get(), checkpoint_all_peak(&g).get());
        }
    }
}
