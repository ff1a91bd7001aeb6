//! Units that carry meaning: byte counts and budget expressions.
//!
//! Memory is counted in whole bytes everywhere, so that peaks computed by the
//! simulator compare exactly against budgets; only solvers see scaled floats.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub};

/// A number of bytes. Saturating subtraction keeps "budget minus fixed memory"
/// from wrapping when a budget is smaller than the resident parameters.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }

    pub fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }

    /// Scales by a rational factor, rounding up, so a scaled budget never
    /// admits a plan that the unscaled one would reject.
    /// A product past u128 (a percentage of twenty digits and eighteen
    /// decimals times a large peak) saturates like any other result past
    /// u64, instead of wrapping to some smaller budget.
    pub fn scale_ceil(self, num: u128, den: u128) -> Bytes {
        let v = (self.0 as u128)
            .checked_mul(num)
            .map_or(u128::MAX, |p| p.div_ceil(den));
        Bytes(v.min(u64::MAX as u128) as u64)
    }

    /// Human-readable form with decimal units, e.g. `3.29 GB`.
    pub fn human(self) -> String {
        self.human_rounded(f64::round)
    }

    /// [`Bytes::human`] rounded up: for a floor, which typed back must not
    /// fall below it (`14.260 GB` for 14,260,197,696 bytes was refused).
    pub fn human_up(self) -> String {
        self.human_rounded(f64::ceil)
    }

    fn human_rounded(self, round: fn(f64) -> f64) -> String {
        let v = self.0 as f64;
        let (div, unit) = if v >= 1e12 {
            (1e12, "TB")
        } else if v >= 1e9 {
            (1e9, "GB")
        } else if v >= 1e6 {
            (1e6, "MB")
        } else if v >= 1e3 {
            (1e3, "KB")
        } else {
            return format!("{} B", self.0);
        };
        format!("{:.3} {}", round(v / div * 1e3) / 1e3, unit)
    }

    /// Human-readable form with binary units, e.g. `16.000 GiB`, for
    /// budgets the user gave in binary units.
    pub fn human_binary(self) -> String {
        let v = self.0 as f64;
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            let div = (1u64 << shift) as f64;
            if v >= div {
                return format!("{:.3} {unit}", v / div);
            }
        }
        format!("{} B", self.0)
    }
}

/// A float as a person reads it: at most 12 significant digits, so that
/// float noise (`25.999999999999996`) prints as `26`; whole numbers of
/// any size stay exact.
pub fn short_float(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let int_digits = v.abs().log10().floor() as i32 + 1;
    // Past 10^17 the digits are not the number's (a cost of 1e307 printed
    // 308 of them): twelve significant ones, as below.
    if int_digits > 17 {
        let s = format!("{v:.11e}");
        return match s.split_once('e') {
            Some((m, e)) if m.contains('.') => {
                format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
            }
            _ => s,
        };
    }
    let decimals = (12 - int_digits).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

// Sums saturate: a graph's total is capped at 2^53 on load, but a
// hand-written plan may allocate the same large node into many registers
// at once; its live bytes then stay "more than any budget" rather than
// wrap around to a small, fitting figure.
impl Add for Bytes {
    type Output = Bytes;
    fn add(self, o: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(o.0))
    }
}

impl AddAssign for Bytes {
    fn add_assign(&mut self, o: Bytes) {
        self.0 = self.0.saturating_add(o.0);
    }
}

impl Sub for Bytes {
    type Output = Bytes;
    fn sub(self, o: Bytes) -> Bytes {
        Bytes(self.0 - o.0)
    }
}

impl Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Bytes {
        Bytes(iter.fold(0u64, |a, b| a.saturating_add(b.0)))
    }
}

/// A budget as the user wrote it: either absolute, or relative to the
/// checkpoint-all peak of the graph it is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSpec {
    Absolute(Bytes),
    /// Percentage as an exact fraction `num / den` of 100%, so `90%` of an
    /// odd peak rounds up exactly rather than through a float.
    Percent {
        num: u128,
        den: u128,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid size '{input}': {reason}")]
pub struct SizeError {
    pub input: String,
    pub reason: String,
    /// What went wrong, for a caller that parses a size as a budget is
    /// parsed but says it in its own words (a capacity, a bandwidth).
    pub kind: SizeErrorKind,
}

/// The failures a caller words differently; everything else keeps its
/// reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeErrorKind {
    Negative,
    UnknownUnit,
    Other,
}

