//! Helpers for the command-line edge: error classes and exit codes, and
//! loading user files with messages that name the file.
//!
//! Every command exits with the same codes (the README's table):
//! 0 a plan was found (or the command did its job), 1 no plan within the
//! limit (or a failure that is not the input's fault), 2 bad input or a
//! provably infeasible budget, 130 interrupted.

pub mod interrupt;
pub mod plan_file;

use crate::graph::{analysis, Graph};
use crate::units::{BudgetSpec, Bytes};
use std::fmt;
use std::path::Path;

pub use plan_file::{check_plan, load_plan, plan_text};

/// Bad user input (a file, a flag value) or a provably infeasible
/// request: exit code 2, one line, no trace.
#[derive(Debug)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

pub fn input_err(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// The user stopped the run (SIGINT, SIGTERM): exit code 130, as shells
/// report a process killed by SIGINT.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// `s` with its control characters escaped (`\n` as the two characters
/// `\` `n`), so that a message stays one line.
pub fn escape_controls(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// Longest error line printed, in characters: past it the line is cut
/// and says how much was left out. An input's own text (a name a megabyte
/// long) would otherwise fill the terminal.
pub const MAX_ERROR_CHARS: usize = 2_000;

/// `msg` cut to [`MAX_ERROR_CHARS`] characters, saying how many were left
/// out.
pub fn shorten_line(msg: &str) -> String {
    let total = msg.chars().count();
    if total <= MAX_ERROR_CHARS {
        return msg.to_string();
    }
    let kept: String = msg.chars().take(MAX_ERROR_CHARS).collect();
    format!("{kept}… ({} more characters)", total - MAX_ERROR_CHARS)
}

/// Exit code for an error: 2 for bad input, 130 for an interrupt, 1 for
/// anything else (no plan within the limit, or an internal failure).
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<InputError>()) {
        2
    } else if e.chain().any(|c| c.is::<Interrupted>()) {
        130
    } else {
        1
    }
}

/// An output path checked before any work is done: a directory, a file
/// where a directory should be, or one of the command's own inputs used to be
/// found out only when the answer was written (after a solve, or with the
/// input graph overwritten by the plan).
pub fn check_output(path: &Path, inputs: &[&Path]) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    if path.is_dir() {
        return Err(input_err(format!(
            "{}: is a directory; give a file name to write to",
            path.display()
        )));
    }
    // `out/` (or `out/.`) names a directory even while none is there:
    // such a path passed every check below, and the write failed only
    // after the work, with exit code 1.
    if names_a_directory(path) {
        return Err(input_err(format!(
            "{}: names a directory, not a file (it ends in '/', '.' or '..'); give a file name to write to",
            path.display()
        )));
    }
    // Missing directories are created when the file is written; a file
    // where a directory should be is not.
    if let Some(file) = path
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists())
        .filter(|a| !a.is_dir())
    {
        return Err(input_err(format!(
            "{}: {} is a file, not a directory",
            path.display(),
            file.display()
        )));
    }
    if let Ok(out) = path.canonicalize() {
        for input in inputs {
            if input.canonicalize().is_ok_and(|i| i == out) {
                return Err(input_err(format!(
                    "{}: is also an input of this command; writing there would overwrite it",
                    path.display()
                )));
            }
        }
    }
    check_writable(path)
}

/// Whether the path as written can only name a directory: it ends in a
/// separator, or its last component is `.` or `..`.
fn names_a_directory(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    let last = bytes
        .rsplit(|&b| b == b'/' || (cfg!(windows) && b == b'\\'))
        .next()
        .unwrap_or_default();
    !bytes.is_empty() && matches!(last, b"" | b"." | b"..")
}

/// A directory a command writes files into (`sweep --plans DIR`, `zoo
/// --all --dir DIR`), checked before any work as [`check_output`] checks
/// a file: an existing file there, or a file where one of its parent
/// directories should be, used to surface only when the first file was
/// written (after the first solve, as a warning with exit code 0, and no
/// plan written at all).
pub fn check_output_dir(dir: &Path, flag: &str) -> anyhow::Result<()> {
    // Elsewhere `-` is standard output; a folder of that name is a surprise.
    if dir.as_os_str() == "-" {
        return Err(input_err(format!(
            "{flag} -: {flag} names a directory to write plan files into, not standard output"
        )));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(input_err(format!(
            "{}: {flag} names a directory to write into, and this is a file",
            dir.display()
        )));
    }
    let existing = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists());
    if let Some(file) = existing.filter(|a| !a.is_dir()) {
        return Err(input_err(format!(
            "{}: {} is a file, not a directory",
            dir.display(),
            file.display()
        )));
    }
    // Missing directories are created; the nearest existing one must
    // take new files.
    let base = existing.unwrap_or(Path::new("."));
    let probe = base.join(format!(".remat-probe.tmp{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            input_err(format!(
                "{}: cannot write there: {}",
                dir.display(),
                e.to_string().to_lowercase()
            ))
        })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Two outputs of one run named by the same path (`sweep -o x.svg --plot
/// x.svg`): the second write destroyed the first, and the run still
/// reported both. Each output is a flag and its path; paths are compared
/// as files, whether they exist yet or not (`./x` and `x` are one).
pub fn check_distinct_outputs(outputs: &[(&str, &Path)]) -> anyhow::Result<()> {
    for (i, (flag_a, a)) in outputs.iter().enumerate() {
        for (flag_b, b) in &outputs[i + 1..] {
            if a.as_os_str() != "-" && resolved(a) == resolved(b) {
                return Err(input_err(format!(
                    "{}: named by both {flag_a} and {flag_b}; the second write would destroy the first, so give each its own path",
                    b.display()
                )));
            }
        }
    }
    Ok(())
}

