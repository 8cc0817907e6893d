//! Quantization-aware training against an independent PyTorch computation
//! (`tests/reference/qat_reference.py` wrote `tests/fixtures/qat_reference.json`, float32,
//! torch 2.13), the straight-through property, and the quantisers against the stored formats.
//! Tolerances: 1e-5 relative on losses; 1e-5 times the largest entry on gradients (float32).

use std::path::Path;

use tch::{Device, Kind, Tensor};

use super::*;
use crate::losses;
use crate::objective::component::{BuildContext, Component};
use crate::objective::{Column, LossKind, MrlConfig, PooledLayer};

fn rows(v: &serde_json::Value) -> Tensor {
    let r: Vec<Vec<f32>> = serde_json::from_value(v.clone()).unwrap();
    let n = r.len() as i64;
    let flat: Vec<f32> = r.into_iter().flatten().collect();
    Tensor::from_slice(&flat).view([n, -1])
}

/// A batch whose last layer (1) is `cols` (already pooled).
fn batch(cols: &[&Tensor]) -> BatchOutput {
    let columns = cols
        .iter()
        .map(|t| Column {
            hidden: Vec::new(),
            mask: Tensor::zeros([1], (Kind::Float, Device::Cpu)),
            pooling: nest_model::Pooling::Mean,
            head: Default::default(),
            cls_attention: Vec::new(),
            pooled: (0..2)
                .map(|_| PooledLayer {
                    raw: t.shallow_clone(),
                    out: t.shallow_clone(),
                })
                .collect(),
        })
        .collect();
    BatchOutput {
        columns,
        scores: None,
        layers: 1,
        normalize: false,
        targets: None,
    }
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> (f64, f64) {
    let d = (a - b).abs().max().double_value(&[]);
    (d, b.abs().max().double_value(&[]))
}

/// MRL (MNRL, scale 20, dims 4/8/16) with int8 and binary at weight 0.5: the loss and its
/// gradient with respect to both columns, and the per-precision columns of the log.
/// (One fixture read once and checked field by field, in its order: 81 lines that read top to
/// bottom against `tests/reference/qat_reference.py`; split, each part would reload it.)
#[test]
// long: one fixture checked field by field in its order (the reason is in the doc above)
fn quantised_mrl_matches_the_pytorch_reference() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qat_reference.json");
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let dims: Vec<usize> = serde_json::from_value(f["dims"].clone()).unwrap();
    let weight = f["weight"].as_f64().unwrap();
    let quantization = Quantization::new(&[QuantPrecision::Int8, QuantPrecision::Binary], weight);
    let task = TaskLoss {
        kind: LossKind::Mnrl,
        scale: f["scale"].as_f64().unwrap(),
        angle_weight: 0.0,
        quantization,
    };
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let cx = BuildContext {
        task,
        hidden: 16,
        num_layers: 1,
        default_dims: &dims,
        default_weights: &[],
        params: vs.root(),
        teacher: None,
    };
    let mrl = MrlConfig {
        weight: 1.0,
        dims: Vec::new(),
        dim_weights: Vec::new(),
    }
    .build(&cx)
    .unwrap();
    let a = rows(&f["anchors"]).set_requires_grad(true);
    let b = rows(&f["positives"]).set_requires_grad(true);
    let out = batch(&[&a, &b]);
    let terms = mrl.terms(
        &out,
        &StepContext {
            step: 0,
            micro_batch: 0,
            seed: 0,
        },
    );
    assert_eq!(terms[0].name, "mnrl+int8+binary@4");
    let total = terms
        .iter()
        .map(|t| t.value.shallow_clone())
        .reduce(|x, y| x + y)
        .unwrap();
    let (got, want) = (total.double_value(&[]), f["loss"].as_f64().unwrap());
    assert!(
        (got - want).abs() <= 1e-5 * want.abs(),
        "loss {got} vs {want}"
    );
    total.backward();
    for (g, key) in [(a.grad(), "grad_anchors"), (b.grad(), "grad_positives")] {
        let (d, m) = max_abs_diff(&g, &rows(&f[key]));
        assert!(
            d <= 1e-5 * m,
            "{key}: max difference {d:e}, largest entry {m}"
        );
    }
    let report = QuantReport {
        task: TaskLoss {
            quantization: Quantization::default(),
            ..task
        },
        quantization,
        dims: dims.clone(),
    };
    let diag = report.diagnostics(&out);
    for precision in ["float32", "int8", "binary"] {
        let got: f64 = diag
            .iter()
            .filter(|(n, _)| n.starts_with(&format!("{precision}@")))
            .map(|x| x.1.double_value(&[]))
            .sum();
        let want = f["loss_by_precision"][precision].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "{precision}: {got} vs {want}"
        );
    }
}

