//! Encoder behaviour on tiny random models generated here (2 layers x 32 hidden): shapes, early
//! exit, truncation, batching, dropout, and errors for bad model directories.

use nest_core::ElasticSpec;
use nest_model::pooling::truncate_normalize;
use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder, EncodeOptions, Error};
use tch::{Device, Tensor};

const TEXTS: [&str; 5] = [
    "the cat sat on the mat",
    "a man is playing music",
    "dog",
    "the dog is playing guitar on the mat, a man sat!",
    "xyz 123",
];

/// Every architecture Nest loads.
const ALL: [Architecture; 6] = [
    Architecture::Bert,
    Architecture::Mpnet,
    Architecture::XlmRoberta,
    Architecture::ModernBert,
    Architecture::Qwen3,
    Architecture::Gemma3,
];

fn tiny(arch: Architecture) -> (tempfile::TempDir, ElasticEncoder) {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model(dir.path(), &TinySpec::new(arch)).unwrap();
    let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
    (dir, enc)
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn noop(_: usize) {}

#[test]
fn shapes_and_early_exit() {
    for arch in ALL {
        let (_d, enc) = tiny(arch);
        assert_eq!((enc.num_layers(), enc.hidden_size()), (2, 32));
        let ids = enc.tokenizer.encode(&TEXTS).unwrap();
        let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
        let input = enc.make_input(&seqs);
        let longest = ids.iter().map(Vec::len).max().unwrap() as i64;
        let _g = tch::no_grad_guard();
        let full = enc.forward(&input, 2, false);
        assert_eq!(
            full.hidden_states.len(),
            3,
            "{arch:?}: embeddings + 2 layers"
        );
        assert_eq!(full.hidden_states[2].size(), vec![5, longest, 32]);
        // early exit computes only the first layer, and it is the same first layer
        let one = enc.forward(&input, 1, false);
        assert_eq!(one.hidden_states.len(), 2);
        assert!(max_abs(&one.hidden_states[1], &full.hidden_states[1]) == 0.0);
        assert!(max_abs(&full.hidden_states[1], &full.hidden_states[2]) > 1e-3);
    }
}

/// An inference pass that keeps only some exits (`forward_exits`, what every encode and the
/// server run) returns exactly the states the pass that keeps all of them returns, in the order
/// asked, with padding in the batch (the CPU packs the real tokens) and without.
#[test]
fn kept_exits_are_the_full_passes_states() {
    for arch in ALL {
        let dir = tempfile::tempdir().unwrap();
        let spec = TinySpec {
            layers: 4,
            ..TinySpec::new(arch)
        };
        write_tiny_model(dir.path(), &spec).unwrap();
        let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
        let ids = enc.tokenizer.encode(&TEXTS).unwrap();
        for seqs in [
            ids.iter().map(Vec::as_slice).collect::<Vec<_>>(),
            vec![&ids[0][..]],
        ] {
            let input = enc.make_input(&seqs);
            let _g = tch::no_grad_guard();
            let full = enc.forward(&input, 4, false).hidden_states;
            for asked in [vec![3, 1, 3], vec![4], vec![0, 2], vec![1]] {
                let kept = enc.forward_exits(&input, &asked);
                assert_eq!(kept.len(), asked.len(), "{arch:?}");
                for (&l, h) in asked.iter().zip(&kept) {
                    assert_eq!(h.size(), full[l].size(), "{arch:?} layer {l}");
                    assert_eq!(max_abs(h, &full[l]), 0.0, "{arch:?} layer {l} of {asked:?}");
                }
            }
        }
    }
}

#[test]
fn truncation_is_the_normalised_prefix() {
    for arch in ALL {
        let (_d, enc) = tiny(arch);
        let opts = EncodeOptions::default();
        let pooled = enc.embed_layers(&TEXTS, &[2], opts, &mut noop).unwrap();
        let full = enc
            .embed(&TEXTS, ElasticSpec { layer: 2, dim: 32 }, opts, &mut noop)
            .unwrap();
        let cut = enc
            .embed(&TEXTS, ElasticSpec { layer: 2, dim: 8 }, opts, &mut noop)
            .unwrap();
        let expect = truncate_normalize(&pooled[0], 8);
        let got = Tensor::from_slice(&cut.data).view([5, 8]);
        assert!(max_abs(&got, &expect) < 1e-6, "{arch:?}");
        // the prefix of the normalised full vector, re-normalised, is the same thing
        let full_t = Tensor::from_slice(&full.data).view([5, 32]);
        assert!(max_abs(&truncate_normalize(&full_t, 8), &got) < 1e-5);
        for i in 0..5 {
            let n: f32 = cut.row(i).iter().map(|v| v * v).sum();
            assert!((n - 1.0).abs() < 1e-5);
        }
    }
}

#[test]
fn batch_equals_one_at_a_time_and_order_is_kept() {
    for arch in ALL {
        let (_d, enc) = tiny(arch);
        let spec = ElasticSpec { layer: 2, dim: 32 };
        let batch = enc
            .embed(&TEXTS, spec, EncodeOptions::batch(3), &mut noop)
            .unwrap();
        for (i, t) in TEXTS.iter().enumerate() {
            let one = enc
                .embed(&[t], spec, EncodeOptions::batch(1), &mut noop)
                .unwrap();
            let d = one
                .row(0)
                .iter()
                .zip(batch.row(i))
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(d < 1e-5, "{arch:?} text {i}: max diff {d}");
        }
    }
}

/// Several streams (batches encoded at once on threads of their own) give every text the
/// vector one stream gives, in input order, and report progress up to the last text; more
/// streams than batches are cut to one per batch.
#[test]
fn streams_give_the_one_stream_vectors_in_order() {
    for arch in ALL {
        let (_d, enc) = tiny(arch);
        let one = enc
            .embed_layers(&TEXTS, &[1, 2], EncodeOptions::batch(2), &mut noop)
            .unwrap();
        for streams in [2, 8] {
            let opts = EncodeOptions {
                batch_size: 2,
                streams,
                ..EncodeOptions::default()
            };
            let mut seen = Vec::new();
            let many = enc
                .embed_layers(&TEXTS, &[1, 2], opts, &mut |d| seen.push(d))
                .unwrap();
            for (a, b) in one.iter().zip(&many) {
                assert_eq!(a.size(), b.size());
                assert!(max_abs(a, b) < 1e-5, "{arch:?}, {streams} streams");
            }
            assert_eq!(seen.len(), 3, "one call per batch");
            assert!(seen.windows(2).all(|w| w[0] < w[1]) && seen.last() == Some(&5));
        }
    }
    // the caller's thread count is what it was
    let threads = tch::get_num_threads();
    let (_d, enc) = tiny(Architecture::Bert);
    let opts = EncodeOptions {
        batch_size: 1,
        streams: 2,
        ..EncodeOptions::default()
    };
    enc.embed_layers(&TEXTS, &[2], opts, &mut noop).unwrap();
    assert_eq!(tch::get_num_threads(), threads);
}

#[test]
fn dropout_only_in_training() {
    let (_d, enc) = tiny(Architecture::Bert);
    let ids = enc.tokenizer.encode(&TEXTS).unwrap();
    let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    let input = enc.make_input(&seqs);
    let _g = tch::no_grad_guard();
    let e1 = enc.forward(&input, 2, false).hidden_states.pop().unwrap();
    let e2 = enc.forward(&input, 2, false).hidden_states.pop().unwrap();
    assert_eq!(max_abs(&e1, &e2), 0.0);
    let t1 = enc.forward(&input, 2, true).hidden_states.pop().unwrap();
    let t2 = enc.forward(&input, 2, true).hidden_states.pop().unwrap();
    assert!(
        max_abs(&t1, &t2) > 1e-3,
        "two training passes must see different dropout masks"
    );
}

#[test]
fn truncates_at_max_seq_length() {
    let (d, _) = tiny(Architecture::Mpnet);
    let enc = ElasticEncoder::load(d.path(), Device::Cpu, Some(10)).unwrap();
    let long = "the cat ".repeat(50);
    let ids = enc.tokenizer.encode(&[long.as_str()]).unwrap();
    assert_eq!(ids[0].len(), 10);
    assert_eq!(*ids[0].last().unwrap(), 2, "ends with </s>");
    // longer than the position table: a clear error, naming the caller's value (it blamed
    // config.json, which the caller had not written)
    let e = ElasticEncoder::load(d.path(), Device::Cpu, Some(1000))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("max length: 1000 is outside 1..="), "{e}");
    assert!(!e.contains("config.json"), "{e}");
}

