//! Segment checkpointing: a set of checkpointed forward nodes → a schedule.
//! This is how Checkmate's artifact turned Chen et al.'s checkpoint choices
//! into (R, S) for its published experiments (not the later variant that
//! keeps every forward value striped to the end, which made √n recompute
//! nothing): checkpoints bridge the gap between the forward and backward
//! passes, everything else between them is recomputed where needed.
//!
//! Lifetimes in S (value `i` kept into stages `i+1 ..= until`):
//! - a checkpoint lives until its last use, counting reads by the
//!   recomputations the schedule performs (a checkpoint exists to seed
//!   them), so normally until its last backward use;
//! - a backward value lives from its creation to its last use;
//! - any other forward value lives while the forward pass still reads it
//!   (until its last forward user). Its segment (the forward nodes between
//!   two consecutive checkpoints) is recomputed once, in the first backward
//!   stage that reads any of its values, and each value then lives until its
//!   last backward use, as in the reference code.
//!
//! A plain DAG has no backward pass, so "the forward pass still reads it"
//! would keep everything to its last use and make the checkpoints
//! meaningless. There a non-checkpoint value lives until its last user up to
//! the next checkpoint (the end of its segment); later users recompute it.
//!
//! R is then the minimal recomputation for that S ([`solve_r`]).

use super::candidates::has_backward;
use crate::graph::analysis::last_use;
use crate::graph::{Graph, NodeId};
use crate::schedule::{solve_r, Schedule};

/// Keeps `i` in S from stage `i+1` through stage `until` (inclusive).
pub(crate) fn keep(sch: &mut Schedule, i: usize, until: usize) {
    sch.set_s_range(i, i + 1..=until.min(sch.stages().saturating_sub(1)), true);
}

/// The schedule for checkpointing exactly `checkpoints` (forward nodes; any
/// order, duplicates ignored). Always valid for the plan generator.
pub fn segments_to_schedule(g: &Graph, checkpoints: &[NodeId]) -> Schedule {
    let n = g.len();
    let mut is_ckpt = vec![false; n];
    for &c in checkpoints {
        is_ckpt[c.idx()] = true;
    }
    let last = last_use(g);
    let plain = !has_backward(g);
    // For plain DAGs: the first checkpoint at or after each position.
    let mut next_ckpt = vec![n; n + 1];
    for i in (0..n).rev() {
        next_ckpt[i] = if is_ckpt[i] { i } else { next_ckpt[i + 1] };
    }
    let mut sch = Schedule::identity(n);
    for v in g.ids() {
        let i = v.idx();
        let node = g.node(v);
        let until = if node.backward || is_ckpt[i] {
            last[i].idx()
        } else if plain {
            let end = next_ckpt[i + 1];
            g.users(v)
                .iter()
                .map(|u| u.idx())
                .filter(|&u| u <= end)
                .max()
                .unwrap_or(i)
        } else {
            g.users(v)
                .iter()
                .filter(|&&u| !g.node(u).backward)
                .map(|u| u.idx())
                .max()
                .unwrap_or(i)
        };
        keep(&mut sch, i, until);
    }
    if !plain {
        keep_recomputed_segments(g, &mut sch, &is_ckpt);
    }
    let sch = solve_r(g, sch);
    extend_checkpoints(g, sch, checkpoints)
}

/// The backward half of the reference behaviour: a segment (the forward
/// nodes after one checkpoint up to the next) is recomputed once, in the
/// first backward stage that reads any of its values, and each of its values
/// then stays until its last backward use. Recomputing per backward stage
/// instead would redo the segment's prefix for every gradient in it.
fn keep_recomputed_segments(g: &Graph, sch: &mut Schedule, is_ckpt: &[bool]) {
    let n = g.len();
    let last = last_use(g);
    // Segment of each forward node: how many checkpoints precede it.
    let mut seg = vec![usize::MAX; n];
    let mut count = 0;
    for v in g.ids() {
        if g.node(v).backward {
            continue;
        }
        if is_ckpt[v.idx()] {
            count += 1;
        } else {
            seg[v.idx()] = count;
        }
    }
    // First backward stage reading each segment.
    let mut first_read = vec![usize::MAX; count + 1];
    for v in g.ids() {
        let s = seg[v.idx()];
        if s == usize::MAX {
            continue;
        }
        if let Some(b) = g
            .users(v)
            .iter()
            .filter(|u| g.node(**u).backward)
            .map(|u| u.idx())
            .min()
        {
            first_read[s] = first_read[s].min(b);
        }
    }
    for v in g.ids() {
        let s = seg[v.idx()];
        if s == usize::MAX || first_read[s] == usize::MAX {
            continue;
        }
        let b = first_read[s];
        let until = last[v.idx()].idx();
        sch.set_s_range(v.idx(), b + 1..=until.min(n - 1), true);
    }
}

/// Keeps each checkpoint through the last stage whose computations read it,
/// so a recomputation never has to recompute a checkpoint itself. R can
/// only shrink when S grows, so one round suffices.
fn extend_checkpoints(g: &Graph, sch: Schedule, checkpoints: &[NodeId]) -> Schedule {
    let n = g.len();
    let mut last_read = vec![0usize; n];
    let mut is_ckpt = vec![false; n];
    for &c in checkpoints {
        is_ckpt[c.idx()] = true;
    }
    for t in 0..n {
        for k in sch.computed(t) {
            for &u in g.deps(k) {
                if is_ckpt[u.idx()] {
                    last_read[u.idx()] = t;
                }
            }
        }
    }
    let mut grown = sch.clone();
    let mut changed = false;
    for c in 0..n {
        if is_ckpt[c] && last_read[c] > c && !sch.s(last_read[c], c) {
            // Only stretch when the checkpoint was dropped before a read
            // that is not also its recomputation site.
            let until = last_read[c];
            keep(&mut grown, c, until);
            changed = true;
        }
    }
    if changed {
        solve_r(g, grown)
    } else {
        sch
    }
}
