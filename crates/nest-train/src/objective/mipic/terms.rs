//! MIPIC's terms as pure tensor functions (`MIPIC.md` eq. 4-17, Appendix A.5): the \[CLS\]
//! scores, the attention KL, top-k linear CKA, one link of the PIC chain, and the schedules.
//! Paper: arXiv:2604.24374 (see the module above); linear CKA: Kornblith et al. 2019,
//! "Similarity of Neural Network Representations Revisited", arXiv:1905.00414.

use tch::{Kind, Tensor};

use crate::losses;

/// Masked-out scores: finite, so that `0 * (log p - log q)` stays 0 at padding.
const MASKED: f64 = -1e9;

/// Checkpoint layers for `n` checkpoints in an `num_layers`-layer model: `l_i = ceil(i * N /
/// n)`, i = 1..n. For Appendix A.5's TinyBERT-6L (and all-MiniLM-L6-v2) with six dims this is
/// 1, 2, 3, 4, 5, 6, the paper's; for BERT-base with seven dims it gives 2, 4, 6, 7, 9, 11, 12
/// where the paper hand-picked 2, 4, 6, 8, 9, 10, 12. The last checkpoint is always the last
/// layer; with more dims than layers, neighbouring checkpoints share a layer.
pub fn checkpoint_layers(n: usize, num_layers: usize) -> Vec<usize> {
    (1..=n)
        .map(|i| (i * num_layers).div_ceil(n).max(1))
        .collect()
}

/// `k_i` for a sequence of `m` candidate tokens: `max(min_k, ceil(gamma * m))`, at most `m`
/// (Appendix A.5; a sequence shorter than `min_k` aligns all its tokens).
pub fn top_k(gamma: f64, m: usize, min_k: usize) -> usize {
    ((gamma * m as f64).ceil() as usize).max(min_k).min(m)
}

/// The \[CLS\]-query scores of eq. 4 and 5 and the tokens they range over.
///
/// # Shapes
/// - `h`: `[B, m, D]` one layer's token states; `mask`: `[B, m]` (1 = token)
/// - returns the candidate mask `[B, m]` (real tokens other than \[CLS\] itself, bool) and the
///   teacher scores `s^(D) = h_CLS . h_j / sqrt(D)` `[B, m]` (computed on detached states)
pub fn teacher_scores(h: &Tensor, mask: &Tensor) -> (Tensor, Tensor) {
    let dd = h.size()[2] as f64;
    let t = h.detach();
    let cls = t.select(1, 0);
    let s = t.matmul(&cls.unsqueeze(-1)).squeeze_dim(-1) / dd.sqrt();
    let cand = mask.to_kind(Kind::Bool).copy();
    let _ = cand.narrow(1, 0, 1).fill_(0);
    (cand, s)
}

/// Attention distribution matching (eq. 4-6): `KL(a_i || a_D)` as eq. 6 writes it (the
/// student's distribution first), batch mean. The student scores `h_CLS . P_i^T h_j[:d_i] /
/// sqrt(D)` use the detached full-dimensional `h_CLS` ("a fixed semantic reference", section
/// 3.2.1), computed as `h_j[:d_i] . (P_i h_CLS)` so that no `[B, m, D]` product is formed.
///
/// # Shapes
/// - `h`: `[B, m, D]`; `cand`, `s_teacher`: from [`teacher_scores`]; `p`: `[d_i, D]`
/// - returns a scalar
pub fn attention_kl(h: &Tensor, cand: &Tensor, s_teacher: &Tensor, p: &Tensor, tau: f64) -> Tensor {
    let (dd, d) = (h.size()[2], p.size()[0]);
    let cls = h.detach().select(1, 0);
    let q = cls.matmul(&p.transpose(0, 1)); // [B, d]
    let s = h.narrow(2, 0, d).matmul(&q.unsqueeze(-1)).squeeze_dim(-1) / (dd as f64).sqrt();
    let off = cand.logical_not();
    let log_s = (s / tau)
        .masked_fill(&off, MASKED)
        .log_softmax(-1, None::<Kind>);
    let log_t = (s_teacher / tau)
        .masked_fill(&off, MASKED)
        .log_softmax(-1, None::<Kind>);
    (log_s.exp() * (&log_s - log_t))
        .sum_dim_intlist(-1, false, None::<Kind>)
        .mean(None::<Kind>)
}

