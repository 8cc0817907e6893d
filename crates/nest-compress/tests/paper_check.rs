//! Nest's SMEC losses against the paper-only reference (issue 35, "independent check of every
//! loss").
//!
//! `tests/reference/paper/smec_paper.py` computed SMEC's losses from the paper alone (float64
//! PyTorch) on inputs it generated and saved in `tests/fixtures/paper/smec_paper.safetensors`:
//! D = 16, trajectory [16, 8, 4, 2], 4 queries x 6 documents with graded relevance, an FC layer
//! `emb = e W^T` without bias, Gumbel tau 1, an S-XBM memory of 12 frozen vectors, top-3
//! neighbours, alpha = 1. Nest gets the same inputs through its public functions (`rank_loss`
//! with scale 1, `Ads`, `Memory`, `cos_rows`, `similarity_gap`), composed as its private
//! `phase.rs` composes them (`y = x W^T + b` with b = 0, a level = a prefix or an ADS choice).
//! Each comparison prints the value (Nest vs paper), the relative difference and the cosine
//! between the gradients; `tests/reference/paper/COMPARISON.md` explains the differences.
//!
//! Nest computes these losses in float32 (`rank_loss` and `cos_rows` sum in `Kind::Float`,
//! `Ads` draws and softmaxes in float32, `Memory` stores float32), so the tolerance is 1e-5
//! relative here, not float64's 1e-6 (measured: below 1e-7).
//!
//! The paper sums over every (query, j, k) triple (eq. 8) and every (item, neighbour) pair (eq.
//! 7); Nest averages over them. The ratio is the number of triples with `y_ij > y_ik` (rank
//! loss) and the number of pairs, 10 items x 3 neighbours (S-XBM): the tests assert those
//! ratios, for the value and for the gradient.

use std::collections::HashMap;
use std::path::Path;

use nest_compress::ads::Ads;
use nest_compress::loss::{cos_rows, rank_loss, similarity_gap};
use nest_compress::memory::Memory;
use tch::{Device, Kind, Tensor};

type Map = HashMap<String, Tensor>;