/// The levers against the bits' collapse: the binary term alone at its own scale, plus the
/// spread-out term on every binary-scored prefix, against the reference's `levers` (same
/// inputs, MNRL at 20 for the float term, dims 4/8/16).
#[test]
fn binary_scale_and_spread_match_the_pytorch_reference() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qat_reference.json");
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let l = &f["levers"];
    let dims: Vec<usize> = serde_json::from_value(f["dims"].clone()).unwrap();
    let task = TaskLoss {
        kind: LossKind::Mnrl,
        scale: f["scale"].as_f64().unwrap(),
        angle_weight: 0.0,
        quantization: Quantization {
            binary_scale: l["binary_scale"].as_f64(),
            spread: l["spread"].as_f64().unwrap(),
            ..Quantization::new(&[QuantPrecision::Binary], 1.0)
        },
    };
    let a = rows(&f["anchors"]).set_requires_grad(true);
    let b = rows(&f["positives"]).set_requires_grad(true);
    let cols = [a.shallow_clone(), b.shallow_clone()];
    let total = dims
        .iter()
        .map(|&d| task.at_dim(&cols, d, None))
        .reduce(|x, y| x + y)
        .unwrap();
    assert_eq!(task.name(), "mnrl+binary+spread");
    let (got, want) = (total.double_value(&[]), l["loss"].as_f64().unwrap());
    assert!(
        (got - want).abs() <= 1e-5 * want.abs(),
        "loss {got} vs {want}"
    );
    total.backward();
    for (g, key) in [(a.grad(), "grad_anchors"), (b.grad(), "grad_positives")] {
        let (d, m) = max_abs_diff(&g, &rows(&l[key]));
        assert!(
            d <= 1e-5 * m,
            "{key}: max difference {d:e}, largest entry {m}"
        );
    }
}

/// The bit entropy: balanced bits count one each, a constant bit none.
#[test]
fn bit_entropy_counts_balanced_bits() {
    let x = Tensor::from_slice(&[1.0f32, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0]).view([4, 2]);
    assert!((bit_entropy(&x).double_value(&[]) - 1.0).abs() < 1e-12);
}

/// The identity straight-through estimator: the value of a loss on straight-through rows is
/// the loss on the explicitly quantised rows, and its gradient is the float gradient of the
/// same loss at the quantised point.
#[test]
fn straight_through_value_is_quantised_and_gradient_is_the_float_one() {
    tch::manual_seed(40);
    let opts = (Kind::Float, Device::Cpu);
    let va = nest_model::pooling::l2_normalize(&Tensor::randn([5, 12], opts));
    let vb = nest_model::pooling::l2_normalize(&(&va + Tensor::randn([5, 12], opts)));
    let gold = Tensor::from_slice(&[0.1f32, 0.9, 0.5, 0.3, 0.7]);
    let cosent = |x: &Tensor, y: &Tensor| losses::cosent(x, y, &gold, 20.0);
    let mnrl = |x: &Tensor, y: &Tensor| losses::mnrl(x, y, None, 20.0);
    type Loss<'a> = &'a dyn Fn(&Tensor, &Tensor) -> Tensor;
    let cases: [(&str, Loss); 2] = [("cosent", &cosent), ("mnrl", &mnrl)];
    for p in [QuantPrecision::Int8, QuantPrecision::Binary] {
        for (name, loss) in cases {
            let (a, b) = (
                va.copy().set_requires_grad(true),
                vb.copy().set_requires_grad(true),
            );
            let l = loss(&straight_through(&a, p), &straight_through(&b, p));
            l.backward();
            let qa = quantize(&va, p).set_requires_grad(true);
            let qb = quantize(&vb, p).set_requires_grad(true);
            let lq = loss(&qa, &qb);
            lq.backward();
            let (got, want) = (l.double_value(&[]), lq.double_value(&[]));
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{name} {p:?}: {got} vs {want}"
            );
            for (g, w) in [(a.grad(), qa.grad()), (b.grad(), qb.grad())] {
                let (d, m) = max_abs_diff(&g, &w);
                assert!(
                    m > 0.0 && d <= 1e-6 * m,
                    "{name} {p:?}: gradient differs by {d:e} (largest {m})"
                );
            }
        }
    }
}

/// The quantised points are the stored formats: int8 the dequantised codes of
/// `nest_core::vector::quantize_int8`, binary the signs `nest index` keeps (`x > 0`), both
/// L2-normalised; zero rows stay zero.
#[test]
fn quantisers_are_the_stored_formats() {
    tch::manual_seed(7);
    let x = Tensor::randn([6, 10], (Kind::Float, Device::Cpu));
    let x = Tensor::cat(&[x, Tensor::zeros([1, 10], (Kind::Float, Device::Cpu))], 0);
    let v = nest_model::pooling::l2_normalize(&x);
    let int8 = quantize(&v, QuantPrecision::Int8);
    let binary = quantize(&v, QuantPrecision::Binary);
    for i in 0..7 {
        let row: Vec<f32> = Vec::try_from(&v.get(i)).unwrap();
        let (codes, s) = nest_core::vector::quantize_int8(&row);
        let mut want: Vec<f32> = codes.iter().map(|&c| c as f32 * s).collect();
        nest_core::vector::l2_normalize(&mut want);
        let got: Vec<f32> = Vec::try_from(&int8.get(i)).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6, "int8 row {i}: {got:?} vs {want:?}");
        }
        let signs: Vec<f32> = row
            .iter()
            .map(|&r| if r > 0.0 { 1.0 } else { -1.0 })
            .collect();
        let got: Vec<f32> = Vec::try_from(&binary.get(i)).unwrap();
        let norm = (signs.len() as f32).sqrt();
        for (g, s) in got.iter().zip(&signs) {
            assert!((g - s / norm).abs() <= 1e-6, "binary row {i}");
        }
    }
    // an all-zero row: int8 codes 0 (scale 0), normalised to zeros
    assert_eq!(int8.get(6).abs().sum(Kind::Float).double_value(&[]), 0.0);
}
