//! Nest's MIPIC, MIC and IBKD losses against the paper-only references (issue 35, "independent
//! check of every loss").
//!
//! `tests/reference/paper/{structure_paper,ibkd_paper}.py` computed every loss from the papers
//! alone (float64 PyTorch, no look at Nest or the authors' code) and wrote
//! `tests/fixtures/paper/{structure,ibkd}_paper.safetensors`: values, gradients with respect to
//! the inputs, and `_alt_` keys for the other readings of ambiguous equations. Here Nest gets
//! the same inputs (`tests/fixtures/objectives/{structure,ibkd}.safetensors`) and settings, and
//! each comparison prints the value (Nest vs paper), the relative difference and the cosine
//! between the two gradients.
//!
//! Each test asserts what `tests/reference/paper/COMPARISON.md` explains, so that it fails if
//! either side changes:
//! - where the readings agree: relative difference <= 1e-6 on the value and on the gradient
//!   (`||g_nest - g_paper|| <= 1e-6 ||g_paper||`, hence cosine >= 1 - 1e-6);
//! - where Nest follows an alternative reading: the same, against that `_alt_` key, and a
//!   visible difference from the primary reading;
//! - where another convention explains the difference (MIC's epsilon, the median heuristic,
//!   the cosine in place of a dot product): the difference, and the explanation checked
//!   (first order in epsilon; Nest's kernel at the reference's bandwidth; the paper's formula
//!   on L2-normalised rows equal to Nest's value and gradient).
//!
//! No private function was needed: the SIA, PIC and MIC checks go through the public term
//! functions and `Objective::terms`; IBKD through `hsic::{gram, side_gram, hsic}` and
//! `distill::infonce_to_teacher` (the `hsic` and `distill` objectives cannot be built outside
//! the crate, and they only pool the batch before calling these).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nest_model::Pooling;
use nest_train::objective::distill::infonce_to_teacher;
use nest_train::objective::hsic::{
    gram, hsic, mean_off_diagonal, side_gram, Bandwidth, HsicConfig, Kernel,
};
use nest_train::objective::mic::{Mic, MicConfig};
use nest_train::objective::mipic::{self, Mipic, MipicConfig};
use nest_train::objective::{BatchOutput, Column, Objective, StepContext, Term};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

// ---------------------------------------------------------------------------------------------
// helpers

type Map = HashMap<String, Tensor>;

