//! Skipping the padding: a batch's real tokens packed into one matrix for the position-wise
//! parts of a layer, and back to the padded layout for attention. Every architecture's layer
//! loop uses it ([`crate::layer::run_layers`], [`crate::blocks::pre_norm_exits`]).

use tch::Tensor;

thread_local! {
    /// Set by [`without_packing`]: the layers run on the padded layout.
    static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by [`with_host_lengths`]: the packing of the batch being run, built on the host.
    static KNOWN: std::cell::RefCell<Option<Known>> = const { std::cell::RefCell::new(None) };
}

/// A batch's packing known before its forward pass: for a `[batch, seq]` mask, `packing`
/// (`None`: no padding).
struct Known {
    batch: i64,
    seq: i64,
    packing: Option<Packing>,
}

/// Runs `f` with packing off on this thread: every layer sees the padded `[batch, seq, ...]`
/// layout. What a captured CUDA graph needs ([`crate::graph`]): packing's token count is read
/// back from the device (a synchronisation, which a capture refuses) and changes the shapes
/// from batch to batch, while a graph replays fixed shapes. The values are the same either way
/// (padding is masked out of attention and pooling), up to float reordering.
pub fn without_packing<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            OFF.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(OFF.with(|c| c.replace(true)));
    f()
}

/// Runs `f` with the packing of a right-padded `[lengths.len(), seq]` batch (row `b`: `lengths[b]`
/// real tokens, then padding) computed from the lengths on the host: [`Packing::new`] on a mask
/// of that shape then reads nothing back from the device. Without it, the packing's `nonzero`
/// waits for the device (a synchronisation per forward pass, which keeps a GPU idle while the
/// host prepares the next batch). `put` moves the host index to the mask's device (a copy that
/// need not wait). The packed positions are those `nonzero` finds, so the values are identical.
pub(crate) fn with_host_lengths<R>(
    lengths: &[usize],
    seq: usize,
    put: impl FnOnce(Tensor) -> Tensor,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore(Option<Known>);
    impl Drop for Restore {
        fn drop(&mut self) {
            KNOWN.with(|k| *k.borrow_mut() = self.0.take());
        }
    }
    let known = Known {
        batch: lengths.len() as i64,
        seq: seq as i64,
        packing: Packing::from_lengths(lengths, seq, put),
    };
    let _restore = Restore(KNOWN.with(|k| k.borrow_mut().replace(known)));
    f()
}

/// The real tokens of a padded batch. Every part of a layer except attention works per
/// position (the linear layers, GELU, the LayerNorms: over 90% of the work), so it runs on the
/// real tokens alone, packed into one `[tokens, hidden]` matrix, and only attention sees the
/// padded `[batch, seq, ...]` layout. Text-embeddings-inference and FlashAttention's "varlen"
/// kernels unpad the same way. A batch of random-length requests (the server's) or of training
/// pairs is often half padding; a length-sorted encode batch has little.
pub(crate) struct Packing {
    /// Positions of the real tokens in the flattened `[batch * seq]` layout, ascending.
    index: Tensor,
    batch: i64,
    seq: i64,
}

impl Packing {
    /// The packing of `tokens` (`[batch, seq]`, nonzero = real token); `None` when the batch has
    /// no padding (then packing would only copy).
    pub(crate) fn new(tokens: &Tensor) -> Option<Packing> {
        if OFF.with(std::cell::Cell::get) {
            return None;
        }
        let (batch, seq) = tokens.size2().ok()?;
        let known = KNOWN.with(|k| {
            k.borrow()
                .as_ref()
                .filter(|k| (k.batch, k.seq) == (batch, seq))
                .map(|k| k.packing.as_ref().map(Packing::share))
        });
        if let Some(packing) = known {
            return packing;
        }
        let index = tokens.reshape([-1]).ne(0).nonzero().squeeze_dim(1);
        (index.size()[0] < batch * seq).then_some(Packing { index, batch, seq })
    }

    /// The packing of a right-padded batch of `lengths` real tokens per row in `seq` positions,
    /// its index built on the host and moved by `put`; `None` without padding.
    fn from_lengths(
        lengths: &[usize],
        seq: usize,
        put: impl FnOnce(Tensor) -> Tensor,
    ) -> Option<Packing> {
        let index: Vec<i64> = lengths
            .iter()
            .enumerate()
            .flat_map(|(b, &n)| (0..n.min(seq)).map(move |t| (b * seq + t) as i64))
            .collect();
        let (batch, seq) = (lengths.len() as i64, seq as i64);
        (index.len() < (batch * seq) as usize).then(|| Packing {
            index: put(Tensor::from_slice(&index)),
            batch,
            seq,
        })
    }