fn load_err(dir: &std::path::Path) -> String {
    let e: Error = ElasticEncoder::load(dir, Device::Cpu, None).unwrap_err();
    e.to_string()
}

#[test]
fn bad_model_directories_give_clear_errors() {
    let (d, _) = tiny(Architecture::Bert);
    let p = d.path();
    assert!(load_err(&p.join("nope")).contains("model directory not found"));

    let cfg = std::fs::read_to_string(p.join("config.json")).unwrap();
    std::fs::write(p.join("config.json"), cfg.replace("\"bert\"", "\"gpt2\"")).unwrap();
    let e = load_err(p);
    assert!(
        e.contains("config.json") && e.contains("model_type 'gpt2' is not supported"),
        "{e}"
    );

    std::fs::write(p.join("config.json"), "{ not json").unwrap();
    let e = load_err(p);
    assert!(
        e.contains("config.json") && e.contains("invalid JSON"),
        "{e}"
    );

    std::fs::write(
        p.join("config.json"),
        cfg.replace("\"hidden_size\": 32", "\"hidden_size\": 48"),
    )
    .unwrap();
    let e = load_err(p);
    assert!(
        e.contains("model.safetensors") && e.contains("has shape"),
        "{e}"
    );

    std::fs::write(p.join("config.json"), &cfg).unwrap();
    std::fs::remove_file(p.join("tokenizer.json")).unwrap();
    let e = load_err(p);
    assert!(
        e.contains("tokenizer.json") && e.contains("not found"),
        "{e}"
    );

    std::fs::write(p.join("tokenizer.json"), "{}").unwrap();
    assert!(load_err(p).contains("tokenizer"));
}

