//! Devices: what a machine's memory tiers and copy engines can do, read from
//! `devices/*.yaml`. A device turns a plan's costs into seconds and gives
//! the timed simulator its slow tier; without one, the tool measures plans
//! in cost units exactly as before.

use crate::units::{parse_seconds, Bandwidth, BudgetSpec, Bytes, Seconds, SizeErrorKind};
use serde::Deserialize;
use std::path::Path;

/// How copies between the tiers share hardware. Chosen per device because
/// it decides whether an offload and a prefetch can overlap each other, and
/// whether either can overlap compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engines {
    /// One copy engine per direction (GPU DMA engines behind PCIe or
    /// NVLink-C2C): a copy out and a copy in can run at the same time.
    Duplex,
    /// One engine for both directions: copies run one after another.
    Shared,
    /// No copy engine: the processor moves the bytes itself, so a copy
    /// occupies the compute stream (AutoTM's synchronous moves on a CPU).
    Synchronous,
}

impl Engines {
    pub fn as_str(self) -> &'static str {
        match self {
            Engines::Duplex => "duplex",
            Engines::Shared => "shared",
            Engines::Synchronous => "synchronous",
        }
    }
}

/// How node costs become seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Throughput {
    /// Cost units (the graph's `cost_unit`, usually flop) per second.
    PerSecond(f64),
    /// The graph's costs already are seconds (profiled graphs).
    CostIsSeconds,
}

/// The slow tier: host memory behind a link, or persistent memory.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowTier {
    pub capacity: Bytes,
    /// Fast → slow (offload, "device to host").
    pub to_slow: Bandwidth,
    /// Slow → fast (prefetch, "host to device").
    pub to_fast: Bandwidth,
    /// Fixed time every copy pays before its first byte moves.
    pub latency: Seconds,
    pub engines: Engines,
    /// Rate at which a kernel reads operands straight from the slow tier,
    /// when it may at all (persistent memory on the memory bus; not a GPU
    /// behind PCIe).
    pub direct_read: Option<Bandwidth>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub name: String,
    pub throughput: Throughput,
    /// Size of the fast tier: the default budget.
    pub fast_capacity: Bytes,
    pub slow: SlowTier,
}

impl Device {
    /// A one-line note when the graph's costs may not be in the unit this
    /// device's throughput counts. The throughput is cost units per second,
    /// and every device file's figure is flop/s, so a graph whose costs are
    /// profiled milliseconds or unlabelled (the public Checkmate graphs,
    /// the random DAGs) gets step times that look exact and mean nothing:
    /// MobileNet's profiled graph at 60% on the A100 showed a 0.003 us step.
    /// The other way round, a device whose costs are seconds on a graph
    /// that labels them otherwise (flop: a tiny MLP's step read 5.7 years;
    /// ms: a silent factor of 1000) gets a note too; an unlabelled graph
    /// does not, as the device file is then the only word on the unit.
    pub fn cost_unit_note(&self, g: &crate::graph::Graph) -> Option<String> {
        let unit = g.cost_unit.as_deref();
        let Throughput::PerSecond(rate) = self.throughput else {
            let u = unit?;
            let seconds = ["s", "sec", "secs", "second", "seconds"]
                .iter()
                .any(|s| u.trim().eq_ignore_ascii_case(s));
            return (!seconds).then(|| {
                format!(
                    "{} counts its costs in '{}', but {} takes costs as seconds (cost_is_seconds): step times are the costs read as seconds, so they are only real if the costs are seconds",
                    g.name,
                    u.escape_debug(),
                    self.name
                )
            });
        };
        if unit.is_some_and(|u| u.eq_ignore_ascii_case("flop") || u.eq_ignore_ascii_case("flops")) {
            return None;
        }
        let label = unit.map_or("gives no cost_unit for its costs".to_string(), |u| {
            format!("counts its costs in '{u}'")
        });
        Some(format!(
            "{} {label}, but {} computes {rate:e} cost units per second as flop/s: step times are the costs over that rate, so they are only real if the costs are flop",
            g.name, self.name
        ))
    }