/// Linear CKA between two row sets with rows masked out (eq. 8-11), per sequence.
///
/// # Shapes
/// - `x`: `[B, k, d]`, `y`: `[B, k, D]`, `sel`: `[B, k]` float (1 = selected row)
/// - returns `[B]`
fn masked_linear_cka(x: &Tensor, y: &Tensor, sel: &Tensor) -> Tensor {
    let center = |t: &Tensor| {
        let w = sel.unsqueeze(-1);
        let n = sel
            .sum_dim_intlist(1, true, None::<Kind>)
            .clamp_min(1.0)
            .unsqueeze(-1);
        let mu = (t * &w).sum_dim_intlist(1, true, None::<Kind>) / n;
        (t - mu) * w
    };
    let (xc, yc) = (center(x), center(y));
    // token-space Gram matrices: ||X^T Y||_F^2 = <X X^T, Y Y^T>_F, cheaper for k < d
    let k = xc.matmul(&xc.transpose(1, 2));
    let l = yc.matmul(&yc.transpose(1, 2));
    let dot =
        |a: &Tensor, b: &Tensor| (a * b).sum_dim_intlist([1i64, 2].as_slice(), false, None::<Kind>);
    let (kl, kk, ll) = (dot(&k, &l), dot(&k, &k), dot(&l, &l));
    // clamped before the root: a sequence with one selected row has kk = ll = 0, and the
    // root's gradient at 0 would turn the (masked-out) term into NaN gradients
    kl / (kk * ll).clamp_min(1e-30).sqrt()
}

/// Top-k hidden-state alignment (eq. 7-12) at every prefix dim: the teacher's top `k_i`
/// tokens by `s^(D)` (one ranking, so the sets are nested, Appendix A.5), `1 - CKA(h[:, :d_i],
/// H)` on them, mean over the sequences with at least two selected tokens. The
/// full-dimensional side is detached: it is the teacher, and the prefix should move towards
/// its structure, not the reverse. Each row's `k_i` ([`top_k`] of its candidate count) is
/// reckoned on the device and masks the top tokens gathered, as many as the longest possible
/// row would select, so that nothing is read back (a recorded step computes it) and the
/// values are those of gathering each row's own `k_i`.
///
/// # Shapes
/// - `h`: `[B, m, D]`; `cand`, `s_teacher`: from [`teacher_scores`]
/// - returns one scalar per `(dim, gamma)` pair
pub fn topk_cka(
    h: &Tensor,
    cand: &Tensor,
    s_teacher: &Tensor,
    dims: &[usize],
    gammas: &[f64],
    min_k: usize,
) -> Vec<Tensor> {
    let (b, m, dd) = h.size3().expect("[B, m, D]");
    let counts = cand.sum_dim_intlist(1, false, Kind::Double);
    // top_k of each row's count, in float64 as top_k reckons it: [B] each
    let ks: Vec<Tensor> = gammas
        .iter()
        .map(|&g| {
            (&counts * g)
                .ceil()
                .clamp_min(min_k as f64)
                .minimum(&counts)
        })
        .collect();
    let most = gammas.iter().map(|&g| top_k(g, m as usize, min_k)).max();
    let kmax = most.unwrap_or(0).max(1) as i64;
    let order = s_teacher
        .masked_fill(&cand.logical_not(), MASKED)
        .argsort(-1, true)
        .narrow(1, 0, kmax);
    let rows = h.gather(1, &order.unsqueeze(-1).expand([b, kmax, dd], false), false);
    let teacher = rows.detach();
    let rank = Tensor::arange(kmax, (Kind::Double, h.device())).unsqueeze(0);
    dims.iter()
        .zip(&ks)
        .map(|(&d, k)| {
            // CKA needs two rows to centre: sequences with fewer selected tokens sit out
            let valid = k.ge(2.0).to_kind(h.kind());
            let sel = rank.lt_tensor(&k.unsqueeze(1)).to_kind(h.kind());
            let cka = masked_linear_cka(&rows.narrow(2, 0, d as i64), &teacher, &sel);
            let loss: Tensor = (1.0 - cka) * &valid;
            loss.sum(None::<Kind>) / valid.sum(None::<Kind>).clamp_min(1.0)
        })
        .collect()
}