/// A tokenizer of another model's, whose ids run past the embedding table, is refused when a
/// text gives such an id, naming the token and both files (libtorch's embedding lookup panicked
/// with "index out of range in self" before).
#[test]
fn a_tokenizer_with_ids_past_the_embedding_rows_is_refused_by_name() {
    let (d, enc) = tiny(Architecture::Bert);
    let rows = enc.config.vocab_size;
    let path = d.path().join("tokenizer.json");
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    t["model"]["vocab"]["zebra"] = serde_json::json!(rows + 100);
    std::fs::write(&path, t.to_string()).unwrap();
    let enc = ElasticEncoder::load(d.path(), Device::Cpu, None).unwrap();
    assert_eq!(enc.tokenizer.encode(&["the cat sat"]).unwrap().len(), 1);
    let e = enc
        .embed(
            &["the cat sat", "a zebra sat"],
            ElasticSpec { layer: 2, dim: 8 },
            EncodeOptions::batch(2),
            &mut noop,
        )
        .unwrap_err()
        .to_string();
    let want = format!(
        "has id {}, past the model's {rows} embedding rows",
        rows + 100
    );
    assert!(
        e.contains("text 1") && e.contains("\"zebra\"") && e.contains(&want),
        "{e}"
    );
    assert!(
        e.contains("tokenizer.json does not belong to the weights of") && e.contains("config.json"),
        "{e}"
    );
}

