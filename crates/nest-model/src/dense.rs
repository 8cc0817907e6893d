//! A linear head after pooling, in sentence-transformers' `Dense` layout: IBKD's dimension
//! reduction (`../shared/papers/IBKD.md` section 3.4, eq. 11: `S' = W_proj S`).
//!
//! On disk (what `sentence_transformers.models.Dense` reads and writes):
//!
//! ```text
//! modules.json             ... {"path": "2_Dense", "type": "sentence_transformers.models.Dense"} ...
//! 2_Dense/config.json      {"in_features": 384, "out_features": 128, "bias": false,
//!                           "activation_function": "torch.nn.modules.linear.Identity"}
//! 2_Dense/model.safetensors  linear.weight [out, in] (and linear.bias [out] when bias)
//! ```
//!
//! A pipeline may hold several Dense modules, applied in order after pooling ([`Head`]):
//! EmbeddingGemma has two (`2_Dense` 768 -> 3072 and `3_Dense` 3072 -> 768, no bias, Identity).
//!
//! In the encoder's `VarStore` the first module's weights are `dense.linear.weight` /
//! `dense.linear.bias`, the `k`-th's (k >= 1) `dense{k}.linear.*` ([`var_prefix`]), so a trainer
//! optimises and checkpoints them with the encoder's own.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{nn, Tensor};

use crate::{Error, Result};

/// Prefix of the first Dense module's variables in the encoder's `VarStore`.
pub const VAR_PREFIX: &str = "dense.";

/// Prefix of the `k`-th Dense module's variables (0-based): `dense.`, then `dense1.`, ...
pub fn var_prefix(k: usize) -> String {
    match k {
        0 => VAR_PREFIX.to_string(),
        k => format!("dense{k}."),
    }
}

/// The Dense module a variable of the encoder's `VarStore` belongs to, and its name inside the
/// module (`linear.weight`); `None` for the transformer's own variables.
pub fn module_of(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix("dense")?;
    let (k, inner) = rest.split_once('.')?;
    match k {
        "" => Some((0, inner)),
        k if !k.starts_with('0') => Some((k.parse().ok()?, inner)),
        _ => None,
    }
}

const IDENTITY: &str = "torch.nn.modules.linear.Identity";
const TANH: &str = "torch.nn.modules.activation.Tanh";

/// `2_Dense/config.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DenseConfig {
    pub in_features: usize,
    pub out_features: usize,
    #[serde(default = "d_true")]
    pub bias: bool,
    /// sentence-transformers' default is Tanh; IBKD's eq. 11 is linear (Identity).
    #[serde(default = "d_tanh")]
    pub activation_function: String,
}

fn d_true() -> bool {
    true
}
fn d_tanh() -> String {
    TANH.into()
}

/// A loaded (or new) Dense head.
#[derive(Debug)]
pub struct Dense {
    pub config: DenseConfig,
    /// sentence-transformers' folder name for it (`2_Dense`).
    pub folder: String,
    /// `[out, in]`.
    pub weight: Tensor,
    /// `[out]`.
    pub bias: Option<Tensor>,
    tanh: bool,
}

impl Dense {
    /// Registers the head's variables under `vs` (named `linear.weight`, `linear.bias`), with
    /// `weight = [I | 0]` (the head starts as truncation to the first `out` coordinates; the paper
    /// gives no initialisation) and `bias = 0`. `path` names the config in errors.
    pub fn new(vs: &nn::Path, config: DenseConfig, folder: &str, path: &Path) -> Result<Self> {
        let bad = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        if config.in_features == 0 || config.out_features == 0 {
            return Err(bad("in_features and out_features must be >= 1".to_string()));
        }
        let tanh = match config.activation_function.as_str() {
            IDENTITY => false,
            TANH => true,
            other => {
                return Err(bad(format!(
                    "activation_function '{other}' is not supported (expected '{IDENTITY}' or '{TANH}')"
                )))
            }
        };
        let (o, i) = (config.out_features as i64, config.in_features as i64);
        let lin = vs / "linear";
        let weight = lin.var_copy(
            "weight",
            &Tensor::eye_m(o, i, (tch::Kind::Float, vs.device())),
        );
        let bias = config.bias.then(|| lin.zeros("bias", &[o]));
        Ok(Dense {
            config,
            folder: folder.to_string(),
            weight,
            bias,
            tanh,
        })
    }

