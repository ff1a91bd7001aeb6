//! A start for the offload moves built the way the step bound reasons
//! ([`crate::solver::tiered::step_bound`]): at the stage where the
//! checkpoint-all plan holds the most, what the link can carry out before
//! it is offloaded, and the rest is recomputed, cheapest per byte first.
//!
//! Why: [`super::tiered_search::improve`] repairs the budget greedily, one
//! gap at a time, by the extra step time per byte of excess it removes.
//! From checkpoint-all on ResNet-50 at 30% on the GH200 that ends at
//! 34.1–34.5 ms, recomputing convolutions two or three times, while the
//! bound is 32.95 ms: dropping the cheap values first (batch norms, ReLUs,
//! adds, recomputed from the convolutions they follow) frees about half of
//! the activations for 0.3 ms, and the largest remaining values are the
//! ones whose copies hide behind the forward pass. No single move of the
//! greedy repair leads there, since each of those drops alone gains little.
//!
//! The seed is a schedule like any other: the moves repair what it gets
//! wrong, and only the simulator's step time decides.

use super::tiered;
use crate::device::Device;
use crate::graph::analysis::{checkpoint_all_profile, last_use};
use crate::graph::{Graph, NodeId};
use crate::schedule::{solve_r_tiered, Schedule};
use crate::units::Bytes;

/// Past this many nodes the seeds are not built: the closure walks and the
/// moves from a fresh start cost more than they are likely to gain.
pub const MAX_NODES: usize = 5_000;

/// Nodes in a recomputation's closure; values with larger ones are not
/// dropped.
const MAX_CLOSURE: usize = 32;

/// The shares of the peak stage's excess the cheap drops free (one seed
/// each), and the copies' deadline as a multiple of the compute before the
/// peak. Measured on ResNet-50 at 30% (`examples/turn_grid`, 30 s of moves
/// each, shares 0.5–0.8, deadlines 0.8–1): the best descents came from 0.8
/// on the GH200 (33.73 ms, against 34.50 from checkpoint-all) and 0.5 on
/// the A100 (108.98 ms, against 110.41), both with a deadline of 1.
pub const SHARES: [f64; 2] = [0.5, 0.8];
pub const DEADLINE: f64 = 1.0;

/// How answers name a seed in their detail line, for a user who has not
/// read this module.
pub const NAME: &str =
    "a turn seed (cheap values recomputed, the largest offloaded before the peak)";

/// [`turn_seeds`] at [`SHARES`] and [`DEADLINE`].
pub fn seeds(g: &Graph, dev: &Device, budget: Bytes) -> Vec<Schedule> {
    turn_seeds(g, dev, budget, &SHARES, DEADLINE)
}

/// The seeds for `budget` on `dev`, for the recompute shares in
/// `recompute` (fractions of the bytes the peak stage must give up that
/// the cheap drops are asked to free) and the link share in `link` (the
/// copies out must all end by this multiple of the compute before the
/// peak stage). Empty when checkpoint-all fits, the graph is past [`MAX_NODES`],
/// or the device has no slow tier to use.
pub fn turn_seeds(
    g: &Graph,
    dev: &Device,
    budget: Bytes,
    recompute: &[f64],
    link: f64,
) -> Vec<Schedule> {
    let n = g.len();
    if !(4..=MAX_NODES).contains(&n) || dev.slow.capacity == Bytes::ZERO {
        return Vec::new();
    }
    let cx = Turn::new(g, dev);
    let held_at_peak: u64 = cx.live[cx.peak];
    let need = (held_at_peak + g.fixed_memory.get()).saturating_sub(budget.get());
    if need == 0 {
        return Vec::new();
    }
    let mut out: Vec<Schedule> = Vec::new();
    for &share in recompute {
        let target = (need as f64 * share).max(0.0);
        let dropped = cx.drops_freeing(target);
        let sch = cx.offload_largest(&dropped, link);
        if !out.contains(&sch) {
            out.push(sch);
        }
    }
    out
}

