//! Where an encode's time goes on the calling thread ([`measure`]): waiting for the tokeniser,
//! queueing batches, finishing. On a GPU the device runs behind the host, so these say what
//! the host's share is (what no layer count shortens) and how long the end waits for the
//! device; `nest bench encode` prints them for each layer's best pass.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The calling thread's time in one encode, by phase.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Phases {
    /// Waiting for texts to be tokenised: all of it without tokenising ahead, else the waits
    /// for the worker's blocks.
    pub tokens: Duration,
    /// Preparing and queueing the batches: padding, the copy up, the pass or its replay.
    pub batches: Duration,
    /// Batches queued.
    pub batch_count: usize,
    /// From the last batch queued to the vectors on the host: on a GPU the wait for the
    /// device, the reordering, normalising and the copy down.
    pub finish: Duration,
    /// The texts' tokens in the batches this thread shaped ([`count_tokens`]).
    pub real_tokens: usize,
    /// Those batches' rows times their padded length: what a padded pass computes (a recorded
    /// one's shape; an eager one on the CPU may skip the padding, `packing.rs`).
    pub padded_tokens: usize,
    /// Batches whose tokens were counted (fewer than [`Self::batch_count`] when batches ran on
    /// other threads: the CPU's streams).
    pub counted_batches: usize,
}

/// Adds one batch's tokens to the measure on this thread, if one is on: `real` tokens padded
/// to `padded` (rows x length).
pub(crate) fn count_tokens(real: usize, padded: usize) {
    NOW.with(|n| {
        if let Some(mut p) = n.get() {
            p.real_tokens += real;
            p.padded_tokens += padded;
            p.counted_batches += 1;
            n.set(Some(p));
        }
    });
}

/// The phases [`timed`] adds to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    Tokens,
    /// This many batches (several at once on [`super::EncodeOptions::streams`] threads).
    Batches(usize),
    Finish,
}

thread_local! {
    static NOW: Cell<Option<Phases>> = const { Cell::new(None) };
}

/// Runs `work` (an encode) and returns what it spent in each phase on this thread (work on
/// other threads, such as tokenising ahead, shows as this thread's waits for it).
pub fn measure<R>(work: impl FnOnce() -> R) -> (R, Phases) {
    struct Restore(Option<Phases>);
    impl Drop for Restore {
        fn drop(&mut self) {
            NOW.with(|n| n.set(self.0.take()));
        }
    }
    let restore = Restore(NOW.with(|n| n.replace(Some(Phases::default()))));
    let out = work();
    let phases = NOW.with(|n| n.get()).unwrap_or_default();
    drop(restore);
    (out, phases)
}

/// Runs `f`, adding its time to `phase` when [`measure`] is on (a clock read otherwise: none).
pub(crate) fn timed<R>(phase: Phase, f: impl FnOnce() -> R) -> R {
    if NOW.with(|n| n.get()).is_none() {
        return f();
    }
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    NOW.with(|n| {
        if let Some(mut p) = n.get() {
            match phase {
                Phase::Tokens => p.tokens += took,
                Phase::Batches(n) => {
                    p.batches += took;
                    p.batch_count += n;
                }
                Phase::Finish => p.finish += took,
            }
            n.set(Some(p));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_inside_a_measure_only() {
        timed(Phase::Batches(1), || ());
        let ((), p) = measure(|| {
            timed(Phase::Batches(1), || {
                std::thread::sleep(Duration::from_millis(2))
            });
            timed(Phase::Batches(1), || count_tokens(5, 8));
            count_tokens(3, 8);
            timed(Phase::Finish, || {
                std::thread::sleep(Duration::from_millis(1))
            });
        });
        assert_eq!(p.batch_count, 2);
        assert_eq!(
            (p.real_tokens, p.padded_tokens, p.counted_batches),
            (8, 16, 2)
        );
        assert!(p.batches >= Duration::from_millis(2) && p.finish >= Duration::from_millis(1));
        assert_eq!(p.tokens, Duration::ZERO);
        assert!(
            NOW.with(|n| n.get()).is_none(),
            "off again after the measure"
        );
    }
}