    /// Reads `dir/folder/config.json`, naming the file on a bad or missing key.
    pub fn read_config(dir: &Path, folder: &str) -> Result<(DenseConfig, PathBuf)> {
        let p = dir.join(folder).join("config.json");
        Ok((crate::config::read_json(&p)?, p))
    }

    /// The weights file of a Dense folder (only safetensors is read).
    pub fn weights_file(dir: &Path, folder: &str) -> Result<PathBuf> {
        let p = dir.join(folder).join("model.safetensors");
        if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Missing {
                path: p,
                message: "the Dense module's weights are not found (Nest reads model.safetensors; \
                          re-save the model with a recent sentence-transformers)"
                    .into(),
            })
        }
    }

    /// `y = act(x W^T + b)`.
    ///
    /// # Shapes
    /// - `x`: `[batch, in_features]`; returns `[batch, out_features]`
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let y = x.linear(&self.weight, self.bias.as_ref());
        if self.tanh {
            y.tanh()
        } else {
            y
        }
    }

    /// A handle on the same tensors (gradients flow to the originals).
    pub fn shallow_clone(&self) -> Dense {
        Dense {
            config: self.config.clone(),
            folder: self.folder.clone(),
            weight: self.weight.shallow_clone(),
            bias: self.bias.as_ref().map(Tensor::shallow_clone),
            tanh: self.tanh,
        }
    }

    /// The config of IBKD's projection: linear, no bias (eq. 11).
    pub fn projection(in_features: usize, out_features: usize) -> DenseConfig {
        DenseConfig {
            in_features,
            out_features,
            bias: false,
            activation_function: IDENTITY.into(),
        }
    }
}

/// The Dense modules after pooling, in pipeline order; empty when the pipeline has none.
#[derive(Debug, Default)]
pub struct Head {
    modules: Vec<Dense>,
}

impl Head {
    /// A head of these modules; each one's `in_features` must be the previous one's
    /// `out_features` (`path` names the pipeline in the error).
    pub fn new(modules: Vec<Dense>, path: &Path) -> Result<Head> {
        for w in modules.windows(2) {
            if w[1].config.in_features != w[0].config.out_features {
                return Err(Error::Config {
                    path: path.to_path_buf(),
                    message: format!(
                        "Dense module {} takes {} features, but {} gives {}",
                        w[1].folder, w[1].config.in_features, w[0].folder, w[0].config.out_features
                    ),
                });
            }
        }
        Ok(Head { modules })
    }

    pub fn modules(&self) -> &[Dense] {
        &self.modules
    }

    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The last module's `out_features` (`None` without modules).
    pub fn out_features(&self) -> Option<usize> {
        self.modules.last().map(|d| d.config.out_features)
    }

    /// Every module in order: `[batch, hidden]` -> `[batch, out_features]` (the input itself,
    /// shallow-cloned, without modules).
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let mut y = x.shallow_clone();
        for d in &self.modules {
            y = d.forward(&y);
        }
        y
    }

    /// Handles on the same tensors (gradients flow to the originals).
    pub fn shallow_clone(&self) -> Head {
        Head {
            modules: self.modules.iter().map(Dense::shallow_clone).collect(),
        }
    }

    /// `in -> out` per module, e.g. `768 -> 3072 -> 768`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .modules
            .first()
            .map(|d| d.config.in_features.to_string())
            .into_iter()
            .collect();
        parts.extend(
            self.modules
                .iter()
                .map(|d| d.config.out_features.to_string()),
        );
        parts.join(" -> ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_round_trip() {
        for k in [0, 1, 2, 11] {
            let name = format!("{}linear.weight", var_prefix(k));
            assert_eq!(module_of(&name), Some((k, "linear.weight")));
        }
        for other in [
            "dense",
            "densely.x",
            "dense01.x",
            "dense_1.x",
            "layers.0.dense.weight",
        ] {
            assert_eq!(module_of(other), None, "{other}");
        }
    }
}