fn read(rel: &str) -> Map {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

/// A fresh float64 leaf with gradient.
fn leaf(t: &Tensor) -> Tensor {
    t.to_kind(Kind::Double)
        .detach()
        .copy()
        .set_requires_grad(true)
}

/// The value of a one-element tensor (shape `[]` or `[1]`).
fn scalar(t: &Tensor) -> f64 {
    t.to_kind(Kind::Double).reshape([-1]).double_value(&[0])
}

fn zero() -> Tensor {
    Tensor::zeros([], (Kind::Double, Device::Cpu))
}

/// `d loss / d input` for every input (zeros for an input the loss does not use).
fn grads(loss: &Tensor, inputs: &[&Tensor]) -> Vec<Tensor> {
    let g = Tensor::run_backward(&[loss], inputs, true, false);
    g.into_iter()
        .zip(inputs)
        .map(|(g, x)| {
            if g.defined() {
                g.to_kind(Kind::Double)
            } else {
                x.zeros_like().to_kind(Kind::Double)
            }
        })
        .collect()
}

/// The paper's gradients `grad_<term>_wrt_<name>` for these names.
fn paper_grads(p: &Map, term: &str, names: &[String]) -> Vec<Tensor> {
    names
        .iter()
        .map(|n| p[&format!("grad_{term}_wrt_{n}")].to_kind(Kind::Double))
        .collect()
}

fn flat(ts: &[Tensor]) -> Tensor {
    let v: Vec<Tensor> = ts
        .iter()
        .map(|t| t.to_kind(Kind::Double).reshape([-1]))
        .collect();
    Tensor::cat(&v, 0)
}

fn norm(t: &Tensor) -> f64 {
    t.square().sum(Kind::Double).sqrt().double_value(&[])
}

/// Cosine between two gradients (each a list of tensors, flattened and concatenated).
fn cosine(a: &[Tensor], b: &[Tensor]) -> f64 {
    let (a, b) = (flat(a), flat(b));
    (&a * &b).sum(Kind::Double).double_value(&[]) / (norm(&a) * norm(&b))
}

/// `||scale * a - b|| / ||b||`.
fn grad_rel_diff(a: &[Tensor], b: &[Tensor], scale: f64) -> f64 {
    let (a, b) = (flat(a), flat(b));
    norm(&(a * scale - &b)) / norm(&b)
}

fn rel_diff(nest: f64, paper: f64) -> f64 {
    (nest - paper).abs() / paper.abs().max(1e-300)
}

/// Prints one comparison line; returns the relative difference.
fn line(what: &str, nest: f64, paper: f64, cos: Option<f64>) -> f64 {
    let rel = rel_diff(nest, paper);
    let cos = cos.map_or("-".to_string(), |c| format!("{c:.12}"));
    eprintln!(
        "{what:<64} nest {nest:>+.12e}  paper {paper:>+.12e}  rel.diff {rel:.2e}  grad cos {cos}"
    );
    rel
}

const TOL: f64 = 1e-6;

/// The readings agree: value and gradient within `TOL` (relative).
fn agrees(what: &str, nest: f64, paper: f64, g_nest: &[Tensor], g_paper: &[Tensor]) {
    let cos = cosine(g_nest, g_paper);
    let rel = line(what, nest, paper, Some(cos));
    let g = grad_rel_diff(g_nest, g_paper, 1.0);
    assert!(rel <= TOL, "{what}: value {nest} vs paper {paper}");
    assert!(
        g <= TOL && cos >= 1.0 - TOL,
        "{what}: gradient differs (relative {g:.2e}, cosine {cos})"
    );
}

// ---------------------------------------------------------------------------------------------
// MIPIC and MIC on the structure fixture

/// Settings of the paper reference (structure_paper.py's docstring).
const DIMS: [usize; 4] = [4, 8, 16, 32];
const GAMMAS: [f64; 4] = [0.2, 0.3, 0.4, 0.5];
const ATT_TAU: f64 = 0.7;
const MIN_K: usize = 3;

struct Structure {
    f: Map,
    p: Map,
    /// `h1..h3` as leaves (index 0 = `h1`).
    h: Vec<Tensor>,
}

fn structure() -> Structure {
    let f = read("tests/fixtures/objectives/structure.safetensors");
    let p = read("tests/fixtures/paper/structure_paper.safetensors");
    let h = (1..=3).map(|l| leaf(&f[&format!("h{l}")])).collect();
    Structure { f, p, h }
}

impl Structure {
    /// One column: `h0` (no gradient; no term reads it) and the leaves `h1..h3`.
    fn output(&self, pooling: Pooling) -> BatchOutput {
        let mut hidden = vec![self.f["h0"].to_kind(Kind::Double)];
        hidden.extend(self.h.iter().map(|t| t.shallow_clone()));
        BatchOutput {
            columns: vec![Column {
                hidden,
                mask: self.f["mask"].shallow_clone(),
                pooling,
                head: Default::default(),
                cls_attention: Vec::new(),
                pooled: Vec::new(),
            }],
            scores: None,
            layers: 3,
            normalize: true,
            targets: None,
        }
    }

    /// `(layer, dim)` entry of a `[layers, dims]` table of the paper fixture.
    fn table(&self, key: &str, row: usize, col: usize) -> f64 {
        self.p[key].double_value(&[row as i64, col as i64])
    }
}

const CTX: StepContext = StepContext {
    step: 0,
    micro_batch: 0,
    seed: 1,
};

fn term(terms: &[Term], name: &str) -> Tensor {
    terms
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no term {name}"))
        .value
        .shallow_clone()
}

/// A MIPIC objective on the fixture's dims (D = 32, 3 layers), its parameters in float64 and
/// copied from the fixture (`sia_p{d}` <- `p{d}`, `pic_phi{d}.{0,1}.{weight,bias}` <-
/// `phi{d}_{0..3}`); returns the objective and its parameters by fixture name.
fn mipic_objective(config: MipicConfig, f: &Map) -> (Mipic, VarStore, HashMap<String, Tensor>) {
    let mut vs = VarStore::new(Device::Cpu);
    let m = Mipic::new(config, DIMS.to_vec(), 32, 3, &vs.root()).unwrap();
    vs.double();
    let mut by_fixture_name = HashMap::new();
    tch::no_grad(|| {
        for (name, mut v) in vs.variables() {
            let src = if let Some(d) = name.strip_prefix("sia_p") {
                format!("p{d}")
            } else {
                let (d, rest) = name["pic_phi".len()..].split_once('.').unwrap();
                let i = match rest {
                    "0.weight" => 0,
                    "0.bias" => 1,
                    "1.weight" => 2,
                    "1.bias" => 3,
                    other => panic!("unexpected parameter {other}"),
                };
                format!("phi{d}_{i}")
            };
            v.copy_(&f[&src]);
            by_fixture_name.insert(src, v);
        }
    });
    (m, vs, by_fixture_name)
}

/// SIA's primary reading, term by term: Nest's public term functions (`teacher_scores`,
/// `attention_kl`, `topk_cka`) at every layer 1..3 and every dim 4..32, with the paper's
/// settings, reproduce `sia_att_per_layer_dim` and `sia_cka_per_layer_dim`, and their sums
/// reproduce `sia_att`, `sia_cka`, `sia` and the gradients with respect to `h1..h3` and
/// `P_4..P_32`.
#[test]
fn sia_term_functions_follow_the_paper_at_every_layer_and_dim() {
    let s = structure();
    let mask = &s.f["mask"];
    let proj: Vec<Tensor> = DIMS.iter().map(|d| leaf(&s.f[&format!("p{d}")])).collect();
    let (mut att_total, mut cka_total) = (zero(), zero());
    for (li, h) in s.h.iter().enumerate() {
        let (cand, scores) = mipic::teacher_scores(h, mask);
        for (di, &d) in DIMS.iter().enumerate() {
            let att = mipic::attention_kl(h, &cand, &scores, &proj[di], ATT_TAU);
            let cka = mipic::topk_cka(h, &cand, &scores, &[d], &[GAMMAS[di]], MIN_K).remove(0);
            let (a, c) = (scalar(&att), scalar(&cka));
            let pa = s.table("sia_att_per_layer_dim", li, di);
            let pc = s.table("sia_cka_per_layer_dim", li, di);
            let ra = line(
                &format!("MIPIC L_att  layer {} dim {d}", li + 1),
                a,
                pa,
                None,
            );
            line(
                &format!("MIPIC L_CKA  layer {} dim {d}", li + 1),
                c,
                pc,
                None,
            );
            assert!(ra <= TOL, "L_att layer {} dim {d}: {a} vs {pa}", li + 1);
            // at d = D, 1 - CKA is 0 in exact arithmetic (both sides print ~1e-16)
            assert!(
                (c - pc).abs() <= TOL * pc.abs() + 1e-12,
                "L_CKA layer {} dim {d}: {c} vs {pc}",
                li + 1
            );
            att_total += att;
            cka_total += cka;
        }
    }
    let h_names: Vec<String> = (1..=3).map(|l| format!("h{l}")).collect();
    let p_names: Vec<String> = DIMS.iter().map(|d| format!("p{d}")).collect();
    let all_names: Vec<String> = h_names.iter().chain(&p_names).cloned().collect();
    let mut inputs: Vec<&Tensor> = s.h.iter().collect();
    inputs.extend(proj.iter());
    agrees(
        "MIPIC L_att  (sum over layers 1-3, dims 4-32)",
        scalar(&att_total),
        scalar(&s.p["sia_att"]),
        &grads(&att_total, &inputs),
        &paper_grads(&s.p, "sia_att", &all_names),
    );
    let h_inputs: Vec<&Tensor> = s.h.iter().collect();
    agrees(
        "MIPIC L_CKA  (sum over layers 1-3, dims 4-32)",
        scalar(&cka_total),
        scalar(&s.p["sia_cka"]),
        &grads(&cka_total, &h_inputs),
        &paper_grads(&s.p, "sia_cka", &h_names),
    );
    let total = &att_total + &cka_total;
    agrees(
        "MIPIC L_SIA  (eq. 13-14, functions at dims 4-32)",
        scalar(&total),
        scalar(&s.p["sia"]),
        &grads(&total, &inputs),
        &paper_grads(&s.p, "sia", &all_names),
    );
}

/// `k_i`: Nest's `top_k` counts the candidate tokens (real tokens other than [CLS]), the
/// reference's `m_candidates` reading; the primary reading counts [CLS] too (m = real tokens).
/// On this fixture the two differ only at sequence 1, d = 32 (k 3 vs 4), where 1 - CKA is 0
/// either way, so no value depends on it.
#[test]
fn sia_top_k_counts_the_candidate_tokens() {
    let s = structure();
    let mask = &s.f["mask"];
    let (alt, primary) = (&s.p["sia_alt_m_candidates_k"], &s.p["sia_k"]);
    let mut differences = Vec::new();
    for b in 0..mask.size()[0] {
        let real = mask.get(b).sum(Kind::Int64).int64_value(&[]) as usize;
        for (di, &g) in GAMMAS.iter().enumerate() {
            let k = mipic::top_k(g, real - 1, MIN_K) as i64;
            let idx = [b, di as i64];
            assert_eq!(
                k,
                alt.int64_value(&idx),
                "sequence {b} dim {}: Nest's k vs m_candidates",
                DIMS[di]
            );
            if k != primary.int64_value(&idx) {
                differences.push((b, DIMS[di], k, primary.int64_value(&idx)));
            }
        }
    }
    eprintln!("k: Nest = m_candidates reading; differs from the primary at {differences:?}");
    assert_eq!(differences, [(1, 32, 3, 4)]);
    // that is the count topk_cka itself uses: sequence 1 (7 real tokens, 6 candidates) at
    // d = 16 aligns the same 3 tokens with gamma 0.5 (ceil(0.5 * 6) = 3; counting [CLS] would
    // give ceil(0.5 * 7) = 4) as with gamma 0.4 (3 either way), and not as with gamma 0.65 (4)
    let (h, m) = (s.h[0].narrow(0, 1, 1), mask.narrow(0, 1, 1));
    let (cand, scores) = mipic::teacher_scores(&h, &m);
    let cka = |g: f64| scalar(&mipic::topk_cka(&h, &cand, &scores, &[16], &[g], MIN_K)[0]);
    eprintln!(
        "sequence 1, layer 1, d = 16: 1 - CKA at gamma 0.4 / 0.5 / 0.65: {:.12} / {:.12} / {:.12}",
        cka(0.4),
        cka(0.5),
        cka(0.65)
    );
    // the same tokens: equal but for float reordering (each gamma gathers as many top tokens
    // as the longest row could select, masking the rest)
    assert!((cka(0.5) - cka(0.4)).abs() < 1e-12);
    assert!((cka(0.5) - cka(0.65)).abs() > 1e-6);
}

/// The SIA component (`Objective::terms`) with the paper's settings (layers 1..3, min_k 3, tau
/// 0.7, gammas 0.2/0.3/0.4) aligns only the prefixes below D: it equals the reference's
/// `no_full_dim` reading (MIPIC A.5, "align the first 6 lower-dimensional prefixes against the
/// full-dimensional teacher"), not the primary one (eq. 13 sums i = 1..n, d = D included, where
/// L_att with P_D is not 0).
#[test]
fn sia_component_equals_the_no_full_dim_reading() {
    let s = structure();
    let config = MipicConfig {
        pic: false,
        min_k: MIN_K,
        attention_temperature: ATT_TAU,
        top_k_ratios: GAMMAS[..3].to_vec(),
        sia_layers: vec![1, 2, 3],
        ..MipicConfig::default()
    };
    let (m, _vs, params) = mipic_objective(config, &s.f);
    let terms = m.terms(&s.output(Pooling::Mean), &CTX);
    let (att, cka) = (term(&terms, "sia/attention"), term(&terms, "sia/cka"));
    let total = &att + &cka;
    let h_names: Vec<String> = (1..=3).map(|l| format!("h{l}")).collect();
    let p_names: Vec<String> = [4, 8, 16].iter().map(|d| format!("p{d}")).collect();
    let mut inputs: Vec<&Tensor> = s.h.iter().collect();
    inputs.extend(p_names.iter().map(|n| &params[n]));
    let mut g = grads(&total, &inputs);
    // Nest has no P_D: its gradient there is 0, as in the no_full_dim reading
    g.push(Tensor::zeros([32, 32], (Kind::Double, Device::Cpu)));
    let names: Vec<String> = h_names
        .iter()
        .chain(&p_names)
        .cloned()
        .chain(["p32".to_string()])
        .collect();
    let g_alt = paper_grads(&s.p, "sia_alt_no_full_dim", &names);
    // value only: the reference has no separate gradient of this part
    let rel = line(
        "MIPIC L_att  component vs alt no_full_dim",
        scalar(&att),
        scalar(&s.p["sia_alt_no_full_dim_att"]),
        None,
    );
    assert!(rel <= TOL, "L_att component vs no_full_dim");
    // the gradient: the primary's CKA gradient (its d = D term is 0 in value and gradient)
    agrees(
        "MIPIC L_CKA  component vs alt no_full_dim",
        scalar(&cka),
        scalar(&s.p["sia_alt_no_full_dim_cka"]),
        &grads(&cka, &inputs[..3]),
        &paper_grads(&s.p, "sia_cka", &h_names),
    );
    agrees(
        "MIPIC L_SIA  component vs alt no_full_dim",
        scalar(&total),
        scalar(&s.p["sia_alt_no_full_dim"]),
        &g,
        &g_alt,
    );
    // against the primary reading: the d = D attention terms are missing
    let g_primary = paper_grads(&s.p, "sia", &names);
    let cos = cosine(&g, &g_primary);
    let rel = line(
        "MIPIC L_SIA  component vs primary (d = D included)",
        scalar(&total),
        scalar(&s.p["sia"]),
        Some(cos),
    );
    let missing: f64 = (0..3)
        .map(|l| s.table("sia_att_per_layer_dim", l, 3) + s.table("sia_cka_per_layer_dim", l, 3))
        .sum();
    assert!(rel > 0.1 && cos < 0.99, "the d = D terms should be visible");
    assert!(
        rel_diff(scalar(&total) + missing, scalar(&s.p["sia"])) <= TOL,
        "primary - Nest = the d = D terms"
    );
}

/// PIC (`Objective::terms`, checkpoints (4,1) (8,2) (16,3) (32,3), tau 0.05). Configured as the
/// paper (`pic_pooling = "cls"`: "truncated [CLS] representation"; `pic_detach_target =
/// false`: eq. 16 has no stop-gradient) Nest equals the primary reading; with its defaults
/// (the model's pooling, here mean, and the deeper checkpoint detached) it equals the
/// reference's `mean_pool_stopgrad` reading; each single switch gives the matching `_alt_`.
#[test]
fn pic_equals_the_reading_its_settings_name() {
    let s = structure();
    let phi_names: Vec<String> = [4, 8, 16]
        .iter()
        .flat_map(|d| (0..4).map(move |i| format!("phi{d}_{i}")))
        .collect();
    let names: Vec<String> = (1..=3)
        .map(|l| format!("h{l}"))
        .chain(phi_names.iter().cloned())
        .collect();
    for (pooling, detach, key) in [
        (Some(Pooling::Cls), false, "pic"),
        (Some(Pooling::Cls), true, "pic_alt_stopgrad"),
        (None, false, "pic_alt_mean_pool"),
        (None, true, "pic_alt_mean_pool_stopgrad"),
    ] {
        let config = MipicConfig {
            sia: false,
            checkpoint_layers: vec![1, 2, 3, 3],
            pic_temperature: 0.05,
            pic_pooling: pooling,
            pic_detach_target: detach,
            ..MipicConfig::default()
        };
        let (m, _vs, params) = mipic_objective(config, &s.f);
        let pic = term(&m.terms(&s.output(Pooling::Mean), &CTX), "pic");
        let mut inputs: Vec<&Tensor> = s.h.iter().collect();
        inputs.extend(phi_names.iter().map(|n| &params[n]));
        let what = format!(
            "MIPIC L_PIC  pooling {} detach {detach} vs {key}",
            if pooling.is_some() {
                "cls"
            } else {
                "model(mean)"
            }
        );
        agrees(
            &what,
            scalar(&pic),
            scalar(&s.p[key]),
            &grads(&pic, &inputs),
            &paper_grads(&s.p, key, &names),
        );
        if key != "pic" {
            // a different reading: the gradient with respect to h differs from the primary's
            let g = grads(&pic, &inputs[..3]);
            let cos = cosine(&g, &paper_grads(&s.p, "pic", &names[..3]));
            eprintln!("    gradient wrt h1..h3 vs primary: cosine {cos:.6}");
            assert!(cos < 0.999, "{key} should differ from the primary reading");
        }
    }
}

/// MIC (`Objective::terms`, layers {1, 3}, dims 4..32, tau_corr 0.1, lambda_var 0.1, t 2):
/// the formulas and the averaging (1/(|L||D|) = 1/8, SCR at d = D counted as 0) are the
/// primary reading; the only difference is the unstated epsilon (Nest 1e-5, reference 1e-6).
/// The difference is linear in epsilon: Nest = paper + 9 (paper - paper(eps = 0)) to first
/// order, for the value and for the gradient.
#[test]
fn mic_differs_from_the_paper_only_by_its_epsilon() {
    let s = structure();
    let config = MicConfig {
        layers: vec![1, 3],
        tau_corr: 0.1,
        lambda_var: 0.1,
        uniformity_t: 2.0,
        ..MicConfig::default()
    };
    let m = Mic::new(config, DIMS.to_vec(), 32, 3).unwrap();
    let terms = m.terms(&s.output(Pooling::Mean), &CTX);
    let (scr, sir) = (term(&terms, "scr"), term(&terms, "sir"));
    let align = &scr + &sir;
    let inputs: Vec<&Tensor> = s.h.iter().collect();
    let names: Vec<String> = (1..=3).map(|l| format!("h{l}")).collect();
    let report = |what: &str, nest: &Tensor, key: &str| {
        let g = grads(nest, &inputs);
        let gp = paper_grads(&s.p, key, &names);
        let cos = cosine(&g, &gp);
        let rel = line(what, scalar(nest), scalar(&s.p[key]), Some(cos));
        (rel, cos, g)
    };
    let (rel_scr, cos_scr, _) = report(
        "MIC  L_SCR part of L_align (eps 1e-5 vs 1e-6)",
        &scr,
        "mic_scr",
    );
    let (rel_sir, cos_sir, _) = report(
        "MIC  L_SIR part of L_align (eps 1e-5 vs 1e-6)",
        &sir,
        "mic_sir",
    );
    let (rel, cos, g) = report("MIC  L_align (eps 1e-5 vs 1e-6)", &align, "mic_align");
    // small, but above float64 round-off: the epsilon is visible
    for (what, r, c) in [
        ("SCR", rel_scr, cos_scr),
        ("SIR", rel_sir, cos_sir),
        ("L_align", rel, cos),
    ] {
        assert!(r > 1e-6 && r < 1e-3, "{what}: relative difference {r:e}");
        assert!(c > 1.0 - 1e-5, "{what}: gradient cosine {c}");
    }
    // first order in epsilon: f(1e-5) = f(1e-6) + 9 (f(1e-6) - f(0))
    let (paper, eps0) = (
        scalar(&s.p["mic_align"]),
        scalar(&s.p["mic_alt_eps0_align"]),
    );
    let predicted = paper + 9.0 * (paper - eps0);
    let nest = scalar(&align);
    let residual = (nest - predicted).abs() / (nest - paper).abs();
    let gp = paper_grads(&s.p, "mic_align", &names);
    let g0 = paper_grads(&s.p, "mic_alt_eps0_align", &names);
    let g_pred: Vec<Tensor> = gp.iter().zip(&g0).map(|(a, b)| a + (a - b) * 9.0).collect();
    let g_residual = grad_rel_diff(&g, &g_pred, 1.0) / grad_rel_diff(&g, &gp, 1.0);
    eprintln!(
        "MIC  L_align eps extrapolation: nest {nest:.12e} predicted {predicted:.12e}; \
         unexplained share of the difference: value {residual:.1e}, gradient {g_residual:.1e}"
    );
    assert!(
        residual < 2e-3 && g_residual < 2e-3,
        "the epsilon explains the difference"
    );
}

// ---------------------------------------------------------------------------------------------
// IBKD

struct Ibkd {
    f: Map,
    p: Map,
}

fn ibkd() -> Ibkd {
    Ibkd {
        f: read("tests/fixtures/objectives/ibkd.safetensors"),
        p: read("tests/fixtures/paper/ibkd_paper.safetensors"),
    }
}

/// The paper's HSIC estimator (eq. 6) written out with the centring matrix, for the linear
/// kernel on given rows: `tr(K_X H K_S H) / l^2`, `K = rows rows^T`.
fn linear_hsic_eq6(x: &Tensor, s: &Tensor) -> Tensor {
    let l = x.size()[0];
    let h = Tensor::eye(l, (Kind::Double, Device::Cpu)) - 1.0 / l as f64;
    let (kx, ks) = (x.matmul(&x.tr()), s.matmul(&s.tr()));
    kx.matmul(&h).matmul(&ks).matmul(&h).trace() / (l * l) as f64
}

fn unit_rows(t: &Tensor) -> Tensor {
    t / t.norm_scalaropt_dim(2.0, [-1i64].as_slice(), true)
}

/// The median of the squared distances between distinct rows (even count: mean of the two
/// middle values), as plain f64.
fn median_sq_dist(t: &Tensor) -> f64 {
    let n = t.size()[0];
    let mut d = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            d.push(
                (t.get(i) - t.get(j))
                    .square()
                    .sum(Kind::Double)
                    .double_value(&[]),
            );
        }
    }
    d.sort_by(f64::total_cmp);
    let k = d.len();
    if k % 2 == 1 {
        d[k / 2]
    } else {
        (d[k / 2 - 1] + d[k / 2]) / 2.0
    }
}

