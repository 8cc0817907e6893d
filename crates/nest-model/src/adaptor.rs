//! Embedding adaptors: a small linear map applied to a frozen model's output to get smaller
//! vectors (SMEC, Search-Adaptor, Matryoshka-Adaptor, PCA; trained by `nest compress`).
//!
//! An adaptor directory holds `adaptor.json` (what it is) and `adaptor.safetensors` (one
//! `weight.K` `[out_k, in]` and `bias.K` `[out_k]` per head). Applying it at dim `d`:
//!
//! ```text
//! x = x / |x|                      (when `normalize_input`, as the frozen model's users receive it)
//! y = x @ weight.K.T + bias.K      (K = the head whose `dims` hold d)
//! y = y[:, :d] / |y[:, :d]|
//! ```
//!
//! Nested adaptors (SMEC, Matryoshka-Adaptor, PCA) have one head whose prefixes are the
//! compressed vectors; Search-Adaptor has one head per dim.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::pooling::{l2_normalize, truncate_normalize};
use crate::{Error, Result};

/// The text whose vector `nest compress` records of the model an adaptor is trained on
/// (`info.source.probe`: `{text, layer, vector}`), so that the adaptor loaded beside another
/// model is noticed ([`Adaptor::probe`]; the check is `Adaptor::foreign_note`).
pub const PROBE_TEXT: &str =
    "Nest adaptor probe: a short sentence whose vector identifies the model that gave it.";

/// Below this cosine between the recorded and the loaded model's probe vectors, the models
/// differ: all-MiniLM-L6-v2 against itself gave 0.9994 in int8 and 0.99994 in bf16, and against
/// its own copy after 60 steps of fine-tuning (`recipes/mrl-stsb.toml`) 0.989.
pub const PROBE_MIN_COSINE: f64 = 0.99;

/// `adaptor.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdaptorMeta {
    /// Format version (1).
    pub format: u32,
    /// How it was made (`smec`, `pca`, `search-adaptor`, ...).
    pub method: String,
    /// Input dimension (the frozen model's output size).
    pub input_dim: usize,
    /// L2-normalise the input before the map.
    pub normalize_input: bool,
    pub heads: Vec<HeadMeta>,
    /// Free-form provenance (command, data, per-stage history).
    #[serde(default)]
    pub info: serde_json::Value,
}

/// One linear map and the dims (prefixes of its output) it serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeadMeta {
    pub dims: Vec<usize>,
}