/// One link of the chain (eq. 16): InfoNCE between `phi_i(z_i)` and `z_{i+1}` with in-batch
/// negatives and cosine similarity over `tau`. Whether `z_{i+1}` is detached is the caller's
/// choice ([`super::MipicConfig::pic_detach_target`]).
///
/// # Shapes
/// - `projected`: `[B, d_{i+1}]` = `phi_i(z_i)`; `next`: `[B, d_{i+1}]`; returns a scalar
pub fn chain_link(projected: &Tensor, next: &Tensor, tau: f64) -> Tensor {
    losses::mnrl(projected, next, None, 1.0 / tau)
}

/// SIA's query token (the paper's \[CLS\]) is the token the model's pooling reads: position 0
/// for \[CLS\], mean, max and mean-sqrt-len pooling (BERT-family and ModernBERT models start with
/// \[CLS\], Gemma 3 with `<bos>`), the last real token for last-token pooling (Qwen3, where
/// position 0 of a causal model sees only itself). For last-token pooling this returns, per row,
/// the token order that swaps that token into position 0 (`[B, seq]` int64), so that SIA's
/// terms, which read position 0 and are otherwise invariant to the order of the tokens, query
/// it; `None` when position 0 already is the query.
pub(crate) fn anchor_first(mask: &Tensor, pooling: nest_model::Pooling) -> Option<Tensor> {
    if pooling != nest_model::Pooling::LastToken {
        return None;
    }
    let (b, n) = mask.size2().expect("mask is [batch, seq]");
    let pos = Tensor::arange(n, (Kind::Int64, mask.device())).expand([b, n], false);
    // the last real token, whichever side the padding is on
    let last = (&pos * mask.to_kind(Kind::Int64)).argmax(1, true); // [B, 1]
    let mut perm = pos.copy();
    let _ = perm.scatter_(1, &last, &Tensor::zeros_like(&last));
    perm.narrow(1, 0, 1).copy_(&last);
    Some(perm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_token_pooling_puts_the_last_real_token_first() {
        // right padding (rows 0, 1) and left padding (row 2)
        let mask = Tensor::from_slice2(&[[1i64, 1, 1, 0], [1, 0, 0, 0], [0, 0, 1, 1]]);
        let perm = anchor_first(&mask, nest_model::Pooling::LastToken).unwrap();
        let got: Vec<Vec<i64>> = (0..3)
            .map(|r| Vec::<i64>::try_from(perm.get(r)).unwrap())
            .collect();
        assert_eq!(got, [[2, 1, 0, 3], [0, 1, 2, 3], [3, 1, 2, 0]]);
        // the reordered mask keeps every real token
        let m = mask.gather(1, &perm, false);
        assert_eq!(
            Vec::<i64>::try_from(m.sum_dim_intlist(1, false, Kind::Int64)).unwrap(),
            [3, 1, 2]
        );
        assert!(anchor_first(&mask, nest_model::Pooling::Mean).is_none());
        assert!(anchor_first(&mask, nest_model::Pooling::Cls).is_none());
    }
}