    /// Why not: step times that overflow to infinity. A throughput or a
    /// bandwidth can be positive and finite yet so small against the
    /// graph's costs and sizes that a plan's step is `inf` (a throughput of
    /// 1e-320 made `solve` print "inf s" and exit 0, and `plot-plan` loop
    /// forever on its axis). Checked against a hundred passes over the
    /// graph, more than any plan recomputes, and the largest value's copy.
    pub fn check_graph(&self, g: &crate::graph::Graph) -> Result<(), String> {
        let step = self.compute_time(g.total_cost() * 100.0).get();
        if !step.is_finite() {
            return Err(format!(
                "compute: {:e} cost units of {} take an infinite time at this throughput",
                g.total_cost(),
                g.name
            ));
        }
        let largest = g.ids().map(|i| g.memory(i)).max().unwrap_or(Bytes::ZERO);
        for to_slow in [true, false] {
            let t = self
                .copy_time(Bytes(largest.get().saturating_mul(100)), to_slow)
                .get();
            if !t.is_finite() {
                return Err(format!(
                    "slow: copying {}'s largest value ({largest}) takes an infinite time at this bandwidth",
                    g.name
                ));
            }
        }
        // Each copy also pays the latency: a hundred copies of every node
        // each way, more than any plan makes, must add up to a finite time
        // (a latency of 1e308 s passed the check above and gave "inf s").
        let copies = 200.0 * g.len() as f64;
        let latency = self.slow.latency.get() * copies;
        if !latency.is_finite() {
            return Err(format!(
                "slow.latency: {:e} s per copy makes {}'s step times infinite",
                self.slow.latency.get(),
                g.name
            ));
        }
        // Every byte moved a hundred times each way, and read directly as
        // often; then finite parts can still add up to infinity.
        let bytes = Bytes(
            g.ids()
                .map(|i| g.memory(i).get())
                .sum::<u64>()
                .saturating_mul(100),
        );
        let parts = [
            ("slow.to_slow", self.slow.to_slow.time(bytes).get()),
            ("slow.to_fast", self.slow.to_fast.time(bytes).get()),
            (
                "slow.direct_read",
                self.direct_read_time(bytes).map_or(0.0, |t| t.get()),
            ),
        ];
        if let Some((key, _)) = parts.iter().find(|(_, t)| !t.is_finite()) {
            return Err(format!(
                "{key}: moving {}'s values takes an infinite time at this bandwidth",
                g.name
            ));
        }
        let worst = step + latency + parts.iter().map(|(_, t)| t).sum::<f64>();
        if !worst.is_finite() {
            return Err(format!(
                "its compute and copy times for {} add up to an infinite step time",
                g.name
            ));
        }
        self.check_time_range(g, largest)
    }

    /// Why not: a copy that takes more than [`MAX_TIME_RATIO`] times the
    /// whole step's compute. The step-time programs count every duration in
    /// units of the all-fast step, and at 1e308 flop/s against a 25 GB/s
    /// link one copy was 1e298 such units: HiGHS refused the model ("the
    /// step cover program failed") and every step time printed as 0.000 us.
    /// No real device is that lopsided; the usual cause is a throughput in
    /// other units than the graph's costs.
    fn check_time_range(&self, g: &crate::graph::Graph, largest: Bytes) -> Result<(), String> {
        let all_fast = self.all_fast_step(g).get();
        if all_fast <= 0.0 {
            return Ok(());
        }
        let longest = [
            self.copy_time(largest, true).get(),
            self.copy_time(largest, false).get(),
            self.direct_read_time(largest).map_or(0.0, |t| t.get()),
        ]
        .into_iter()
        .fold(0.0, f64::max);
        let ratio = longest / all_fast;
        if ratio <= MAX_TIME_RATIO {
            return Ok(());
        }
        // A copy that alone takes longer than any real one (11 days) is
        // that figure's fault, not the throughput's, which the message used
        // to blame for `to_slow: 1e-300` and `latency: 1e300s` alike.
        let terms = [
            ("slow.latency", self.slow.latency.get()),
            ("slow.to_slow", self.slow.to_slow.time(largest).get()),
            ("slow.to_fast", self.slow.to_fast.time(largest).get()),
            (
                "slow.direct_read",
                self.direct_read_time(largest).map_or(0.0, |t| t.get()),
            ),
        ];
        let (culprit, _) =
            terms.into_iter().fold(
                ("", f64::NEG_INFINITY),
                |a, b| if b.1 > a.1 { b } else { a },
            );
        if longest > 1e6 {
            return Err(format!(
                "{culprit}: one copy of {}'s largest value ({}) takes {} ({ratio:.1e} times all its computations); durations more than {MAX_TIME_RATIO:e} times apart cannot be planned with: check {culprit}",
                g.name,
                largest.human(),
                Seconds(longest),
            ));
        }
        let (key, rate) = match self.throughput {
            Throughput::PerSecond(r) => (
                "compute.throughput",
                format!("at {r:e} cost units per second"),
            ),
            Throughput::CostIsSeconds => {
                ("compute.cost_is_seconds", "with costs as seconds".into())
            }
        };
        Err(format!(
            "{key}: {rate}, all of {}'s computations take {}, and one copy of its largest value {} ({ratio:.1e} times as long); durations more than {MAX_TIME_RATIO:e} times apart cannot be planned with: check the throughput against the graph's cost unit",
            g.name,
            Seconds(all_fast),
            Seconds(longest),
        ))
    }

