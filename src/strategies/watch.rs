//! A live view of one running solve, for whoever must answer before it
//! returns: the progress line on a terminal, and an interrupt that has to
//! keep the time limit's promise of "the best plan so far".
//!
//! Strategies report what they find as they find it (a schedule with its
//! cost, a solver's incumbent cost, a bound); the watcher reads a snapshot
//! at any moment. Nothing here is trusted as an answer: a snapshot's
//! schedule still goes through the plan generator and the simulator
//! ([`crate::solve::from_snapshot`]).

use crate::graph::{Graph, NodeId};
use crate::schedule::Schedule;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub struct Watch {
    state: Mutex<Snapshot>,
    /// Set when the strategy solves a graph with merged kernels: its bounds
    /// hold for that graph, not for the real one, so they are ignored.
    merged: AtomicBool,
    /// The watch of the same strategy solving the graph in another node
    /// order (`solve::in_order`): its schedules are in that graph's ids.
    other: Mutex<Option<OtherOrder>>,
}

/// A graph in another node order, the order (its ids in the file's), and
/// the watch of the solve on it.
type OtherOrder = (Arc<Graph>, Vec<NodeId>, Arc<Watch>);

/// What a solve knows at one moment.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// The cheapest plan's cost known, with or without its schedule (a MIP
    /// solver reports costs before the schedule is decoded).
    pub cost: Option<f64>,
    /// The best lower bound known.
    pub bound: Option<f64>,
    /// The cheapest schedule in hand, with its cost and where it came from.
    pub plan: Option<(f64, Schedule, String)>,
    /// The same in another node order: that order's graph, the order (its
    /// ids in the file's), and what its solve knows.
    pub other: Option<(Arc<Graph>, Vec<NodeId>, Box<Snapshot>)>,
}

impl Watch {
    fn with(&self, f: impl FnOnce(&mut Snapshot)) {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A schedule that fits the budget, with its cost; kept if cheapest.
    pub fn plan(&self, cost: f64, schedule: &Schedule, origin: &str) {
        self.with(|s| {
            if s.plan.as_ref().is_none_or(|(c, _, _)| cost < *c) {
                s.plan = Some((cost, schedule.clone(), origin.to_string()));
            }
            s.cost = Some(s.cost.map_or(cost, |c| c.min(cost)));
        })
    }

    /// A plan on a device, ranked in cost units like every other plan: its
    /// step time as the compute it equals, so that the progress line reads
    /// it against checkpoint-all and an interrupt keeps the fastest plan of
    /// either kind (recompute-only or tiered).
    pub fn step(
        &self,
        dev: &crate::device::Device,
        step: crate::units::Seconds,
        schedule: &Schedule,
        origin: &str,
    ) {
        let per_unit = dev.compute_time(1.0).get();
        self.plan(
            step.get() / per_unit.max(f64::MIN_POSITIVE),
            schedule,
            origin,
        );
    }

    /// An incumbent cost without its schedule (display only).
    pub fn cost(&self, cost: f64) {
        self.with(|s| s.cost = Some(s.cost.map_or(cost, |c| c.min(cost))))
    }

    /// From here on, schedules are of the merged graph and bounds are not
    /// bounds of the real one (see `strategies::solve_groups`).
    pub fn merged_kernels(&self) {
        self.merged.store(true, Ordering::Relaxed);
    }

    /// A proven lower bound; the highest is kept.
    pub fn bound(&self, bound: f64) {
        if bound.is_finite() && !self.merged.load(Ordering::Relaxed) {
            self.with(|s| s.bound = Some(s.bound.map_or(bound, |b| b.max(bound))))
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut snap = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let other = self.other.lock().unwrap_or_else(|e| e.into_inner());
        snap.other = other
            .as_ref()
            .map(|(g, order, w)| (g.clone(), order.clone(), Box::new(w.snapshot())));
        snap
    }

    /// A plan in another node order (`gp`, the graph in `order`), taking
    /// the other order's place only if cheaper than the plan there: the
    /// annealing's tries report plans in many orders, one after another or
    /// at once on several threads, and a later, costlier try's report
    /// would otherwise have replaced an earlier try's best for an
    /// interrupt.
    pub fn plan_in_other_order(
        &self,
        gp: &Graph,
        order: &[NodeId],
        cost: f64,
        schedule: &Schedule,
        origin: &str,
    ) {
        let mut other = self.other.lock().unwrap_or_else(|e| e.into_inner());
        let held = other.as_ref().and_then(|(_, _, w)| w.plan_cost());
        if held.is_none_or(|c| cost < c) {
            let w = Arc::new(Watch::default());
            w.plan(cost, schedule, origin);
            *other = Some((Arc::new(gp.clone()), order.to_vec(), w));
        }
    }

    /// The cost of the plan held, if any.
    fn plan_cost(&self) -> Option<f64> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.plan.as_ref().map(|(c, _, _)| *c)
    }

    /// A watch for the solve of `gp`, the graph in `order`, whose plans an
    /// interrupt keeps too: a solve that splits its time between two
    /// orders lost the other order's plans to a Ctrl-C.
    pub fn in_other_order(&self, gp: &Graph, order: &[NodeId]) -> Arc<Watch> {
        let w = Arc::new(Watch::default());
        *self.other.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Arc::new(gp.clone()), order.to_vec(), w.clone()));
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_order_keeps_the_cheapest_plan_reported() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/order/f2.yaml");
        let g = Graph::load(&path).unwrap();
        let order: Vec<NodeId> = g.ids().collect();
        let sch = Schedule::checkpoint_all(&g);
        let w = Watch::default();
        let held = |w: &Watch| {
            w.snapshot()
                .other
                .and_then(|o| o.2.plan.map(|p| (p.0, p.2)))
        };
        w.plan_in_other_order(&g, &order, 10.0, &sch, "first");
        w.plan_in_other_order(&g, &order, 12.0, &sch, "costlier");
        assert_eq!(held(&w), Some((10.0, "first".to_string())));
        w.plan_in_other_order(&g, &order, 8.0, &sch, "cheaper");
        assert_eq!(held(&w), Some((8.0, "cheaper".to_string())));
    }
}
