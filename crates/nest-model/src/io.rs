//! What a transformer forward pass takes and returns, shared by the architectures ([`crate::bert`],
//! [`crate::mpnet`]), the layer loop ([`crate::layer`]) and the encoder that drives them: a leaf
//! module, so that the architectures need not import the encoder that imports them.

use tch::Tensor;

/// A padded batch of token ids.
#[derive(Debug)]
pub struct EncoderInput {
    /// `[batch, seq]` int64 token ids, padded with the model's pad id.
    pub ids: Tensor,
    /// `[batch, seq]` int64, 1 for real tokens, 0 for padding.
    pub mask: Tensor,
}

/// What a forward pass returns.
#[derive(Debug)]
pub struct EncoderOutput {
    /// Index 0 = embedding output; index `l` = output of layer `l`. Holds `layers + 1` tensors of
    /// shape `[batch, seq, hidden]` for a forward run to `layers` ([`Exits::UpTo`]); for
    /// [`Exits::Only`], the kept layers' states alone, in ascending layer order. What stands at padding
    /// positions after the embeddings is zero, not a token's state (the layers skip the
    /// padding); pooling and every loss read through the mask.
    pub hidden_states: Vec<Tensor>,
    /// Index `l - 1` = layer `l`'s attention probabilities for the first ([CLS]) query row,
    /// before attention dropout, padding keys at 0: `[batch, heads, seq]` for
    /// [`ClsAttention::PerHead`], `[batch, seq]` for [`ClsAttention::Mean`]; empty otherwise.
    pub cls_attention: Vec<Tensor>,
}

/// How far a forward pass runs and which layers' states it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exits<'a> {
    /// The first `n` layers, every state kept (index 0 the embeddings, `l` layer `l`'s
    /// output): what training reads (an objective may weigh every exit).
    UpTo(usize),
    /// Up to the deepest of these layers (0 = the embeddings), keeping only their states, in
    /// ascending layer order without repeats; every other state is freed once the next layer
    /// has run. Inference's pooled exits: a pass keeps two or three states at a time instead of
    /// all of them (on a GPU, each recorded shape's memory pool holds that peak).
    Only(&'a [usize]),
}

impl Exits<'_> {
    /// Layers run.
    pub fn depth(&self) -> usize {
        match self {
            Exits::UpTo(n) => *n,
            Exits::Only(ls) => ls.iter().copied().max().unwrap_or(0),
        }
    }

    /// Whether layer `l`'s state (0: the embeddings) is returned.
    pub fn keeps(&self, l: usize) -> bool {
        match self {
            Exits::UpTo(n) => l <= *n,
            Exits::Only(ls) => ls.contains(&l),
        }
    }
}

/// Whether a forward pass also returns each layer's [CLS]-row attention probabilities. When not
/// asked, nothing beyond the fused attention kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClsAttention {
    #[default]
    None,
    /// Averaged over heads: `[batch, seq]` per layer.
    Mean,
    /// Per head: `[batch, heads, seq]` per layer.
    PerHead,
}
