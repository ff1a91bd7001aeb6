//! `tiertrain`: TierTrain's queuing rule (Swaminathan and Prasad, Intel
//! Labs). Timings come from an all-fast-memory run, as TierTrain profiles
//! its first epoch: `ts(t)` and `te(t)` are the start and end of stage `t`
//! when every node computes once with nothing moved.
//!
//! - *Eviction*: an activation (a forward value a gradient reads, see
//!   [`super::offload_all`]) is evicted right after its last forward read
//!   `f` when its idle time `IT = ts(b) − te(f)`, up to its first backward
//!   read `b`, is at least `sz·(1/ER + 1/PR) + ST`. ER and PR are the
//!   device's copy bandwidths out and in; ST, the paper's "stay time", is
//!   a tuning constant (0–20 s at epoch scale in its Table 4) that we set
//!   to the two copies' latencies, so the rule asks exactly that a copy
//!   out and a copy back both fit the idle window.
//! - *Prefetch*: triggered at `ts(b) − (latency + sz/PR)`, i.e. in the
//!   last stage that starts by then (the schedule's copies start with a
//!   stage). One prefetch channel: requests are taken in the order the
//!   backward pass needs them; one whose trigger is earlier than the
//!   channel's `t_busy` is dropped (the value then stays in fast memory),
//!   and an accepted one sets `t_busy = ts(b)`.
//! - The paper's partial evictions (part of a tensor when the whole does
//!   not fit the window) are not modelled: a value moves whole or not at
//!   all.
//! - The rule ignores the budget, as TierTrain does: it reduces fast
//!   memory as far as timing allows, and a budget below the resulting peak
//!   has no TierTrain plan (infeasible).
//! - Like offload-all, the copy out runs during stage `f` (beside the last
//!   forward read), so the fast copy is gone from the end of `f`.

use super::offload_all::{build, fates, Fate};
use super::tiered;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::graph::Graph;
use crate::units::Bytes;

pub struct TierTrain;

impl Strategy for TierTrain {
    fn name(&self) -> &'static str {
        "tiertrain"
    }

    fn describe(&self) -> &'static str {
        "TierTrain: evict an activation when its idle time covers both copies, prefetch just in time on one channel (needs --device)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        let n = g.len();
        let rd = tiered::reads(g);
        // The activations, with nothing cheap: TierTrain recomputes nothing.
        let (mut fate, last) = fates(g, &rd, &|_| false);
        let all_fast = crate::schedule::Schedule::identity(n);
        let dur = tiered::stage_compute(g, &all_fast, dev);
        let mut start = vec![0.0; n + 1];
        for t in 0..n {
            start[t + 1] = start[t] + dur[t];
        }
        let ts = |t: usize| start[t];
        let te = |t: usize| start[t + 1];
        let mut requests: Vec<(usize, usize, usize)> = (0..n)
            .filter_map(|i| match fate[i] {
                Fate::Offload { out, need } => Some((need, out, i)),
                _ => None,
            })
            .collect();
        requests.sort_by_key(|&(need, _, i)| (need, std::cmp::Reverse(i)));
        let mut fetch = vec![0usize; n];
        let mut t_busy = f64::NEG_INFINITY;
        let (mut evicted, mut too_short, mut busy) = (0usize, 0usize, 0usize);
        for (need, out, i) in requests {
            let to_slow = tiered::copy_secs(g, dev, i, true);
            let to_fast = tiered::copy_secs(g, dev, i, false);
            let idle = ts(need) - te(out);
            if idle < to_slow + to_fast {
                fate[i] = Fate::Keep;
                too_short += 1;
                continue;
            }
            let trigger = ts(need) - to_fast;
            if t_busy > trigger {
                fate[i] = Fate::Keep;
                busy += 1;
                continue;
            }
            t_busy = ts(need);
            // The last stage starting by the trigger, within the window.
            let p = (out + 1..need)
                .rev()
                .find(|&p| ts(p) <= trigger)
                .unwrap_or(out + 1);
            fetch[i] = p;
            evicted += 1;
        }
        let Some(sch) = build(g, &fate, &last, &fetch, &opts.stop) else {
            return Err(StrategyError::Other(format!(
                "{} stopped at its time limit",
                self.name()
            )));
        };
        let detail = format!(
            "{evicted} activations evicted; {too_short} kept for a short idle time, {busy} for a busy prefetch channel"
        );
        tiered::finish(g, budget, dev, sch, self.name(), detail)
    }
}
