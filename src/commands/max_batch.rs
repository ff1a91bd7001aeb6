//! `remat max-batch`: the largest batch each strategy trains in a device's memory.

use super::SolverArgs;
use anyhow::Result;
use remat::cli::{check_output, check_resumable_output, input_err, load_device, load_graph};
use remat::strategies;
use remat::units::BudgetSpec;
use remat::workflows::maxbatch::{self, CostRule, MaxBatchConfig, MaxBatchError};
use remat::workflows::resultlog::LogError;
use remat::workflows::sweep::{self, select_strategies};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file (YAML or JSON); costs and activation memory scale from its batch_size.
    model: PathBuf,
    /// Device memory, e.g. 16GB or 16GiB. Required without --device; with
    /// one it defaults to the device's fast-tier capacity.
    #[arg(long, allow_hyphen_values = true)]
    memory: Option<String>,
    /// Comma-separated strategy names, or `all` (every strategy that makes
    /// plans; checkpoint-all is always included).
    #[arg(short, long, visible_alias = "strategy", default_value = "all")]
    strategies: String,
    /// Allow cost up to this many times checkpoint-all's (`1.1`, `1.1x` or
    /// `10%`), instead of one extra forward pass.
    #[arg(long, conflicts_with = "device", allow_hyphen_values = true, value_parser = parse_overhead)]
    max_overhead: Option<f64>,
    /// Device file (devices/*.yaml): plans may use its slow tier, and a
    /// batch is allowed by its simulated step time instead of its cost.
    #[arg(long)]
    device: Option<PathBuf>,
    /// With --device: allow a step time up to this many times the all-fast
    /// step at the same batch (`1.25` or `25%`), instead of one extra
    /// forward pass's time.
    #[arg(long, requires = "device", allow_hyphen_values = true, value_parser = parse_slowdown)]
    max_slowdown: Option<f64>,
    /// Largest batch tried.
    #[arg(long, default_value_t = 1 << 24, allow_hyphen_values = true, value_parser = clap::value_parser!(u32).range(1..))]
    max_batch: u32,
    /// Write the results as CSV (rows are kept; re-running skips them).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Strategies searched in parallel (default: all cores).
    #[arg(long, allow_hyphen_values = true, value_parser = super::parse_jobs)]
    jobs: Option<usize>,
    #[command(flatten)]
    solver: SolverArgs,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let Args {
        model,
        memory,
        strategies,
        max_overhead,
        device,
        max_slowdown,
        max_batch,
        output,
        jobs,
        solver,
    } = args;
    // clap's `requires` is not checked once another argument's conflict
    // is (`--max-slowdown 1.25 --max-overhead 2` without --device ran a
    // slowdown rule with no device and ignored the overhead), so the rule
    // is stated here too.
    if max_slowdown.is_some() && device.is_none() {
        return Err(input_err(
            "--max-slowdown needs --device (a slowdown is of the simulated step time on a device); without one, use --max-overhead",
        ));
    }
    if let Some(o) = &output {
        check_resumable_output(o, "max-batch")?;
        let inputs: Vec<&std::path::Path> = std::iter::once(model.as_path())
            .chain(device.as_deref())
            .collect();
        check_output(o, &inputs)?;
    }
    let g = load_graph(&model)?;
    let device = device.as_deref().map(|d| load_device(d, &g)).transpose()?;
    let memory_arg = memory.clone();
    let memory = match (memory.as_deref().map(BudgetSpec::parse), &device) {
        (Some(Ok(BudgetSpec::Absolute(b))), _) => b,
        (Some(Ok(_)), _) => {
            return Err(input_err(
                "--memory must be a size such as 16GB, not a percentage",
            ))
        }
        (Some(Err(e)), _) => return Err(input_err(format!("--memory: {e}"))),
        (None, Some(d)) => d.fast_capacity,
        (None, None) => {
            return Err(input_err(
                "--memory is required without --device (with a device it defaults to the fast-tier capacity)",
            ))
        }
    };
    // Parameters, gradients and optimizer state do not shrink with the
    // batch: if they alone overflow the device, no batch fits, and a table
    // of zeros would hide why.
    if memory == remat::Bytes::ZERO {
        return Err(input_err("--memory must be more than 0 bytes"));
    }
    if g.fixed_memory >= memory {
        // Named as the user gave it: a device's capacity is not --memory.
        let whose = match (&memory_arg, &device) {
            (None, Some(d)) => format!("device '{}''s fast-tier capacity", d.name),
            _ => "--memory".to_string(),
        };
        return Err(input_err(format!(
            "{}: the fixed memory (parameters, gradients, optimizer state) alone needs {} ({} bytes), all of {whose} {} ({} bytes) or more: no batch fits",
            model.display(),
            g.fixed_memory.human(),
            g.fixed_memory,
            memory.human(),
            memory
        )));
    }
    let mut cfg = MaxBatchConfig::new(memory);
    cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
    check_runnable(&strategies, device.is_some())?;
    solver.check_no_recompute(cfg.strategies.iter().map(|s| s.name()))?;
    solver.note_search_orders(cfg.strategies.iter().map(|s| s.as_ref()), ctx.quiet);
    if let Some(f) = max_overhead {
        cfg.rule = CostRule::MaxOverhead(f);
    }
    if let Some(f) = max_slowdown {
        cfg.rule = CostRule::MaxSlowdown(f);
    }
    cfg.max_batch = max_batch.max(1);
    cfg.opts = solver.options(super::MAX_BATCH_SECONDS);
    let device_note = device.as_ref().map(|d| {
        format!(
            ", on device '{}' (step time against all-fast{})",
            d.name,
            if d.fast_capacity == memory {
                "; memory is its fast-tier capacity"
            } else {
                ""
            }
        )
    });
    // As in solve: a --memory above the device's fast tier is searched as
    // given, and the batches found fit it, not the card.
    if let Some(d) = device
        .as_ref()
        .filter(|d| memory > d.fast_capacity && !ctx.quiet)
    {
        eprintln!(
            "note: --memory {} is more than {}'s fast memory ({}): the batches fit the memory given, not the device",
            memory.human(),
            d.name,
            d.fast_capacity.human()
        );
    }
    cfg.opts.device = device.map(std::sync::Arc::new);
    cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
    cfg.quiet = ctx.quiet;
    cfg.output = output.clone();
    remat::cli::interrupt::exit_on_interrupt(match &output {
        Some(o) => format!(
            "interrupted: the strategies finished so far are in {}; run the same command again to resume",
            o.display()
        ),
        None => "interrupted".into(),
    });
    let rows = maxbatch::run(&g, &cfg).map_err(|e| match e {
        MaxBatchError::Log(
            LogError::Format { .. } | LogError::OtherKind { .. } | LogError::Busy { .. },
        ) => input_err(e.to_string()),
        e => e.into(),
    })?;
    outln!(
        "{} at {} ({} bytes), cost rule {}{}",
        g.name,
        memory.human(),
        memory,
        cfg.rule.label(),
        device_note.unwrap_or_default()
    )?;
    out!("{}", maxbatch::render(&rows))?;
    if let Some(o) = output.filter(|_| !ctx.quiet) {
        eprintln!("wrote {}", o.display());
    }
    Ok(())
}

