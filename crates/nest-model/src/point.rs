//! The operating point: which layer to exit at and how many leading dimensions to keep (through
//! an adaptor when one is loaded). This module is its one owner:
//!
//! - [`Offer`] is what a loaded model (and adaptor) offers: its layer count and width, the exits
//!   and dims it was trained for, and its default dim. Building it (`Offer::new`, written beside
//!   the encoder so that this module does not import it) is the one place that checks an
//!   adaptor's input width against the model.
//! - [`Offer::resolve`] turns what a user asked for (one point: `nest encode`, the server) and
//!   [`Offer::resolve_grid`] (a grid: `nest eval`, `nest inspect`) into checked points, with the
//!   defaults, the ranges and the trained-point policy in one place; errors name the flag or API
//!   field the user actually wrote ([`Keys`]).
//! - [`finish`] is the one function that turns pooled vectors into embeddings: cut to the dim,
//!   map through the adaptor when there is one, L2-normalise.
//!
//! Everything that turns a pooled vector into an embedding (encode, eval, serve, the trainer's
//! evaluation) goes through [`finish`]; the range checks are `nest_core::spec`'s.

use nest_core::spec::{check_dims, check_layers};
pub use nest_core::ElasticSpec as Point;
use tch::Tensor;

use crate::pooling::truncate_normalize;
use crate::{Adaptor, NestMeta, Result};

/// The names the user wrote for the two coordinates, so that an error names the flag, recipe
/// key or API field actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    pub layer: &'static str,
    pub dim: &'static str,
}

impl Keys {
    /// One point on the command line (`nest encode`).
    pub const FLAGS: Keys = Keys {
        layer: "--layer",
        dim: "--dim",
    };
    /// A grid on the command line (`nest eval`, `nest inspect`).
    pub const GRID_FLAGS: Keys = Keys {
        layer: "--layers",
        dim: "--dims",
    };
    /// The embeddings API's request fields (`/v1/embeddings`).
    pub const API: Keys = Keys {
        layer: "layers",
        dim: "dimensions",
    };
}

/// Which points a caller may get: any in range, or only those the model was trained for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Any layer in `1..=num_layers` and any prefix in `1..=width` (the command line).
    AnyInRange,
    /// Only trained exits and trained dims; `unlock` tells the user how to lift this (the
    /// server: "start the server with --allow-any-point").
    TrainedOnly { unlock: &'static str },
}

/// A point the model does not offer, with the key the user wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct PointError {
    pub key: &'static str,
    pub message: String,
}

impl From<PointError> for nest_core::Error {
    fn from(e: PointError) -> Self {
        nest_core::Error::value(e.key, e.message)
    }
}

impl From<PointError> for crate::Error {
    fn from(e: PointError) -> Self {
        crate::Error::Core(e.into())
    }
}

/// What a loaded model (with its adaptor, if any) offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    num_layers: usize,
    width: usize,
    layers: Vec<usize>,
    dims: Vec<usize>,
    default_dim: usize,
    adaptor: bool,
}

impl Offer {
    /// The offer of a model of `num_layers` layers and `width` output dims with training record
    /// `meta`; `adaptor_dims` are the dims of the adaptor's heads when one is loaded.
    pub fn from_meta(
        num_layers: usize,
        width: usize,
        meta: &NestMeta,
        adaptor_dims: Option<Vec<usize>>,
    ) -> Offer {
        let adaptor = adaptor_dims.is_some();
        let mut dims = match adaptor_dims {
            Some(d) => d,
            None => {
                let mut d = meta.matryoshka_dims.clone();
                d.push(width);
                d
            }
        };
        dims.retain(|&d| d >= 1 && (adaptor || d <= width));
        dims.sort_unstable();
        dims.dedup();
        let mut layers = meta.trained_layers.clone();
        layers.push(num_layers);
        layers.retain(|&l| l >= 1 && l <= num_layers);
        layers.sort_unstable();
        layers.dedup();
        let default_dim = match (adaptor, meta.default_dim) {
            (true, _) => *dims.last().unwrap_or(&width),
            (false, Some(d)) if d >= 1 && d <= width => d,
            (false, _) => width,
        };
        Offer {
            num_layers,
            width,
            layers,
            dims,
            default_dim,
            adaptor,
        }
    }

    /// Transformer layers of the model.
    pub fn num_layers(&self) -> usize {
        self.num_layers
    }
    /// The model's output width (before any adaptor).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Trained exits, increasing (the last layer always among them).
    pub fn layers(&self) -> &[usize] {
        &self.layers
    }
    /// Trained dims (or the adaptor's dims), increasing.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }
    /// The dim given when none is asked for: the adaptor's widest head, else `nest slim --dim`'s
    /// choice, else the full width.
    pub fn default_dim(&self) -> usize {
        self.default_dim
    }
    /// Whether an adaptor maps the vectors (then only its dims exist).
    pub fn has_adaptor(&self) -> bool {
        self.adaptor
    }

