//! Tiny random models in Hugging Face / sentence-transformers layout, for tests and smoke runs.
//!
//! [`write_tiny_model`] writes `config.json`, `tokenizer.json` (a WordPiece vocabulary of
//! characters and a few words), `model.safetensors` (seeded random weights),
//! `sentence_bert_config.json`, `modules.json` and `1_Pooling/config.json`.

use std::path::Path;

use serde_json::json;
use tch::nn::VarStore;

use crate::config::Architecture;
use crate::config::ModelConfig;
use crate::Result;

/// Shape of a tiny model.
#[derive(Debug, Clone, Copy)]
pub struct TinySpec {
    pub arch: Architecture,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub max_seq_length: usize,
    pub seed: i64,
    /// `"mean"` or `"cls"`.
    pub pooling: &'static str,
}

impl TinySpec {
    pub fn new(arch: Architecture) -> Self {
        TinySpec {
            arch,
            layers: 2,
            hidden: 32,
            heads: 4,
            max_seq_length: 64,
            seed: 7,
            pooling: "mean",
        }
    }
}

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

fn vocab(arch: Architecture) -> Vec<String> {
    let mut v: Vec<String> = match arch {
        Architecture::Bert | Architecture::ModernBert => {
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                .map(String::from)
                .to_vec()
        }
        Architecture::Mpnet
        | Architecture::XlmRoberta
        | Architecture::Qwen3
        | Architecture::Gemma3 => ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
            .map(String::from)
            .to_vec(),
    };
    v.extend(WORDS.iter().map(|w| w.to_string()));
    for c in ('a'..='z').chain('0'..='9') {
        v.push(c.to_string());
        v.push(format!("##{c}"));
    }
    for c in ".,!?'\"-:;()".chars() {
        v.push(c.to_string());
    }
    v
}

