//! Skipping the padding: a batch's real tokens packed into one matrix for the position-wise
//! parts of a layer, and back to the padded layout for attention. Every architecture's layer
//! loop uses it ([`crate::layer::run_layers`], [`crate::blocks::pre_norm_exits`]).

use tch::Tensor;

thread_local! {
    /// Set by [`without_packing`]: the layers run on the padded layout.
    static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
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
        let index = tokens.reshape([-1]).ne(0).nonzero().squeeze_dim(1);
        (index.size()[0] < batch * seq).then_some(Packing { index, batch, seq })
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
}
