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

/// Builds the minimal R for `s` (an n×n keep matrix over `g`'s stages) and
/// returns the schedule (R, S). `s` must only carry values from earlier
/// stages (`S[t,i]=1` only for `i < t`); everything else it may leave
/// inconsistent, since missing computations are exactly what this adds.
///
/// Cost: O(n²/64) for the carry rule plus, per stage, one scan of the
/// stage's row and the edges of the nodes it computes: O(stages × edges).
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
    for t in 0..n {
        if g.has_groups() {
            let early: Vec<usize> = sch.s[t]
                .ones()
                .filter(|&i| g.group_end(NodeId::from(i)) >= t)
                .collect();
            for i in early {
                sch.s[t].set(i, false);
            }
        }
        sch.r[t].clear();
        let id = NodeId::from(t);
        if g.group_end(id) == t {
            sch.r[t].insert_range(g.group_start(id)..t + 1);
        }
    }
    let add_group = |row: &mut fixedbitset::FixedBitSet, i: usize| {
        let id = NodeId::from(i);
        row.insert_range(g.group_start(id)..g.group_end(id) + 1);
    };
    for t in (1..n).rev() {
        let mut need = sch.s[t].clone();
        need.difference_with(&sch.s[t - 1]);
        for &i in sch.p_row(t - 1) {
            need.set(i as usize, false);
        }
        need.difference_with(&sch.r[t - 1]);
        for i in need.ones().collect::<Vec<_>>() {
            add_group(&mut sch.r[t - 1], i);
        }
    }
    for t in 0..n {
        for v in (0..=t).rev() {
            if !sch.r[t].contains(v) {
                continue;
            }
            for &u in g.deps(NodeId::from(v)) {
                let u = u.idx();
                let read_slow = direct_reads && sch.h(t, u);
                if !sch.s[t].contains(u) && !read_slow && !sch.r[t].contains(u) {
                    add_group(&mut sch.r[t], u);
                }
            }
        }
    }
    sch
}
