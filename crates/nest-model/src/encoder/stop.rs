//! Stopping an embedding between batches. A host that cannot take a signal while an embedding
//! runs (the Python module: Python handles Ctrl-C only when its own code runs, and the
//! embedding runs with its lock released) installs a check, and every embedding asks it after
//! each batch: when it says stop, the embedding ends with an error, and the host, seeing
//! [`take_stopped`], raises what a stop raises (`KeyboardInterrupt`). The check is asked only
//! inside [`armed`] on the thread that runs it (a training run has its own stop, after a step
//! with a checkpoint: its evaluations are not cut), and never without one installed (the CLI,
//! whose Ctrl-C ends the process).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static CHECK: OnceLock<fn() -> bool> = OnceLock::new();
static STOPPED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` with the check asked after each batch of the embeddings it runs on this thread.
pub fn armed<T>(work: impl FnOnce() -> T) -> T {
    let before = ARMED.with(|a| a.replace(true));
    let out = work();
    ARMED.with(|a| a.set(before));
    out
}

/// Installs the check every embedding asks after each batch (the first one installed stays).
pub fn install(check: fn() -> bool) {
    let _ = CHECK.set(check);
}

/// Whether an embedding stopped on the check since the last call (and clears it).
pub fn take_stopped() -> bool {
    STOPPED.swap(false, Ordering::SeqCst)
}

/// Asked after each batch: an error when the installed check says stop.
pub(super) fn check() -> crate::Result<()> {
    let armed = ARMED.with(Cell::get);
    match armed && CHECK.get().is_some_and(|c| c()) {
        false => Ok(()),
        true => {
            STOPPED.store(true, Ordering::SeqCst);
            Err(crate::Error::Core(nest_core::Error::value(
                "embedding",
                "stopped between batches (interrupted)",
            )))
        }
    }
}
