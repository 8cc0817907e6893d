//! The model folder's writer (nest-model owns the layout, read and write): the final model in
//! Hugging Face / sentence-transformers layout, loadable by
//! `SentenceTransformer(path)` and by `nest`: `config.json`, `model.safetensors` (names as in
//! `BertModel` / `MPNetModel`), the tokenizer files, `modules.json`, `sentence_bert_config.json`,
//! `1_Pooling/config.json`, `2_Dense/` when the model has a projection head, and `nest.json` (the
//! trained dims and layers), with the fields vLLM and sentence-transformers read to use the
//! elastic dims ([`interop_metadata`]). [`slim`] writes the same layout with only the first n
//! layers.

use std::path::Path;

use crate::{ElasticEncoder, NestMeta};
use serde_json::json;

use crate::{Error, Result};

const COPIED: [&str; 6] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "config_sentence_transformers.json",
];

/// Writes the model to `dest` (replacing it) through a temporary folder renamed at the end.
pub fn save(enc: &ElasticEncoder, dest: &Path, meta: &NestMeta) -> Result<()> {
    write(enc, dest, meta, None)
}

/// Why `out` must not take a model folder written from `source`'s model (`--out` of `nest
/// slim`, `nest export checkpoint`): it is `source`'s own folder (or holds it), or it holds
/// files and `overwrite` is off, or it holds files but no model (the whole folder is replaced).
pub fn check_out(out: &Path, source: &Path, overwrite: bool) -> std::result::Result<(), String> {
    if let (Ok(o), Ok(m)) = (out.canonicalize(), source.canonicalize()) {
        if o == m || m.starts_with(&o) {
            return Err(format!(
                "--out {} is the model's own folder (or holds it): write the model elsewhere",
                out.display()
            ));
        }
    }
    let holds_files = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
    if holds_files && !overwrite {
        return Err(format!(
            "--out {} already holds files: pass --overwrite to replace them, or choose another \
             folder",
            out.display()
        ));
    }
    // --overwrite replaces a model, never a folder of something else (`--out .`, `--out runs`)
    if holds_files && !out.join("config.json").is_file() {
        return Err(format!(
            "--out {} holds files but no model (no config.json): the whole folder is replaced, \
             so only a model's is; choose another folder",
            out.display()
        ));
    }
    Ok(())
}

/// A smaller model with only the first `layers` layers (2DMSE section 5.4: "one can simply
/// remove the last layers"): the other layers' weights are dropped and `config.json` says
/// `num_hidden_layers = layers`, so it loads in `SentenceTransformer(path)` and gives the vectors
/// that `nest encode --layer <layers>` gives on the full model. With `dim`, `nest.json` records it
/// as the default truncation (sentence-transformers users pass `truncate_dim=dim`).
pub fn slim(enc: &ElasticEncoder, dest: &Path, layers: usize, dim: Option<usize>) -> Result<()> {
    enc.check(&[layers], dim.as_slice())?;
    let old = &enc.meta;
    let meta = NestMeta {
        matryoshka_dims: old.matryoshka_dims.clone(),
        trained_layers: if old.trained_layers.is_empty() {
            Vec::new()
        } else {
            // the slim model's last layer is trained whenever the original's layer n was
            old.trained_layers
                .iter()
                .copied()
                .filter(|&l| l <= layers)
                .collect()
        },
        objective: slim_note(old, enc.num_layers(), layers),
        default_dim: dim.or(old.default_dim),
        training_dtype: old.training_dtype.clone(),
        seed: old.seed,
    };
    write(enc, dest, &meta, Some(layers))
}

/// The slim model's `objective`: the original's, and when the kept last layer was never
/// trained as an exit (it is not among the original's trained layers, nor its last), a note
/// that says so: the slim model's `trained_layers` then lists none of its layers.
fn slim_note(old: &NestMeta, num_layers: usize, layers: usize) -> Option<String> {
    if layers == num_layers || old.trained_layers.contains(&layers) {
        return old.objective.clone();
    }
    // the original's last layer counts as trained even where nest.json lists none
    let mut trained = old.trained_layers.clone();
    trained.push(num_layers);
    trained.sort_unstable();
    trained.dedup();
    Some(format!(
        "{}; slimmed to {layers} of {num_layers} layers: layer {layers} was never trained as an \
         exit (trained: {trained:?})",
        old.objective.as_deref().unwrap_or("not recorded"),
    ))
}