/// Strategies named in `-s` that cannot answer a max-batch search are
/// refused as `solve` refuses them: lp-bound makes no plan (it was dropped
/// from the table without a word), and a policy that moves values to a
/// slow tier has none without --device ([`super::check_device_named`]). The
/// group `all` means the strategies that make plans.
fn check_runnable(list: &str, device: bool) -> Result<()> {
    super::check_device_named(list, device)?;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if strategies::by_name(name).is_some_and(|s| !s.makes_plans()) {
            return Err(input_err(format!(
                "-s {name}: it makes no plan, so it has no batch to find; drop it from -s"
            )));
        }
    }
    Ok(())
}

/// The largest slowdown taken as a bare number (see [`parse_slowdown`]).
const MAX_BARE_SLOWDOWN: f64 = 10.0;

/// `1.25` or `25%` (a quarter slower than all-fast). A bare number below 1
/// would mean faster than all fast memory, which no plan is: refused, with
/// the percentage it probably meant.
fn parse_slowdown(s: &str) -> Result<f64, String> {
    parse_factor(s, Factor::Slowdown)
}

/// `--max-overhead`, read as `--max-slowdown` is: no plan costs less than
/// checkpoint-all, so below 1 every batch would be refused and the answer
/// would read "max batch 0"; and a bare 25 is more likely 25% than 25
/// times the cost.
fn parse_overhead(s: &str) -> Result<f64, String> {
    parse_factor(s, Factor::Overhead)
}

