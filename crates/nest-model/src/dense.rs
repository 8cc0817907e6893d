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
//! In the encoder's `VarStore` the weights are `dense.linear.weight` / `dense.linear.bias`, so a
//! trainer optimises and checkpoints them with the encoder's own.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{nn, Tensor};

use crate::{Error, Result};

/// Prefix of the head's variables in the encoder's `VarStore`.
pub const VAR_PREFIX: &str = "dense.";

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