/// Why a decimal did not parse: not a number at all, or one past what a
/// budget can hold (which used to read "expected a number" too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecimalError {
    NotANumber,
    TooLarge,
    TooPrecise,
}

/// Parses a decimal string like `12.5` into an exact fraction.
fn parse_decimal(s: &str) -> Result<(u128, u128), DecimalError> {
    let s = s.trim();
    let (int, frac) = match s.split_once('.') {
        Some((a, b)) => (a, b),
        None => (s, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return Err(DecimalError::NotANumber);
    }
    // Leading zeros are no magnitude.
    let int = int.trim_start_matches('0');
    if int.len() > 20 {
        return Err(DecimalError::TooLarge);
    }
    if frac.len() > 18 {
        return Err(DecimalError::TooPrecise);
    }
    parse_exact(int, frac).ok_or(DecimalError::TooLarge)
}

fn parse_exact(int: &str, frac: &str) -> Option<(u128, u128)> {
    let den = 10u128.pow(frac.len() as u32);
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_v: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    Some((int_v.checked_mul(den)?.checked_add(frac_v)?, den))
}

impl DecimalError {
    fn reason(self) -> &'static str {
        match self {
            DecimalError::NotANumber => "expected a number",
            DecimalError::TooLarge => "too large",
            DecimalError::TooPrecise => "at most 18 decimals",
        }
    }
}

/// The percentage a bare budget number probably meant (`90` or `0.9` for
/// 90%), when it is written as one: digits and a point, no unit, and the
/// percentage of `peak` is at least `min` (a suggestion that is itself
/// infeasible sends the user from one failure to the next). Callers ask
/// only when the bytes it says are below the smallest budget, where no plan
/// fits and a slip is likelier than a wish. Shared by `-b`, the inline
/// `--budgets` list and budget files, so that each says the same.
pub fn percent_meant(input: &str, peak: Bytes, min: Bytes) -> Option<String> {
    let t = input.trim();
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    let pct = if v > 0.0 && v < 1.0 {
        v * 100.0
    } else if (1.0..=100.0).contains(&v) {
        v
    } else {
        return None;
    };
    if pct / 100.0 * peak.as_f64() < min.as_f64() {
        return None;
    }
    Some(format!("did you mean {}%?", short_float(pct)))
}

impl BudgetSpec {
    /// Accepts `123456`, `1.5GB`, `16GiB`, `512 MB`, `90%`.
    pub fn parse(input: &str) -> Result<BudgetSpec, SizeError> {
        Self::parse_rounding(input).map(|(spec, _)| spec)
    }

    /// True when `input` is a count of bytes with a fraction (`74.9`,
    /// `74.9B`), which [`BudgetSpec::parse`] rounds down: callers say so,
    /// as it reads like a slip more than a wish.
    pub fn drops_a_fraction(input: &str) -> bool {
        Self::parse_rounding(input).is_ok_and(|(_, dropped)| dropped)
    }