    /// The same packing, its index tensor shared.
    fn share(&self) -> Packing {
        Packing {
            index: self.index.shallow_clone(),
            batch: self.batch,
            seq: self.seq,
        }
    }

    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`; returns `[tokens, hidden]`
    pub(crate) fn pack(&self, x: &Tensor) -> Tensor {
        let h = *x.size().last().expect("x has a feature axis");
        x.reshape([-1, h]).index_select(0, &self.index)
    }

    /// The inverse of [`Packing::pack`], with zeros at the padding.
    ///
    /// # Shapes
    /// - `x`: `[tokens, hidden]`; returns `[batch, seq, hidden]`
    pub(crate) fn unpack(&self, x: &Tensor) -> Tensor {
        let h = x.size()[1];
        Tensor::zeros([self.batch * self.seq, h], (x.kind(), x.device()))
            .index_copy(0, &self.index, x)
            .view([self.batch, self.seq, h])
    }

    /// `t` in the padded layout: unpacked under a packing, as it is without one.
    ///
    /// # Shapes
    /// - `t`: `[tokens, width]` with a packing, else `[batch, seq, width]`; returns
    ///   `[batch, seq, width]`
    pub(crate) fn padded(p: Option<&Packing>, t: Tensor) -> Tensor {
        match p {
            Some(p) => p.unpack(&t),
            None => t,
        }
    }

    /// `t` (`[batch, seq, width]`) in the layer's layout: packed under a packing.
    pub(crate) fn packed(p: Option<&Packing>, t: Tensor) -> Tensor {
        match p {
            Some(p) => p.pack(&t),
            None => t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn pack_then_unpack_keeps_the_real_tokens_and_zeroes_the_padding() {
        let tokens = Tensor::from_slice(&[1i64, 1, 0, 1, 0, 0]).view([2, 3]);
        let x = Tensor::arange(12, (Kind::Float, Device::Cpu)).view([2, 3, 2]) + 1.0;
        let p = Packing::new(&tokens).expect("padding");
        let packed = p.pack(&x);
        assert_eq!(packed.size(), vec![3, 2]);
        let back = Vec::<f32>::try_from(p.unpack(&packed).view([-1])).unwrap();
        assert_eq!(back, vec![1., 2., 3., 4., 0., 0., 7., 8., 0., 0., 0., 0.]);
    }

    fn index_of(p: Option<Packing>) -> Option<Vec<i64>> {
        p.map(|p| Vec::<i64>::try_from(&p.index).unwrap())
    }

    /// Host lengths give the positions `nonzero` finds, for masks of that shape only; without
    /// padding, no packing; outside the scope, `nonzero` again.
    #[test]
    fn host_lengths_give_the_positions_nonzero_finds() {
        let tokens = Tensor::from_slice(&[1i64, 1, 0, 1, 0, 0, 1, 1, 1]).view([3, 3]);
        let found = index_of(Packing::new(&tokens));
        assert_eq!(found, Some(vec![0, 1, 3, 6, 7, 8]));
        let put = |t: Tensor| t;
        let given = with_host_lengths(&[2, 1, 3], 3, put, || {
            let other = Tensor::ones([2, 2], (Kind::Int64, Device::Cpu));
            assert!(
                Packing::new(&other).is_none(),
                "another shape: nonzero, no padding"
            );
            // all ones, but the host lengths say what the batch holds: nothing read back
            index_of(Packing::new(&Tensor::ones(
                [3, 3],
                (Kind::Int64, Device::Cpu),
            )))
        });
        assert_eq!(given, found);
        let full = with_host_lengths(&[2, 2], 2, put, || {
            Packing::new(&Tensor::ones([2, 2], (Kind::Int64, Device::Cpu))).is_none()
        });
        assert!(full, "no padding: no packing");
        assert!(without_packing(|| with_host_lengths(
            &[1, 2],
            2,
            put,
            || { Packing::new(&tokens.narrow(0, 0, 2).narrow(1, 0, 2)).is_none() }
        )));
        assert_eq!(
            index_of(Packing::new(&tokens)),
            found,
            "the scope has ended"
        );
    }
}