/// Whether a weight name belongs to an encoder layer at or beyond `keep`: `encoder.layer.<i>.`
/// (BERT, MPNet, XLM-RoBERTa) or `layers.<i>.` (ModernBERT, Qwen3, Gemma 3).
fn dropped(name: &str, keep: usize) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.windows(2).any(|w| {
        matches!(w[0], "layer" | "layers") && w[1].parse::<usize>().is_ok_and(|i| i >= keep)
    })
}

/// `io::Error` at `p` as this crate's error.
fn io(p: &Path, e: std::io::Error) -> Error {
    nest_core::Error::io(p, e).into()
}

/// Writes `v` as pretty JSON to `dir/rel` (atomically).
fn write_json(dir: &Path, rel: &str, v: &serde_json::Value) -> Result<()> {
    let p = dir.join(rel);
    let text = serde_json::to_string_pretty(v).map_err(|e| Error::Config {
        path: p.clone(),
        message: e.to_string(),
    })?;
    nest_core::fsutil::write_atomic(&p, text.as_bytes())?;
    Ok(())
}

/// The sentence-transformers layout written file by file into one temporary folder that is
/// renamed into place at the end (atomic).
fn write(enc: &ElasticEncoder, dest: &Path, meta: &NestMeta, keep: Option<usize>) -> Result<()> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "final".into());
    let tmp = parent.join(format!(".tmp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("1_Pooling")).map_err(|e| io(&tmp, e))?;
    for f in COPIED {
        let src = enc.files.dir.join(f);
        if src.is_file() {
            std::fs::copy(&src, tmp.join(f)).map_err(|e| io(&src, e))?;
        }
    }
    // each Dense module goes to its own folder, as sentence-transformers keeps it
    let (head, mut named): (Vec<_>, Vec<_>) = weights(enc, keep)
        .into_iter()
        .partition(|(n, _)| crate::dense::module_of(n).is_some());
    named.sort_by(|a, b| a.0.cmp(&b.0));
    tch::Tensor::write_safetensors(&named, tmp.join("model.safetensors"))?;
    if let Some(k) = keep {
        slim_config(&tmp, k)?;
    }
    interop_metadata(&tmp, meta, enc.output_dim())?;
    write_json(
        &tmp,
        "sentence_bert_config.json",
        &json!({"max_seq_length": enc.tokenizer.max_length(), "do_lower_case": false}),
    )?;
    let modules = write_modules(enc, &tmp, &head)?;
    write_json(&tmp, "modules.json", &json!(modules))?;
    write_json(&tmp, "1_Pooling/config.json", &pooling_config(enc))?;
    let meta = serde_json::to_value(meta).map_err(|e| Error::Config {
        path: tmp.clone(),
        message: e.to_string(),
    })?;
    write_json(&tmp, "nest.json", &meta)?;
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| io(dest, e))?;
    }
    std::fs::rename(&tmp, dest).map_err(|e| io(dest, e))?;
    Ok(())
}

/// The trained variables, plus what the original file holds beyond them (BERT's pooler,
/// position_ids) so that transformers loads the model without "newly initialized" weights;
/// without the layers at or beyond `keep`.
fn weights(enc: &ElasticEncoder, keep: Option<usize>) -> Vec<(String, tch::Tensor)> {
    let mut named: Vec<(String, tch::Tensor)> = enc.vs.variables().into_iter().collect();
    let known: std::collections::HashSet<String> = named.iter().map(|n| n.0.clone()).collect();
    if let Ok(orig) = tch::Tensor::read_safetensors(&enc.files.weights) {
        for (name, t) in orig {
            let plain = ["bert.", "mpnet.", "model.", "roberta."]
                .iter()
                .find_map(|p| name.strip_prefix(p))
                .unwrap_or(&name)
                .to_string();
            if !known.contains(&plain) {
                named.push((plain, t));
            }
        }
    }
    if let Some(k) = keep {
        named.retain(|(n, _)| !dropped(n, k));
    }
    named
}

