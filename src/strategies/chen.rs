//! Chen et al. (2016) checkpointing, √n and greedy, on chains, and the two
//! generalizations of Checkmate §6.1 to arbitrary DAGs: candidates drawn
//! from articulation points (`ap-*`) or from every forward node of a
//! linearized topological order (`lin-*`). The chosen checkpoints become a
//! schedule by segment checkpointing ([`segments_to_schedule`]).

use super::candidates::{articulation_points, forward_nodes, linearized, not_linear_reason};
use super::knobs::{solve_by_points, KnobPoint, Points, TradeOff};
use super::segments::segments_to_schedule;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;

/// Which nodes may become checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidates {
    /// Chen et al. as published: every layer of a chain; other graphs are
    /// refused.
    Chain,
    /// Articulation points of the forward graph (Appendix B.1).
    ArticulationPoints,
    /// All forward nodes along the topological order (Appendix B.2).
    Linearized,
}

/// How checkpoints are picked among the candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Every ⌊√k⌋-th of the k candidates.
    Sqrtn,
    /// Segments of roughly `b` bytes, `b` swept over every distinct outcome.
    Greedy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chen {
    pub candidates: Candidates,
    pub rule: Rule,
}

impl Chen {
    pub const ALL: [Chen; 6] = [
        Chen::new(Candidates::Chain, Rule::Sqrtn),
        Chen::new(Candidates::Chain, Rule::Greedy),
        Chen::new(Candidates::ArticulationPoints, Rule::Sqrtn),
        Chen::new(Candidates::ArticulationPoints, Rule::Greedy),
        Chen::new(Candidates::Linearized, Rule::Sqrtn),
        Chen::new(Candidates::Linearized, Rule::Greedy),
    ];

    pub const fn new(candidates: Candidates, rule: Rule) -> Chen {
        Chen { candidates, rule }
    }

    /// The candidate set on `g`, in topological order, or why the variant
    /// does not apply.
    pub fn candidate_set(&self, g: &Graph) -> Result<Vec<NodeId>, StrategyError> {
        if let Some(reason) = self.not_applicable(g) {
            return Err(StrategyError::NotApplicable {
                strategy: self.name(),
                reason,
            });
        }
        Ok(match self.candidates {
            Candidates::Chain => forward_nodes(g),
            Candidates::ArticulationPoints => articulation_points(g),
            Candidates::Linearized => linearized(g),
        })
    }
}

/// Chen's √n rule: with k candidates, checkpoint those at 1-based positions
/// ⌊√k⌋, 2⌊√k⌋, ... (the last candidate when k is a perfect square).
pub fn sqrtn_checkpoints(candidates: &[NodeId]) -> Vec<NodeId> {
    let k = candidates.len();
    if k == 0 {
        return Vec::new();
    }
    let step = k.isqrt();
    candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| (i + 1) % step == 0)
        .map(|(_, &v)| v)
        .collect()
}

/// One run of Chen's greedy rule with segment size `b`: walk the forward
/// nodes in order, summing their memory; at a candidate whose running sum
/// exceeds `b`, checkpoint it and start a new segment. Also returns the
/// smallest running sum that triggered a checkpoint: the outcome is the
/// same for every segment size from `b` up to (not including) that value.
fn greedy_run(g: &Graph, is_candidate: &[bool], b: u128) -> (Vec<NodeId>, Option<u128>) {
    let mut temp: u128 = 0;
    let mut out = Vec::new();
    let mut next: Option<u128> = None;
    for v in g.forward_ids() {
        temp += g.memory(v).get() as u128;
        if is_candidate[v.idx()] && temp > b {
            out.push(v);
            next = Some(next.map_or(temp, |n: u128| n.min(temp)));
            temp = 0;
        }
    }
    (out, next)
}

/// Chen's greedy rule for one segment size `b` (bytes).
pub fn greedy_checkpoints(g: &Graph, candidates: &[NodeId], b: u64) -> Vec<NodeId> {
    let mut is_candidate = vec![false; g.len()];
    for &c in candidates {
        is_candidate[c.idx()] = true;
    }
    greedy_run(g, &is_candidate, b as u128).0
}

/// Every distinct outcome of the greedy rule as `b` sweeps from 0 upwards:
/// the densest possible grid, since the rule only changes where `b` crosses
/// a running sum it compared against. Each entry is the least `b` giving
/// that checkpoint set. The last entry has no checkpoints.
pub fn greedy_sweep(g: &Graph, candidates: &[NodeId]) -> Vec<(u64, Vec<NodeId>)> {
    let mut is_candidate = vec![false; g.len()];
    for &c in candidates {
        is_candidate[c.idx()] = true;
    }
    let mut out = Vec::new();
    let mut b: u128 = 0;
    let per_run = g.forward_ids().count().max(1);
    loop {
        let (set, next) = greedy_run(g, &is_candidate, b);
        out.push((b.min(u64::MAX as u128) as u64, set));
        match next {
            // Past the work cap, b doubles instead: still ordered by b and
            // ending with no checkpoints, in O(log) more runs.
            Some(nb) if out.len() * per_run > GREEDY_SWEEP_WORK => b = nb.max(2 * b),
            Some(nb) => b = nb,
            None => break,
        }
    }
    out
}

