//! The long-running workflows (sweep, max-batch) end to end: their CSV
//! outputs, resume and interrupts, through the `remat` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .output()
        .expect("run remat")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that `o`'s standard error mentions `needle`, and shows it if not.
#[track_caller]
fn err_says(o: &Output, needle: &str) {
    let e = stderr(o);
    assert!(e.contains(needle), "{e}");
}

/// Exit code 2 and a single line naming `needle`.
#[track_caller]
fn one_line_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains(needle), "{e}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn linear8(dir: &Path) -> PathBuf {
    let mut s = String::from("name: linear8\ngraph: forward\ncost_unit: unit\nnodes:\n");
    for i in 0..8 {
        let deps = if i == 0 {
            String::new()
        } else {
            format!("f{}", i - 1)
        };
        s.push_str(&format!(
            "  - {{name: f{i}, cost: 1, memory: 1, deps: [{deps}], saves: [self], grad_cost: 1}}\n"
        ));
    }
    s.push_str("  - {name: loss, cost: 1, memory: 1, deps: [f7]}\n");
    write(dir, "linear8.yaml", &s)
}

fn interrupted_after(secs: u64, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(secs));
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    child.wait_with_output().unwrap()
}

/// Runs `args`, killing the run if it has not ended within a minute: a
/// run that blocks is a failure, not a hung test.
fn run_or_kill(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    panic!("remat {args:?} blocked: {}", stderr(&o));
}

/// An interrupted `sweep --fresh` must not tell the user to run the same
/// command again: --fresh would drop the rows it just finished.
#[test]
fn an_interrupted_fresh_sweep_says_to_resume_without_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let o = interrupted_after(
        3,
        &[
            "sweep",
            "models/resnet50.yaml",
            "-b",
            "30%",
            "-s",
            "remat-exact",
            "--time-limit",
            "600",
            "--no-lp-bound",
            "--fresh",
            "-o",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    err_says(&o, "interrupted: the rows finished so far are in");
    err_says(&o, "run the same command without --fresh again to resume");
}

/// sweep and max-batch read their -o before any work, to resume: a FIFO
/// blocked them forever, and /dev/null was "a CSV of another kind".
#[cfg(unix)]
#[test]
fn a_resumable_output_must_be_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = linear8(dir.path());
    let fifo = dir.path().join("fifo.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let m = m.to_str().unwrap();
    for out in [fifo.to_str().unwrap(), "/dev/null"] {
        let o = run_or_kill(&["sweep", m, "-b", "50%", "-s", "checkpoint-all", "-o", out]);
        one_line_error(&o, &format!("{out}: not a regular file"));
        let o = run_or_kill(&["max-batch", m, "--memory", "1KB", "-o", out]);
        one_line_error(&o, &format!("{out}: not a regular file"));
    }
    // A link to a regular file is that file, and a missing file is made.
    let real = dir.path().join("real.csv");
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = remat(&[
        "sweep",
        m,
        "-b",
        "50%",
        "-s",
        "checkpoint-all",
        "-o",
        link.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&real)
        .unwrap()
        .contains("linear8,checkpoint-all,"));
}

/// A model named with a space at an end ("zc ") never matched its own
/// rows, which CSV reading trims: every re-run solved and appended them
/// again. Refused when the graph is read, naming the file.
#[test]
fn a_model_name_with_outer_white_space_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(linear8(dir.path())).unwrap();
    for name in ["'zc '", "' zc'", "\"zc\\t\""] {
        let m = write(
            dir.path(),
            "zc.yaml",
            &text.replace("name: linear8", &format!("name: {name}")),
        );
        let csv = dir.path().join("zc.csv");
        let o = remat(&[
            "sweep",
            m.to_str().unwrap(),
            "-b",
            "50%",
            "-s",
            "checkpoint-all",
            "-o",
            csv.to_str().unwrap(),
        ]);
        one_line_error(&o, "zc.yaml");
        err_says(&o, "may not begin or end with white space");
        assert!(!csv.exists());
    }
}