/// What other tools read of an elastic model, beside Nest's own `nest.json`:
/// - vLLM accepts a request's `dimensions` only when the Hugging Face `config.json` has a
///   non-empty `matryoshka_dimensions` (or `is_matryoshka: true`), and then only a listed one
///   (`vllm/pooling_params.py`, `ModelConfig.is_matryoshka`): the trained dims and the full
///   width are listed when the model was trained for prefixes;
/// - sentence-transformers truncates by default to `truncate_dim` of
///   `config_sentence_transformers.json` (`SentenceTransformer._parse_model_config`): written
///   when the model has a default dim (`nest slim --dim`).
///
/// Evidence: docs/SERVING.md, "Metadata other tools read".
fn interop_metadata(dir: &Path, meta: &NestMeta, width: usize) -> Result<()> {
    if !meta.matryoshka_dims.is_empty() {
        let mut cfg = read_json(dir, "config.json")?;
        let mut dims = meta.matryoshka_dims.clone();
        dims.push(width);
        dims.sort_unstable();
        dims.dedup();
        cfg["matryoshka_dimensions"] = json!(dims);
        cfg["is_matryoshka"] = json!(true);
        write_json(dir, "config.json", &cfg)?;
    }
    if let Some(d) = meta.default_dim.filter(|&d| d < width) {
        let name = "config_sentence_transformers.json";
        let mut cfg = match dir.join(name).is_file() {
            true => read_json(dir, name)?,
            false => {
                json!({"prompts": {}, "default_prompt_name": null, "similarity_fn_name": "cosine"})
            }
        };
        cfg["truncate_dim"] = json!(d);
        write_json(dir, name, &cfg)?;
    }
    Ok(())
}

fn read_json(dir: &Path, rel: &str) -> Result<serde_json::Value> {
    let p = dir.join(rel);
    let text = std::fs::read_to_string(&p).map_err(|e| io(&p, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Config {
        path: p.clone(),
        message: e.to_string(),
    })
}

/// `config.json` of a model cut to `k` layers.
fn slim_config(dir: &Path, k: usize) -> Result<()> {
    let mut cfg = read_json(dir, "config.json")?;
    cfg["num_hidden_layers"] = json!(k);
    // ModernBERT / Qwen3 / Gemma 3 list one attention type per layer
    if let Some(types) = cfg.get_mut("layer_types").and_then(|t| t.as_array_mut()) {
        types.truncate(k);
    }
    write_json(dir, "config.json", &cfg)
}

/// The Dense folders (each module's weights, `head` holding them under the encoder's names)
/// and the `modules.json` entries of the pipeline.
fn write_modules(
    enc: &ElasticEncoder,
    dir: &Path,
    head: &[(String, tch::Tensor)],
) -> Result<Vec<serde_json::Value>> {
    let mut modules = vec![
        json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
        json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
    ];
    for (k, d) in enc.head.modules().iter().enumerate() {
        let folder = format!("{}_Dense", modules.len());
        std::fs::create_dir_all(dir.join(&folder)).map_err(|e| io(dir, e))?;
        let mut own: Vec<(String, tch::Tensor)> = head
            .iter()
            .filter_map(|(n, t)| match crate::dense::module_of(n) {
                Some((m, inner)) if m == k => Some((inner.to_string(), t.shallow_clone())),
                _ => None,
            })
            .collect();
        own.sort_by(|a, b| a.0.cmp(&b.0));
        tch::Tensor::write_safetensors(&own, dir.join(&folder).join("model.safetensors"))?;
        let config = serde_json::to_value(&d.config).map_err(|e| Error::Config {
            path: dir.join(&folder),
            message: e.to_string(),
        })?;
        write_json(dir, &format!("{folder}/config.json"), &config)?;
        let i = modules.len();
        modules.push(json!({"idx": i, "name": i.to_string(), "path": folder, "type": "sentence_transformers.models.Dense"}));
    }
    if enc.normalize {
        let i = modules.len();
        modules.push(json!({"idx": i, "name": i.to_string(), "path": format!("{i}_Normalize"), "type": "sentence_transformers.models.Normalize"}));
    }
    Ok(modules)
}

/// `1_Pooling/config.json` of the model's pooling.
fn pooling_config(enc: &ElasticEncoder) -> serde_json::Value {
    let p = enc.pooling;
    use crate::Pooling::*;
    json!({
        "word_embedding_dimension": enc.hidden_size(),
        "pooling_mode_cls_token": p == Cls,
        "pooling_mode_mean_tokens": p == Mean,
        "pooling_mode_max_tokens": p == Max,
        "pooling_mode_mean_sqrt_len_tokens": p == MeanSqrtLen,
        "pooling_mode_lasttoken": p == LastToken,
        "include_prompt": enc.include_prompt,
    })
}

#[cfg(test)]
mod tests {
    use super::dropped;

    #[test]
    fn slim_drops_the_layers_of_every_architecture() {
        for (name, gone) in [
            ("encoder.layer.2.attention.self.query.weight", true),
            ("encoder.layer.1.output.dense.bias", false),
            ("layers.3.mlp.down_proj.weight", true),
            ("layers.0.attn.Wqkv.weight", false),
            ("embeddings.LayerNorm.weight", false),
            ("norm.weight", false),
            ("dense.linear.weight", false),
        ] {
            assert_eq!(dropped(name, 2), gone, "{name}");
        }
    }
}