#[derive(Clone, Copy)]
enum Factor {
    Slowdown,
    Overhead,
}

fn parse_factor(s: &str, what: Factor) -> Result<f64, String> {
    let (example, longer, below) = match what {
        Factor::Slowdown => (
            "a slowdown such as 1.25, 1.25x or 25%",
            "steps",
            "faster than all-fast memory",
        ),
        Factor::Overhead => (
            "an overhead such as 1.1, 1.1x or 10% (at least 1: the checkpoint-all cost)",
            "costs",
            "cheaper than checkpoint-all; it is at least 1",
        ),
    };
    let t = s.trim();
    let factor = t.strip_suffix(['x', 'X']).map(str::trim);
    let v = match (t.strip_suffix('%'), factor) {
        (Some(p), _) => p.trim().parse::<f64>().ok().map(|p| 1.0 + p / 100.0),
        (None, Some(f)) => f.parse::<f64>().ok(),
        (None, None) => t.parse::<f64>().ok(),
    }
    .filter(|v| v.is_finite())
    .ok_or(format!("expected {example}"))?;
    // A bare 25 is more likely 25% than a step 25 times as long: asked for,
    // as --gap asks for 5%; a factor that large is written 25x.
    if factor.is_none() && !t.ends_with('%') && v > MAX_BARE_SLOWDOWN {
        return Err(format!(
            "{t} would allow {longer} {t} times as large; write {t}% for {t}% more, or {t}x for the factor"
        ));
    }
    if v < 1.0 {
        let name = match what {
            Factor::Slowdown => "a slowdown",
            Factor::Overhead => "an overhead",
        };
        return Err(match t.strip_suffix('%') {
            Some(_) => format!("{name} below 0% means {below}"),
            None => format!(
                "{name} below 1 means {below}; for {t} as a fraction extra write {}%",
                remat::units::short_float(v * 100.0)
            ),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn slowdowns_as_factor_or_percent() {
        assert_eq!(super::parse_slowdown("1.25"), Ok(1.25));
        assert_eq!(super::parse_slowdown("25%"), Ok(1.25));
        assert!(super::parse_slowdown("0.25").unwrap_err().contains("25%"));
        assert!(super::parse_slowdown("25")
            .unwrap_err()
            .contains("write 25% for 25% more, or 25x"));
        assert_eq!(super::parse_slowdown("25x"), Ok(25.0));
        assert_eq!(super::parse_slowdown("2"), Ok(2.0));
        for bad in ["-5%", "x", "inf", "nan"] {
            assert!(super::parse_slowdown(bad).is_err(), "{bad}");
        }
    }

    /// `--max-overhead 25` used to allow 25 times checkpoint-all's cost
    /// while `--max-slowdown 25` was refused as a probable percentage.
    #[test]
    fn overheads_read_as_slowdowns_are() {
        assert_eq!(super::parse_overhead("1.1"), Ok(1.1));
        assert_eq!(super::parse_overhead("10%"), Ok(1.1));
        assert_eq!(super::parse_overhead("25x"), Ok(25.0));
        assert!(super::parse_overhead("25")
            .unwrap_err()
            .contains("25% for 25% more"));
        assert!(super::parse_overhead("0.5")
            .unwrap_err()
            .contains("at least 1"));
    }
}
