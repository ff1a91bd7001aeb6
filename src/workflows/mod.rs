//! The workflows: what runs the single-solve pipeline ([`crate::solve`]) many
//! times over and records the answers. A sweep walks (strategy, budget)
//! pairs, max-batch walks batch sizes, baselines walks every heuristic's
//! knobs; all of them append rows to a [`resultlog`] so that a re-run
//! resumes, and the budget files say which budgets a sweep visits.

pub mod baselines;
pub mod budgets;
pub mod maxbatch;
pub mod resultlog;
pub mod sweep;
