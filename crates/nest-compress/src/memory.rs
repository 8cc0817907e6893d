//! S-XBM (SMEC, arXiv:2510.12474, section 3.4; after "Cross-Batch Memory for Embedding
//! Learning", Wang et al. 2020, arXiv:1912.06798): a first-in-first-out memory of *frozen*
//! embeddings across batches.
//! Only frozen-backbone vectors are stored (the trainable adaptor is applied when they are
//! used), so stored features never drift; each batch retrieves, per item, its top-k most similar
//! stored vectors as extra pairs for the unsupervised loss (eq. 7).

use tch::{Kind, Tensor};

/// A ring buffer of `[capacity, D]` vectors.
#[derive(Debug)]
pub struct Memory {
    buf: Tensor,
    capacity: usize,
    /// Next slot to write.
    head: usize,
    len: usize,
}

impl Memory {
    pub fn new(capacity: usize, dim: usize) -> Self {
        Memory {
            buf: Tensor::zeros(
                [capacity.max(1) as i64, dim as i64],
                (Kind::Float, tch::Device::Cpu),
            ),
            capacity: capacity.max(1),
            head: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends rows, evicting the oldest when full.
    ///
    /// # Shapes
    /// - `x`: `[n, D]`
    pub fn push(&mut self, x: &Tensor) {
        let x = x.detach();
        let n = x.size()[0] as usize;
        // only the last `capacity` rows can survive
        let skip = n.saturating_sub(self.capacity);
        let mut src = skip;
        while src < n {
            // at most two contiguous copies: up to the end of the ring, then from its start
            let run = (n - src).min(self.capacity - self.head);
            self.buf
                .narrow(0, self.head as i64, run as i64)
                .copy_(&x.narrow(0, src as i64, run as i64));
            self.head = (self.head + run) % self.capacity;
            src += run;
        }
        self.len = (self.len + n - skip).min(self.capacity);
    }

    /// The stored rows, oldest first: `[len, D]`.
    pub fn contents(&self) -> Tensor {
        if self.len < self.capacity {
            self.buf.narrow(0, 0, self.len as i64)
        } else {
            Tensor::cat(
                &[
                    self.buf
                        .narrow(0, self.head as i64, (self.capacity - self.head) as i64),
                    self.buf.narrow(0, 0, self.head as i64),
                ],
                0,
            )
        }
    }

    /// Each query's `k` most similar stored vectors by cosine (vectors equal to the query, i.e.
    /// the item itself stored earlier, are skipped): `(vectors [N, k', D], cosines [N, k'])` with
    /// `k' = min(k, len)`, or `None` while the memory is empty.
    pub fn neighbours(&self, q: &Tensor, k: usize) -> Option<(Tensor, Tensor)> {
        if self.len == 0 || k == 0 {
            return None;
        }
        let stored = self.buf.narrow(0, 0, self.len as i64);
        let sims = crate::loss::cos_matrix(&q.detach(), &stored);
        let sims = sims.masked_fill(&sims.gt(1.0 - 1e-6), -2.0);
        let k = k.min(self.len) as i64;
        let (top, idx) = sims.topk(k, 1, true, true);
        let n = q.size()[0];
        let vecs = stored.index_select(0, &idx.view([-1])).view([n, k, -1]);
        Some((vecs, top))
    }
}
