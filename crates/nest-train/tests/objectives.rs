//! 2DMSE and ESE terms against independent PyTorch computations and sentence-transformers' own
//! `Matryoshka2dLoss`; the layer sampler's distribution; one forward pass per column.
//!
//! Fixtures: `tests/reference/objectives.py` (PyTorch 2.13, sentence-transformers 6.2) wrote
//! `tests/fixtures/objectives/`. Tolerances: 1e-10 relative in float64 for the closed-form terms;
//! 1e-4 for the randomised-SVD PCA target (the same libtorch generator and LAPACK, float32);
//! 1e-4 relative for whole losses in float32; 2e-4 relative against sentence-transformers on
//! the real model (its forward pass and ours differ in float32 rounding).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder, Pooling};
use nest_train::data::{Batch, Source};
use nest_train::losses;
use nest_train::objective::{
    BatchOutput, Column, Ese, EseConfig, LayerWeighting, Objective, StepContext, TaskLoss,
    TwoDConfig, TwoDMse,
};
use nest_train::recipe::{DataFormat, DataSource, LossKind};
use tch::{Device, Kind, Tensor};

/// libtorch's RNG is global to the process: tests that seed it run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> HashMap<String, Tensor> {
    let p = root().join("tests/fixtures/objectives/terms.safetensors");
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

fn scalar(t: &Tensor) -> f64 {
    t.double_value(&[0])
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    let err = (got - want).abs() / want.abs().max(1e-12);
    eprintln!("{what}: nest {got:.10} reference {want:.10} (relative error {err:.2e})");
    assert!(
        err <= rel,
        "{what}: {got} vs {want}, relative error {err:e} > {rel:e}"
    );
}

#[test]
fn kl_and_distill_match_pytorch() {
    let f = fixture();
    let (s, t) = (&f["kl_s"], &f["kl_t"]);
    close(
        losses::kl_align(s, t, 0.3).double_value(&[]),
        scalar(&f["kl_0.3"]),
        1e-10,
        "kl T=0.3",
    );
    close(
        losses::kl_align(s, t, 1.0).double_value(&[]),
        scalar(&f["kl_1"]),
        1e-10,
        "kl T=1",
    );
    close(
        losses::mse_kl(&f["distill_x"], &f["distill_y"], 1.0, 1.0).double_value(&[]),
        scalar(&f["distill"]),
        1e-10,
        "distill",
    );
    // KL of a distribution with itself is 0; gradient reaches both sides unless detached
    let s = f["kl_s"].set_requires_grad(true);
    let t = f["kl_t"].set_requires_grad(true);
    assert!(
        losses::kl_align(&s, &s.detach(), 0.3)
            .double_value(&[])
            .abs()
            < 1e-12
    );
    losses::kl_align(&s, &t, 0.3).backward();
    assert!(s.grad().abs().sum(Kind::Double).double_value(&[]) > 0.0);
    assert!(t.grad().abs().sum(Kind::Double).double_value(&[]) > 0.0);
}

#[test]
fn pca_target_matches_angle_with_the_same_seed() {
    let _s = serial();
    let f = fixture();
    tch::manual_seed(7);
    let got = losses::pca_compress(&f["pca_m"], 12);
    let want = &f["pca"];
    assert_eq!(got.size(), want.size());
    let err = (&got - want).abs().max().double_value(&[]);
    let scale = want.abs().max().double_value(&[]);
    eprintln!("pca: max |nest - torch.svd_lowrank| {err:.2e} (max |value| {scale:.2})");
    assert!(err <= 1e-4 * scale.max(1.0), "{err}");
    assert!(!got.requires_grad());
}

/// A [`BatchOutput`] from the fixture's fixed hidden states (2 columns, 4 layers).
fn fixed_output(f: &HashMap<String, Tensor>) -> BatchOutput {
    let columns = (0..2)
        .map(|c| Column {
            hidden: (0..=4)
                .map(|l| f[&format!("ese_h{c}_{l}")].shallow_clone())
                .collect(),
            mask: f["ese_mask"].shallow_clone(),
            pooling: Pooling::Mean,
            head: Default::default(),
            cls_attention: Vec::new(),
            pooled: Vec::new(),
        })
        .collect();
    BatchOutput {
        columns,
        scores: Some(f["ese_gold"].shallow_clone()),
        layers: 4,
        normalize: true,
        targets: None,
    }
}

fn cosent() -> TaskLoss {
    TaskLoss {
        kind: LossKind::Cosent,
        scale: 20.0,
        angle_weight: 0.0,
        quantization: Default::default(),
    }
}