/// `path` made absolute, symlinks resolved as far as it exists: a file not
/// yet written is its directory's resolved path and its own name.
pub(crate) fn resolved(path: &Path) -> std::path::PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (parent.canonicalize(), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// A CSV that a command appends to and resumes from cannot be standard
/// output: `-o -` used to read and write a file named `-`. Nor can it be
/// anything but a regular file (or one still to be made): the command
/// reads it before any work, so a FIFO blocked the run forever, and
/// `/dev/null` was refused only as "a CSV of another kind (header '')".
pub fn check_resumable_output(path: &Path, command: &str) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Err(input_err(format!(
            "-o -: {command} appends its rows to a CSV file and resumes from it, so it cannot write to standard output; give a file name"
        )));
    }
    // Following links: a link to a regular file is that file. A directory
    // is left to check_output's own message.
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() && !m.is_dir() {
            return Err(input_err(format!(
                "{}: not a regular file; {command} appends its rows to a CSV file and resumes from it, so give the path of one (or of one to create)",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Whether the answer can be written at all, tried before the work
/// (`--plan /proc/x` used to fail after the solve, exit 1, naming a
/// temporary file): a device that is there is opened for writing (nothing
/// is truncated); a FIFO is left alone (opening it would wait for, then
/// end, its reader); otherwise a file is created and removed again where
/// [`write_atomic`] will create its own, in the file's directory or, when
/// that is still to be made, in its nearest existing ancestor.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    let cannot = |e: std::io::Error| {
        input_err(format!(
            "{}: cannot write there: {}",
            path.display(),
            e.to_string().to_lowercase()
        ))
    };
    if let Some(m) = std::fs::metadata(path)
        .ok()
        .filter(|m| !m.is_file() && !m.is_dir())
    {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if m.file_type().is_fifo() {
                return Ok(());
            }
        }
        let _ = m;
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map(drop)
            .map_err(cannot);
    }
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .ancestors()
        .find(|a| a.as_os_str().is_empty() || a.exists())
        .filter(|a| !a.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(".remat-probe.tmp{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(cannot)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Prints the device's note on the graph's cost unit, if any, unless
/// quiet: for commands whose input has already passed every check.
pub fn note_cost_unit(device: Option<&crate::device::Device>, g: &Graph, quiet: bool) {
    if let Some(w) = device.and_then(|d| d.cost_unit_note(g)).filter(|_| !quiet) {
        eprintln!("note: {w}");
    }
}

/// A device file, checked against the graph it will time.
pub fn load_device(path: &Path, g: &Graph) -> anyhow::Result<crate::device::Device> {
    let d = crate::device::Device::load(path).map_err(|e| input_err(e.to_string()))?;
    d.check_graph(g)
        .map_err(|e| input_err(format!("{}: {e}", path.display())))?;
    Ok(d)
}

pub fn load_graph(path: &Path) -> anyhow::Result<Graph> {
    Graph::load(path).map_err(|e| input_err(e.to_string()))
}

/// A budget as the user wrote it and as it resolved for one graph.
#[derive(Debug, Clone)]
pub struct Budget {
    pub bytes: Bytes,
    pub spec: BudgetSpec,
    input: String,
    /// The device whose fast-tier capacity this budget is, when the user
    /// gave a device and no budget: said in every summary, so that a
    /// budget the user never typed is never a surprise.
    pub from_device: Option<String>,
}

impl Budget {
    /// The budget in the units the user wrote it in (`16.000 GiB` for
    /// `16GiB`), with the exact byte count.
    pub fn show(&self) -> String {
        let human = if self.input.to_ascii_lowercase().ends_with("ib") {
            self.bytes.human_binary()
        } else {
            self.bytes.human()
        };
        match &self.from_device {
            Some(d) => format!(
                "{human} ({} bytes), the fast-tier capacity of device '{d}'",
                self.bytes
            ),
            None => format!("{human} ({} bytes)", self.bytes),
        }
    }

    /// The default budget with a device: its whole fast tier, since that is
    /// the memory a step on that device actually has.
    pub fn of_device(d: &crate::device::Device) -> Budget {
        Budget {
            bytes: d.fast_capacity,
            spec: BudgetSpec::Absolute(d.fast_capacity),
            input: d.fast_capacity.0.to_string(),
            from_device: Some(d.name.clone()),
        }
    }

    /// `--budget` when given, else the device's fast capacity; neither is
    /// an input error naming both flags.
    pub fn given_or_device(
        g: &Graph,
        budget: Option<&str>,
        device: Option<&crate::device::Device>,
    ) -> anyhow::Result<Budget> {
        match (budget, device) {
            (Some(b), _) => parse_budget(g, b),
            (None, Some(d)) => Ok(Budget::of_device(d)),
            (None, None) => Err(input_err(
                "--budget is required without --device (with a device it defaults to the fast-tier capacity)",
            )),
        }
    }

    /// What the user probably meant when a budget is far too small to be
    /// meant: `-b 90` (90 bytes) or `-b 0.9` (one byte) for 90%, when
    /// that percentage of `g`'s peak would fit.
    pub fn did_you_mean(&self, g: &Graph) -> Option<String> {
        // A device's capacity is no typo of the user's.
        if self.from_device.is_some() {
            return None;
        }
        crate::units::percent_meant(
            &self.input,
            analysis::checkpoint_all_peak(g),
            analysis::min_feasible_budget(g),
        )
    }

    /// A note for a budget that is probably a mistake but still has an
    /// answer (above the checkpoint-all peak, every plan fits).
    pub fn warning(&self, g: &Graph) -> Option<String> {
        if BudgetSpec::drops_a_fraction(&self.input) {
            return Some(format!(
                "{} is not a whole number of bytes: the budget is {} bytes (a budget is a cap, so the fraction is dropped)",
                self.input.trim(),
                self.bytes
            ));
        }
        match self.spec {
            BudgetSpec::Percent { num, den } if num > den => Some(format!(
                "{} is more than the checkpoint-all peak ({}): no recomputation is needed",
                self.input.trim(),
                analysis::checkpoint_all_peak(g).human()
            )),
            _ => None,
        }
    }
}

/// Resolves a budget string against the graph's checkpoint-all peak.
pub fn parse_budget(g: &Graph, s: &str) -> anyhow::Result<Budget> {
    let spec = BudgetSpec::parse(s).map_err(|e| input_err(format!("--budget: {e}")))?;
    Ok(Budget {
        bytes: spec.resolve(analysis::checkpoint_all_peak(g)),
        spec,
        input: s.to_string(),
        from_device: None,
    })
}

/// "1 recomputation", "2 recomputations".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `size` as a percentage of the graph's checkpoint-all peak, for messages.
pub fn percent_of_peak(g: &Graph, size: Bytes) -> String {
    let peak = analysis::checkpoint_all_peak(g).as_f64().max(1.0);
    format!(
        "{:.1}% of the checkpoint-all peak",
        size.as_f64() * 100.0 / peak
    )
}

/// [`percent_of_peak`] rounded up to a tenth, for a floor: typed back as a
/// budget it must not fall below it.
pub fn percent_of_peak_up(g: &Graph, size: Bytes) -> String {
    let peak = analysis::checkpoint_all_peak(g).as_f64().max(1.0);
    format!(
        "{:.1}% of the checkpoint-all peak",
        (size.as_f64() * 1000.0 / peak).ceil() / 10.0
    )
}

/// Writes a file atomically: a crash never leaves a half-written file.
///
/// Only regular files are replaced. A device or a FIFO that is already
/// there (`-o /dev/null`) is written into: renaming over it, as root,
/// replaced `/dev/null` with a regular file. A symbolic link is followed,
/// so the file it names gets the contents and the link stays a link.
pub fn write_atomic(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let context = || format!("writing {}", path.display());
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return std::fs::write(path, contents).with_context(context);
    }
    let resolved = std::fs::canonicalize(path)
        .ok()
        .or_else(|| link_target(path));
    let path = resolved.as_deref().unwrap_or(path);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, contents).with_context(context)?;
    // The file replaced keeps its mode (a 0640 CSV stayed private only
    // until the next resume rewrote it with the umask's).
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow::Error::new(e).context(context()));
    }
    Ok(())
}

/// Where a chain of symbolic links ends when its last target does not
/// exist yet (`canonicalize` refuses those): the file is written there, as
/// `>` in a shell would, instead of replacing the link with a file.
fn link_target(path: &Path) -> Option<std::path::PathBuf> {
    let mut at = path.to_path_buf();
    let mut hops = 0;
    while std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
        hops += 1;
        if hops > 40 {
            return None;
        }
        let to = std::fs::read_link(&at).ok()?;
        at = match at.parent() {
            Some(dir) if to.is_relative() => dir.join(to),
            _ => to,
        };
    }
    (hops > 0).then_some(at)
}

/// Writes to standard output for `-`, as `zoo` does, else atomically to
/// the file.
pub fn write_output(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        use std::io::Write;
        std::io::stdout().write_all(contents)?;
        return Ok(());
    }
    write_atomic(path, contents)
}

/// Writes to standard output and flushes, so that a failed write is
/// reported here rather than lost when the process exits: `print!` panics
/// when standard output cannot be written (`> /dev/full`: exit 101 and a
/// backtrace). Every command's output goes through this one place (the
/// binary's `out!` and `outln!`).
pub fn write_stdout(args: std::fmt::Arguments) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .context("writing to standard output")
}