/// Node visits after which [`greedy_sweep`] stops listing every outcome
/// (a quarter of a second; it also bounds the outcomes' checkpoint lists
/// to 100M entries). A 114,290-node forward chain has ~10^5 outcomes of
/// O(n) each: listing them all took remat-fast's baselines 160 s past
/// a 60 s limit on the 200,007-node operator chain. Graphs below ~10,000
/// forward nodes list every outcome, as before.
const GREEDY_SWEEP_WORK: usize = 100_000_000;

/// The most greedy settings a strategy evaluates. Every setting costs a
/// plan and a simulation (quadratic in the graph size), and a 1000-node
/// graph has thousands of distinct outcomes; a few hundred, spread evenly
/// over the outcomes in order of b, still trace the curve densely.
pub const MAX_GREEDY_SETTINGS: usize = 200;

/// Keeps at most `max` entries, evenly spaced, always the first and last.
fn thin<T>(v: Vec<T>, max: usize) -> Vec<T> {
    let n = v.len();
    if n <= max || max < 2 {
        return v;
    }
    let keep: std::collections::HashSet<usize> =
        (0..max).map(|k| k * (n - 1) / (max - 1)).collect();
    v.into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, x)| x)
        .collect()
}

impl Strategy for Chen {
    fn name(&self) -> &'static str {
        match (self.candidates, self.rule) {
            (Candidates::Chain, Rule::Sqrtn) => "chen-sqrtn",
            (Candidates::Chain, Rule::Greedy) => "chen-greedy",
            (Candidates::ArticulationPoints, Rule::Sqrtn) => "ap-sqrtn",
            (Candidates::ArticulationPoints, Rule::Greedy) => "ap-greedy",
            (Candidates::Linearized, Rule::Sqrtn) => "lin-sqrtn",
            (Candidates::Linearized, Rule::Greedy) => "lin-greedy",
        }
    }

    fn describe(&self) -> &'static str {
        match (self.candidates, self.rule) {
            (Candidates::Chain, Rule::Sqrtn) => {
                "Chen et al. 2016: checkpoint every ⌊√n⌋-th layer (linear graphs only)"
            }
            (Candidates::Chain, Rule::Greedy) => {
                "Chen et al. 2016: greedy segments of b bytes, b swept (linear graphs only)"
            }
            (Candidates::ArticulationPoints, Rule::Sqrtn) => {
                "Chen √n over the articulation points of the forward graph, minimal recomputation"
            }
            (Candidates::ArticulationPoints, Rule::Greedy) => {
                "Chen greedy over the articulation points of the forward graph, b swept"
            }
            (Candidates::Linearized, Rule::Sqrtn) => {
                "Chen √n over all forward nodes in topological order, minimal recomputation"
            }
            (Candidates::Linearized, Rule::Greedy) => {
                "Chen greedy over all forward nodes in topological order, b swept"
            }
        }
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        solve_by_points(self, g, budget, opts)
    }

    /// The knob machinery merges each multi-output kernel itself, and
    /// judges every setting by its plan lifted back to the graph
    /// (`knobs::solve_by_points`).
    fn handles_groups(&self) -> bool {
        true
    }
}

impl TradeOff for Chen {
    fn not_applicable(&self, g: &Graph) -> Option<String> {
        let Candidates::Chain = self.candidates else {
            return None;
        };
        not_linear_reason(g).map(|reason| {
            format!(
                "Chen et al.'s heuristics are defined on linear graphs only; {reason} (use ap-{0} or lin-{0} for general graphs)",
                match self.rule {
                    Rule::Sqrtn => "sqrtn",
                    Rule::Greedy => "greedy",
                }
            )
        })
    }

    fn points<'a>(&'a self, g: &'a Graph) -> Result<Points<'a>, StrategyError> {
        let cands = self.candidate_set(g)?;
        Ok(match self.rule {
            Rule::Sqrtn => {
                let ck = sqrtn_checkpoints(&cands);
                let point = KnobPoint {
                    knob: format!(
                        "every {} of {} candidates ({} checkpoints)",
                        cands.len().isqrt(),
                        cands.len(),
                        ck.len()
                    ),
                    value: cands.len().isqrt() as f64,
                    schedule: segments_to_schedule(g, &ck),
                };
                Points {
                    len: 1,
                    at: Box::new(move |_| point.clone()),
                    monotone: false,
                }
            }
            Rule::Greedy => {
                let sweep = thin(greedy_sweep(g, &cands), MAX_GREEDY_SETTINGS);
                Points {
                    len: sweep.len(),
                    at: Box::new(move |i| {
                        let (b, ck) = &sweep[i];
                        KnobPoint {
                            knob: format!("b={b} ({} checkpoints)", ck.len()),
                            value: *b as f64,
                            schedule: segments_to_schedule(g, ck),
                        }
                    }),
                    monotone: false,
                }
            }
        })
    }
}