/// HSIC (eq. 6) for every kernel Nest has: RBF with gamma 0.5 (primary) and 0.1, IMQ with
/// c = 1, and the saturation diagnostic, agree with the paper reading. The median-heuristic
/// RBF and the "linear" kernel differ by a convention each (see the asserts). The reference's
/// `laplace_g05` and `literal_g05` (eq. 7 as printed) have no Nest counterpart.
#[test]
fn hsic_agrees_per_kernel_except_two_conventions() {
    let t = ibkd();
    let x = t.f["x"].to_kind(Kind::Double);
    for (kernel, gamma, key) in [
        (Kernel::Rbf, 0.5, "rbf_g05"),
        (Kernel::Rbf, 0.1, "rbf_g01"),
        (Kernel::Imq, 1.0, "imq_c1"),
    ] {
        let s = leaf(&t.f["s"]);
        let (kx, ks) = (gram(&x, kernel, gamma), gram(&s, kernel, gamma));
        let v = hsic(&kx, &ks);
        agrees(
            &format!("IBKD HSIC {key}"),
            scalar(&v),
            scalar(&t.p[&format!("hsic_{key}")]),
            &grads(&v, &[&s]),
            &[t.p[&format!("grad_hsic_{key}_wrt_s")].shallow_clone()],
        );
        for (side, k) in [("kx", &kx), ("ks", &ks)] {
            let want = scalar(&t.p[&format!("hsic_{key}_{side}_offdiag_mean")]);
            let got = mean_off_diagonal(k).double_value(&[]);
            let r = line(
                &format!("IBKD {key} {side} mean off-diagonal"),
                got,
                want,
                None,
            );
            assert!(r <= TOL);
        }
    }

    // median heuristic: Nest's bandwidth is from the median *squared* distance, gamma =
    // 1/(2 median(d^2)); the reference's sigma is the median distance, gamma = 1/(2 median(d)^2).
    // With 28 pairs (even) the medians average two middle values, so they differ slightly.
    let s = leaf(&t.f["s"]);
    let config = HsicConfig {
        kernel: Kernel::Rbf,
        bandwidth: Bandwidth::Median,
        ..HsicConfig::default()
    };
    let v = hsic(&side_gram(&x, &config), &side_gram(&s, &config));
    let g = grads(&v, &[&s]);
    let gp = [t.p["grad_hsic_rbf_median_wrt_s"].shallow_clone()];
    let cos = cosine(&g, &gp);
    let rel = line(
        "IBKD HSIC rbf_median (median d^2 vs median d)",
        scalar(&v),
        scalar(&t.p["hsic_rbf_median"]),
        Some(cos),
    );
    assert!(rel > 1e-6 && rel < 0.05, "median convention: {rel:e}");
    // Nest = fixed gamma 1/(2 median(d^2)) per side
    let (mx, ms) = (median_sq_dist(&x), median_sq_dist(&t.f["s"]));
    let fixed = hsic(
        &gram(&x, Kernel::Rbf, 0.5 / mx),
        &gram(&s, Kernel::Rbf, 0.5 / ms),
    );
    assert!(rel_diff(scalar(&v), scalar(&fixed)) <= 1e-12);
    // and Nest's kernel with the reference's sigma gives the reference's value and gradient
    let (sx, ss) = (
        scalar(&t.p["rbf_median_sigma_x"]),
        scalar(&t.p["rbf_median_sigma_s"]),
    );
    eprintln!(
        "    median d^2 = {mx:.6} / {ms:.6}; reference sigma^2 = {:.6} / {:.6}",
        sx * sx,
        ss * ss
    );
    let s2 = leaf(&t.f["s"]);
    let v2 = hsic(
        &gram(&x, Kernel::Rbf, 0.5 / (sx * sx)),
        &gram(&s2, Kernel::Rbf, 0.5 / (ss * ss)),
    );
    agrees(
        "IBKD HSIC rbf, Nest's kernel at the reference's sigma",
        scalar(&v2),
        scalar(&t.p["hsic_rbf_median"]),
        &grads(&v2, &[&s2]),
        &gp,
    );

    // "linear": Nest's kernel is the cosine (rows L2-normalised, as the authors' code); the
    // reference's is <a, b>. Eq. 6 with <a, b> on the raw rows is the reference; on the
    // normalised rows it is Nest.
    let s = leaf(&t.f["s"]);
    let v = hsic(
        &gram(&x, Kernel::Linear, 0.5),
        &gram(&s, Kernel::Linear, 0.5),
    );
    let g = grads(&v, &[&s]);
    let gp = [t.p["grad_hsic_linear_wrt_s"].shallow_clone()];
    let cos = cosine(&g, &gp);
    let rel = line(
        "IBKD HSIC linear (Nest: cosine kernel)",
        scalar(&v),
        scalar(&t.p["hsic_linear"]),
        Some(cos),
    );
    assert!(
        rel > 0.1 && cos < 0.9,
        "the cosine kernel is not <a, b>: {rel:e}"
    );
    let raw = linear_hsic_eq6(&x, &t.f["s"].to_kind(Kind::Double));
    assert!(rel_diff(scalar(&raw), scalar(&t.p["hsic_linear"])) <= 1e-12);
    let s3 = leaf(&t.f["s"]);
    let normalised = linear_hsic_eq6(&unit_rows(&x), &unit_rows(&s3));
    let g3 = grads(&normalised, &[&s3]);
    assert!(rel_diff(scalar(&v), scalar(&normalised)) <= 1e-12);
    assert!(grad_rel_diff(&g, &g3, 1.0) <= 1e-10);
}

