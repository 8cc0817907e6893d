//! Scaled dot-product attention (Vaswani et al. 2017, arXiv:1706.03762, eq. 1) for every
//! architecture: the one place that chooses how it is computed.
//!
//! libtorch's fused `scaled_dot_product_attention` (a flash-attention kernel on CPU, blocks of
//! 32 queries by 512 keys) never materialises the `[seq, seq]` scores, which pays off on long
//! inputs, but it costs 2-3x the explicit `softmax(q k^T s + mask) v` on the short ones that
//! sentence batches mostly are. Measured with torch 2.13.0, 2 threads, batch 32, 12 heads
//! (`scripts/bench/attention_kernels.py`; docs/PRECISION.md, "Attention kernel"), on an AMD EPYC
//! with AVX512-BF16 (family 26):
//!
//! | keys | head dim | bf16 fused / explicit (ms) | float32 fused / explicit (ms) |
//! |---:|---:|---:|---:|
//! | 16 | 32 | 0.50 / 0.22 | 0.61 / 0.17 |
//! | 32 | 32 | 0.85 / 0.50 | 0.91 / 0.77 |
//! | 40 | 64 | 2.80 / 1.33 | 3.20 / 1.49 |
//! | 64 | 64 | 3.98 / 3.75 | 4.47 / 4.21 |
//! | 128 | 32 | 8.4 / 12.7 | 8.6 / 9.4 |
//!
//! So on CPU up to [`EXPLICIT_MAX_KEYS`] keys the explicit form runs, beyond it the fused
//! kernel. On a GPU the fused kernel runs in float32 only. In bf16 it pays a large cost per new
//! input shape: one bf16 training epoch ran 2.2-2.7x slower fused than explicit while the
//! median step (repeated shapes) barely moved (an H200), and `nest serve` in bf16 under 64
//! clients, whose batches are ever new shapes, served 266-720 inputs/s fused against 2,831
//! explicit (an H100, 2026-11-26; float32 fused 4,182). Repeated shapes ran 1.5-1.9x faster
//! fused in bf16 (encode at batch 32, an H200), but encoding on a GPU now replays recorded
//! CUDA graphs (`encoder/graphed.rs`), where the explicit form's extra kernels cost no launches
//! (BENCHMARKS.md, "On a GPU").
//!
//! `NEST_ATTENTION=explicit` or `fused` forces one form everywhere, to measure the kernels
//! against each other (`scripts/gpu/gpu_check.sh`); unset or `auto`, the rule above.
//!
//! The explicit form runs in float32 whatever the inputs' kind (the fused kernel accumulates
//! the scores and the softmax in float32 too): bf16 rounds only its inputs and its output.

use std::sync::OnceLock;

use tch::{Kind, Tensor};

/// The longest key sequence computed explicitly; longer ones go to the fused kernel. The
/// measured crossover lay between 40 and 64 keys in both kinds (module docs).
pub(crate) const EXPLICIT_MAX_KEYS: i64 = 40;

/// Whether the fused kernel runs (module docs).
fn fused(q: &Tensor, keys: i64) -> bool {
    static FORCED: OnceLock<Option<bool>> = OnceLock::new();
    let forced = FORCED.get_or_init(|| match std::env::var("NEST_ATTENTION").as_deref() {
        Ok("explicit") => Some(false),
        Ok("fused") => Some(true),
        Ok("auto") | Err(_) => None,
        Ok(other) => {
            eprintln!("NEST_ATTENTION: unknown value '{other}' (expected auto, explicit or fused); using auto");
            None
        }
    });
    match (forced, q.device()) {
        (Some(f), _) => *f,
        (None, tch::Device::Cpu) => keys > EXPLICIT_MAX_KEYS,
        (None, _) => q.kind() == Kind::Float,
    }
}