    fn parse_rounding(input: &str) -> Result<(BudgetSpec, bool), SizeError> {
        let err = |reason: &str| SizeError {
            input: input.to_string(),
            reason: reason.to_string(),
            kind: SizeErrorKind::Other,
        };
        let s = input.trim();
        if s.starts_with('-') {
            return Err(SizeError {
                kind: SizeErrorKind::Negative,
                ..err("a budget must be positive")
            });
        }
        if let Some(p) = s.strip_suffix('%') {
            let (num, den) = parse_decimal(p).map_err(|e| match e {
                DecimalError::NotANumber => err("expected a number before '%'"),
                e => err(e.reason()),
            })?;
            // `0%` is 0 bytes, as `0` is: each caller then says the same
            // about it (solve: below the smallest budget; a sweep: fits no
            // plan), where `0%` alone read "a budget must be positive".
            return Ok((
                BudgetSpec::Percent {
                    num,
                    den: den * 100,
                },
                false,
            ));
        }
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        if number.is_empty() {
            return Err(err("expected a number, optionally followed by a unit"));
        }
        let mult: u128 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" | "k" => 1_000,
            "mb" | "m" => 1_000_000,
            "gb" | "g" => 1_000_000_000,
            "tb" | "t" => 1_000_000_000_000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            u if u.starts_with('e')
                && u[1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') =>
            {
                return Err(err(
                    "no exponents: write the number in full or with a unit (1e9 is 1GB)",
                ))
            }
            _ => {
                return Err(SizeError {
                    kind: SizeErrorKind::UnknownUnit,
                    ..err("unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB or NN%)")
                })
            }
        };
        let (num, den) = parse_decimal(number).map_err(|e| err(e.reason()))?;
        // Twenty digits and eighteen decimals times a TB pass u128. A byte
        // budget is a cap, so a fraction of a byte rounds down: 64.5 bytes
        // let a 65-byte plan "fit" when it rounded up.
        let bytes = num.checked_mul(mult).map_or(u128::MAX, |p| p / den);
        if bytes > u64::MAX as u128 {
            return Err(err("too large"));
        }
        // Only a count of bytes: `1.3KiB` is 1,331.2 bytes by arithmetic,
        // not by a slip.
        let dropped = mult == 1 && num % den != 0;
        Ok((BudgetSpec::Absolute(Bytes(bytes as u64)), dropped))
    }

    /// Resolves against the checkpoint-all peak, rounding percentages up.
    pub fn resolve(self, checkpoint_all_peak: Bytes) -> Bytes {
        match self {
            BudgetSpec::Absolute(b) => b,
            BudgetSpec::Percent { num, den } => checkpoint_all_peak.scale_ceil(num, den),
        }
    }
}

impl fmt::Display for BudgetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetSpec::Absolute(b) => write!(f, "{b}"),
            BudgetSpec::Percent { num, den } => {
                write!(f, "{}%", (*num as f64) * 100.0 / (*den as f64))
            }
        }
    }
}

/// A span of wall-clock time. Plans with a device are measured in seconds,
/// not cost units, so the two cannot be mixed up in a report.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seconds(pub f64);

impl Seconds {
    pub const ZERO: Seconds = Seconds(0.0);

    pub fn get(self) -> f64 {
        self.0
    }

    /// The later of two instants: a statement starts when everything it
    /// waits on is done.
    pub fn max(self, o: Seconds) -> Seconds {
        Seconds(self.0.max(o.0))
    }

    pub fn min(self, o: Seconds) -> Seconds {
        Seconds(self.0.min(o.0))
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        // Past a year or below a nanosecond, fixed point prints hundreds
        // of digits (1e300 s) or nothing but zeros (3e-12 s as 0.000 us).
        if v != 0.0 && !(1e-9..3.2e7).contains(&v.abs()) {
            write!(f, "{v:.3e} s")
        } else if v != 0.0 && v.abs() < 1e-3 {
            write!(f, "{:.3} us", v * 1e6)
        } else if v.abs() < 1.0 {
            write!(f, "{:.3} ms", v * 1e3)
        } else {
            write!(f, "{v:.3} s")
        }
    }
}

impl Add for Seconds {
    type Output = Seconds;
    fn add(self, o: Seconds) -> Seconds {
        Seconds(self.0 + o.0)
    }
}

impl AddAssign for Seconds {
    fn add_assign(&mut self, o: Seconds) {
        self.0 += o.0;
    }
}

impl Sub for Seconds {
    type Output = Seconds;
    fn sub(self, o: Seconds) -> Seconds {
        Seconds(self.0 - o.0)
    }
}

/// A transfer rate in bytes per second. Kept apart from plain floats so a
/// bandwidth is never divided the wrong way round.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bandwidth(f64);

