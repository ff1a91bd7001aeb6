//! `mc-dla`: MC-DLA's memory manager (after vDNN and MXNet): offload-all,
//! except that layers that are cheap to compute are recomputed during
//! backpropagation instead of being copied out and back (MC-DLA, footnote
//! 4: "activation layers, pooling layers, ...").
//!
//! "Cheap" is decided by cost per byte of output, not by layer name, so it
//! works on graphs without `op` labels: a node is cheap when it costs at
//! most [`CHEAP_FLOP_PER_BYTE`] per byte it outputs. On the zoo's models
//! every elementwise, normalisation and pooling layer costs 0.25 to 2.25
//! flop per byte and every convolution or dense layer 13.5 or more, so 4
//! separates them with room on both sides (docs/tiers.md has the table).
//! A cheap activation is kept through its forward reads, dropped, and
//! recomputed once, in the stage of its first backward read (its inputs
//! are then brought back, or recomputed, for that stage), then kept to its
//! last read. Everything else is exactly [`super::offload_all`].

use super::offload_all::offload_policy;
use super::tiered;
use super::{Solution, SolveOptions, Strategy, StrategyError};
use crate::device::Throughput;
use crate::graph::{Graph, NodeId};
use crate::units::Bytes;

pub struct McDla;

/// Flop per output byte at or below which a layer is recomputed (16 flop
/// per fp32 element).
pub const CHEAP_FLOP_PER_BYTE: f64 = 4.0;

/// With costs in seconds (`cost_is_seconds`) there are no flop: the
/// threshold is taken at a nominal 10 Tflop/s, in seconds per byte.
const NOMINAL_FLOP_PER_SECOND: f64 = 1e13;

impl Strategy for McDla {
    fn name(&self) -> &'static str {
        "mc-dla"
    }

    fn describe(&self) -> &'static str {
        "MC-DLA: offload-all, but layers costing at most 4 flop per output byte are recomputed in backward (needs --device)"
    }

    fn solve(
        &self,
        g: &Graph,
        budget: Bytes,
        opts: &SolveOptions,
    ) -> Result<Solution, StrategyError> {
        let dev = tiered::device(opts, self.name())?;
        let limit = match dev.throughput {
            Throughput::PerSecond(_) => CHEAP_FLOP_PER_BYTE,
            Throughput::CostIsSeconds => CHEAP_FLOP_PER_BYTE / NOMINAL_FLOP_PER_SECOND,
        };
        let cheap = |i: usize| {
            let id = NodeId::from(i);
            let mem = g.memory(id).as_f64();
            mem > 0.0 && g.cost(id) / mem <= limit
        };
        offload_policy(g, budget, dev, self.name(), &opts.stop, cheap)
    }
}