struct Turn<'a> {
    g: &'a Graph,
    dev: &'a Device,
    /// Each node's last reader (itself when none).
    last: Vec<usize>,
    /// Bytes the checkpoint-all plan holds at each stage, fixed memory
    /// aside.
    live: Vec<u64>,
    peak: usize,
    /// The widest gap between two events of each value that spans the
    /// peak stage, if any.
    gap: Vec<Option<(usize, usize)>>,
}

impl<'a> Turn<'a> {
    fn new(g: &'a Graph, dev: &'a Device) -> Turn<'a> {
        let n = g.len();
        let reads = tiered::reads(g);
        let last: Vec<usize> = last_use(g).iter().map(|u| u.idx()).collect();
        let live: Vec<u64> = checkpoint_all_profile(g).iter().map(|b| b.get()).collect();
        let peak = (0..n)
            .max_by_key(|&t| (live[t], std::cmp::Reverse(t)))
            .unwrap_or(0);
        let gap = (0..n)
            .map(|v| {
                let mut ev = vec![v];
                ev.extend(reads[v].stages.iter().copied());
                ev.windows(2)
                    .map(|w| (w[0], w[1]))
                    .find(|&(x, y)| x < peak && y > peak && y >= x + 2)
            })
            .collect();
        Turn {
            g,
            dev,
            last,
            live,
            peak,
            gap,
        }
    }

    /// The compute of recomputing `v` at stage `c`: `v` and every input
    /// not available there (dropped, or dead by then), recursively, each
    /// once. Infinite past [`MAX_CLOSURE`] nodes: summed per path instead,
    /// a random DAG of 1,000 nodes did not finish in 30 s.
    fn closure(&self, v: usize, c: usize, dropped: &[bool]) -> f64 {
        let mut seen: Vec<usize> = vec![v];
        let mut stack = vec![v];
        let mut cost = 0.0;
        while let Some(x) = stack.pop() {
            cost += self.g.cost(NodeId::from(x));
            for d in self.g.deps(NodeId::from(x)) {
                let u = d.idx();
                if (dropped[u] || self.last[u] < c) && !seen.contains(&u) {
                    if seen.len() == MAX_CLOSURE {
                        return f64::INFINITY;
                    }
                    seen.push(u);
                    stack.push(u);
                }
            }
        }
        cost
    }

    /// Values dropped over their gap across the peak, in node order, each
    /// when its closure per byte is at most `theta`.
    fn drops(&self, theta: f64) -> (Vec<bool>, f64) {
        let n = self.g.len();
        let mut dropped = vec![false; n];
        let mut freed = 0.0;
        for v in 0..n {
            let Some((_, y)) = self.gap[v] else { continue };
            let m = self.g.memory(NodeId::from(v)).as_f64();
            if m <= 0.0 {
                continue;
            }
            if self.closure(v, y, &dropped) <= theta * m {
                dropped[v] = true;
                freed += m;
            }
        }
        (dropped, freed)
    }

    /// The least closure-per-byte threshold whose drops free `target`
    /// bytes at the peak (by bisection in log space), or every drop.
    fn drops_freeing(&self, target: f64) -> Vec<bool> {
        if target <= 0.0 {
            return vec![false; self.g.len()];
        }
        let (mut lo, mut hi) = (1e-6_f64, 1e12_f64);
        let (all, freed_all) = self.drops(hi);
        if freed_all < target {
            return all;
        }
        for _ in 0..48 {
            let mid = (lo * hi).sqrt();
            if self.drops(mid).1 >= target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        self.drops(hi).0
    }

    /// Checkpoint-all with `dropped` absent over their gaps, then the
    /// largest values still held at the peak offloaded over the gap that
    /// spans it, each taken only if the copies out, run by one FIFO engine
    /// as their values are computed (over the first computations' times),
    /// still all end by `link` times the compute before the peak. Summing
    /// the copies' times instead let the last ones end past the turn
    /// (ResNet-50 at 30% on the GH200: 33.84 ms after the moves, against
    /// 33.73). A copy out is led to the stage where it ends, and a fetch
    /// is issued where it must start to arrive by its reader.
    fn offload_largest(&self, dropped: &[bool], link: f64) -> Schedule {
        let g = self.g;
        let n = g.len();
        let mut s = Schedule::checkpoint_all(g);
        for (v, (&d, gap)) in dropped.iter().zip(&self.gap).enumerate() {
            if let (true, Some((x, y))) = (d, *gap) {
                s.set_s_range(v, x + 1..=y, false);
            }
        }
        let s = solve_r_tiered(g, s, self.dev.slow.direct_read.is_some());
        let mut start = vec![0.0f64; n + 1];
        for t in 0..n {
            start[t + 1] = start[t] + self.dev.compute_time(g.cost(NodeId::from(t))).get();
        }
        let deadline = link * start[self.peak];
        // The stages that compute or read each value in the seed.
        let mut events: Vec<Vec<usize>> = vec![Vec::new(); n];
        for t in 0..n {
            for u in s.computed(t) {
                events[u.idx()].push(t);
                for d in g.deps(u) {
                    events[d.idx()].push(t);
                }
            }
        }
        let mut held: Vec<usize> = s.kept(self.peak).map(|v| v.idx()).collect();
        held.sort_by_key(|&v| (std::cmp::Reverse(g.memory(NodeId::from(v))), v));
        // When the last copy out ends, the copies of `c` issued in stage
        // order on one engine, each as its value is computed.
        let fifo_end = |c: &[(usize, usize, usize)]| {
            let mut c = c.to_vec();
            c.sort_by_key(|c| (c.1, c.0));
            c.iter().fold(0.0f64, |free, &(v, x, _)| {
                free.max(start[x + 1]) + tiered::copy_secs(g, self.dev, v, true)
            })
        };
        let mut chosen: Vec<(usize, usize, usize)> = Vec::new();
        for v in held {
            let ev = &mut events[v];
            ev.sort_unstable();
            ev.dedup();
            let Some((x, y)) = ev
                .windows(2)
                .map(|w| (w[0], w[1]))
                .find(|&(x, y)| x < self.peak && y > self.peak)
            else {
                continue;
            };
            if y < x + 3 || !(x + 1..y).all(|t| s.s(t, v)) {
                continue;
            }
            chosen.push((v, x, y));
            if fifo_end(&chosen) > deadline {
                chosen.pop();
            }
        }
        let mut o = s.clone();
        // Copies out in issue order on one engine.
        chosen.sort_by_key(|c| (c.1, c.0));
        let mut free = 0.0f64;
        let mut timed: Vec<(usize, usize, usize, usize)> = Vec::new();
        for &(v, x, y) in &chosen {
            let begin = free.max(start[x + 1]);
            free = begin + tiered::copy_secs(g, self.dev, v, true);
            let w = (x..n).find(|&t| start[t + 1] >= free).unwrap_or(n - 1);
            timed.push((v, x, y, w));
        }
        // Fetches latest first, each done by its reader's start.
        timed.sort_by_key(|c| std::cmp::Reverse((c.2, c.0)));
        let mut latest = f64::INFINITY;
        for (v, x, y, w) in timed {
            let end = latest.min(start[y]);
            let begin = end - tiered::copy_secs(g, self.dev, v, false);
            latest = begin;
            let issue = (0..n).rev().find(|&t| start[t] <= begin).unwrap_or(0);
            let fetch = y - 1;
            if w + 1 >= issue || issue > fetch {
                continue;
            }
            o.offload(v, w, fetch);
            o.set_s_range(v, y..=y, true);
            if w > x {
                o.set_out_lead(w, v, w - x);
            }
            if fetch > issue {
                o.set_fetch_lead(fetch, v, fetch - issue);
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analysis::checkpoint_all_peak;
    use crate::schedule::{generate_plan, simulate_on};
    use std::path::Path;

    /// On ResNet-50 at 30% on the GH200: the cheap drops free the share of
    /// the peak stage's excess they are asked for, and the copies out,
    /// timed as the engine runs them and led to where they end, hide
    /// behind the forward pass (no stall), as do the fetches.
    #[test]
    fn the_drops_free_their_share_and_the_copies_hide() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dev = Device::load(&root.join("devices/gh200.yaml")).unwrap();
        let g = Graph::load(&root.join("models/resnet50.yaml")).unwrap();
        let budget = checkpoint_all_peak(&g).scale_ceil(30, 100);
        let cx = Turn::new(&g, &dev);
        let need = (cx.live[cx.peak] + g.fixed_memory.get() - budget.get()) as f64;
        for share in [0.5, 0.8] {
            let dropped = cx.drops_freeing(share * need);
            let freed: f64 = (0..g.len())
                .filter(|&v| dropped[v])
                .map(|v| g.memory(NodeId::from(v)).as_f64())
                .sum();
            assert!(freed >= share * need, "{freed} < {}", share * need);
            // Not much more than asked: the threshold is the least that
            // frees it.
            assert!(freed < share * need + 0.9e9, "{freed}");
            let bare = cx.offload_largest(&dropped, 0.0);
            let sim = simulate_on(&g, &generate_plan(&g, &bare).unwrap(), Some(&dev)).unwrap();
            let held = tiered::stage_peaks(&g, &generate_plan(&g, &bare).unwrap())[cx.peak];
            let all = cx.live[cx.peak] + g.fixed_memory.get();
            assert!(
                held.as_f64() <= all as f64 - freed + 1.0,
                "{held} at the peak"
            );
            assert_eq!(sim.timing.unwrap().stall.get(), 0.0);

            let led = cx.offload_largest(&dropped, 1.0);
            let plan = generate_plan(&g, &led).unwrap();
            let timed = simulate_on(&g, &plan, Some(&dev)).unwrap();
            let t = timed.timing.unwrap();
            assert!(t.bytes_to_slow.get() > 2_000_000_000, "{}", t.bytes_to_slow);
            assert!(t.stall.get() < 1e-9, "stall {}", t.stall);
            assert!(timed.peak < sim.peak, "{} ≥ {}", timed.peak, sim.peak);
            // Every copy out ends before the peak stage.
            assert!((cx.peak..g.len()).all(|t| led.o_row(t).is_empty()));
        }
        assert_eq!(turn_seeds(&g, &dev, budget, &[0.5, 0.8], 1.0).len(), 2);
        assert!(turn_seeds(&g, &dev, checkpoint_all_peak(&g), &[0.5], 1.0).is_empty());
    }

    /// A closure is a set: on a dense random DAG, where dead inputs share
    /// ancestors, each node's cost counts once (summed per path, a
    /// 1,000-node DAG took minutes), and a closure past [`MAX_CLOSURE`]
    /// nodes is never dropped.
    #[test]
    fn a_closure_counts_each_node_once_and_stops_at_its_cap() {
        use crate::zoo::synthetic::{self, RandomDag};
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dev = Device::load(&root.join("devices/gh200.yaml")).unwrap();
        let g = synthetic::random_layered(&RandomDag {
            nodes: 400,
            width: 4,
            skip_prob: 0.6,
            skip_span: 8,
            seed: 7,
            ..RandomDag::default()
        });
        let cx = Turn::new(&g, &dev);
        let none = vec![false; g.len()];
        let all = vec![true; g.len()];
        let mut capped = 0;
        for v in 0..g.len() {
            // With every input dropped, the closure is all of v's
            // ancestors, or infinite when they are more than the cap.
            let mut anc = vec![false; g.len()];
            let mut stack = vec![v];
            let mut cost = 0.0;
            let mut count = 0;
            anc[v] = true;
            while let Some(x) = stack.pop() {
                cost += g.cost(NodeId::from(x));
                count += 1;
                for d in g.deps(NodeId::from(x)) {
                    if !anc[d.idx()] {
                        anc[d.idx()] = true;
                        stack.push(d.idx());
                    }
                }
            }
            let c = cx.closure(v, v + 1, &all);
            if count > MAX_CLOSURE {
                assert!(c.is_infinite(), "node {v}: {count} ancestors, closure {c}");
                capped += 1;
            } else {
                assert_eq!(c, cost, "node {v}");
            }
            // Inputs alive at the reader are not recomputed.
            let c0 = cx.closure(v, v, &none);
            assert!(c0 >= g.cost(NodeId::from(v)) && c0 <= c, "node {v}: {c0}");
        }
        assert!(capped > 100, "{capped} capped closures");
        let budget = checkpoint_all_peak(&g).scale_ceil(30, 100);
        assert!(!seeds(&g, &dev, budget).is_empty());
    }
}
