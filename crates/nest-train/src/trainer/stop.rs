//! A request to stop a training run at the next step boundary, with a checkpoint of that step:
//! what an interrupt does in-process (Python's `nest.train` turns Ctrl-C into [`request`], the
//! `nest` binary turns SIGINT and SIGTERM into it). The stopped run is resumable exactly, as
//! after `stop_after_steps`. One flag for the process, as a signal is; each run clears it when
//! it starts. A data-parallel run stops when any rank asked ([`agreed`]), every rank after the
//! same step.

use std::sync::atomic::{AtomicBool, Ordering};

use nest_dist::Group;

use crate::{Error, Result};

static STOP: AtomicBool = AtomicBool::new(false);
static STEPPING: AtomicBool = AtomicBool::new(false);

/// Asks the running training run (if any) to stop after its current step. True when a run is
/// in its steps, and so will stop at the next step boundary with a checkpoint; false before
/// its first step and after its last (loading, the final evaluation and export), where
/// nothing waits for the request.
pub fn request() -> bool {
    STOP.store(true, Ordering::SeqCst);
    STEPPING.load(Ordering::SeqCst)
}

/// Whether a stop was requested since the run started.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Forgets an earlier request (a run's start).
pub(crate) fn clear() {
    STOP.store(false, Ordering::SeqCst);
}

/// Whether the run stops after this step: a request on this process, or, data parallel, on
/// any rank (one 8-byte all-gather per step), so that every rank stops after the same step.
pub(crate) fn agreed(group: Option<&Group>) -> Result<bool> {
    match group {
        Some(g) if g.world() > 1 => g.any(requested()).map_err(Error::from),
        _ => Ok(requested()),
    }
}

/// While alive, a run is in its steps (what [`request`] answers).
pub(crate) struct Stepping(());

impl Stepping {
    pub(crate) fn start() -> Stepping {
        STEPPING.store(true, Ordering::SeqCst);
        Stepping(())
    }
}

impl Drop for Stepping {
    fn drop(&mut self) {
        STEPPING.store(false, Ordering::SeqCst);
    }
}
