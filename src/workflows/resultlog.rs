//! Crash-safe CSV result logs for long runs (sweeps, max-batch searches).
//!
//! A long run must never lose finished work, so each result is appended as
//! one whole line the moment it exists; a kill can at worst leave one
//! partial last line, which [`ResultLog::open`] cuts off before appending
//! again (a last line that is a whole row without its newline is kept).
//! Re-running reads the rows already present, so the caller can skip them
//! (resume). When a run completes, [`rewrite_sorted`] replaces the log
//! atomically with its rows in a canonical order, so an interrupted and
//! resumed run ends with the same file as an uninterrupted one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The cause is part of the message, not a `source`: anyhow's `{:#}`
    /// prints a source after the message, which said it twice ("Is a
    /// directory (os error 21): Is a directory (os error 21)").
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Another run is writing this CSV now.
    #[error("{path}: another run is writing to it; wait for it to end, or write to another -o")]
    Busy { path: PathBuf },
    /// A line of the log does not parse.
    #[error("{path}: {msg}")]
    Format { path: PathBuf, msg: String },
    /// The file is a CSV of another kind (its header differs). Readers may
    /// skip it; a writer refuses to append to, or rewrite, someone else's file.
    #[error("{path}: a CSV of another kind (header '{found}', expected '{expected}'){}", if *.writing { "; not writing to it" } else { "" })]
    OtherKind {
        path: PathBuf,
        found: String,
        expected: String,
        /// Refused as the output of a run, not only skipped as an input.
        writing: bool,
    },
}

/// Held by a run for as long as it writes its CSV: two runs into one file
/// lost rows, since each rewrites the file whole at its end (the last
/// writer's rows won, and both said they had written theirs). A lock file
/// beside the CSV, not the CSV itself: a rewrite renames a new file over
/// the CSV, which a lock on the old one would not cover. Removed when the
/// run ends.
pub struct RunLock {
    path: PathBuf,
    _file: File,
}