    /// Resolves one point from what the user asked (`None`: the default), checked against the
    /// model and `policy`.
    pub fn resolve(
        &self,
        layer: Option<usize>,
        dim: Option<usize>,
        keys: Keys,
        policy: Policy,
    ) -> std::result::Result<Point, PointError> {
        let p = Point {
            layer: layer.unwrap_or(self.num_layers),
            dim: dim.unwrap_or(self.default_dim),
        };
        self.check_layer(p.layer, keys.layer)?;
        self.check_dim(p.dim, keys.dim)?;
        if let Policy::TrainedOnly { unlock } = policy {
            if !self.layers.contains(&p.layer) {
                return Err(PointError {
                    key: keys.layer,
                    message: format!(
                        "{}={} is not a trained exit of this model (trained: {}); {unlock} to serve any layer",
                        keys.layer, p.layer, list(&self.layers)
                    ),
                });
            }
            if !self.dims.contains(&p.dim) {
                return Err(PointError {
                    key: keys.dim,
                    message: format!(
                        "{}={} is not a trained dim of this model (trained: {}); {unlock} to serve any prefix",
                        keys.dim, p.dim, list(&self.dims)
                    ),
                });
            }
        }
        Ok(p)
    }

    /// What of `p` the model was not trained for, in the words of `keys` (`None`: both were).
    /// The server refuses such a point ([`Policy::TrainedOnly`]); where any point in range is
    /// allowed (`nest encode`, `nest mine`, Python's `encode`) it is said as a warning.
    pub fn untrained(&self, p: Point, keys: Keys) -> Option<String> {
        let mut parts = Vec::new();
        if !self.layers.contains(&p.layer) {
            let trained = list(&self.layers);
            parts.push(format!(
                "{} {} is not a trained exit (trained: {trained})",
                keys.layer, p.layer
            ));
        }
        if !self.dims.contains(&p.dim) {
            let trained = list(&self.dims);
            parts.push(format!(
                "{} {} is not a trained dim (trained: {trained})",
                keys.dim, p.dim
            ));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "{}: the model was not trained to give good vectors there (`nest eval --layers L \
                 --dims D` measures them)",
                parts.join("; ")
            )
        })
    }

    /// Resolves a grid: `layers` defaults to every layer, `dims` to the adaptor's dims or to
    /// [`default_dims`] of the width; every value is checked (any point in range is allowed).
    pub fn resolve_grid(
        &self,
        layers: Option<Vec<usize>>,
        dims: Option<Vec<usize>>,
        keys: Keys,
    ) -> std::result::Result<(Vec<usize>, Vec<usize>), PointError> {
        let layers = layers.unwrap_or_else(|| (1..=self.num_layers).collect());
        let dims = dims.unwrap_or_else(|| match self.adaptor {
            true => self.dims.clone(),
            false => default_dims(self.width),
        });
        for &l in &layers {
            self.check_layer(l, keys.layer)?;
        }
        for &d in &dims {
            self.check_dim(d, keys.dim)?;
        }
        Ok((layers, dims))
    }

    fn check_layer(&self, layer: usize, key: &'static str) -> std::result::Result<(), PointError> {
        check_layers(key, &[layer], self.num_layers).map_err(|e| PointError {
            key,
            message: core_message(e),
        })
    }

    fn check_dim(&self, dim: usize, key: &'static str) -> std::result::Result<(), PointError> {
        if self.adaptor && !self.dims.contains(&dim) {
            return Err(PointError {
                key,
                message: format!("the adaptor serves dims {:?}, not {dim}", self.dims),
            });
        }
        check_dims(key, &[dim], self.width).map_err(|e| PointError {
            key,
            message: core_message(e),
        })
    }
}

/// The default dims of a grid: powers of two from 16 below `width`, and `width` itself.
pub fn default_dims(width: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (4..)
        .map(|p| 1usize << p)
        .take_while(|&d| d < width)
        .collect();
    v.push(width);
    v
}

/// Pooled vectors to embeddings at `dim`: the first `dim` coordinates L2-normalised, or, with an
/// adaptor, its head for `dim` (which normalises its input and output as it was trained). The
/// one place a pooled vector becomes an embedding.
///
/// # Shapes
/// - `pooled`: `[n, width]` (any float kind); returns `[n, dim]`
pub fn finish(pooled: &Tensor, dim: usize, adaptor: Option<&Adaptor>) -> Result<Tensor> {
    match adaptor {
        Some(a) => a.apply(pooled, dim),
        None => Ok(truncate_normalize(pooled, dim)),
    }
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn core_message(e: nest_core::Error) -> String {
    match e {
        nest_core::Error::Value { message, .. } => message,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
