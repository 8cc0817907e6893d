//! Dynamic batching: requests put their inputs on one bounded queue; worker threads (off the
//! async runtime) take token-bounded batches of inputs that exit at the same layer, run one
//! forward pass per batch and answer each input on its own channel. A request's inputs may span
//! several batches, and a batch may hold inputs of several requests.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use tokio::sync::oneshot;

use crate::metrics::METRICS;
use crate::{Error, Result};

/// One input waiting for its vector.
#[derive(Debug)]
pub struct Item {
    /// Complete input ids (special tokens included), already truncated.
    pub ids: Vec<i64>,
    /// Layers to run (early exit).
    pub layer: usize,
    /// Dims of the answer (prefix, or the adaptor's head).
    pub dim: usize,
    /// Leading tokens left out of the pooling (the prompt's, when the model's pooling has
    /// `include_prompt = false`; else 0).
    pub skip: usize,
    pub reply: oneshot::Sender<std::result::Result<Vec<f32>, String>>,
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Item>,
    closed: bool,
}

/// The bounded queue between the HTTP handlers and the workers.
#[derive(Debug)]
pub struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    limit: usize,
}

impl Queue {
    /// A queue holding at most `limit` inputs.
    pub fn new(limit: usize) -> Self {
        Queue {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enqueues all of a request's inputs, or none of them (`Overloaded` when they do not fit).
    pub fn push_all(&self, items: Vec<Item>) -> Result<()> {
        let mut s = self.lock();
        if s.closed {
            return Err(Error::Unavailable("the server is shutting down".into()));
        }
        if s.items.len() + items.len() > self.limit {
            return Err(Error::Overloaded {
                queued: s.items.len(),
                limit: self.limit,
            });
        }
        s.items.extend(items);
        METRICS.queue_depth.set(s.items.len() as i64);
        drop(s);
        self.ready.notify_all();
        Ok(())
    }

    /// Number of inputs waiting.
    pub fn depth(&self) -> usize {
        self.lock().items.len()
    }

    /// Blocks until inputs are waiting, then takes a batch: the oldest input's layer, and every
    /// following input of that layer, in arrival order, while the padded batch
    /// (`longest * count`) stays within `max_tokens` and the count within `max_inputs` (one
    /// input always fits). `None` once the queue is closed and empty.
    pub fn take_batch(&self, max_tokens: usize, max_inputs: usize) -> Option<Vec<Item>> {
        let mut s = self.lock();
        while s.items.is_empty() {
            if s.closed {
                return None;
            }
            s = self.ready.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        let layer = s.items[0].layer;
        let mut take = Vec::new();
        let mut longest = 0;
        for (i, it) in s.items.iter().enumerate() {
            if it.layer != layer {
                continue;
            }
            let l = longest.max(it.ids.len());
            if !take.is_empty() && (l * (take.len() + 1) > max_tokens || take.len() >= max_inputs) {
                break;
            }
            longest = l;
            take.push(i);
        }
        let mut batch = Vec::with_capacity(take.len());
        let mut rest = VecDeque::with_capacity(s.items.len() - take.len());
        let mut next = take.iter().peekable();
        for (i, it) in std::mem::take(&mut s.items).into_iter().enumerate() {
            if next.peek() == Some(&&i) {
                next.next();
                batch.push(it);
            } else {
                rest.push_back(it);
            }
        }
        s.items = rest;
        METRICS.queue_depth.set(s.items.len() as i64);
        Some(batch)
    }

    /// Refuses new inputs; workers finish what is queued, then stop.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// The forward passes a batch sorted by increasing length runs as, for a model `hidden` wide
/// on `device`.
///
/// On a GPU, one pass for the whole batch: a pass of a server's batch (at most
/// `--max-batch-tokens` padded tokens) costs its launches, or one replay and one wait for the
/// device, about the same whatever its padding, so every extra pass is that cost again.
///
/// On the CPU the position-wise work (over 90%) runs on the real tokens alone
/// (`nest_model::packing`), so padding costs only in attention: a row of `len` real tokens
/// padded to `seq` pays about `seq² / (6 · hidden · len)` of its own linear work again (the
/// attention products `4 · seq² · hidden` against `24 · hidden² · len`). A new pass starts
/// where an input is both more than 25% (+ 4 tokens) longer than the pass's first (shortest)
/// input and long enough that the first would pay over half its work again at its length
/// (`seq² > 3 · hidden · len`); else one pass, since each pass has its fixed cost too. For
/// MiniLM (384 wide), STS-length texts (under ~100 tokens) stay in one pass, while a 10-token
/// query and 256-token documents split.
///
/// `NEST_LENGTH_RUNS=0` forces one pass, `=1` the 25% rule alone (the rule before packing), for
/// measurements.
pub fn passes(
    sorted_lens: &[usize],
    hidden: usize,
    device: tch::Device,
) -> Vec<std::ops::Range<usize>> {
    // read once per process: this runs for every batch
    static FORCED: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let forced = *FORCED.get_or_init(|| match std::env::var("NEST_LENGTH_RUNS").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    });
    let split = |first: usize, len: usize| -> bool {
        let longer = len * 4 > first * 5 + 16;
        match forced {
            Some(old_rule) => old_rule && longer,
            None if device.is_cuda() => false,
            None => longer && len * len > 3 * hidden * first.max(1),
        }
    };
    let mut runs = Vec::new();
    let mut start = 0;
    for (i, &l) in sorted_lens.iter().enumerate() {
        if i > start && split(sorted_lens[start], l) {
            runs.push(start..i);
            start = i;
        }
    }
    if start < sorted_lens.len() {
        runs.push(start..sorted_lens.len());
    }
    runs
}

#[cfg(test)]
mod tests {
    /// The CPU splits where attention padding would cost (a short query among long
    /// documents), not within short texts; a GPU runs the batch as one pass.
    #[test]
    fn passes_split_only_where_padding_costs() {
        if std::env::var_os("NEST_LENGTH_RUNS").is_some() {
            return;
        }
        use tch::Device::{Cpu, Cuda};
        assert!(super::passes(&[], 384, Cpu).is_empty());
        // STS-like lengths: one pass (the 25% rule alone would make three)
        let sts = [8, 10, 12, 14, 20, 24, 40, 60];
        assert_eq!(super::passes(&sts, 384, Cpu), vec![0..8]);
        // queries of 10-12 tokens and documents of 200-256: two passes
        let mix = [10, 11, 12, 200, 230, 256];
        assert_eq!(super::passes(&mix, 384, Cpu), vec![0..3, 3..6]);
        // the bound: 10 tokens first, 3 * 384 * 10 = 11,520 < 108^2 but > 107^2
        assert_eq!(super::passes(&[10, 107], 384, Cpu), vec![0..2]);
        assert_eq!(super::passes(&[10, 108], 384, Cpu), vec![0..1, 1..2]);
        // wider models pay less for the same padding
        assert_eq!(super::passes(&[10, 108], 1024, Cpu), vec![0..2]);
        assert_eq!(super::passes(&mix, 384, Cuda(0)), vec![0..6]);
        assert_eq!(super::passes(&[5; 4], 384, Cpu), vec![0..4]);
    }

    use super::*;

    fn item(
        len: usize,
        layer: usize,
    ) -> (
        Item,
        oneshot::Receiver<std::result::Result<Vec<f32>, String>>,
    ) {
        let (tx, rx) = oneshot::channel();
        (
            Item {
                ids: vec![1; len],
                layer,
                dim: 4,
                skip: 0,
                reply: tx,
            },
            rx,
        )
    }

    #[test]
    fn batches_are_per_layer_token_bounded_and_fifo() {
        let q = Queue::new(10);
        let mut rxs = Vec::new();
        let mut items = Vec::new();
        for (len, layer) in [(10, 6), (5, 3), (20, 6), (10, 6), (8, 3)] {
            let (it, rx) = item(len, layer);
            items.push(it);
            rxs.push(rx);
        }
        q.push_all(items).unwrap();
        // layer 6 first: 10, then 20 (padded 2 * 20 = 40 <= 60), then 10 (3 * 20 = 60)
        let b = q.take_batch(60, 100).unwrap();
        assert_eq!(
            b.iter().map(|i| (i.ids.len(), i.layer)).collect::<Vec<_>>(),
            vec![(10, 6), (20, 6), (10, 6)]
        );
        let b = q.take_batch(60, 100).unwrap();
        assert_eq!(
            b.iter().map(|i| i.ids.len()).collect::<Vec<_>>(),
            vec![5, 8]
        );
        // an input longer than the budget still goes, alone
        let (big, _r) = item(100, 6);
        let (small, _s) = item(1, 6);
        q.push_all(vec![big, small]).unwrap();
        assert_eq!(q.take_batch(60, 100).unwrap().len(), 1);
        assert_eq!(q.take_batch(60, 100).unwrap().len(), 1);
        assert_eq!(q.depth(), 0);
        // the input cap
        q.push_all((0..5).map(|_| item(2, 6).0).collect()).unwrap();
        assert_eq!(q.take_batch(1000, 3).unwrap().len(), 3);
        assert_eq!(q.take_batch(1000, 3).unwrap().len(), 2);
    }

    #[test]
    fn a_full_queue_refuses_whole_requests_and_close_drains() {
        let q = Queue::new(3);
        let two = || (0..2).map(|_| item(3, 6).0).collect::<Vec<_>>();
        q.push_all(two()).unwrap();
        let e = q.push_all(two()).unwrap_err();
        assert_eq!(e.status().as_u16(), 429);
        assert_eq!(q.depth(), 2);
        q.close();
        assert!(q.push_all(vec![item(1, 6).0]).is_err());
        assert_eq!(q.take_batch(100, 100).unwrap().len(), 2);
        assert!(q.take_batch(100, 100).is_none());
    }
}