    /// Time one computation of a node of this cost takes.
    pub fn compute_time(&self, cost: f64) -> Seconds {
        match self.throughput {
            Throughput::PerSecond(r) => Seconds(cost / r),
            Throughput::CostIsSeconds => Seconds(cost),
        }
    }

    /// Duration of one copy of `bytes` in the given direction, latency
    /// included.
    pub fn copy_time(&self, bytes: Bytes, to_slow: bool) -> Seconds {
        let bw = if to_slow {
            self.slow.to_slow
        } else {
            self.slow.to_fast
        };
        self.slow.latency + bw.time(bytes)
    }

    /// Extra time a computation spends reading `bytes` of operands straight
    /// from the slow tier; `None` where the device forbids it.
    pub fn direct_read_time(&self, bytes: Bytes) -> Option<Seconds> {
        self.slow.direct_read.map(|bw| bw.time(bytes))
    }

    /// The step time of a plan that computes every node once from fast
    /// memory: the all-fast reference that overheads are quoted against.
    pub fn all_fast_step(&self, g: &crate::graph::Graph) -> Seconds {
        self.compute_time(g.total_cost())
    }

    /// A content hash of the parsed figures (not the file's text, so that
    /// comments and `40GB` against `40000000000` change nothing): sweep
    /// rows carry it, so that rows timed on one device are never resumed
    /// under another.
    pub fn fingerprint(&self) -> crate::graph::Fingerprint {
        crate::graph::Fingerprint::of_text(&format!("{self:?}"))
    }

    pub fn load(path: &Path) -> Result<Device, DeviceError> {
        let file = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::MAX_SMALL_BYTES).map_err(|e| {
            DeviceError {
                file: file.clone(),
                msg: format!("cannot read: {e}"),
            }
        })?;
        Device::parse(&text).map_err(|msg| DeviceError { file, msg })
    }

    /// Parses a device file's text; the error is one line without the
    /// file name, which [`Device::load`] adds.
    pub fn parse(text: &str) -> Result<Device, String> {
        // Before the parser, which takes a minute on a few thousand
        // nested brackets.
        crate::input::check_nesting(text).map_err(|e| format!("not a device file: {e}"))?;
        let raw: RawDevice = serde_yaml::from_str(text)
            .map_err(|e| crate::input::plain_serde_message(&e.to_string()))?;
        raw.check()
    }
}

/// The most a single copy may take, in multiples of the all-fast step
/// ([`Device::check_graph`]). On ResNet-50 behind the A100's link HiGHS
/// built the step cover program at 5e13 (1e28 flop/s) and refused it at
/// 5e15 (1e30 flop/s); 1e12 leaves room, and is far past any real device
/// (one large activation over PCIe takes some 10^7 steps of a tiny graph
/// counted in flop).
pub const MAX_TIME_RATIO: f64 = 1e12;

/// A bad device file: one line naming the file, for exit code 2.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{file}: {msg}")]
pub struct DeviceError {
    pub file: String,
    pub msg: String,
}

// The file's shape. Sizes, rates and durations are strings with units
// (`40GB`, `25GB/s`, `10us`) or plain numbers (bytes, bytes/s, seconds),
// so a figure reads the way its datasheet prints it.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    compute: RawCompute,
    fast: RawFast,
    slow: RawSlow,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompute {
    throughput: Option<f64>,
    #[serde(default)]
    cost_is_seconds: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFast {
    capacity: Quantity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlow {
    capacity: Quantity,
    to_slow: Quantity,
    to_fast: Quantity,
    latency: Quantity,
    engines: Engines,
    direct_read: Quantity,
}

enum Quantity {
    Number(f64),
    Text(String),
}

/// By hand rather than `#[serde(untagged)]`: an untagged enum's error
/// ("data did not match any variant of untagged enum Quantity") named an
/// internal type and the section instead of the key, and said nothing of
/// what to write.
impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Quantity, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or a figure with its unit (40GB, 25GB/s, 10us)")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity::Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity::Number(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity::Text(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Quantity, E> {
                Err(E::custom(
                    "no value; give a number or a figure with its unit (direct_read takes none for no direct reads)",
                ))
            }
        }
        d.deserialize_any(V)
    }
}