/// The paper's InfoNCE (eq. 3-5): `-mean_i log softmax_j(s_i^T W t_j / tau)[i]`, a bilinear
/// score on the raw vectors.
fn nce_eq5(mapped: &Tensor, teacher: &Tensor, tau: f64) -> Tensor {
    let logits = mapped.matmul(&teacher.tr()) / tau;
    -logits
        .log_softmax(1, Kind::Double)
        .diagonal(0, 0, 1)
        .mean(Kind::Double)
}

/// InfoNCE through W (eq. 3-5, tau 0.1): Nest scores `cos(W s_i + b, t_j) / tau` (the authors'
/// code: a Linear with bias and the cosine); the paper prints `exp(s_i^T W t_j / tau)`, a raw
/// bilinear score without bias (reference `nce`; with the bias: `nce_alt_bias`). The difference
/// is exactly the normalisation: eq. 5 on L2-normalised `W s_i + b` and `t_j` is Nest's value
/// and gradient.
#[test]
fn infonce_through_w_uses_the_cosine_where_the_paper_prints_a_dot_product() {
    let t = ibkd();
    let teacher = t.f["teacher"].to_kind(Kind::Double);
    let tau = 0.1;
    let (s, w, b) = (leaf(&t.f["s"]), leaf(&t.f["w"]), leaf(&t.f["b"]));
    let nest = infonce_to_teacher(&s.linear(&w, Some(&b)), &teacher, tau);
    let g = grads(&nest, &[&s, &w, &b]);
    let g_bias: Vec<Tensor> = ["s", "w", "b"]
        .iter()
        .map(|n| t.p[&format!("grad_nce_alt_bias_wrt_{n}")].shallow_clone())
        .collect();
    let cos = cosine(&g, &g_bias);
    let rel = line(
        "IBKD InfoNCE through W vs alt bias (dot + b)",
        scalar(&nest),
        scalar(&t.p["nce_alt_bias"]),
        Some(cos),
    );
    assert!(
        rel > 0.01 && cos < 0.99,
        "cosine vs dot product should show: {rel:e}, {cos}"
    );
    let g_primary: Vec<Tensor> = ["s", "w"]
        .iter()
        .map(|n| t.p[&format!("grad_nce_wrt_{n}")].shallow_clone())
        .collect();
    let cos = cosine(&g[..2], &g_primary);
    let rel = line(
        "IBKD InfoNCE through W vs primary (dot, no bias)",
        scalar(&nest),
        scalar(&t.p["nce"]),
        Some(cos),
    );
    assert!(rel > 0.01 && cos < 0.99);
    // Nest without the bias is still not the primary: the bias is not the main difference
    let (s0, w0) = (leaf(&t.f["s"]), leaf(&t.f["w"]));
    let nb = infonce_to_teacher(&s0.linear::<Tensor>(&w0, None), &teacher, tau);
    let cos0 = cosine(&grads(&nb, &[&s0, &w0]), &g_primary);
    let rel0 = line(
        "IBKD InfoNCE through W, Nest without bias vs primary",
        scalar(&nb),
        scalar(&t.p["nce"]),
        Some(cos0),
    );
    assert!(rel0 > 0.01 && cos0 < 0.99);

    // eq. 5 written here reproduces the reference's two readings...
    let sd = t.f["s"].to_kind(Kind::Double);
    let (wd, bd) = (
        t.f["w"].to_kind(Kind::Double),
        t.f["b"].to_kind(Kind::Double),
    );
    assert!(
        rel_diff(
            scalar(&nce_eq5(&sd.linear::<Tensor>(&wd, None), &teacher, tau)),
            scalar(&t.p["nce"])
        ) <= 1e-12
    );
    assert!(
        rel_diff(
            scalar(&nce_eq5(&sd.linear(&wd, Some(&bd)), &teacher, tau)),
            scalar(&t.p["nce_alt_bias"])
        ) <= 1e-12
    );
    // ...and, on normalised rows, Nest's value and gradient
    let (s2, w2, b2) = (leaf(&t.f["s"]), leaf(&t.f["w"]), leaf(&t.f["b"]));
    let cos_form = nce_eq5(
        &unit_rows(&s2.linear(&w2, Some(&b2))),
        &unit_rows(&teacher),
        tau,
    );
    let gc = grads(&cos_form, &[&s2, &w2, &b2]);
    let r = line(
        "IBKD InfoNCE: eq. 5 on L2-normalised rows vs Nest",
        scalar(&cos_form),
        scalar(&nest),
        Some(cosine(&gc, &g)),
    );
    assert!(r <= 1e-12 && grad_rel_diff(&g, &gc, 1.0) <= 1e-10);

    // the IB loss of eq. 8 (stage 1, beta_1 = 1): InfoNCE + HSIC(rbf, 0.5); only the InfoNCE
    // part differs
    let sh = leaf(&t.f["s"]);
    let h = hsic(
        &gram(&t.f["x"].to_kind(Kind::Double), Kernel::Rbf, 0.5),
        &gram(&sh, Kernel::Rbf, 0.5),
    );
    let ib = scalar(&nest) + scalar(&h);
    line(
        "IBKD L_IB = InfoNCE + 1.0 HSIC (eq. 8)",
        ib,
        scalar(&t.p["ib_loss"]),
        None,
    );
    assert!(((ib - scalar(&t.p["ib_loss"])) - (scalar(&nest) - scalar(&t.p["nce"]))).abs() <= 1e-9);
}
