//! Loads a `model.safetensors` into a `VarStore`, checking every tensor's presence and shape.

use std::collections::HashMap;
use std::path::Path;

use tch::{nn::VarStore, Tensor};

use crate::{Error, Result};

/// Prefixes some checkpoints put before the encoder's own names (`bert.embeddings...`).
const PREFIXES: [&str; 4] = ["bert.", "mpnet.", "model.", "roberta."];

/// Copies each variable of `vs` from the file, naming the first missing or mis-shaped tensor.
/// Extra tensors in the file (e.g. `embeddings.position_ids`, `pooler.*`, MLM heads) are ignored.
pub(crate) fn load(vs: &mut VarStore, path: &Path) -> Result<()> {
    load_part(vs, path, &|name| Some(name.to_string()))
}

/// Copies the variables of `vs` that `key` maps to a name in the file (the others are left
/// alone), e.g. the encoder's from `model.safetensors` and a Dense head's from
/// `2_Dense/model.safetensors`.
pub(crate) fn load_part(
    vs: &mut VarStore,
    path: &Path,
    key: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let named = Tensor::read_safetensors(path).map_err(|e| Error::Weights {
        path: path.to_path_buf(),
        message: format!("cannot read safetensors: {e}"),
    })?;
    let mut file: HashMap<String, Tensor> = HashMap::with_capacity(named.len());
    for (name, t) in named {
        let key = PREFIXES
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .map(str::to_string)
            .unwrap_or(name);
        file.insert(legacy_norm_name(key), t);
    }
    let device = vs.device();
    let vars = vs.variables();
    let mut names: Vec<(&String, String)> =
        vars.keys().filter_map(|n| key(n).map(|k| (n, k))).collect();
    names.sort();
    tch::no_grad(|| -> Result<()> {
        for (name, k) in names {
            let var = &vars[name];
            let src = file.get(k.as_str()).ok_or_else(|| Error::Weights {
                path: path.to_path_buf(),
                message: format!("tensor '{k}' not found (expected shape {:?})", var.size()),
            })?;
            if src.size() != var.size() {
                return Err(Error::Weights {
                    path: path.to_path_buf(),
                    message: format!(
                        "tensor '{k}' has shape {:?}, the config implies {:?}",
                        src.size(),
                        var.size()
                    ),
                });
            }
            let mut var = var.shallow_clone();
            var.f_copy_(&src.to_device(device).to_kind(var.kind()))?;
        }
        Ok(())
    })
}

/// LayerNorm parameters under their TensorFlow-era names (`*.gamma`, `*.beta`), as older hub
/// checkpoints and transformers 5's saving of BERT-family models write them, read as `*.weight`
/// and `*.bias` (transformers does the same on load: `_fix_state_dict_key_on_load`).
fn legacy_norm_name(key: String) -> String {
    if let Some(stem) = key.strip_suffix(".gamma") {
        format!("{stem}.weight")
    } else if let Some(stem) = key.strip_suffix(".beta") {
        format!("{stem}.bias")
    } else {
        key
    }
}

/// How many values the tensors of a safetensors file hold, from its header alone (the 8-byte
/// header length and the JSON header; nothing else is read).
pub(crate) fn stored_values(path: &Path) -> Result<u128> {
    use std::io::Read;
    let bad = |message: String| Error::Weights {
        path: path.to_path_buf(),
        message,
    };
    let mut f = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|e| bad(format!("no safetensors header: {e}")))?;
    let len = u64::from_le_bytes(len);
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > size.saturating_sub(8) || len > 100 << 20 {
        return Err(bad(format!(
            "safetensors header of {len} bytes in a file of {size} bytes"
        )));
    }
    let mut head = vec![0u8; len as usize];
    f.read_exact(&mut head)
        .map_err(|e| bad(format!("truncated safetensors header: {e}")))?;
    let head: HashMap<String, serde_json::Value> = serde_json::from_slice(&head)
        .map_err(|e| bad(format!("unreadable safetensors header: {e}")))?;
    Ok(head
        .iter()
        .filter(|(k, _)| k.as_str() != "__metadata__")
        .filter_map(|(_, v)| v.get("shape")?.as_array().cloned())
        .map(|shape| {
            shape
                .iter()
                .map(|d| d.as_u64().unwrap_or(0) as u128)
                .fold(1u128, |a, d| a.saturating_mul(d))
        })
        .fold(0u128, |a, n| a.saturating_add(n)))
}

/// Refuses a config that describes far more values than its weights file holds, before any
/// variable is allocated: a `config.json` edited by hand (or by a fuzzer) to a huge
/// `hidden_size`, vocabulary or layer count would otherwise make the model's construction
/// allocate terabytes and abort, when the load would fail on the first shape anyway.
/// `implied` is an upper estimate of the values the config's variables hold; the check allows 4x
/// (estimates count a full attention and a gated MLP in every layer) plus a million.
pub(crate) fn check_fits(config_path: &Path, implied: u128, weights_path: &Path) -> Result<()> {
    let stored = stored_values(weights_path)?;
    if implied > stored.saturating_mul(4).saturating_add(1 << 20) {
        return Err(Error::Config {
            path: config_path.to_path_buf(),
            message: format!(
                "describes a model of about {implied} values, but {} holds {stored}: the config \
                 and the weights do not belong together",
                weights_path.display()
            ),
        });
    }
    Ok(())
}