fn ctx(micro_batch: u64) -> StepContext {
    StepContext {
        step: micro_batch,
        micro_batch,
        seed: 42,
    }
}

fn total(terms: &[nest_train::objective::Term]) -> f64 {
    terms.iter().map(|t| t.value.double_value(&[])).sum()
}

#[test]
fn ese_total_matches_angle_arithmetic() {
    let _s = serial();
    let f = fixture();
    let out = fixed_output(&f);
    let ese = Ese {
        task: cosent(),
        config: EseConfig {
            compression_size: 8,
            ..Default::default()
        },
        hidden: 32,
    };
    tch::manual_seed(11);
    let terms = ese.terms(&out, &ctx(0));
    let names: Vec<&str> = terms.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "last/cosent@32",
            "last/cosent@8",
            "last/compress",
            "shallow/cosent@8",
            "shallow/compress"
        ]
    );
    close(total(&terms), scalar(&f["ese_total"]), 1e-4, "ese total");
}

#[test]
fn layer_and_dim_sampling_are_uniform_and_reproducible() {
    let cfg = TwoDConfig {
        dims: vec![4, 8, 16, 32],
        dims_per_step: 1,
        ..Default::default()
    };
    let o = TwoDMse::new(cosent(), cfg, 32);
    let n = 30_000u64;
    let mut layers = [0u64; 6];
    let mut dims: HashMap<usize, u64> = HashMap::new();
    for mb in 0..n {
        let c = ctx(mb);
        let l = o.sample_layers(&c, 6);
        assert_eq!(l.len(), 1);
        assert!((1..=5).contains(&l[0]), "{l:?}");
        layers[l[0]] += 1;
        let d = o.sample_dims(&c);
        assert_eq!(d.len(), 1);
        *dims.entry(d[0].0).or_default() += 1;
        // a function of the context only
        assert_eq!(o.sample_layers(&c, 6), l);
    }
    // chi-square with 4 degrees of freedom: 18.47 is the 0.999 quantile
    let expect = n as f64 / 5.0;
    let chi: f64 = layers[1..]
        .iter()
        .map(|&c| (c as f64 - expect).powi(2) / expect)
        .sum();
    eprintln!("layer counts {:?}, chi-square {chi:.2}", &layers[1..]);
    assert!(chi < 18.47, "layers {layers:?}");
    assert_eq!(
        dims.len(),
        3,
        "the full dim is never a sampled prefix: {dims:?}"
    );
    let expect = n as f64 / 3.0;
    let chi: f64 = dims
        .values()
        .map(|&c| (c as f64 - expect).powi(2) / expect)
        .sum();
    assert!(chi < 13.82, "dims {dims:?}"); // 2 degrees of freedom, 0.999
                                           // all layers, all dims
    let all = TwoDMse::new(
        cosent(),
        TwoDConfig {
            layers_per_step: 0,
            dims: vec![8, 32],
            ..Default::default()
        },
        32,
    );
    assert_eq!(all.sample_layers(&ctx(3), 6), vec![1, 2, 3, 4, 5]);
    assert_eq!(all.sample_dims(&ctx(3)), vec![(8, 1.0)]);
}