impl Quantity {
    fn bytes(&self, key: &str) -> Result<Bytes, String> {
        match self {
            // `as u64` would saturate 1e30 to 2^64 - 1 bytes without a word;
            // the same figure as text (`1e30`) is refused too.
            Quantity::Number(v) if v.is_finite() && *v >= u64::MAX as f64 => {
                Err(format!("{key}: {v:e} bytes is too large"))
            }
            Quantity::Number(v) if v.is_finite() && *v >= 0.0 && v.fract() == 0.0 => {
                Ok(Bytes(*v as u64))
            }
            Quantity::Number(v) if *v < 0.0 => Err(format!("{key}: {v}: a capacity must not be negative")),
            Quantity::Number(v) => Err(format!("{key}: {v} is not a whole number of bytes")),
            // Parsed as a budget is, but said as a capacity: the budget's
            // own words ("a budget must be positive", "or NN%") misled.
            Quantity::Text(s) => match BudgetSpec::parse(s) {
                Ok(BudgetSpec::Absolute(b)) => Ok(b),
                Ok(BudgetSpec::Percent { .. }) => {
                    Err(format!("{key}: a capacity cannot be a percentage"))
                }
                Err(e) => Err(match e.kind {
                    SizeErrorKind::Negative => {
                        format!("{key}: invalid size '{s}': a capacity must be positive")
                    }
                    SizeErrorKind::UnknownUnit => format!(
                        "{key}: invalid size '{s}': unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"
                    ),
                    SizeErrorKind::Other => format!("{key}: {e}"),
                }),
            },
        }
    }

    fn bandwidth(&self, key: &str) -> Result<Bandwidth, String> {
        match self {
            Quantity::Number(v) => Bandwidth::bytes_per_sec(*v)
                .ok_or_else(|| format!("{key}: a bandwidth must be positive and finite")),
            Quantity::Text(s) => Bandwidth::parse(s).map_err(|e| format!("{key}: {e}")),
        }
    }

    fn seconds(&self, key: &str) -> Result<Seconds, String> {
        match self {
            Quantity::Number(v) if v.is_finite() && *v >= 0.0 => Ok(Seconds(*v)),
            Quantity::Number(v) if *v < 0.0 => {
                Err(format!("{key}: {v}: a duration must not be negative"))
            }
            Quantity::Number(v) => Err(format!("{key}: {v} is not a duration")),
            Quantity::Text(s) => parse_seconds(s).map_err(|e| format!("{key}: {e}")),
        }
    }
}

impl RawDevice {
    fn check(self) -> Result<Device, String> {
        if self.name.trim().is_empty() {
            return Err("name: must not be empty".into());
        }
        // The name is echoed in summaries and notes: a newline or an
        // escape code in it splits or garbles them (as a graph's labels).
        // Sweep and max-batch rows are keyed by the device name, and CSV
        // cells are read back trimmed: a name with a space at either end
        // never matched its own rows, and every re-run solved them anew.
        if self.name.trim() != self.name {
            return Err(format!(
                "name: '{}' may not begin or end with white space (CSV rows are keyed by the name, trimmed)",
                self.name.escape_debug()
            ));
        }
        if self.name.chars().any(char::is_control) {
            return Err(format!(
                "name: '{}' may not contain control characters",
                self.name.escape_debug()
            ));
        }
        let throughput =
            match (self.compute.throughput, self.compute.cost_is_seconds) {
                (Some(_), true) => {
                    return Err(
                        "compute: give either throughput or cost_is_seconds: true, not both".into(),
                    )
                }
                (None, false) => return Err(
                    "compute: missing throughput (cost units per second) or cost_is_seconds: true"
                        .into(),
                ),
                (None, true) => Throughput::CostIsSeconds,
                (Some(v), false) if v.is_finite() && v > 0.0 => Throughput::PerSecond(v),
                (Some(v), false) => {
                    return Err(format!("compute.throughput: {v} is not a positive number"))
                }
            };
        let direct_read = match &self.slow.direct_read {
            Quantity::Text(s) if s.trim() == "none" => None,
            q => Some(q.bandwidth("slow.direct_read")?),
        };
        let fast_capacity = self.fast.capacity.bytes("fast.capacity")?;
        // The fast tier is the default budget: no plan fits in nothing.
        if fast_capacity == Bytes::ZERO {
            return Err("fast.capacity: must be more than 0 bytes".into());
        }
        Ok(Device {
            name: self.name,
            throughput,
            fast_capacity,
            slow: SlowTier {
                capacity: self.slow.capacity.bytes("slow.capacity")?,
                to_slow: self.slow.to_slow.bandwidth("slow.to_slow")?,
                to_fast: self.slow.to_fast.bandwidth("slow.to_fast")?,
                latency: self.slow.latency.seconds("slow.latency")?,
                engines: self.slow.engines,
                direct_read,
            },
        })
    }
}