/// `softmax(q k^T scale + mask) v`, with dropout `dropout` on the probabilities (0 at
/// inference).
///
/// # Shapes
/// - `q`: `[batch, heads, queries, dim]`; `k`, `v`: `[batch, heads, keys, dim]` (any float
///   kind; the fused kernel gets them in `q`'s)
/// - `mask`: additive (any float kind; float32 keeps it exact), broadcastable to
///   `[batch, heads, queries, keys]`
/// - `scale`: `None` for `1 / sqrt(dim)`
/// - returns `[batch, heads, queries, dim]` in `q`'s kind
pub(crate) fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    dropout: f64,
    scale: Option<f64>,
) -> Tensor {
    let kind = q.kind();
    let (dim, keys) = (q.size()[3], k.size()[2]);
    if fused(q, keys) {
        // the fused kernel wants the mask in q's kind; float32's minimum would round to -inf in
        // bf16, so it is clamped to a finite value first
        let mask = match mask.kind() == kind {
            true => mask.shallow_clone(),
            false => mask.clamp_min(-1e38).to_kind(kind),
        };
        return Tensor::scaled_dot_product_attention(
            q,
            &k.to_kind(kind),
            &v.to_kind(kind),
            Some(&mask),
            dropout,
            false,
            scale,
            false,
        );
    }
    let scale = scale.unwrap_or(1.0 / (dim as f64).sqrt());
    let mut scores = q
        .to_kind(Kind::Float)
        .matmul(&k.to_kind(Kind::Float).transpose(-1, -2));
    let _ = scores
        .g_mul_scalar_(scale)
        .g_add_(&mask.to_kind(Kind::Float));
    let p = scores
        .softmax(-1, Kind::Float)
        .dropout(dropout, dropout > 0.0);
    // the product with v in float32 too: a few MFLOP, and no oneDNN bf16 kernel per shape
    // (see `row_blocks::in_row_blocks`)
    p.matmul(&v.to_kind(Kind::Float)).to_kind(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// The explicit form against the fused kernel (forced by a longer key axis of masked keys),
    /// in float32 (1e-5) and bf16 (bf16 rounding of the output, 2e-2), with a padding mask.
    #[test]
    fn explicit_matches_fused() {
        tch::manual_seed(11);
        let (b, h, s, d) = (3, 4, 9, 16);
        let opts = (Kind::Float, Device::Cpu);
        let (q, k, v) = (
            Tensor::randn([b, h, s, d], opts),
            Tensor::randn([b, h, s, d], opts),
            Tensor::randn([b, h, s, d], opts),
        );
        let real = Tensor::from_slice(&[9i64, 5, 1]);
        let pos = Tensor::arange(s, (Kind::Int64, Device::Cpu));
        let allowed = pos.unsqueeze(0).lt_tensor(&real.unsqueeze(1)); // [b, s]
        let mask = Tensor::zeros([b, 1, 1, s], opts)
            .masked_fill(&allowed.logical_not().view([b, 1, 1, s]), -1e38);
        for kind in [Kind::Float, Kind::BFloat16] {
            let (q, k, v) = (q.to_kind(kind), k.to_kind(kind), v.to_kind(kind));
            let explicit = attend(&q, &k, &v, &mask, 0.0, None);
            assert_eq!(explicit.kind(), kind);
            let fused = Tensor::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                Some(&mask.to_kind(kind)),
                0.0,
                false,
                None,
                false,
            );
            let diff = (explicit.to_kind(Kind::Float) - fused.to_kind(Kind::Float))
                .abs()
                .max()
                .double_value(&[]);
            let tol = if kind == Kind::Float { 1e-5 } else { 2e-2 };
            assert!(diff < tol, "{kind:?}: max |explicit - fused| {diff}");
        }
        // a scale of its own (Gemma's query_pre_attn_scalar)
        let e = attend(&q, &k, &v, &mask, 0.0, Some(0.3));
        let f = Tensor::scaled_dot_product_attention(
            &q,
            &k,
            &v,
            Some(&mask),
            0.0,
            false,
            Some(0.3),
            false,
        );
        assert!((e - f).abs().max().double_value(&[]) < 1e-5);
    }

    /// Past [`EXPLICIT_MAX_KEYS`] the fused kernel runs: the same values either way.
    #[test]
    fn long_inputs_take_the_fused_kernel() {
        tch::manual_seed(12);
        let s = EXPLICIT_MAX_KEYS + 8;
        let opts = (Kind::Float, Device::Cpu);
        let (q, k, v) = (
            Tensor::randn([2, 2, s, 8], opts),
            Tensor::randn([2, 2, s, 8], opts),
            Tensor::randn([2, 2, s, 8], opts),
        );
        let mask = Tensor::zeros([2, 1, 1, s], opts);
        let got = attend(&q, &k, &v, &mask, 0.0, None);
        let explicit = (q.matmul(&k.transpose(-1, -2)) / 8f64.sqrt())
            .softmax(-1, Kind::Float)
            .matmul(&v);
        assert!((got - explicit).abs().max().double_value(&[]) < 1e-5);
    }
}
