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
