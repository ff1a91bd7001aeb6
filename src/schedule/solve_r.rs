//! The cheapest recomputation matrix R for a fixed checkpoint matrix S
//! (Checkmate §5.2 and Appendix B.1). Heuristics only decide what to keep;
//! this fills in exactly the computations that decision forces, so every
//! heuristic is compared on its choice of S alone.
//!
//! Why it is optimal: with S fixed, the constraints on R are monotone
//! implications (R[t,t]=1; S[t+1,i] forces R[t,i] unless S[t,i]; a computed
//! node forces each dependency not kept). The least set closed under them is
//! unique and every feasible R contains it, so with non-negative costs it is
//! the cheapest. Walking each stage in reverse topological order reaches that
//! closure in one pass, because a node is only forced by its users, which
//! come later in the order.

use super::Schedule;
use crate::graph::{Graph, NodeId};
use fixedbitset::FixedBitSet;

/// Builds the minimal R for `s` (an n×n keep matrix over `g`'s stages) and
/// returns the schedule (R, S). `s` must only carry values from earlier
/// stages (`S[t,i]=1` only for `i < t`); everything else it may leave
/// inconsistent, since missing computations are exactly what this adds.
///
/// Cost: O(n + keep intervals) for the carry rule plus, per stage, the
/// nodes it computes and their edges: linear in the schedule's content.
pub fn solve_r(g: &Graph, s: Schedule) -> Schedule {
    solve_r_tiered(g, s, false)
}

/// [`solve_r`] for a schedule with transfers: a value copied in during
/// stage `t-1` (P) is carried into stage `t` without being computed, and,
/// with `direct_reads` (a device whose kernels read the slow tier), a
/// dependency held only as a slow copy (H) is read from there rather than
/// recomputed. O, P and H are left as they are; the least R is unique for
/// the same reason as without transfers. On a schedule without transfers
/// it is exactly [`solve_r`].
pub fn solve_r_tiered(g: &Graph, s: Schedule, direct_reads: bool) -> Schedule {
    debug_assert_eq!(s.stages(), g.len());
    solve_r_groups(g, s, direct_reads)
}

/// The closure itself. With multi-output kernels, computing one member
/// computes its whole group, and a group is first made in the stage of its
/// last member: both are monotone implications too, so the least R is
/// still unique. A kept member before its group is made (an S bit no
/// schedule can honour) is dropped first, so that moves on S need not know
/// about groups. Without groups every group is one node and this is
/// Checkmate's closure as it stands.
fn solve_r_groups(g: &Graph, mut sch: Schedule, direct_reads: bool) -> Schedule {
    let n = g.len();
    if g.has_groups() {
        // S[t,i] for t <= group_end(i): a member kept before its group is
        // made.
        for (i, ivs) in sch.s.iter_mut().enumerate() {
            let end = g.group_end(NodeId::from(i)) as u32;
            if ivs.first().is_some_and(|iv| iv.0 <= end) {
                super::intervals_set(ivs, 0, end, false);
            }
        }
    }
    for t in 0..n {
        let id = NodeId::from(t);
        sch.r[t] = if g.group_end(id) == t {
            (g.group_start(id) as u32..=t as u32).collect()
        } else {
            Vec::new()
        };
    }
    // Values kept into stage t but not into t-1 (nor copied in during t-1)
    // are computed in t-1: only interval starts matter.
    let ev = sch.keep_events();
    for t in 1..n {
        let mut add: Vec<u32> = Vec::new();
        for &i in ev.starts(t) {
            let i = i as usize;
            if !sch.p(t - 1, i) && !super::row_has(&sch.r[t - 1], i) {
                let id = NodeId::from(i);
                add.extend(g.group_start(id) as u32..=g.group_end(id) as u32);
            }
        }
        if !add.is_empty() {
            let row = &mut sch.r[t - 1];
            row.extend(add);
            row.sort_unstable();
            row.dedup();
        }
    }
    // The dependency closure, per stage, with a dense scratch set cleared
    // after each stage: O(n + R + edges read), not O(n) per stage. The
    // least closed set does not depend on the order nodes are visited in.
    let mut kept = sch.kept_sweep();
    let mut in_row = FixedBitSet::with_capacity(n);
    let mut stack: Vec<usize> = Vec::new();
    for t in 0..n {
        kept.enter(t);
        let mut row = std::mem::take(&mut sch.r[t]);
        for &v in &row {
            in_row.insert(v as usize);
            stack.push(v as usize);
        }
        while let Some(v) = stack.pop() {
            for &u in g.deps(NodeId::from(v)) {
                let u = u.idx();
                let read_slow = direct_reads && sch.h(t, u);
                if !kept.contains(u) && !read_slow && !in_row.contains(u) {
                    let id = NodeId::from(u);
                    for m in g.group_start(id)..=g.group_end(id) {
                        if !in_row.contains(m) {
                            in_row.insert(m);
                            row.push(m as u32);
                            stack.push(m);
                        }
                    }
                }
            }
        }
        row.sort_unstable();
        for &v in &row {
            in_row.set(v as usize, false);
        }
        sch.r[t] = row;
    }
    sch
}