fn tokenizer_json(arch: Architecture) -> serde_json::Value {
    let v = vocab(arch);
    let map: serde_json::Map<String, serde_json::Value> = v
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let (unk, specials, post) = match arch {
        Architecture::Bert | Architecture::ModernBert => (
            "[UNK]",
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            json!({"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}}),
        ),
        Architecture::Mpnet
        | Architecture::XlmRoberta
        | Architecture::Qwen3
        | Architecture::Gemma3 => (
            "<unk>",
            ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            json!({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": false}),
        ),
    };
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
        .collect();
    json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0},
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": unk, "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": map}
    })
}

/// The `config.json` of a tiny model.
pub fn tiny_config(spec: &TinySpec) -> ModelConfig {
    let vocab_size = vocab(spec.arch).len();
    let (model_type, pad, max_pos) = match spec.arch {
        Architecture::Bert => ("bert", 0, spec.max_seq_length),
        Architecture::Mpnet => ("mpnet", 1, spec.max_seq_length + 2),
        Architecture::XlmRoberta => ("xlm-roberta", 1, spec.max_seq_length + 2),
        Architecture::Qwen3 => ("qwen3", 1, spec.max_seq_length),
        Architecture::ModernBert => ("modernbert", 0, spec.max_seq_length),
        Architecture::Gemma3 => ("gemma3_text", 1, spec.max_seq_length),
    };
    let decoder = spec.arch == Architecture::Qwen3;
    ModelConfig {
        model_type: model_type.into(),
        vocab_size,
        hidden_size: spec.hidden,
        num_hidden_layers: spec.layers,
        num_attention_heads: spec.heads,
        intermediate_size: spec.hidden * 4,
        hidden_act: if decoder { "silu" } else { "gelu" }.into(),
        hidden_dropout_prob: 0.1,
        attention_probs_dropout_prob: 0.1,
        max_position_embeddings: max_pos,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
        pad_token_id: Some(pad),
        relative_attention_num_buckets: 32,
        position_embedding_type: None,
        extra: if spec.arch == Architecture::Gemma3 {
            // bidirectional (EmbeddingGemma), a window narrower than the inputs, mixed layers
            let types: Vec<&str> = (0..spec.layers)
                .map(|i| {
                    if i % 2 == 0 {
                        "sliding_attention"
                    } else {
                        "full_attention"
                    }
                })
                .collect();
            json!({"num_key_value_heads": (spec.heads / 2).max(1), "sliding_window": 6,
                "use_bidirectional_attention": true, "layer_types": types,
                "query_pre_attn_scalar": 16})
            .as_object()
            .cloned()
            .unwrap_or_default()
        } else if spec.arch == Architecture::ModernBert {
            // a local window narrower than the tiny models' inputs, so that it matters
            json!({"local_attention": 4, "global_attn_every_n_layers": 2, "norm_eps": 1e-5})
                .as_object()
                .cloned()
                .unwrap_or_default()
        } else if decoder {
            // Qwen3's keys: grouped-query attention with half the heads for keys and values
            json!({"num_key_value_heads": (spec.heads / 2).max(1), "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0, "attention_bias": false, "hidden_act": "silu"})
            .as_object()
            .cloned()
            .unwrap_or_default()
        } else {
            Default::default()
        },
    }
}

/// Writes a tiny random model to `dir` (created if needed).
pub fn write_tiny_model(dir: &Path, spec: &TinySpec) -> Result<()> {
    let io = |p: &Path, e: std::io::Error| nest_core::Error::io(p, e);
    std::fs::create_dir_all(dir.join("1_Pooling")).map_err(|e| io(dir, e))?;
    let cfg = tiny_config(spec);
    let write = |name: &str, v: &serde_json::Value| -> Result<()> {
        let p = dir.join(name);
        let text = serde_json::to_string_pretty(v)
            .map_err(|e| nest_core::Error::value(name, e.to_string()))?;
        std::fs::write(&p, text).map_err(|e| io(&p, e).into())
    };
    write(
        "config.json",
        &serde_json::to_value(&cfg)
            .map_err(|e| nest_core::Error::value("config", e.to_string()))?,
    )?;
    write("tokenizer.json", &tokenizer_json(spec.arch))?;
    write(
        "sentence_bert_config.json",
        &json!({"max_seq_length": spec.max_seq_length, "do_lower_case": false}),
    )?;
    write(
        "modules.json",
        &json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]),
    )?;
    write(
        "1_Pooling/config.json",
        &json!({"word_embedding_dimension": spec.hidden,
            "pooling_mode_cls_token": spec.pooling == "cls",
            "pooling_mode_mean_tokens": spec.pooling == "mean",
            "pooling_mode_max_tokens": false,
            "pooling_mode_mean_sqrt_len_tokens": false}),
    )?;
    let vs = VarStore::new(tch::Device::Cpu);
    drop(crate::encoder::build_net(
        spec.arch,
        &vs,
        &cfg,
        &dir.join("config.json"),
    )?);
    randomize(&vs, spec.seed as u64);
    vs.save(dir.join("model.safetensors"))?;
    Ok(())
}

/// Fills every variable of `vs` from a local generator seeded by `seed`, not libtorch's global
/// RNG, so that the same spec gives the same model even while other threads draw random numbers.
fn randomize(vs: &VarStore, seed: u64) {
    let mut rng = SplitMix64(seed);
    let mut vars: Vec<(String, tch::Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (name, mut t) in vars {
            let size = t.size();
            let n: i64 = size.iter().product();
            // uniform(-b, b): embeddings unit variance, linear weights 1/sqrt(fan_in) (kaiming
            // uniform), biases small, LayerNorm weights around 1
            let (center, bound) = if name.contains("LayerNorm") && name.ends_with("weight") {
                (1.0, 0.1)
            } else if name.ends_with("bias") {
                (0.0, 0.1)
            } else if name.contains("embeddings") || name.contains("relative_attention_bias") {
                (0.0, 3f64.sqrt())
            } else {
                (0.0, 1.0 / (*size.last().unwrap_or(&1) as f64).sqrt())
            };
            let vals: Vec<f32> = (0..n)
                .map(|_| (center + bound * (2.0 * rng.next_f64() - 1.0)) as f32)
                .collect();
            let _ = t.f_copy_(&tch::Tensor::from_slice(&vals).view(size.as_slice()));
        }
    });
}

/// SplitMix64 (Steele et al. 2014): a tiny, seedable generator for reproducible test weights.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
