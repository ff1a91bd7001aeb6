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