impl Bandwidth {
    /// `None` unless the rate is finite and positive: a zero bandwidth would
    /// make every copy take forever, which no device file can mean.
    pub fn bytes_per_sec(v: f64) -> Option<Bandwidth> {
        (v.is_finite() && v > 0.0).then_some(Bandwidth(v))
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// Time to move `b` bytes at this rate.
    pub fn time(self, b: Bytes) -> Seconds {
        Seconds(b.as_f64() / self.0)
    }

    /// Parses `25GB/s`, `12.5 GiB/s`, `800MB/s` or a plain number of bytes
    /// per second.
    pub fn parse(input: &str) -> Result<Bandwidth, SizeError> {
        let s = input.trim();
        let size = s.strip_suffix("/s").unwrap_or(s);
        let err = |reason: &str, kind: SizeErrorKind| SizeError {
            input: input.to_string(),
            reason: reason.to_string(),
            kind,
        };
        // `25GB` is a size: a rate with a unit says per second, as a
        // datasheet does (a plain number is bytes per second).
        if size.len() == s.len() && s.ends_with(['B', 'b']) {
            return Err(err(
                "a size, not a rate: write it per second (25GB/s)",
                SizeErrorKind::Other,
            ));
        }
        // Link rates are often given in bits (`40Gb/s`): a lowercase `b`
        // was read as bytes, eight times too fast.
        if size.ends_with('b') {
            return Err(err(
                "a lowercase b reads as bits: remat takes bytes, so write B (40Gb/s is 5GB/s)",
                SizeErrorKind::Other,
            ));
        }
        // A plain number of bytes per second may be a fraction (0.5/s);
        // as a size it would round down to 0 bytes, and be refused as not
        // positive.
        if let Ok(v) = size.strip_suffix('B').unwrap_or(size).trim().parse::<f64>() {
            return Bandwidth::bytes_per_sec(v).ok_or_else(|| {
                err(
                    "a bandwidth must be positive and finite",
                    SizeErrorKind::Other,
                )
            });
        }
        // The size is parsed as a budget is; its errors spoke of budgets
        // ("a budget must be positive") and offered NN% for a rate.
        match BudgetSpec::parse(size) {
            Ok(BudgetSpec::Absolute(b)) => Bandwidth::bytes_per_sec(b.as_f64())
                .ok_or_else(|| err("a bandwidth must be positive", SizeErrorKind::Other)),
            Ok(BudgetSpec::Percent { .. }) => Err(err(
                "a bandwidth cannot be a percentage",
                SizeErrorKind::Other,
            )),
            Err(e) => Err(match e.kind {
                SizeErrorKind::Negative => err("a bandwidth must be positive", e.kind),
                SizeErrorKind::UnknownUnit => err(
                    "unknown unit (use B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s or TiB/s)",
                    e.kind,
                ),
                SizeErrorKind::Other => err(&e.reason, e.kind),
            }),
        }
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", Bytes(self.0.round() as u64).human())
    }
}

/// A duration that does not parse: named as one (a device file's bad
/// latency used to read "invalid size").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration '{input}': {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

/// Parses a duration: `10us`, `1.5 ms`, `2s`, `300ns`, or plain seconds.
pub fn parse_seconds(input: &str) -> Result<Seconds, DurationError> {
    let s = input.trim();
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let split = s
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')
        })
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let v: f64 = number
        .trim()
        .parse()
        .map_err(|_| err("expected a number, optionally followed by s, ms, us or ns"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        _ => return Err(err("unknown unit (use s, ms, us or ns)")),
    };
    let v = v * scale;
    if !(v.is_finite() && v >= 0.0) {
        return Err(err("a duration must be finite and not negative"));
    }
    Ok(Seconds(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A floor is shown rounded up: typed back, it must not fall below.
    #[test]
    fn floors_round_up() {
        assert_eq!(Bytes(14_260_197_696).human(), "14.260 GB");
        assert_eq!(Bytes(14_260_197_696).human_up(), "14.261 GB");
        assert_eq!(Bytes(14_260_000_000).human_up(), "14.260 GB");
        assert_eq!(Bytes(999).human_up(), "999 B");
    }

    #[test]
    fn seconds_print_readably_at_any_size() {
        assert_eq!(Seconds(3.4e-12).to_string(), "3.400e-12 s");
        assert_eq!(Seconds(2.5e-6).to_string(), "2.500 us");
        assert_eq!(Seconds(0.0).to_string(), "0.000 ms");
        assert_eq!(Seconds(7e300).to_string(), "7.000e300 s");
        assert_eq!(Seconds(12.0).to_string(), "12.000 s");
    }

    #[test]
    fn parses_units() {
        assert_eq!(
            BudgetSpec::parse("1.5GB").unwrap(),
            BudgetSpec::Absolute(Bytes(1_500_000_000))
        );
        assert_eq!(
            BudgetSpec::parse("16GiB").unwrap(),
            BudgetSpec::Absolute(Bytes(16 << 30))
        );
        assert_eq!(
            BudgetSpec::parse("512 KB").unwrap(),
            BudgetSpec::Absolute(Bytes(512_000))
        );
        assert_eq!(
            BudgetSpec::parse("42").unwrap(),
            BudgetSpec::Absolute(Bytes(42))
        );
        assert!(BudgetSpec::parse("12XB").is_err());
        assert!(BudgetSpec::parse("-5").is_err());
        assert!(BudgetSpec::parse("%").is_err());
    }

    #[test]
    fn short_floats_drop_noise_only() {
        assert_eq!(short_float(25.999999999999996), "26");
        assert_eq!(short_float(23781002090496.0), "23781002090496");
        assert_eq!(short_float(0.125), "0.125");
        assert_eq!(short_float(90.0), "90");
        assert_eq!(short_float(1e307), "1e307");
        assert_eq!(short_float(-2.5e20), "-2.5e20");
        assert_eq!(short_float(123456789012345678.0), "1.23456789012e17");
        assert_eq!(Bytes(16 << 30).human_binary(), "16.000 GiB");
        assert_eq!(
            BudgetSpec::parse("-5GB").unwrap_err().reason,
            "a budget must be positive"
        );
    }

    #[test]
    fn parses_bandwidths_and_durations() {
        assert_eq!(Bandwidth::parse("25GB/s").unwrap().get(), 25e9);
        assert_eq!(Bandwidth::parse("1KiB/s").unwrap().get(), 1024.0);
        assert!(Bandwidth::parse("0GB/s").is_err());
        assert!(Bandwidth::parse("50%").is_err());
        assert!(Bandwidth::parse("25GB").is_err());
        assert_eq!(Bandwidth::parse("2500").unwrap().get(), 2500.0);
        // Fractions of a byte per second are rates, not sizes rounded to 0.
        assert_eq!(Bandwidth::parse("0.5/s").unwrap().get(), 0.5);
        assert_eq!(Bandwidth::parse("0.5B/s").unwrap().get(), 0.5);
        // Bits are refused, not read as bytes.
        for bits in ["40Gb/s", "40gb/s", "40Kb/s", "40b/s"] {
            let e = Bandwidth::parse(bits).unwrap_err().to_string();
            assert!(e.contains("reads as bits"), "{bits}: {e}");
        }
        assert_eq!(Bandwidth::parse("5GB/s").unwrap().get(), 5e9);
        for bad in ["-1/s", "nan", "inf", "0/s"] {
            assert!(Bandwidth::parse(bad).is_err(), "{bad}");
        }
        assert!((parse_seconds("10us").unwrap().get() - 10e-6).abs() < 1e-18);
        assert_eq!(parse_seconds("2").unwrap(), Seconds(2.0));
        assert_eq!(
            parse_seconds("-1s").unwrap_err().to_string(),
            "invalid duration '-1s': a duration must be finite and not negative"
        );
        assert!(parse_seconds("3 fortnights").is_err());
    }

    #[test]
    fn percent_rounds_up_exactly() {
        // The benchmark README's own example: 46,319 at 90% and 80%.
        let peak = Bytes(46_319);
        assert_eq!(
            BudgetSpec::parse("90%").unwrap().resolve(peak),
            Bytes(41_688)
        );
        assert_eq!(
            BudgetSpec::parse("80%").unwrap().resolve(peak),
            Bytes(37_056)
        );
        // 90% of 100 is exactly 90, where a float product would round to 91.
        assert_eq!(
            BudgetSpec::parse("90%").unwrap().resolve(Bytes(100)),
            Bytes(90)
        );
        assert_eq!(
            BudgetSpec::parse("12.5%").unwrap().resolve(Bytes(8)),
            Bytes(1)
        );
    }
}
