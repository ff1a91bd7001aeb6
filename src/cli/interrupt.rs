//! SIGINT and SIGTERM as a request, not a kill: a long `solve` must keep
//! the promise its time limit makes (the best plan so far), so the signal
//! only sets a flag that the command polls.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: anything more is not async-signal-safe.
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to [`requested`] for the rest of the process.
pub fn install() {
    #[cfg(unix)]
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether the user asked to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// For runs that write their rows as they finish (sweep, max-batch): on
/// SIGINT or SIGTERM, say what is kept and exit with 130 at once. The
/// default action killed them without a word; the finished rows were safe,
/// but nothing said so, nor how to go on. The rows being solved are lost
/// (their plans are not answers yet), and the CSVs' lock files go.
pub fn exit_on_interrupt(message: String) {
    install();
    std::thread::spawn(move || loop {
        if requested() {
            crate::workflows::resultlog::release_locks();
            eprintln!("{message}");
            std::process::exit(130);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    });
}