fn fixture() -> Map {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/paper/smec_paper.safetensors");
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

fn leaf(t: &Tensor) -> Tensor {
    t.to_kind(Kind::Double)
        .detach()
        .copy()
        .set_requires_grad(true)
}

fn scalar(t: &Tensor) -> f64 {
    t.to_kind(Kind::Double).reshape([-1]).double_value(&[0])
}

fn d(t: &Tensor) -> Tensor {
    t.to_kind(Kind::Double)
}

fn grads(loss: &Tensor, inputs: &[&Tensor]) -> Vec<Tensor> {
    let g = Tensor::run_backward(&[loss], inputs, true, false);
    g.into_iter()
        .zip(inputs)
        .map(|(g, x)| {
            if g.defined() {
                d(&g)
            } else {
                d(&x.zeros_like())
            }
        })
        .collect()
}

fn flat(ts: &[Tensor]) -> Tensor {
    let v: Vec<Tensor> = ts.iter().map(|t| d(t).reshape([-1])).collect();
    Tensor::cat(&v, 0)
}

fn norm(t: &Tensor) -> f64 {
    t.square().sum(Kind::Double).sqrt().double_value(&[])
}

fn cosine(a: &[Tensor], b: &[Tensor]) -> f64 {
    let (a, b) = (flat(a), flat(b));
    (&a * &b).sum(Kind::Double).double_value(&[]) / (norm(&a) * norm(&b))
}

/// `||scale * a - b|| / ||b||`.
fn grad_rel_diff(a: &[Tensor], b: &[Tensor], scale: f64) -> f64 {
    let (a, b) = (flat(a), flat(b));
    norm(&(a * scale - &b)) / norm(&b)
}

fn rel_diff(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

fn line(what: &str, nest: f64, paper: f64, cos: Option<f64>) -> f64 {
    let rel = rel_diff(nest, paper);
    let cos = cos.map_or("-".to_string(), |c| format!("{c:.12}"));
    eprintln!(
        "{what:<60} nest {nest:>+.12e}  paper {paper:>+.12e}  rel.diff {rel:.2e}  grad cos {cos}"
    );
    rel
}

/// Float32 arithmetic inside Nest (see the module comment).
const TOL: f64 = 1e-5;

/// `paper = ratio * nest` for the value and for the gradient.
fn scaled(what: &str, nest: f64, paper: f64, ratio: f64, g_nest: &[Tensor], g_paper: &[Tensor]) {
    let cos = cosine(g_nest, g_paper);
    line(what, nest, paper, Some(cos));
    let r = rel_diff(ratio * nest, paper);
    let g = grad_rel_diff(g_nest, g_paper, ratio);
    eprintln!("    paper / nest = {:.9} (expected {ratio}); gradient: ||{ratio} g_nest - g_paper|| / ||g_paper|| = {g:.2e}", paper / nest);
    assert!(r <= TOL, "{what}: paper {paper} != {ratio} x nest {nest}");
    assert!(
        g <= TOL && cos >= 1.0 - TOL,
        "{what}: gradient not {ratio} x Nest's (relative {g:.2e}, cosine {cos})"
    );
}

struct Smec {
    x: Map,
    q: Tensor,
    c: Tensor,
    rel: Tensor,
    /// Triples (i, j, k) with y_ij > y_ik: the paper's sum / Nest's mean.
    triples: f64,
}

fn smec() -> Smec {
    let x = fixture();
    let (q, c, rel) = (d(&x["query_emb"]), d(&x["corpus_emb"]), d(&x["relevance"]));
    let (nq, nc) = (rel.size()[0], rel.size()[1]);
    let mut triples = 0.0;
    for i in 0..nq {
        for j in 0..nc {
            for k in 0..nc {
                if rel.double_value(&[i, j]) > rel.double_value(&[i, k]) {
                    triples += 1.0;
                }
            }
        }
    }
    Smec {
        x,
        q,
        c,
        rel,
        triples,
    }
}

/// Nest's FC layer on `x`: `x W^T + b` with the first `rows` rows of `W` (the trainable rows of
/// a phase) and b = 0 (the reference has no bias).
fn fc(x: &Tensor, w: &Tensor, rows: i64) -> Tensor {
    let w = w.narrow(0, 0, rows);
    x.matmul(&w.tr()) + Tensor::zeros([rows], (Kind::Double, Device::Cpu))
}

/// Nest's rank loss at one level (scale 1, the paper's formula).
fn rank(s: &Smec, w: &Tensor, rows: i64, level: impl Fn(&Tensor) -> Tensor) -> Tensor {
    rank_loss(
        &level(&fc(&s.q, w, rows)),
        &level(&fc(&s.c, w, rows)),
        &s.rel,
        1.0,
    )
}

fn prefix(m: i64) -> impl Fn(&Tensor) -> Tensor {
    move |y: &Tensor| y.narrow(-1, 0, m)
}

/// Rank loss (eq. 8) per dim, parallel MRL (eq. 1 with c_m = 1) and each SMRL stage (section
/// 3.2: stage s trains the transition D/2^(s-1) -> D/2^s on the rows [0, D/2^(s-1)) of W, loss
/// L_rank(D/2^(s-1)) + L_rank(D/2^s)): the same formula, Nest averaging over the triples.
#[test]
fn rank_loss_mrl_and_smrl_stages_are_the_paper_sums_over_the_triple_count() {
    let s = smec();
    eprintln!("triples with y_ij > y_ik: {}", s.triples);
    let mut mrl = Tensor::zeros([], (Kind::Double, Device::Cpu));
    let w_mrl = leaf(&s.x["w_fc"]);
    for (i, m) in [16i64, 8, 4, 2].into_iter().enumerate() {
        let w = leaf(&s.x["w_fc"]);
        let l = rank(&s, &w, 16, prefix(m));
        scaled(
            &format!("SMEC L_rank dim {m} (eq. 8)"),
            scalar(&l),
            s.x["rank_loss_per_dim"].double_value(&[i as i64]),
            s.triples,
            &grads(&l, &[&w]),
            &[s.x[&format!("grad_rank_loss_dim{m}_wrt_w_fc")].shallow_clone()],
        );
        // not `+=`: an in-place add on a graph's tensor would break its backward pass
        #[allow(clippy::assign_op_pattern)]
        let sum = mrl + rank(&s, &w_mrl, 16, prefix(m));
        mrl = sum;
    }
    scaled(
        "SMEC MRL L_rank({16,8,4,2}) (eq. 1, c_m = 1)",
        scalar(&mrl),
        scalar(&s.x["mrl_rank_loss"]),
        s.triples,
        &grads(&mrl, &[&w_mrl]),
        &[s.x["grad_mrl_rank_loss_wrt_w_fc"].shallow_clone()],
    );
    for stage in 1..=3i64 {
        let (hi, lo) = (16 >> (stage - 1), 16 >> stage);
        let w = leaf(&s.x["w_fc"]);
        // the phase's levels: the chain [hi, lo], truncation
        let l = rank(&s, &w, hi, prefix(hi)) + rank(&s, &w, hi, prefix(lo));
        let g = grads(&l, &[&w]);
        assert_eq!(
            g[0].narrow(0, hi, 16 - hi)
                .abs()
                .sum(Kind::Double)
                .double_value(&[]),
            0.0,
            "rows >= {hi} are frozen"
        );
        scaled(
            &format!("SMEC SMRL stage {stage} ({hi} -> {lo})"),
            scalar(&l),
            s.x["smrl_stage_loss"].double_value(&[stage - 1]),
            s.triples,
            &g,
            &[s.x[&format!("grad_smrl_stage{stage}_wrt_w_fc")].shallow_clone()],
        );
    }
}

/// The Gumbel noise `Ads::sample` draws after `tch::manual_seed(seed)` (its first draw).
fn nest_gumbel(seed: i64, n: i64) -> Tensor {
    tch::manual_seed(seed);
    let u = Tensor::rand([n], (Kind::Float, Device::Cpu)).clamp(1e-10, 1.0 - 1e-7);
    d(&-(-u.log()).log())
}

/// One ADS draw with the reference's logits and noise: `Ads` draws its own noise, so its
/// logits are set to `ads_logits + gumbel_noise - G_nest` (the gradient with respect to them
/// is the gradient with respect to `ads_logits`). `soft`: Nest's `Ads::soft` (weights `z_k`)
/// instead of its default straight-through weights `z_k / sg(z_k)`. Returns the logits leaf,
/// the kept dims and their weights.
fn ads_draw(s: &Smec, soft: bool) -> (Tensor, Tensor, Tensor) {
    let seed = 20240611;
    let g = nest_gumbel(seed, 16);
    let logits = leaf(&(d(&s.x["ads_logits"]) + d(&s.x["gumbel_noise"]) - g));
    let ads = Ads {
        logits: logits.shallow_clone(),
        k: 8,
        tau: 1.0,
        soft,
    };
    tch::manual_seed(seed);
    let (idx, wt) = ads.sample(None);
    (logits, idx, wt)
}

/// ADS (section 3.3, eq. 6), stage 1 (16 -> 8): `L_rank(16) + L_rank(ADS 8)`, Nest keeping
/// the reference's 8 dims.
///
/// - `Ads::soft` (weights `z_k`, `nest compress --ads-gradient soft`) is the primary `_soft`
///   reading over the triple count: value, FC gradient and logit gradient.
/// - Nest's default straight-through weights `z_k / sg(z_k)` give the `_st` reading's value and
///   FC gradient (hard selection forward), but another logit gradient than the reference's
///   straight-through `1 + z_k - sg(z_k)`: Nest passes each kept dim's own gradient `g_k` to its
///   logit (and nothing to the dropped ones, since sum_k g_k = 0 by the cosine's scale
///   invariance), the reference `z_j (g_j - sum_k g_k z_k)`. Hence Nest's logit gradient =
///   (r_j / z_j - r_u / z_u) / triples on a kept dim j (u any dropped dim), 0 on a dropped one,
///   r the reference's.
#[test]
fn ads_soft_is_the_primary_reading_and_the_default_a_straight_through_one() {
    let s = smec();
    let want: Vec<i64> = Vec::try_from(&s.x["ads_selected_idx"]).unwrap();
    let mut default_logit_grad = None;
    for soft in [true, false] {
        let (logits, idx, wt) = ads_draw(&s, soft);
        let got: Vec<i64> = Vec::try_from(&idx).unwrap();
        assert_eq!(got, want, "the same 8 dims");
        let w = leaf(&s.x["w_fc"]);
        let level1 = |y: &Tensor| y.index_select(-1, &idx) * &wt;
        let l = rank(&s, &w, 16, prefix(16)) + rank(&s, &w, 16, level1);
        let g = grads(&l, &[&w, &logits]);
        let (key, what) = match soft {
            true => ("soft", "Ads::soft vs primary soft"),
            false => ("st", "default ST vs alt st"),
        };
        let gp_w = s.x[&format!("grad_ads_stage1_loss_{key}_wrt_w_fc")].shallow_clone();
        let gp_l = s.x[&format!("grad_ads_stage1_loss_{key}_wrt_ads_logits")].shallow_clone();
        let value = scalar(&l);
        let paper = scalar(&s.x[&format!("ads_stage1_loss_{key}")]);
        if soft {
            scaled(
                &format!("SMEC ADS stage-1 L_rank, {what} (FC + logits)"),
                value,
                paper,
                s.triples,
                &g,
                &[gp_w, gp_l],
            );
        } else {
            scaled(
                &format!("SMEC ADS stage-1 L_rank, {what} (FC gradient)"),
                value,
                paper,
                s.triples,
                &g[..1],
                &[gp_w],
            );
            // against the primary (soft) reading: another value and FC gradient
            let cos = cosine(
                &g[..1],
                &[s.x["grad_ads_stage1_loss_soft_wrt_w_fc"].shallow_clone()],
            );
            let rel = line(
                "SMEC ADS default ST x triples vs primary soft (FC grad)",
                value * s.triples,
                scalar(&s.x["ads_stage1_loss_soft"]),
                Some(cos),
            );
            assert!(rel > 0.01, "hard vs soft selection should show: {rel:e}");
            default_logit_grad = Some(g[1].shallow_clone());
        }
    }

    // the default's logit gradient against the reference's straight-through one
    let gl = default_logit_grad.unwrap();
    let r = d(&s.x["grad_ads_stage1_loss_st_wrt_ads_logits"]);
    let z = d(&s.x["ads_probs"]);
    let kept: Vec<bool> = (0..16).map(|j| want.contains(&j)).collect();
    let ratio = |j: usize| r.double_value(&[j as i64]) / z.double_value(&[j as i64]);
    let dropped: Vec<f64> = (0..16).filter(|&j| !kept[j]).map(ratio).collect();
    let c = dropped.iter().sum::<f64>() / dropped.len() as f64;
    assert!(
        dropped.iter().all(|v| (v - c).abs() <= 1e-9 * c.abs()),
        "r_u / z_u is one constant over the dropped dims: {dropped:?}"
    );
    let predicted: Vec<f64> = (0..16)
        .map(|j| match kept[j] {
            true => (ratio(j) - c) / s.triples,
            false => 0.0,
        })
        .collect();
    let predicted = Tensor::from_slice(&predicted);
    let direct = cosine(&[gl.shallow_clone()], &[r.shallow_clone()]);
    let err = grad_rel_diff(&[gl.shallow_clone()], &[predicted], 1.0);
    let on_dropped = (0..16)
        .filter(|&j| !kept[j])
        .map(|j| gl.double_value(&[j as i64]).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "SMEC ADS default ST logit gradient: cosine with the reference's st gradient \
         {direct:.6}; vs (r_j/z_j - r_u/z_u)/triples on kept dims and 0 on dropped: relative \
         error {err:.2e}; largest |gradient| on a dropped dim {on_dropped:.1e} (norm {:.3e})",
        norm(&gl)
    );
    assert!(err <= TOL, "Nest's z/sg(z) estimator: {err:e}");
    assert!(direct < 0.99, "the two straight-through estimators differ");
}

/// S-XBM (section 3.4, eq. 7) per target dim d = 8, 4, 2: Nest's `Memory` finds the
/// reference's top-3 neighbours (cosine on frozen features, no self-matches) and keeps the
/// FIFO order; the loss is the primary reading (teacher = cosine of the original frozen
/// embeddings, student = cosine of the FC output's prefix), Nest averaging over the 30 pairs.
/// Then eq. 9 for stage 1 (ADS 16 -> 8, alpha = 1), composed as `phase.rs` does.
#[test]
fn sxbm_is_the_primary_reading_averaged_over_the_pairs() {
    let s = smec();
    let x = &s.x;
    let items = Tensor::cat(&[&s.q, &s.c], 0); // the 10 frozen embeddings of the batch
    let memory = d(&x["xbm_memory"]);
    let mut mem = Memory::new(12, 16);
    mem.push(&memory);
    let (vecs, _) = mem.neighbours(&items.to_kind(Kind::Float), 3).unwrap();
    let vecs = d(&vecs); // [10, 3, 16], float32 values
                         // which memory rows: the nearest stored row to each returned vector
    let (n, k) = (vecs.size()[0], vecs.size()[1]);
    let stored = d(&memory.to_kind(Kind::Float));
    for i in 0..n {
        for r in 0..k {
            let dist = (&stored - vecs.get(i).get(r))
                .abs()
                .sum_dim_intlist(1, false, Kind::Double);
            let row = dist.argmin(0, false).int64_value(&[]);
            assert_eq!(
                row,
                x["sxbm_neighbors"].int64_value(&[i, r]),
                "item {i} neighbour {r}"
            );
            assert_eq!(dist.double_value(&[row]), 0.0);
        }
    }
    let pairs = (n * k) as f64;
    let frozen = cos_rows(&items.unsqueeze(1).expand_as(&vecs), &vecs);
    for (i, dim) in [8i64, 4, 2].into_iter().enumerate() {
        let w = leaf(&x["w_fc"]);
        let (ci, cv) = (
            fc(&items, &w, 16).narrow(-1, 0, dim),
            fc(&vecs, &w, 16).narrow(-1, 0, dim),
        );
        let comp = cos_rows(&ci.unsqueeze(1).expand_as(&cv), &cv);
        let gap = similarity_gap(&frozen, &comp);
        scaled(
            &format!("SMEC S-XBM L_un-sup d = {dim} (eq. 7)"),
            scalar(&gap),
            x["sxbm_loss"].double_value(&[i as i64]),
            pairs,
            &grads(&gap, &[&w]),
            &[x[&format!("grad_sxbm_d{dim}_wrt_w_fc")].shallow_clone()],
        );
        // not the alternative teacher (the full FC output)
        let alt = x["sxbm_alt_fc_full_loss"].double_value(&[i as i64]);
        let r = line(
            "    vs alt fc_full (x pairs)",
            scalar(&gap) * pairs,
            alt,
            None,
        );
        assert!(r > 0.01);
    }
    // FIFO: the batch enqueued after the loss evicts the 10 oldest rows
    mem.push(&items);
    let after = d(&mem.contents());
    let want = d(&x["xbm_memory_after"].to_kind(Kind::Float));
    assert_eq!(norm(&(after - want)), 0.0, "FIFO contents");

    // eq. 9, stage 1 (levels 16 and ADS 8, Ads::soft so that the selection is the primary
    // reading), alpha = 1, as phase.rs: at every level, the rank loss plus alpha times eq. 7
    // against the memory neighbours
    let (logits, idx, wt) = ads_draw(&s, true);
    let w = leaf(&x["w_fc"]);
    let level1 = |y: &Tensor| y.index_select(-1, &idx) * &wt;
    let gap_at = |level: &dyn Fn(&Tensor) -> Tensor| {
        let (ci, cv) = (level(&fc(&items, &w, 16)), level(&fc(&vecs, &w, 16)));
        similarity_gap(&frozen, &cos_rows(&ci.unsqueeze(1).expand_as(&cv), &cv))
    };
    let (rank0, rank1) = (rank(&s, &w, 16, prefix(16)), rank(&s, &w, 16, level1));
    let (gap0, gap1) = (gap_at(&prefix(16)), gap_at(&level1));
    let total = &rank0 + &gap0 + &rank1 + &gap1;
    let inputs = [&w, &logits];
    let gp: Vec<Tensor> = ["w_fc", "ads_logits"]
        .iter()
        .map(|n| x[&format!("grad_smec_stage1_total_wrt_{n}")].shallow_clone())
        .collect();
    let g = grads(&total, &inputs);
    let cos = cosine(&g, &gp);
    line(
        "SMEC stage-1 L_total (eq. 9), Ads::soft",
        scalar(&total),
        scalar(&x["smec_stage1_total"]),
        Some(cos),
    );
    eprintln!(
        "    Nest = rank(16) {:.6} + rank(ADS 8) {:.6} + gap(16) {:.6} + gap(ADS 8) {:.6}",
        scalar(&rank0),
        scalar(&rank1),
        scalar(&gap0),
        scalar(&gap1),
    );
    assert!(cos < 0.999, "the totals' gradients differ");
    // the S-XBM part at the reduced level is the reference's (soft ADS) over the pairs
    scaled(
        "SMEC S-XBM at ADS 8 (soft) vs sxbm_ads_soft_d8",
        scalar(&gap1),
        scalar(&x["sxbm_ads_soft_d8"]),
        pairs,
        &grads(&gap1, &inputs),
        &["w_fc", "ads_logits"]
            .iter()
            .map(|n| x[&format!("grad_sxbm_ads_soft_d8_wrt_{n}")].shallow_clone())
            .collect::<Vec<_>>(),
    );
    // the difference: each part normalised (1/triples, 1/pairs), which changes alpha's
    // effective weight, and eq. 7 also at the chain's top level (d = 16: the FC output against
    // the original), which the reference does not have. Undoing both gives the reference's
    // total, value and gradient.
    let rebuilt = (&rank0 + &rank1) * s.triples + &gap1 * pairs;
    scaled(
        "SMEC stage-1 total: triples x rank + pairs x gap(ADS 8)",
        scalar(&rebuilt),
        scalar(&x["smec_stage1_total"]),
        1.0,
        &grads(&rebuilt, &inputs),
        &gp,
    );
    assert!(
        scalar(&gap0) > 1e-3,
        "Nest's eq. 7 at the top level is not empty"
    );
}