#[test]
fn invalid_points_are_refused() {
    let (_d, enc) = tiny(Architecture::Bert);
    let o = EncodeOptions::default();
    let e = enc
        .embed(&TEXTS, ElasticSpec { layer: 3, dim: 8 }, o, &mut noop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("layer 3 is outside"), "{e}");
    let e = enc
        .embed(&TEXTS, ElasticSpec { layer: 1, dim: 33 }, o, &mut noop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dimension 33 is outside"), "{e}");
    let e = enc
        .embed(&TEXTS, ElasticSpec { layer: 1, dim: 0 }, o, &mut noop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dimension 0"), "{e}");
    assert!(enc
        .embed(&[], ElasticSpec { layer: 1, dim: 8 }, o, &mut noop)
        .is_err());
}

/// The sentence-transformers 6 layout: `pooling_mode` as a string, no `max_seq_length` in
/// `sentence_bert_config.json`, the length in `tokenizer_config.json`.
#[test]
fn reads_the_sentence_transformers_6_layout() {
    let (d, _) = tiny(Architecture::Bert);
    let p = d.path();
    std::fs::write(
        p.join("1_Pooling/config.json"),
        r#"{"embedding_dimension": 32, "pooling_mode": "cls", "include_prompt": true}"#,
    )
    .unwrap();
    std::fs::write(
        p.join("sentence_bert_config.json"),
        r#"{"transformer_task": "feature-extraction"}"#,
    )
    .unwrap();
    std::fs::write(
        p.join("tokenizer_config.json"),
        r#"{"model_max_length": 12}"#,
    )
    .unwrap();
    let enc = ElasticEncoder::load(p, Device::Cpu, None).unwrap();
    assert_eq!(enc.pooling, nest_model::Pooling::Cls);
    assert_eq!(enc.tokenizer.max_length(), 12);
    // HF's "unset" sentinel is ignored: the position table bounds the length
    std::fs::write(
        p.join("tokenizer_config.json"),
        r#"{"model_max_length": 1000000000000000019884624838656}"#,
    )
    .unwrap();
    assert_eq!(
        ElasticEncoder::load(p, Device::Cpu, None)
            .unwrap()
            .tokenizer
            .max_length(),
        64
    );
    std::fs::write(
        p.join("1_Pooling/config.json"),
        r#"{"pooling_mode": "weightedmean"}"#,
    )
    .unwrap();
    let e = load_err(p);
    assert!(
        e.contains("pooling_mode 'weightedmean' is not supported"),
        "{e}"
    );
}

/// The same spec gives the same weights, byte for byte, whatever else uses libtorch's RNG.
#[test]
fn tiny_models_are_reproducible() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let spec = TinySpec::new(Architecture::Mpnet);
    write_tiny_model(a.path(), &spec).unwrap();
    tch::manual_seed(999);
    let _ = Tensor::randn([100], (tch::Kind::Float, Device::Cpu));
    write_tiny_model(b.path(), &spec).unwrap();
    assert!(
        std::fs::read(a.path().join("model.safetensors")).unwrap()
            == std::fs::read(b.path().join("model.safetensors")).unwrap()
    );
}

/// A token budget per batch (`EncodeOptions::max_tokens`) changes the batches, not the vectors.
#[test]
fn a_token_budget_gives_the_same_vectors() {
    for arch in [Architecture::Bert, Architecture::Qwen3] {
        let (_d, enc) = tiny(arch);
        let plain = enc
            .embed_layers(&TEXTS, &[1, 2], EncodeOptions::batch(4), &mut noop)
            .unwrap();
        let opts = EncodeOptions {
            batch_size: 4,
            max_tokens: 12,
            ..EncodeOptions::default()
        };
        let mut calls = 0;
        let budget = enc
            .embed_layers(&TEXTS, &[1, 2], opts, &mut |_| calls += 1)
            .unwrap();
        assert!(
            calls > 2,
            "{arch:?}: {calls} batches under a 12-token budget"
        );
        for (a, b) in plain.iter().zip(&budget) {
            assert!(max_abs(a, b) < 1e-5, "{arch:?}");
        }
    }
}

/// An adaptor records the vector its model gave a probe sentence (`nest compress`); loaded
/// beside another model of the same width, `foreign_note` says so, and beside its own, nothing.
#[test]
fn an_adaptor_names_a_model_it_was_not_trained_on() {
    use nest_model::adaptor::{AdaptorMeta, HeadMeta, PROBE_TEXT};
    use nest_model::Adaptor;
    let (_a, own) = tiny(Architecture::Bert);
    let dir = tempfile::tempdir().unwrap();
    let other_spec = TinySpec {
        seed: 8,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(dir.path(), &other_spec).unwrap();
    let other = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
    let probe = |enc: &ElasticEncoder, layer: usize| -> Vec<f32> {
        let v = enc
            .embed_layers(&[PROBE_TEXT], &[layer], EncodeOptions::batch(1), &mut noop)
            .unwrap();
        Vec::<f32>::try_from(&v[0].view([-1])).unwrap()
    };
    let adaptor = |layer: usize, vector: Vec<f32>| {
        let meta = AdaptorMeta {
            format: 1,
            method: "pca".into(),
            input_dim: 32,
            normalize_input: true,
            heads: vec![HeadMeta { dims: vec![16, 32] }],
            info: serde_json::json!({"source": {"model": "models/own", "probe":
                {"text": PROBE_TEXT, "layer": layer, "vector": vector}}}),
        };
        let w = Tensor::eye(32, (tch::Kind::Float, Device::Cpu));
        Adaptor::new(
            meta,
            vec![(w, Tensor::zeros([32], (tch::Kind::Float, Device::Cpu)))],
        )
        .unwrap()
    };
    let a = adaptor(2, probe(&own, 2));
    assert_eq!(a.foreign_note(&own).unwrap(), None, "its own model");
    let note = a.foreign_note(&other).unwrap().expect("another model");
    assert!(
        note.contains("trained on another model's vectors (models/own)") && note.contains("cosine"),
        "{note}"
    );
    // an exit the model does not have
    let deep = adaptor(5, probe(&own, 2));
    let note = deep.foreign_note(&own).unwrap().expect("no layer 5");
    assert!(note.contains("layer 5"), "{note}");
    // no record (embedding files): nothing to say
    let mut bare = adaptor(2, probe(&own, 2));
    bare.meta.info = serde_json::json!({});
    assert_eq!(bare.foreign_note(&other).unwrap(), None);
    // applied at another layer than its own (helper trial C, U8: only "not a trained exit")
    assert_eq!(a.layer_note(&[2]), None);
    let note = a.layer_note(&[1, 2]).expect("layer 1");
    assert!(
        note.contains("trained on layer 2's vectors, and is applied at layer 1:"),
        "{note}"
    );
    assert_eq!(bare.layer_note(&[1]), None, "no record");
}