/// The lock files held now, for [`release_locks`].
static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the lock files of the runs in this process: for an exit that
/// skips destructors (an interrupt; see `cli::interrupt`).
pub fn release_locks() {
    for p in HELD.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

impl RunLock {
    /// Locks the file `csv` names, not the name: through a symbolic link
    /// (`-o link.csv`, link to `real.csv`) a run locked `.link.csv.lock`
    /// while another locked `.real.csv.lock`, and both wrote `real.csv`.
    pub fn acquire(csv: &Path) -> Result<RunLock, LogError> {
        let target = link_target(csv);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = target.with_file_name(format!(".{name}.lock"));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        match file.try_lock() {
            Ok(()) => {
                HELD.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(path.clone());
                Ok(RunLock { path, _file: file })
            }
            Err(std::fs::TryLockError::WouldBlock) => Err(LogError::Busy {
                path: csv.to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(io_err(&path)(e)),
        }
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p != &self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The file `path` names once every symbolic link is followed, in its
/// directory's canonical form, whether the file exists yet or not (a link
/// may name a file a run is still to create): [`crate::cli::resolved`] of
/// the last link's target. A chain past 40 links stops where it is.
fn link_target(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // As the kernel does, give up on a chain of links past 40.
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(t) => {
                p = match p.parent() {
                    Some(dir) if t.is_relative() => dir.join(t),
                    _ => t,
                }
            }
            Err(_) => break,
        }
    }
    crate::cli::resolved(&p)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |error| LogError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// The whole file, up to [`crate::input::MAX_CSV_BYTES`]. Past the cap is
/// bad input (a `Format` error, exit code 2), not a failed read: `report
/// /dev/zero` used to read until the OOM killer ended it.
fn read_all(path: &Path, file: impl Read) -> Result<Vec<u8>, LogError> {
    crate::input::read_capped(file, crate::input::MAX_CSV_BYTES).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            LogError::Format {
                path: path.to_path_buf(),
                msg: format!("cannot read: {e}"),
            }
        } else {
            io_err(path)(e)
        }
    })
}

/// An open log; appends are serialized, so worker threads share one.
pub struct ResultLog {
    path: PathBuf,
    file: Mutex<File>,
    torn: Option<String>,
}

impl ResultLog {
    /// Opens (creating if needed) a log with this header, repairs a torn
    /// last line, and returns the rows already in it.
    ///
    /// A last line without its newline is not always torn: a file edited
    /// by hand, or written by another tool, often ends so, and cutting it
    /// deleted a finished row without a word. A tail that is a whole row
    /// (one record of the header's field count that `whole` accepts, as
    /// the caller's row parser would) is kept and given its newline; any
    /// other tail is cut, and [`ResultLog::torn`] says what was.
    pub fn open(
        path: &Path,
        header: &[&str],
        whole: &dyn Fn(&[String]) -> bool,
    ) -> Result<(ResultLog, Vec<Vec<String>>), LogError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err(path))?;
        let text = read_all(path, &mut file)?;
        // Keep only whole lines: a run killed mid-write leaves a tail
        // without its newline. The header is checked first, so that a file
        // of someone else's is refused untouched: cutting 'hello' (no
        // newline) to nothing and writing our header after it destroyed
        // the file and then failed anyway.
        let header_line = record_line(header.iter().copied());
        let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let rows = if keep == 0 {
            // Nothing whole: an empty file, or a header torn as it was
            // written (a prefix of ours); anything else is not our log.
            if !header_line.as_bytes().starts_with(&text) {
                return Err(LogError::OtherKind {
                    path: path.to_path_buf(),
                    found: shown(&String::from_utf8_lossy(&text)),
                    expected: header.join(","),
                    writing: true,
                });
            }
            None
        } else {
            Some(
                parse_rows(path, &text[..keep], header).map_err(|e| match e {
                    LogError::OtherKind {
                        path,
                        found,
                        expected,
                        ..
                    } => LogError::OtherKind {
                        path,
                        found,
                        expected,
                        writing: true,
                    },
                    e => e,
                })?,
            )
        };
        let tail = &text[keep..];
        let whole_tail = match &rows {
            Some(_) if !tail.is_empty() => one_record(tail, header.len()).filter(|r| whole(r)),
            _ => None,
        };
        let mut torn = None;
        if whole_tail.is_some() {
            file.seek(SeekFrom::End(0)).map_err(io_err(path))?;
            file.write_all(b"\n").map_err(io_err(path))?;
        } else if keep < text.len() {
            if rows.is_some() {
                torn = Some(shown(&String::from_utf8_lossy(tail)));
            }
            file.set_len(keep as u64).map_err(io_err(path))?;
        }
        let rows = match rows {
            Some(mut rows) => {
                rows.extend(whole_tail);
                rows
            }
            None => {
                file.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
                file.write_all(header_line.as_bytes())
                    .map_err(io_err(path))?;
                Vec::new()
            }
        };
        file.seek(SeekFrom::End(0)).map_err(io_err(path))?;
        Ok((
            ResultLog {
                path: path.to_path_buf(),
                file: Mutex::new(file),
                torn,
            },
            rows,
        ))
    }

    /// The last line cut off by [`ResultLog::open`] (a row torn as it was
    /// written), as a message shows it: the caller says so, since that
    /// row's work is done again.
    pub fn torn(&self) -> Option<&str> {
        self.torn.as_deref()
    }

    /// Appends one row as a single write of a whole line, then flushes.
    pub fn append<S: AsRef<str>>(&self, row: &[S]) -> Result<(), LogError> {
        let line = record_line(row.iter().map(|s| s.as_ref()));
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(line.as_bytes())
            .and_then(|_| f.flush())
            .map_err(io_err(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `text` as exactly one CSV record of `fields` fields (trimmed as
/// [`read_rows`] trims them); `None` if it is anything else.
fn one_record(text: &[u8], fields: usize) -> Option<Vec<String>> {
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text);
    let mut records = rd.records();
    let rec = records.next()?.ok()?;
    if records.next().is_some() || rec.len() != fields {
        return None;
    }
    Some(rec.iter().map(|s| s.trim().to_string()).collect())
}

/// One CSV line (with quoting where a field needs it), newline included.
pub fn record_line<'a>(fields: impl Iterator<Item = &'a str>) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    // Writing to a Vec cannot fail.
    let _ = w.write_record(fields);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// A foreign header as an error message shows it: on one line, control
/// characters escaped, and at most 80 characters (a binary file's "header"
/// made a message of 900).
fn shown(found: &str) -> String {
    let mut out: String = found
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if out.chars().count() > 80 {
        out = out.chars().take(80).collect::<String>() + "…";
    }
    out
}

/// Reads a whole log file (header checked) into rows.
pub fn read_rows(path: &Path, header: &[&str]) -> Result<Vec<Vec<String>>, LogError> {
    // Said as every other input file's failed read is.
    let file = File::open(path).map_err(|e| LogError::Format {
        path: path.to_path_buf(),
        msg: format!("cannot read: {e}"),
    })?;
    parse_rows(path, &read_all(path, file)?, header)
}

fn parse_rows(path: &Path, text: &[u8], header: &[&str]) -> Result<Vec<Vec<String>>, LogError> {
    let fmt = |msg: String| LogError::Format {
        path: path.to_path_buf(),
        msg,
    };
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text);
    let got = rd
        .headers()
        .map_err(|e| fmt(format!("not a CSV file: {e}")))?
        .clone();
    if got.iter().map(str::trim).ne(header.iter().copied()) {
        return Err(LogError::OtherKind {
            path: path.to_path_buf(),
            writing: false,
            found: shown(&got.iter().collect::<Vec<_>>().join(",")),
            expected: header.join(","),
        });
    }
    let mut rows = Vec::new();
    for (i, rec) in rd.records().enumerate() {
        let rec = rec.map_err(|e| fmt(format!("line {}: {e}", i + 2)))?;
        rows.push(rec.iter().map(|s| s.trim().to_string()).collect());
    }
    Ok(rows)
}

/// Atomically replaces the log with `header` and `rows` (already in the
/// order the caller wants).
pub fn rewrite(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<(), LogError> {
    let mut out = record_line(header.iter().copied());
    for r in rows {
        out.push_str(&record_line(r.iter().map(String::as_str)));
    }
    crate::cli::write_atomic(path, out.as_bytes()).map_err(|e| LogError::Io {
        path: path.to_path_buf(),
        error: std::io::Error::other(format!("{e:#}")),
    })
}

/// Parses every record with `parse`; a failure names the file and line.
pub fn parse_records<T>(
    path: &Path,
    rows: &[Vec<String>],
    parse: impl Fn(&[String]) -> Result<T, String>,
) -> Result<Vec<T>, LogError> {
    rows.iter()
        .enumerate()
        .map(|(i, f)| {
            parse(f).map_err(|msg| LogError::Format {
                path: path.to_path_buf(),
                msg: format!("line {}: {msg}", i + 2),
            })
        })
        .collect()
}

/// Checks a record's field count against its header.
pub fn expect_fields(f: &[String], header: &[&str]) -> Result<(), String> {
    if f.len() == header.len() {
        Ok(())
    } else {
        Err(format!(
            "expected {} fields, found {}",
            header.len(),
            f.len()
        ))
    }
}

/// A number a CSV cell may hold. Rust's float parser takes `NaN`, `inf`
/// and `infinity`, which no run writes: read back, they made `report`
/// average and `plot` draw garbage without a word, so a float must be
/// finite.
pub trait CellNumber: std::str::FromStr {
    fn is_finite_number(&self) -> bool {
        true
    }
}

impl CellNumber for f64 {
    fn is_finite_number(&self) -> bool {
        self.is_finite()
    }
}

impl CellNumber for u64 {}
impl CellNumber for u32 {}
impl CellNumber for usize {}

/// An optional number from a cell (empty is `None`); the error names the
/// column.
pub fn opt_num<T: CellNumber>(s: &str, col: &str) -> Result<Option<T>, String> {
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<T>() {
        Ok(v) if v.is_finite_number() => Ok(Some(v)),
        Ok(_) => Err(format!("column {col}: '{s}' is not a finite number")),
        Err(_) => Err(format!("column {col}: '{s}' is not a number")),
    }
}

/// The progress bar of a long run on stderr: hidden with `quiet` or when
/// stderr is not a terminal (logs and CI stay clean). `template` is the
/// indicatif template after the `{prefix}`.
pub fn progress_bar(
    quiet: bool,
    len: usize,
    prefix: String,
    template: &str,
) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template(&format!("{{prefix}} {template}"))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    b.set_prefix(prefix);
    b.enable_steady_tick(std::time::Duration::from_millis(500));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &[&str] = &["a", "b"];

    /// The rows of these tests' logs, as a caller's parser would check
    /// them.
    fn numbers(f: &[String]) -> bool {
        f.iter().all(|x| x.parse::<u64>().is_ok())
    }

    #[test]
    fn an_io_error_is_said_once() {
        let dir = std::env::temp_dir().join(format!("remat-log-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let Err(e) = ResultLog::open(&dir, H, &numbers) else {
            panic!("a directory opened as a log");
        };
        let msg = format!("{:#}", anyhow::Error::new(e));
        assert!(msg.starts_with(&dir.display().to_string()), "{msg}");
        assert_eq!(msg.matches("os error").count(), 1, "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn torn_tail_is_cut_and_rows_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        {
            let (log, rows) = ResultLog::open(&p, H, &numbers).unwrap();
            assert!(rows.is_empty());
            log.append(&["1", "two, with comma"]).unwrap();
        }
        // A kill mid-write.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"3,fo").unwrap();
        drop(f);
        let (log, rows) = ResultLog::open(&p, H, &numbers).unwrap();
        assert_eq!(rows, vec![vec!["1".to_string(), "two, with comma".into()]]);
        log.append(&["5", "6"]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "a,b\n1,\"two, with comma\"\n5,6\n"
        );
    }

    /// A link and the file it names are one CSV, and so one lock: two
    /// runs through the two names both wrote it, and rows were lost.
    #[cfg(unix)]
    #[test]
    fn a_link_locks_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.csv");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let link = sub.join("link.csv");
        // Relative, and to a file not made yet.
        std::os::unix::fs::symlink("../real.csv", &link).unwrap();
        let held = RunLock::acquire(&real).unwrap();
        let e = RunLock::acquire(&link).err().expect("the link is locked");
        assert!(matches!(e, LogError::Busy { .. }), "{e}");
        assert!(!sub.join(".link.csv.lock").exists());
        drop(held);
        let held = RunLock::acquire(&link).unwrap();
        assert!(dir.path().join(".real.csv.lock").exists());
        assert!(matches!(
            RunLock::acquire(&real).err(),
            Some(LogError::Busy { .. })
        ));
        drop(held);
    }

    /// A last row whole but for its newline (a file saved by an editor)
    /// is a finished row: it was cut, and its work done again.
    #[test]
    fn a_whole_last_row_without_its_newline_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        std::fs::write(&p, "a,b\n1,2\n3,4").unwrap();
        let (log, rows) = ResultLog::open(&p, H, &numbers).unwrap();
        assert_eq!(rows, vec![vec!["1", "2"], vec!["3", "4"]]);
        assert_eq!(log.torn(), None);
        log.append(&["5", "6"]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n3,4\n5,6\n");
        // Torn: too few fields, or a value the parser refuses.
        for tail in ["3", "3,", "3,x"] {
            std::fs::write(&p, format!("a,b\n1,2\n{tail}")).unwrap();
            let (log, rows) = ResultLog::open(&p, H, &numbers).unwrap();
            assert_eq!(rows, vec![vec!["1", "2"]], "{tail}");
            assert_eq!(log.torn(), Some(tail));
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
        }
    }

    #[test]
    fn refuses_a_foreign_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        std::fs::write(&p, "name,value\n1,2\n").unwrap();
        let e = ResultLog::open(&p, H, &numbers).err().unwrap();
        assert!(e.to_string().contains("a CSV of another kind"), "{e}");
        assert!(e.to_string().contains("not writing to it"), "{e}");
        // Read only, the same file is merely of another kind: a reader may
        // skip it, and must not speak of overwriting.
        let e = read_rows(&p, H).err().unwrap();
        assert!(!e.to_string().contains("writing"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "name,value\n1,2\n");
    }

    #[test]
    fn a_file_without_a_whole_line_is_ours_only_if_it_is_a_torn_header() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        // Someone's text, a binary tail, a foreign header torn: refused,
        // the file untouched, the message one short line.
        let mut binary = vec![0u8; 200];
        binary.extend_from_slice(b"\n\n\xff");
        for content in [b"hello".to_vec(), b"a,c".to_vec(), vec![0u8; 200], binary] {
            std::fs::write(&p, &content).unwrap();
            let e = ResultLog::open(&p, H, &numbers).err().expect("refused");
            let msg = e.to_string();
            assert!(msg.contains("not writing to it"), "{msg}");
            assert!(msg.len() < 300 && !msg.contains('\n'), "{msg}");
            assert_eq!(std::fs::read(&p).unwrap(), content);
        }
        // A header torn as it was written is ours: it is written again
        // from the start of the file, with no bytes before it.
        std::fs::write(&p, "a,").unwrap();
        let (log, rows) = ResultLog::open(&p, H, &numbers).unwrap();
        assert!(rows.is_empty());
        log.append(&["1", "2"]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
    }
}
