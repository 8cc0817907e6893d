//! What loading an encoder assembles: the network of the config's architecture, the
//! sentence-transformers pipeline around it (pooling, Normalize, Dense), the maximum sequence
//! length. A leaf of the encoder module: it imports nothing from it.

use tch::nn::VarStore;

use crate::backbone::{Backbone, REGISTRY};
use crate::config::{read_json, Architecture, ModelConfig, ModelFiles, PoolingConfig, SbertConfig};
use crate::dense::{var_prefix, Dense, Head};
use crate::pooling::Pooling;
use crate::{weights, Error, Result};

/// The network of one architecture, behind the [`Backbone`] trait.
pub(crate) type Net = Box<dyn Backbone>;

/// The architecture's network with its weights registered in `vs` (not loaded yet), built by
/// its [`REGISTRY`] line; the architecture's own config keys are checked there, errors naming
/// `config.json`.
pub(crate) fn net(
    arch: Architecture,
    vs: &VarStore,
    config: &ModelConfig,
    config_path: &std::path::Path,
) -> Result<Net> {
    let (_, build) = REGISTRY
        .iter()
        .find(|(a, _)| *a == arch)
        .expect("every architecture is registered (backbone::tests)");
    build(vs, config).map_err(|message| Error::Config {
        path: config_path.to_path_buf(),
        message,
    })
}

/// An upper estimate of the values `config`'s variables hold, for [`weights::check_fits`]:
/// embeddings (tokens, positions, types) and, per layer, an attention with
/// `heads + kv_heads` query/output and key/value projections of `head_dim`, a gated MLP (three
/// `hidden x intermediate` matrices) and norms, plus a pooler.
pub(crate) fn implied_values(config: &ModelConfig) -> u128 {
    let key = |k: &str| config.extra.get(k).and_then(serde_json::Value::as_u64);
    let h = config.hidden_size as u128;
    let heads = config.num_attention_heads as u128;
    let head_dim = key("head_dim").map_or(config.head_dim() as u128, u128::from);
    let kv = key("num_key_value_heads").map_or(heads, u128::from);
    let attention = h
        .saturating_mul(head_dim)
        .saturating_mul(heads.saturating_add(kv).saturating_mul(2));
    let mlp = h
        .saturating_mul(config.intermediate_size as u128)
        .saturating_mul(3);
    let layer = attention
        .saturating_add(mlp)
        .saturating_add(h.saturating_mul(4));
    let tables = (config.vocab_size as u128)
        .saturating_add(config.max_position_embeddings as u128)
        .saturating_add(config.type_vocab_size as u128);
    tables
        .saturating_mul(h)
        .saturating_add(layer.saturating_mul(config.num_hidden_layers as u128))
        .saturating_add(h.saturating_mul(h))
}

/// The pipeline's Dense modules in order, the `k`-th registered under [`var_prefix`]`(k)` in
/// `vs`; the first must take the model's `hidden_size`, each next one its predecessor's output.
pub(super) fn head(
    folders: &[String],
    vs: &VarStore,
    config: &ModelConfig,
    files: &ModelFiles,
) -> Result<Head> {
    let mut modules = Vec::new();
    for (k, folder) in folders.iter().enumerate() {
        let (cfg, p) = Dense::read_config(&files.dir, folder)?;
        if k == 0 && cfg.in_features != config.hidden_size {
            return Err(Error::Config {
                path: p,
                message: format!(
                    "in_features {} differs from the model's hidden_size {}",
                    cfg.in_features, config.hidden_size
                ),
            });
        }
        let implied = (cfg.in_features as u128 + 1).saturating_mul(cfg.out_features as u128);
        weights::check_fits(&p, implied, &Dense::weights_file(&files.dir, folder)?)?;
        let prefix = var_prefix(k);
        let path = vs.root() / prefix.trim_end_matches('.');
        modules.push(Dense::new(&path, cfg, folder, &p)?);
    }
    Head::new(modules, &files.dir.join("modules.json"))
}

/// The sentence-transformers pipeline around the transformer: the pooling mode, whether it ends
/// with `Normalize`, and the folders of its `Dense` modules in order.
pub(super) fn read_pipeline(files: &ModelFiles) -> Result<(Pooling, bool, Vec<String>)> {
    let pooling = match &files.pooling_config {
        Some(p) => read_json::<PoolingConfig>(p)?.pooling(p)?,
        None => Pooling::Mean,
    };
    let mods: Vec<serde_json::Value> = match &files.modules {
        Some(p) => read_json(p)?,
        None => Vec::new(),
    };
    let of_type = |suffix: &str| -> Vec<&serde_json::Value> {
        mods.iter()
            .filter(|m| {
                m.get("type")
                    .and_then(|t| t.as_str())
                    .is_some_and(|t| t.ends_with(suffix))
            })
            .collect()
    };
    let normalize = files.modules.is_none() || !of_type("Normalize").is_empty();
    let config_error = |message: &str| Error::Config {
        path: files.dir.join("modules.json"),
        message: message.into(),
    };
    let dense_folders = of_type("Dense")
        .iter()
        .map(|m| {
            m.get("path")
                .and_then(|p| p.as_str())
                .map(str::to_string)
                .ok_or_else(|| config_error("a Dense module has no \"path\""))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((pooling, normalize, dense_folders))
}

/// The token limit: the caller's, else sentence-transformers' (`sentence_bert_config.json` up
/// to v5, `tokenizer_config.json`'s `model_max_length` in v6), else the position table's size.
pub(super) fn max_seq_len(
    files: &ModelFiles,
    config: &ModelConfig,
    asked: Option<usize>,
) -> Result<usize> {
    let sbert: Option<SbertConfig> = files.sbert_config.as_deref().map(read_json).transpose()?;
    let limit = config.max_positions();
    // HF writes a huge sentinel as model_max_length when unset
    let tokenizer_max = match &files.tokenizer_config {
        Some(p) => read_json::<serde_json::Value>(p)?
            .get("model_max_length")
            .and_then(serde_json::Value::as_f64)
            .filter(|v| *v >= 1.0 && *v <= limit as f64)
            .map(|v| v as usize),
        None => None,
    };
    let max_len = asked
        .or(sbert.and_then(|s| s.max_seq_length))
        .or(tokenizer_max)
        .unwrap_or(limit);
    if let Some(n) = asked.filter(|&n| n == 0 || n > limit) {
        // the caller's value: named as the caller's (--max-length, max_length=), not the file's
        let message = format!("{n} is outside 1..={limit}, the model's position table");
        return Err(nest_core::Error::value("max length", message).into());
    }
    if max_len == 0 || max_len > limit {
        return Err(Error::Config {
            path: files.config.clone(),
            message: format!(
                "max_seq_length {max_len} is outside 1..={limit} (the position table)"
            ),
        });
    }
    Ok(max_len)
}
