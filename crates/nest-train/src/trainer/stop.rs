//! A request to stop a training run at the next step boundary, with a checkpoint of that step:
//! what an interrupt does in-process (Python's `nest.train` turns Ctrl-C into [`request`]).
//! The stopped run is resumable exactly, as after `stop_after_steps`. One flag for the
//! process, as a signal is; each run clears it when it starts.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks the running training run (if any) to stop after its current step.
pub fn request() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was requested since the run started.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Forgets an earlier request (a run's start).
pub(crate) fn clear() {
    STOP.store(false, Ordering::SeqCst);
}
