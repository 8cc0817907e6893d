//! Levels: one (precision, prefix dim) view of every vector in an index.
//!
//! Every level stores the vector's first `dim` coordinates, L2-normalised again after the cut
//! (so a float32 dot product is the cosine of the truncated vectors), then:
//! - `float32`: `dim` little-endian f32 per row;
//! - `int8`: `dim` i8 per row plus one f32 scale per row (in a side file): symmetric per-row
//!   scaling, `q = round(x / s)` with `s = max|x| / 127`. Queries are quantised the same way and
//!   scored `dot_i8(q, r) * s_q * s_r`, an estimate of the cosine;
//! - `binary`: the sign bits (`x > 0` is 1), packed 8 per byte, first coordinate in the most
//!   significant bit (numpy's `packbits`, pgvector's `binary_quantize`), `ceil(dim / 8)` bytes;
//!   scored `1 - 2 * hamming / dim`.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How a level stores its coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Float32,
    Int8,
    Binary,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Float32, Precision::Int8, Precision::Binary];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Float32 => "float32",
            Precision::Int8 => "int8",
            Precision::Binary => "binary",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "float32" | "f32" => Ok(Precision::Float32),
            "int8" | "i8" => Ok(Precision::Int8),
            "binary" | "ubinary" | "bit" => Ok(Precision::Binary),
            other => Err(Error::invalid(
                "precision",
                format!("unknown precision '{other}'; expected float32, int8 or binary"),
            )),
        }
    }

    /// Parses a comma-separated list such as `float32,int8,binary`.
    pub fn parse_list(s: &str) -> Result<Vec<Self>> {
        let mut out: Vec<Precision> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(Precision::parse)
            .collect::<Result<_>>()?;
        out.sort();
        out.dedup();
        if out.is_empty() {
            return Err(Error::invalid("precision", "no precision given"));
        }
        Ok(out)
    }
}

/// One stored view: `precision` at the first `dim` coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Level {
    pub precision: Precision,
    pub dim: usize,
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.precision.name(), self.dim)
    }
}

impl Level {
    /// Parses `precision:dim`, e.g. `binary:384`.
    pub fn parse(s: &str) -> Result<Self> {
        let (p, d) = s.trim().split_once(':').ok_or_else(|| {
            Error::invalid(
                "level",
                format!("'{s}' is not precision:dim (e.g. float32:64, int8:384, binary:384)"),
            )
        })?;
        let dim = d
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&d| d > 0)
            .ok_or_else(|| {
                Error::invalid("level", format!("'{s}': dim must be a positive integer"))
            })?;
        Ok(Level {
            precision: Precision::parse(p)?,
            dim,
        })
    }

    /// Bytes one row takes in the level's main file.
    pub fn row_bytes(&self) -> usize {
        match self.precision {
            Precision::Float32 => self.dim * 4,
            Precision::Int8 => self.dim,
            Precision::Binary => self.dim.div_ceil(8),
        }
    }

    /// The level's main file name inside the index folder.
    pub fn file_name(&self) -> String {
        format!("{}-{}.bin", self.precision.name(), self.dim)
    }

    /// The side file of per-row scales (int8 only).
    pub fn scale_file_name(&self) -> Option<String> {
        (self.precision == Precision::Int8).then(|| format!("int8-{}.scale", self.dim))
    }
}

/// The first `dim` coordinates of `v`, L2-normalised (all zeros stay zeros): Nest's one row
/// normalisation, `nest_core::vector`.
pub use nest_core::vector::prefix_normalized;

/// Symmetric per-row int8 quantisation (`nest_core::vector`, shared with `nest eval`).
pub use nest_core::vector::quantize_int8;

/// Sign bits packed most significant first, `ceil(len / 8)` bytes.
pub fn pack_bits(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len().div_ceil(8)];
    for (j, v) in x.iter().enumerate() {
        if *v > 0.0 {
            out[j / 8] |= 0x80 >> (j % 8);
        }
    }
    out
}

/// A query prepared for one level (normalised prefix, then quantised like the rows).
#[derive(Debug, Clone)]
pub enum Prepared {
    Float32(Vec<f32>),
    Int8(Vec<i8>, f32),
    Binary(Vec<u8>),
}

impl Prepared {
    pub fn new(query: &[f32], level: Level) -> Self {
        let p = prefix_normalized(query, level.dim);
        match level.precision {
            Precision::Float32 => Prepared::Float32(p),
            Precision::Int8 => {
                let (q, s) = quantize_int8(&p);
                Prepared::Int8(q, s)
            }
            Precision::Binary => Prepared::Binary(pack_bits(&p)),
        }
    }
}