/// A loaded adaptor.
#[derive(Debug)]
pub struct Adaptor {
    pub meta: AdaptorMeta,
    /// `(weight [out, in], bias [out])` per head, float32 on CPU.
    pub heads: Vec<(Tensor, Tensor)>,
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::Config {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

impl Adaptor {
    /// Builds and validates an adaptor.
    pub fn new(meta: AdaptorMeta, heads: Vec<(Tensor, Tensor)>) -> Result<Self> {
        let a = Adaptor { meta, heads };
        a.validate(Path::new("adaptor.json"))?;
        Ok(a)
    }

    fn validate(&self, path: &Path) -> Result<()> {
        let m = &self.meta;
        if m.format != 1 {
            return Err(bad(
                path,
                format!("format {} is not supported (expected 1)", m.format),
            ));
        }
        if m.heads.is_empty() || m.heads.len() != self.heads.len() {
            return Err(bad(
                path,
                format!(
                    "{} heads described, {} stored",
                    m.heads.len(),
                    self.heads.len()
                ),
            ));
        }
        for (k, (h, (w, b))) in m.heads.iter().zip(&self.heads).enumerate() {
            let ws = w.size();
            if ws.len() != 2 || ws[1] != m.input_dim as i64 || b.size() != [ws[0]] {
                return Err(bad(
                    path,
                    format!(
                        "head {k}: weight {ws:?} / bias {:?} do not fit input_dim {} (expected [out, {}] and [out])",
                        b.size(),
                        m.input_dim,
                        m.input_dim
                    ),
                ));
            }
            if h.dims.is_empty() || h.dims.iter().any(|&d| d == 0 || d as i64 > ws[0]) {
                return Err(bad(
                    path,
                    format!("head {k}: dims {:?} must be in 1..={}", h.dims, ws[0]),
                ));
            }
        }
        Ok(())
    }

    /// Every dim the adaptor serves, increasing.
    pub fn dims(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self
            .meta
            .heads
            .iter()
            .flat_map(|h| h.dims.clone())
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// The head serving `dim`, or an error naming the dims served.
    pub fn head_for(&self, dim: usize) -> Result<usize> {
        self.meta
            .heads
            .iter()
            .position(|h| h.dims.contains(&dim))
            .ok_or_else(|| {
                Error::Core(nest_core::Error::value(
                    "dim",
                    format!("the adaptor serves dims {:?}, not {dim}", self.dims()),
                ))
            })
    }

    /// The compressed, L2-normalised vectors at `dim`.
    ///
    /// # Shapes
    /// - `x`: `[N, input_dim]` (any float kind, any device); returns `[N, dim]` float32
    pub fn apply(&self, x: &Tensor, dim: usize) -> Result<Tensor> {
        let k = self.head_for(dim)?;
        let n = x.size();
        if n.len() != 2 || n[1] != self.meta.input_dim as i64 {
            return Err(Error::Core(nest_core::Error::value(
                "input",
                format!(
                    "embeddings of shape {n:?}; the adaptor expects [N, {}]",
                    self.meta.input_dim
                ),
            )));
        }
        let (w, b) = &self.heads[k];
        let dev = x.device();
        let mut x = x.to_kind(Kind::Float);
        if self.meta.normalize_input {
            x = l2_normalize(&x);
        }
        let y = x.matmul(&w.to_device(dev).tr()) + b.to_device(dev);
        Ok(truncate_normalize(&y, dim))
    }

    /// Writes `dir/adaptor.json` and `dir/adaptor.safetensors` (each atomically).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (k, (w, b)) in self.heads.iter().enumerate() {
            named.push((format!("weight.{k}"), w.to_kind(Kind::Float).contiguous()));
            named.push((format!("bias.{k}"), b.to_kind(Kind::Float).contiguous()));
        }
        let st = dir.join("adaptor.safetensors");
        let tmp = dir.join("adaptor.safetensors.partial");
        Tensor::write_safetensors(&named, &tmp)?;
        std::fs::rename(&tmp, &st).map_err(|e| nest_core::Error::io(&st, e))?;
        let json = serde_json::to_vec_pretty(&self.meta).expect("meta serialises");
        nest_core::fsutil::write_atomic(&dir.join("adaptor.json"), &json)?;
        Ok(())
    }

    /// The probe the adaptor recorded of its model: the layer and the vector it gave
    /// [`PROBE_TEXT`] (`None` for adaptors trained on embedding files, or before the record).
    pub fn probe(&self) -> Option<(usize, Vec<f32>)> {
        let p = self.meta.info.get("source")?.get("probe")?;
        if p.get("text")?.as_str()? != PROBE_TEXT {
            return None;
        }
        let layer = p.get("layer")?.as_u64()? as usize;
        let v = p.get("vector")?.as_array()?;
        let v: Option<Vec<f32>> = v.iter().map(|x| x.as_f64().map(|x| x as f32)).collect();
        Some((layer, v?))
    }

    /// A warning when this adaptor is applied to other layers' vectors than the layer it was
    /// trained on (its probe's: `nest compress` trains on the model's last layer): `None` when
    /// `layers` are that one, or the adaptor records none.
    pub fn layer_note(&self, layers: &[usize]) -> Option<String> {
        let (trained, _) = self.probe()?;
        let other: Vec<String> = layers
            .iter()
            .filter(|&&l| l != trained)
            .map(usize::to_string)
            .collect();
        (!other.is_empty()).then(|| {
            format!(
                "the adaptor was trained on layer {trained}'s vectors, and is applied at layer {}: \
                 it maps vectors it never saw there, so expect less than its trained quality; \
                 for an adaptor of layer L, `nest slim --keep-layers L` the model and run \
                 `nest compress --model` on the slim one",
                other.join(", ")
            )
        })
    }

    /// Reads an adaptor directory, checking every tensor against `adaptor.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let jp = dir.join("adaptor.json");
        let raw = std::fs::read(&jp).map_err(|e| Error::Missing {
            path: jp.clone(),
            message: format!("not an adaptor directory ({e})"),
        })?;
        let meta: AdaptorMeta = serde_json::from_slice(&raw).map_err(|e| {
            bad(&jp, format!("expected {{format, method, input_dim, normalize_input, heads: [{{dims}}]}}: {e}"))
        })?;
        let sp: PathBuf = dir.join("adaptor.safetensors");
        let tensors = Tensor::read_safetensors(&sp).map_err(|e| Error::Weights {
            path: sp.clone(),
            message: format!("unreadable (truncated or corrupted?): {e}"),
        })?;
        let get = |name: &str| -> Result<Tensor> {
            tensors
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.to_kind(Kind::Float))
                .ok_or_else(|| Error::Weights {
                    path: sp.clone(),
                    message: format!("tensor '{name}' is missing"),
                })
        };
        let mut heads = Vec::new();
        for k in 0..meta.heads.len() {
            heads.push((get(&format!("weight.{k}"))?, get(&format!("bias.{k}"))?));
        }
        let a = Adaptor { meta, heads };
        a.validate(&jp)?;
        Ok(a)
    }
}
