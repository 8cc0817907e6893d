//! MIPIC (SIA, PIC) and MIC (SCR, SIR) terms against an independent PyTorch computation.
//!
//! Fixture: `tests/reference/structure.py` (PyTorch 2.13, float64, the papers' formulas one
//! sequence at a time) wrote `tests/fixtures/objectives/structure.safetensors`. The inputs
//! hold padded rows, a row whose `k` exceeds its real length, a row too short for CKA, `d = D`
//! and a batch of one. Tolerance: `|nest - torch| <= 1e-9 * max(|torch|, 1)` (float64; the two
//! sides sum in different orders).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nest_model::Pooling;
use nest_train::objective::mic::{self, Mic, MicConfig};
use nest_train::objective::mipic::{self, Mipic, MipicConfig};
use nest_train::objective::{BatchOutput, Column, Objective, StepContext};
use tch::{Device, Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> HashMap<String, Tensor> {
    let p = root().join("tests/fixtures/objectives/structure.safetensors");
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

fn close(got: &Tensor, want: &Tensor, what: &str) {
    let (g, w) = (got.double_value(&[]), want.double_value(&[0]));
    let err = (g - w).abs();
    eprintln!("{what}: nest {g:.12} torch {w:.12} (|error| {err:.1e})");
    assert!(err <= 1e-9 * w.abs().max(1.0), "{what}: {g} vs {w}");
}

const DIMS: [usize; 4] = [4, 8, 16, 32];
const GAMMAS: [f64; 4] = [0.2, 0.3, 0.4, 0.5];

#[test]
fn sia_terms_match_pytorch_at_every_layer_and_dim() {
    let f = fixture();
    let mask = &f["mask"];
    for l in 1..=3 {
        let h = &f[&format!("h{l}")];
        let (cand, s) = mipic::teacher_scores(h, mask);
        for (&d, &g) in DIMS.iter().zip(&GAMMAS) {
            let att = mipic::attention_kl(h, &cand, &s, &f[&format!("p{d}")], 0.7);
            close(
                &att,
                &f[&format!("att_l{l}_d{d}")],
                &format!("attention KL layer {l} dim {d}"),
            );
            let cka = mipic::topk_cka(h, &cand, &s, &[d], &[g], 3);
            close(
                &cka[0],
                &f[&format!("cka_l{l}_d{d}")],
                &format!("top-k CKA layer {l} dim {d}"),
            );
        }
        // all dims at once (one gather, nested masks) give the same values
        let all = mipic::topk_cka(h, &cand, &s, &DIMS, &GAMMAS, 3);
        for (c, d) in all.iter().zip(DIMS) {
            close(
                c,
                &f[&format!("cka_l{l}_d{d}")],
                &format!("batched CKA layer {l} dim {d}"),
            );
        }
    }
}

#[test]
fn mic_terms_match_pytorch_at_every_layer_and_dim() {
    let f = fixture();
    let mask = &f["mask"];
    for l in 1..=3 {
        let h = &f[&format!("h{l}")];
        let (x, sigma) = mic::standardize(h, mask);
        let c = mic::correlation(&x, mask);
        let z = Pooling::Mean.pool(h, mask);
        for d in DIMS {
            if d < 32 {
                let v = mic::scr(&c, &sigma, d, 0.1, 0.1);
                close(
                    &v,
                    &f[&format!("scr_l{l}_d{d}")],
                    &format!("SCR layer {l} dim {d}"),
                );
            }
            let v = mic::sir(&z.narrow(1, 0, d as i64), 2.0);
            close(
                &v,
                &f[&format!("sir_l{l}_d{d}")],
                &format!("SIR layer {l} dim {d}"),
            );
        }
    }
}

#[test]
fn a_batch_of_one() {
    let f = fixture();
    let (h, mask) = (&f["one_h"], &f["one_mask"]);
    let (cand, s) = mipic::teacher_scores(h, mask);
    close(
        &mipic::attention_kl(h, &cand, &s, &f["p8"], 0.7),
        &f["one_att"],
        "attention KL, B = 1",
    );
    close(
        &mipic::topk_cka(h, &cand, &s, &[8], &[0.3], 3)[0],
        &f["one_cka"],
        "CKA, B = 1",
    );
    let (x, sigma) = mic::standardize(h, mask);
    close(
        &mic::scr(&mic::correlation(&x, mask), &sigma, 8, 0.1, 0.1),
        &f["one_scr"],
        "SCR, B = 1",
    );
    let z = Pooling::Mean.pool(h, mask).narrow(1, 0, 8);
    close(&mic::sir(&z, 2.0), &f["one_sir"], "SIR, B = 1");
    // InfoNCE over a batch of one has one candidate: 0, and finite
    let one = mipic::chain_link(&z, &z, 0.05);
    assert_eq!(one.double_value(&[]), 0.0);
}

fn output(f: &HashMap<String, Tensor>) -> BatchOutput {
    BatchOutput {
        columns: vec![Column {
            hidden: (0..=3)
                .map(|l| f[&format!("h{l}")].shallow_clone())
                .collect(),
            mask: f["mask"].shallow_clone(),
            pooling: Pooling::Mean,
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

fn term<'a>(terms: &'a [nest_train::objective::Term], name: &str) -> &'a Tensor {
    &terms
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no term {name}"))
        .value
}

const CTX: StepContext = StepContext {
    step: 0,
    micro_batch: 0,
    seed: 1,
};

#[test]
fn whole_components_match_pytorch() {
    let f = fixture();
    let mut vs = tch::nn::VarStore::new(Device::Cpu);
    let config = MipicConfig {
        min_k: 3,
        attention_temperature: 0.7,
        ..MipicConfig::default()
    };
    let m = Mipic::new(config, DIMS.to_vec(), 32, 3, &vs.root()).unwrap();
    vs.double();
    let vars = vs.variables();
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "pic_phi16.0.bias",
            "pic_phi16.0.weight",
            "pic_phi16.1.bias",
            "pic_phi16.1.weight",
            "pic_phi4.0.bias",
            "pic_phi4.0.weight",
            "pic_phi4.1.bias",
            "pic_phi4.1.weight",
            "pic_phi8.0.bias",
            "pic_phi8.0.weight",
            "pic_phi8.1.bias",
            "pic_phi8.1.weight",
            "sia_p16",
            "sia_p4",
            "sia_p8"
        ]
    );
    tch::no_grad(|| {
        for (name, mut v) in vars {
            let src = if let Some(d) = name.strip_prefix("sia_p") {
                format!("p{d}")
            } else {
                let (a, rest) = name["pic_phi".len()..].split_once('.').unwrap();
                let i = match rest {
                    "0.weight" => 0,
                    "0.bias" => 1,
                    "1.weight" => 2,
                    _ => 3,
                };
                format!("phi{a}_{i}")
            };
            v.copy_(&f[&src]);
        }
    });
    let out = output(&f);
    let terms = m.terms(&out, &CTX);
    close(
        term(&terms, "sia/attention"),
        &f["mipic_att"],
        "MIPIC L_att (layers 1-3, dims 4-16)",
    );
    close(term(&terms, "sia/cka"), &f["mipic_cka"], "MIPIC L_CKA");
    close(
        term(&terms, "pic"),
        &f["mipic_pic"],
        "MIPIC L_PIC (checkpoints (4,1) (8,2) (16,3) (32,3))",
    );

    let config = MicConfig {
        layers: vec![1, 3],
        ..MicConfig::default()
    };
    let m = Mic::new(config, DIMS.to_vec(), 32, 3).unwrap();
    let terms = m.terms(&out, &CTX);
    close(
        term(&terms, "scr"),
        &f["mic_scr"],
        "MIC SCR part of L_align",
    );
    close(
        term(&terms, "sir"),
        &f["mic_sir"],
        "MIC SIR part of L_align",
    );
}

#[test]
fn the_teacher_side_gets_no_gradient_and_the_projectors_do() {
    let f = fixture();
    let h = f["h2"].set_requires_grad(true);
    let mask = &f["mask"];
    let p = f["p8"].set_requires_grad(true);
    let (cand, s) = mipic::teacher_scores(&h, mask);
    let att = mipic::attention_kl(&h, &cand, &s, &p, 0.7);
    let cka = mipic::topk_cka(&h, &cand, &s, &[8], &[0.3], 3).remove(0);
    (att + cka).backward();
    let g = h.grad();
    let prefix = g.narrow(2, 0, 8).abs().sum(Kind::Double).double_value(&[]);
    let rest = g.narrow(2, 8, 24).abs().sum(Kind::Double).double_value(&[]);
    eprintln!(
        "gradient: prefix {prefix:e}, rest {rest:e}, P {:e}",
        p.grad().abs().sum(Kind::Double).double_value(&[])
    );
    assert!(
        prefix > 0.0 && prefix.is_finite(),
        "the prefix must be trained, with finite gradient"
    );
    assert_eq!(
        rest, 0.0,
        "the full-dimensional teacher (and h_CLS) must be detached"
    );
    assert!(
        p.grad().abs().sum(Kind::Double).double_value(&[]) > 0.0,
        "P_i must get gradient"
    );
}

/// Every term's gradient is finite on the fixture's awkward rows (one candidate token, `k` above
/// the real length) and on a batch of one.
#[test]
fn gradients_are_finite_on_short_rows_and_a_batch_of_one() {
    let f = fixture();
    for (h, mask) in [(&f["h1"], &f["mask"]), (&f["one_h"], &f["one_mask"])] {
        let h = h.set_requires_grad(true);
        let (cand, s) = mipic::teacher_scores(&h, mask);
        let p = f["p8"].set_requires_grad(true);
        let mut total = mipic::attention_kl(&h, &cand, &s, &p, 0.7);
        for c in mipic::topk_cka(&h, &cand, &s, &DIMS, &GAMMAS, 3) {
            // not `+=`: an in-place add on an autograd output
            #[allow(clippy::assign_op_pattern)]
            let sum = total + c;
            total = sum;
        }
        let (x, sigma) = mic::standardize(&h, mask);
        let c = mic::correlation(&x, mask);
        let z = Pooling::Mean.pool(&h, mask);
        for d in [4usize, 8, 16] {
            total = total
                + mic::scr(&c, &sigma, d, 0.1, 0.1)
                + mic::sir(&z.narrow(1, 0, d as i64), 2.0);
        }
        total.backward();
        let g = h.grad().abs().sum(Kind::Double).double_value(&[]);
        assert!(g.is_finite() && g > 0.0, "gradient {g}");
    }
}

#[test]
fn defaults_follow_the_papers_appendices() {
    // MIPIC Appendix A.5: six checkpoints on a six-layer model are layers 1..6
    assert_eq!(mipic::checkpoint_layers(6, 6), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(mipic::checkpoint_layers(7, 12), vec![2, 4, 6, 7, 9, 11, 12]);
    assert_eq!(mipic::checkpoint_layers(4, 3), vec![1, 2, 3, 3]);
    // k = max(8, ceil(gamma m)), at most m
    assert_eq!(mipic::top_k(0.2, 100, 8), 20);
    assert_eq!(mipic::top_k(0.2, 20, 8), 8);
    assert_eq!(mipic::top_k(0.7, 5, 8), 5);
    // MIC Appendix D: layers {2, 4} of six
    assert_eq!(mic::default_layers(6), vec![2, 4]);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let m = Mipic::new(
        MipicConfig::default(),
        vec![16, 32, 64, 128, 256, 384],
        384,
        6,
        &vs.root(),
    )
    .unwrap();
    let d = m.describe();
    assert!(
        d.contains("layers [1, 2, 3, 4, 5, 6]") && d.contains("[0.2, 0.3, 0.4, 0.5, 0.6]"),
        "{d}"
    );
    assert!(
        d.contains("(16,1) (32,2) (64,3) (128,4) (256,5) (384,6)"),
        "{d}"
    );
    // bad settings are refused with the reason
    let e = Mipic::new(MipicConfig::default(), vec![16, 32], 384, 6, &vs.root()).unwrap_err();
    assert!(e.contains("must end at the model's hidden size 384"), "{e}");
    let c = MipicConfig {
        top_k_ratios: vec![0.5],
        ..MipicConfig::default()
    };
    let e = Mipic::new(c, vec![16, 32, 384], 384, 6, &vs.root()).unwrap_err();
    assert!(e.contains("one ratio in (0, 1] per prefix dim"), "{e}");
    let c = MicConfig {
        layers: vec![7],
        ..MicConfig::default()
    };
    assert!(Mic::new(c, vec![16, 384], 384, 6)
        .unwrap_err()
        .contains("outside 1..=6"));
}
