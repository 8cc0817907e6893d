//! From a pass's token states to sentence vectors: pooling (one layer's, or several layers'
//! under one mask, the means' weights shared) and the Dense head.

use tch::{Kind, Tensor};

use super::ElasticEncoder;

impl ElasticEncoder {
    /// Applies the Dense modules, if any, to pooled vectors: `[batch, hidden]` ->
    /// `[batch, output_dim]`.
    pub fn apply_head(&self, pooled: Tensor) -> Tensor {
        match self.head.is_empty() {
            true => pooled,
            false => self.head.forward(&pooled),
        }
    }

    /// Pools one layer's token states (`[batch, seq, hidden]` -> `[batch, hidden]`), without the
    /// Dense head ([`Self::embed_pooled`] applies it).
    pub fn pool(&self, hidden: &Tensor, mask: &Tensor) -> Tensor {
        // float32 whatever the stream's kind (a bf16 mean over tokens would lose digits)
        self.pooling.pool(&hidden.to_kind(Kind::Float), mask)
    }

    /// The sentence vector of one layer's token states: pooled, then the Dense head if any, not
    /// normalised (`[batch, seq, hidden]` -> `[batch, output_dim]`).
    pub fn embed_pooled(&self, hidden: &Tensor, mask: &Tensor) -> Tensor {
        self.apply_head(self.pool(hidden, mask))
    }

    /// [`Self::embed_pooled`] for several layers' states under one mask, the pooling's weights
    /// computed once ([`crate::pooling::Pooling::weights`]): float32, the Dense head applied.
    ///
    /// # Shapes
    /// - `states`: each `[batch, seq, hidden]`; `mask`: `[batch, seq]`
    /// - returns one `[batch, output_dim]` float32 tensor per state
    pub fn embed_pooled_all(&self, states: &[Tensor], mask: &Tensor) -> Vec<Tensor> {
        let weights = self.pooling.weights(mask, Kind::Float);
        self.embed_pooled_weighted(states, mask, weights.as_ref(), None)
    }

    /// [`Self::embed_pooled_all`] with the means' float32 weights given (`[batch, 1, seq]`,
    /// [`Pooling::weights`](crate::pooling::Pooling::weights) or made on the host), which the
    /// other modes ignore; written into `into` when given (`[states, batch, output_dim]`, a
    /// recorded pass's static output: a mean without a Dense head is written there by its
    /// product, no copy), whose rows are then returned.
    pub(crate) fn embed_pooled_weighted(
        &self,
        states: &[Tensor],
        mask: &Tensor,
        weights: Option<&Tensor>,
        into: Option<&Tensor>,
    ) -> Vec<Tensor> {
        let direct = self.head.is_empty() && self.pooling.is_mean();
        states
            .iter()
            .enumerate()
            .map(|(k, h)| {
                let h = h.to_kind(Kind::Float);
                let dest = into.map(|o| o.get(k as i64));
                if let (Some(d), Some(w), true) = (&dest, weights, direct) {
                    let _ = w.bmm_out(&d.unsqueeze(1), &h);
                    return d.shallow_clone();
                }
                let pooled = self.pooling.pool_weighted(&h, mask, weights);
                let p = self.apply_head(pooled).to_kind(Kind::Float);
                match dest {
                    Some(mut d) => {
                        d.copy_(&p);
                        d
                    }
                    None => p,
                }
            })
            .collect()
    }
}
