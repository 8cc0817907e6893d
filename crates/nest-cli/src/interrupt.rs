//! Ctrl-C (SIGINT) and SIGTERM during `nest train` and `nest distill`: the first stops the run
//! after its current step with a checkpoint (a scheduler's SIGTERM before it kills a job, a
//! user's Ctrl-C), and the command then exits with 128 + the signal's number, saying how to
//! continue. Outside the steps (loading, the final evaluation and export), and on a second
//! signal, the signal does what it does by default: the process ends at once, which every
//! command survives (`crates/nest-cli/tests/crash.rs`), saying so the first time; the run
//! continues from its last checkpoint. A data-parallel run stops every rank after the same
//! step when any rank got the signal (`nest_train::trainer::stop`). Commands without steps end at once but say what the
//! cut kept ([`explain_on_signals`]).

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};

use nest_train::trainer::stop;
use signal_hook::consts::{SIGINT, SIGTERM};

/// The first signal received, 0 before any.
static FIRST: AtomicI32 = AtomicI32::new(0);

/// Hands each SIGINT and SIGTERM to `each(signal, main)` on a thread of its own; `main`: this
/// process is alone or a launch's main one (the one that speaks).
fn on_signals(mut each: impl FnMut(i32, bool) + Send + 'static) -> anyhow::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let main = nest_dist::Launch::from_env()
        .ok()
        .flatten()
        .is_none_or(|l| l.is_main());
    std::thread::Builder::new()
        .name("nest-signals".into())
        .spawn(move || signals.forever().for_each(|sig| each(sig, main)))?;
    Ok(())
}

/// The signal's default action: the process ends, killed by it (no exit handlers run while
/// other threads are inside libtorch).
fn die_of(sig: i32) {
    let _ = signal_hook::low_level::emulate_default_handler(sig);
}

/// Turns this process's SIGINT and SIGTERM into training stop requests (see the module docs).
pub fn stop_training_on_signals() -> anyhow::Result<()> {
    on_signals(|sig, main| {
        let first = FIRST
            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if !(first && stop::request()) {
            if first && main {
                // outside the steps it ended silently (helper trial E), though the run is as
                // resumable as after any cut
                let _ = writeln!(
                    std::io::stderr(),
                    "\n{} (signal {sig}): stopped at once, outside a training step (loading, \
                     the teacher's cache, an evaluation or the export): what came after the \
                     run's last checkpoint is not kept; the same command with --resume \
                     continues from that checkpoint (a run cut before its first one starts \
                     again without --resume)",
                    name(sig)
                );
            }
            return die_of(sig);
        }
        if main {
            let _ = writeln!(
                std::io::stderr(),
                "\n{} (signal {sig}): stopping after this step with a checkpoint; a second {} \
                 stops at once (the run then continues from its last checkpoint)",
                name(sig),
                name(sig)
            );
        }
    })
}

/// Ctrl-C (SIGINT) or SIGTERM during a command that keeps no checkpoint a step at a time
/// (`nest encode`, `nest index build`, `nest compress`, `nest mine`): the process still ends at
/// once, killed by the signal as by default (exit 130 or 143), but first says what the cut
/// kept and how to continue: `note()`'s sentence (on the main process of a launch only).
pub fn explain_on_signals(note: impl Fn() -> String + Send + 'static) -> anyhow::Result<()> {
    on_signals(move |sig, main| {
        if main {
            let _ = writeln!(
                std::io::stderr(),
                "\n{} (signal {sig}): {}",
                name(sig),
                note()
            );
        }
        die_of(sig)
    })
}

/// [`explain_on_signals`]' sentence for a job whose vectors are kept a chunk at a time
/// (`nest_core::kept`), or `otherwise` before and after that stage.
pub fn kept_or(otherwise: String) -> impl Fn() -> String + Send + 'static {
    move || nest_core::kept::cut_note().unwrap_or_else(|| otherwise.clone())
}

/// The exit status of a run a signal stopped: 128 + the signal's number (130 for Ctrl-C), as
/// a shell reports a process the signal killed; SIGTERM's (143) when the signal came to
/// another rank of a data-parallel run.
pub fn stopped_status() -> i32 {
    128 + match FIRST.load(Ordering::SeqCst) {
        0 => SIGTERM,
        sig => sig,
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "Ctrl-C",
        _ => "SIGTERM",
    }
}