fn model_dir() -> Option<PathBuf> {
    let p = root().join("models/all-MiniLM-L6-v2");
    if p.join("model.safetensors").is_file() {
        return Some(p);
    }
    let required = std::env::var("NEST_REQUIRE_MODELS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(!required, "{} is missing under CI", p.display());
    eprintln!(
        "SKIP: {} not found (run scripts/setup.sh models)",
        p.display()
    );
    None
}

fn source(enc: &ElasticEncoder, rows: Vec<Vec<String>>, scores: Vec<f64>) -> Source {
    let flat: Vec<&str> = rows.iter().flatten().map(String::as_str).collect();
    let ids = enc.tokenizer.encode(&flat).unwrap();
    let cols = rows[0].len();
    Source {
        spec: DataSource {
            path: "fixture".into(),
            format: if scores.is_empty() {
                DataFormat::Triplets
            } else {
                DataFormat::Scored
            },
            made_by: None,
            prompts: vec![],
            weight: 1.0,
        },
        texts: rows,
        ids: ids.chunks(cols).map(|c| c.to_vec()).collect(),
        scores,
        prompt_tokens: vec![],
    }
}

#[test]
fn two_d_equals_sentence_transformers_matryoshka2d_loss() {
    // loading a model initialises modules from the global RNG, which seeded tests share
    let _s = serial();
    let Some(dir) = model_dir() else { return };
    let enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let p = root().join("tests/fixtures/objectives/st_2d.json");
    let st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let dims: Vec<usize> = serde_json::from_value(st["dims"].clone()).unwrap();
    let two_d = |kind: LossKind| {
        TwoDMse::new(
            TaskLoss {
                kind,
                scale: 20.0,
                angle_weight: 0.0,
                quantization: Default::default(),
            },
            TwoDConfig {
                dims: dims.clone(),
                align_prefix: false, // sentence-transformers aligns the full dim only
                layer_weighting: LayerWeighting::Uniform,
                ..Default::default()
            },
            384,
        )
    };
    let _g = tch::no_grad_guard();
    let rows: Vec<Vec<String>> = serde_json::from_value(st["triplets"].clone()).unwrap();
    let src = source(&enc, rows, Vec::new());
    let batch = Batch {
        source: 0,
        examples: (0..src.len()).collect(),
    };
    let before = enc.forward_count();
    let out = nest_train::trainer::batch_output(
        &enc,
        &src,
        &batch,
        LossKind::Mnrl,
        false,
        Default::default(),
    );
    assert_eq!(
        enc.forward_count() - before,
        3,
        "one forward pass per column serves every layer and dim"
    );
    let o = two_d(LossKind::Mnrl);
    let layer = st["mnrl"]["layer"].as_u64().unwrap() as usize;
    close(
        total(&o.terms_at(&out, &[layer], &o.prefix)),
        st["mnrl"]["value"].as_f64().unwrap(),
        2e-4,
        &format!("2dmse(mnrl), layer {layer} vs Matryoshka2dLoss"),
    );
    let pairs: Vec<(String, String, f64)> = serde_json::from_value(st["pairs"].clone()).unwrap();
    let src = source(
        &enc,
        pairs
            .iter()
            .map(|p| vec![p.0.clone(), p.1.clone()])
            .collect(),
        pairs.iter().map(|p| p.2).collect(),
    );
    let out = nest_train::trainer::batch_output(
        &enc,
        &src,
        &batch,
        LossKind::Cosent,
        false,
        Default::default(),
    );
    let o = two_d(LossKind::Cosent);
    let layer = st["cosent"]["layer"].as_u64().unwrap() as usize;
    close(
        total(&o.terms_at(&out, &[layer], &o.prefix)),
        st["cosent"]["value"].as_f64().unwrap(),
        2e-4,
        &format!("2dmse(cosent), layer {layer} vs Matryoshka2dLoss"),
    );
}

/// n-tuples (`anchor, positive, negative_1..n`, what `nest mine --output-format n-tuple`
/// writes) read from JSONL and TSV alike, and MNRL on them equals sentence-transformers'
/// `MultipleNegativesRankingLoss` on the same rows (`tests/reference/st_ntuple.py`: every
/// negative of the batch is a candidate); a file whose rows disagree on n is refused at the row.
#[test]
fn n_tuples_train_as_sentence_transformers_mnrl_scores_them() {
    // loading a model initialises modules from the global RNG, which seeded tests share
    let _s = serial();
    let Some(dir) = model_dir() else { return };
    let enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let p = root().join("tests/fixtures/objectives/st_ntuple.json");
    let st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let rows: Vec<Vec<String>> = serde_json::from_value(st["rows"].clone()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (jsonl, tsv) = (tmp.path().join("t.jsonl"), tmp.path().join("t.tsv"));
    let mut j = String::new();
    let mut t = String::from("anchor\tpositive\tnegative_1\tnegative_2\tnegative_3\n");
    for r in &rows {
        let mut o =
            serde_json::json!({"anchor": r[0], "positive": r[1], "scores": [0.9, 0.5, 0.4, 0.3]});
        for (k, n) in r[2..].iter().enumerate() {
            o[format!("negative_{}", k + 1)] = serde_json::json!(n);
        }
        j.push_str(&format!("{o}\n"));
        t.push_str(&format!("{}\n", r.join("\t")));
    }
    std::fs::write(&jsonl, &j).unwrap();
    std::fs::write(&tsv, &t).unwrap();
    let read = |path: &Path| {
        nest_train::data::read_source(&DataSource {
            path: path.to_path_buf(),
            format: DataFormat::Triplets,
            made_by: None,
            prompts: vec![],
            weight: 1.0,
        })
    };
    assert_eq!(read(&jsonl).unwrap().0, rows);
    assert_eq!(read(&tsv).unwrap().0, rows);
    let _g = tch::no_grad_guard();
    let mnrl = TwoDMse::new(
        TaskLoss {
            kind: LossKind::Mnrl,
            scale: 20.0,
            angle_weight: 0.0,
            quantization: Default::default(),
        },
        TwoDConfig::default(),
        384,
    );
    for width in [5, 3] {
        let cut: Vec<Vec<String>> = rows.iter().map(|r| r[..width].to_vec()).collect();
        let src = source(&enc, cut, Vec::new());
        let batch = Batch {
            source: 0,
            examples: (0..src.len()).collect(),
        };
        let out = nest_train::trainer::batch_output(
            &enc,
            &src,
            &batch,
            LossKind::Mnrl,
            false,
            Default::default(),
        );
        close(
            total(&mnrl.terms_at(&out, &[], &[])),
            st[format!("mnrl_{width}")].as_f64().unwrap(),
            2e-4,
            &format!("mnrl on {width}-tuples vs MultipleNegativesRankingLoss"),
        );
    }
    // a row with fewer negatives than the first
    let short = j.lines().take(1).collect::<String>()
        + "\n"
        + &serde_json::json!({"anchor": "a", "positive": "b", "negative_1": "c"}).to_string();
    std::fs::write(&jsonl, short).unwrap();
    let e = read(&jsonl).unwrap_err().to_string();
    assert!(
        e.contains("t.jsonl")
            && e.contains("line 2")
            && e.contains("1 negatives, but the first row has 3"),
        "{e}"
    );
    // a header that is neither a triplet nor an n-tuple
    std::fs::write(&tsv, "anchor\tpositive\tneg\na\tb\tc\n").unwrap();
    let e = read(&tsv).unwrap_err().to_string();
    assert!(e.contains("negative_1") && e.contains("line 1"), "{e}");
}

#[test]
fn the_kl_teacher_is_detached_unless_asked() {
    let _s = serial();
    let f = fixture();
    for detach in [true, false] {
        let leaves: Vec<Tensor> = (0..=4)
            .map(|l| f[&format!("ese_h0_{l}")].set_requires_grad(true))
            .collect();
        let mut out = fixed_output(&f);
        out.columns[0].hidden = leaves.iter().map(Tensor::shallow_clone).collect();
        let o = TwoDMse::new(
            cosent(),
            TwoDConfig {
                dims: vec![8, 32],
                kl_weight: 1.0,
                detach_teacher: detach,
                ..Default::default()
            },
            32,
        );
        let terms = o.terms_at(&out, &[2], &o.prefix);
        let kl = terms.iter().find(|t| t.name == "kl@full").unwrap();
        kl.value.backward();
        let g = leaves[4].grad();
        let reached = g.defined() && g.abs().sum(Kind::Double).double_value(&[]) > 0.0;
        assert_eq!(reached, !detach, "detach_teacher = {detach}");
        assert!(leaves[2].grad().abs().sum(Kind::Double).double_value(&[]) > 0.0);
    }
}

#[test]
fn tiny_two_d_step_runs_one_forward_per_column() {
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("tiny");
    let spec = TinySpec {
        layers: 4,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&m, &spec).unwrap();
    let enc = ElasticEncoder::load(&m, Device::Cpu, None).unwrap();
    let rows: Vec<Vec<String>> = (0..6)
        .map(|i| {
            vec![
                format!("the cat sat {i}"),
                format!("a dog is on the mat {i}"),
            ]
        })
        .collect();
    let src = source(&enc, rows, vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.5]);
    let batch = Batch {
        source: 0,
        examples: (0..6).collect(),
    };
    let o = TwoDMse::new(
        cosent(),
        TwoDConfig {
            dims: vec![8, 16, 32],
            ..Default::default()
        },
        32,
    );
    let before = enc.forward_count();
    let r = nest_train::trainer::micro_step(&enc, &o, &src, &batch, LossKind::Cosent, &ctx(5), 1);
    assert_eq!(enc.forward_count() - before, 2);
    assert!(r.loss.is_finite());
    let names: Vec<&str> = r.terms.iter().map(|t| t.0.as_str()).collect();
    for want in [
        "last/cosent@32",
        "last/cosent@8",
        "shallow/cosent@32",
        "shallow/cosent@16",
        "kl@full",
        "kl@prefix",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let sum: f64 = r.terms.iter().map(|t| t.1).sum();
    assert!((sum - r.loss).abs() < 1e-4 * r.loss.abs().max(1.0));
}
