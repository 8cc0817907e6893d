//! Wire formats of a returned vector: OpenAI's `encoding_format` (`float`, `base64`), the
//! quantized types of Cohere's `embedding_types` and sentence-transformers'
//! `quantize_embeddings` (`int8`, `uint8`, `binary`, `ubinary`), and the raw `bytes` body of
//! bulk clients.
//!
//! The quantized types are computed by the index's own query preparation
//! ([`nest_index::level::Prepared`]): a vector returned as `int8` or `ubinary` is, bit for bit,
//! what `nest index` stores and `nest search` / `nest eval --precision` score, so it ranks as
//! the index would.
//!
//! - `int8`: Nest's symmetric per-row codes `round(x / s)`, `s = max|x| / 127`, with the scale
//!   returned beside them (`scale`); the cosine of two vectors is estimated as
//!   `dot(a, b) * s_a * s_b`. sentence-transformers' int8 maps each dimension through ranges
//!   calibrated on a set of vectors (by default the request's own batch), so a vector would
//!   change with its neighbours in a request; a server must not do that, so Nest keeps the
//!   per-row scheme and says so.
//! - `uint8`: the same codes offset by 128 (`code + 128`, 1..=255), same scale.
//! - `ubinary`: the sign bits (`x > 0` is 1), 8 per byte, the first coordinate in the most
//!   significant bit, the last byte zero-padded: `numpy.packbits(x > 0)`, exactly
//!   sentence-transformers' and Cohere's `ubinary`. Scored by Hamming distance.
//! - `binary`: those bytes minus 128 as int8 (sentence-transformers' and Cohere's `binary`).

use base64::Engine as _;
use nest_index::level::{Level, Precision, Prepared};

pub use crate::response::{RawRow, Wire};

mod output;
pub use output::Output;

/// One wire format of a vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    Float,
    /// Little-endian float32 bytes, base64 (what the official Python client asks for by default).
    Base64,
    Int8,
    Uint8,
    Binary,
    Ubinary,
}

impl Encoding {
    pub const ALL: [Encoding; 6] = [
        Encoding::Float,
        Encoding::Base64,
        Encoding::Int8,
        Encoding::Uint8,
        Encoding::Binary,
        Encoding::Ubinary,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Float => "float",
            Encoding::Base64 => "base64",
            Encoding::Int8 => "int8",
            Encoding::Uint8 => "uint8",
            Encoding::Binary => "binary",
            Encoding::Ubinary => "ubinary",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Encoding::ALL.into_iter().find(|e| e.name() == s)
    }

    /// The names, for messages and the OpenAPI document.
    pub fn names() -> Vec<&'static str> {
        Encoding::ALL.iter().map(|e| e.name()).collect()
    }

    /// Whether the vector comes with a `scale` (the int8 codes' dequantisation factor).
    pub fn has_scale(self) -> bool {
        matches!(self, Encoding::Int8 | Encoding::Uint8)
    }
}

/// The element type of packed vectors (`embed_dtype`, vLLM's name, with `encoding_format`
/// `base64`, `bytes` or `bytes_only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedDtype {
    Float32,
    Float16,
    Bfloat16,
    Int8,
    Uint8,
    Binary,
    Ubinary,
}

impl EmbedDtype {
    pub const ALL: [EmbedDtype; 7] = [
        EmbedDtype::Float32,
        EmbedDtype::Float16,
        EmbedDtype::Bfloat16,
        EmbedDtype::Int8,
        EmbedDtype::Uint8,
        EmbedDtype::Binary,
        EmbedDtype::Ubinary,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EmbedDtype::Float32 => "float32",
            EmbedDtype::Float16 => "float16",
            EmbedDtype::Bfloat16 => "bfloat16",
            EmbedDtype::Int8 => "int8",
            EmbedDtype::Uint8 => "uint8",
            EmbedDtype::Binary => "binary",
            EmbedDtype::Ubinary => "ubinary",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        EmbedDtype::ALL.into_iter().find(|e| e.name() == s)
    }

    pub fn names() -> Vec<&'static str> {
        EmbedDtype::ALL.iter().map(|e| e.name()).collect()
    }

    /// Bytes of one row of `dim` coordinates.
    pub fn row_bytes(self, dim: usize) -> usize {
        match self {
            EmbedDtype::Float32 => 4 * dim,
            EmbedDtype::Float16 | EmbedDtype::Bfloat16 => 2 * dim,
            EmbedDtype::Int8 | EmbedDtype::Uint8 => dim,
            EmbedDtype::Binary | EmbedDtype::Ubinary => dim.div_ceil(8),
        }
    }

    /// Whether a row comes with a `scale` (the int8 codes' dequantisation factor).
    pub fn has_scale(self) -> bool {
        matches!(self, EmbedDtype::Int8 | EmbedDtype::Uint8)
    }

    /// One row's bytes (floats in `order`), with its scale for int8 / uint8.
    pub fn pack(self, v: &[f32], order: Endianness) -> (Vec<u8>, Option<f32>) {
        let big = order == Endianness::Big;
        let mut out = Vec::with_capacity(self.row_bytes(v.len()));
        let mut put = |b: &[u8]| match big {
            true => out.extend(b.iter().rev()),
            false => out.extend_from_slice(b),
        };
        let mut scale = None;
        match self {
            EmbedDtype::Float32 => v.iter().for_each(|x| put(&x.to_le_bytes())),
            EmbedDtype::Float16 => v
                .iter()
                .for_each(|x| put(&half::f16::from_f32(*x).to_le_bytes())),
            EmbedDtype::Bfloat16 => v
                .iter()
                .for_each(|x| put(&half::bf16::from_f32(*x).to_le_bytes())),
            EmbedDtype::Int8 | EmbedDtype::Uint8 => {
                let (q, s) = int8(v);
                let shift = if self == EmbedDtype::Uint8 { 128 } else { 0 };
                out.extend(q.iter().map(|&c| (c as i16 + shift) as u8));
                scale = Some(s);
            }
            EmbedDtype::Ubinary => out.extend(ubinary(v)),
            EmbedDtype::Binary => out.extend(ubinary(v).iter().map(|&b| b.wrapping_sub(128))),
        }
        (out, scale)
    }
}

/// Byte order of packed floats (`endianness`, vLLM's name; `native` is this machine's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endianness {
    Little,
    Big,
}

impl Endianness {
    pub fn name(self) -> &'static str {
        match self {
            Endianness::Little => "little",
            Endianness::Big => "big",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "little" => Some(Endianness::Little),
            "big" => Some(Endianness::Big),
            "native" if cfg!(target_endian = "big") => Some(Endianness::Big),
            "native" => Some(Endianness::Little),
            _ => None,
        }
    }
}

/// One served vector in the forms a request asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The vector in each encoding, in the order asked.
    pub values: Vec<(Encoding, Wire)>,
    /// The int8 scale, when an int8 or uint8 form was asked for.
    pub scale: Option<f32>,
}

/// The index's int8 codes and scale of a served (normalised) vector.
pub fn int8(v: &[f32]) -> (Vec<i8>, f32) {
    match Prepared::new(v, level(Precision::Int8, v.len())) {
        Prepared::Int8(q, s) => (q, s),
        _ => unreachable!("an int8 level prepares int8 codes"),
    }
}

/// The index's packed sign bits of a served vector (`ubinary`).
pub fn ubinary(v: &[f32]) -> Vec<u8> {
    match Prepared::new(v, level(Precision::Binary, v.len())) {
        Prepared::Binary(b) => b,
        _ => unreachable!("a binary level prepares bits"),
    }
}

fn level(precision: Precision, dim: usize) -> Level {
    Level { precision, dim }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `v` in each of `encodings` (JSON wire forms), with the int8 scale when one needs it.
pub fn encode(v: &[f32], encodings: &[Encoding]) -> Encoded {
    let q8 = encodings.iter().any(|e| e.has_scale()).then(|| int8(v));
    let bits = encodings
        .iter()
        .any(|e| matches!(e, Encoding::Binary | Encoding::Ubinary))
        .then(|| ubinary(v));
    let codes = || q8.as_ref().map(|q| q.0.clone()).unwrap_or_default();
    let packed = || bits.clone().unwrap_or_default();
    let values = encodings
        .iter()
        .map(|&e| {
            let value = match e {
                Encoding::Float => Wire::Floats(v.to_vec()),
                Encoding::Base64 => {
                    Wire::Text(b64(&EmbedDtype::Float32.pack(v, Endianness::Little).0))
                }
                Encoding::Int8 => Wire::Signed(codes()),
                Encoding::Uint8 => {
                    Wire::Unsigned(codes().iter().map(|&c| (c as i16 + 128) as u8).collect())
                }
                Encoding::Ubinary => Wire::Unsigned(packed()),
                Encoding::Binary => {
                    Wire::Signed(packed().iter().map(|&x| (x as i16 - 128) as i8).collect())
                }
            };
            (e, value)
        })
        .collect();
    Encoded {
        values,
        scale: q8.map(|q| q.1),
    }
}

/// A raw body: the rows of `dtype` one after another, and vLLM's `metadata` record of where
/// each lies (`start`, `end`, `shape`, `embed_dtype`, `endianness`; Nest adds `scale` for
/// int8 / uint8).
pub fn raw(vectors: &[Vec<f32>], dtype: EmbedDtype, order: Endianness) -> (Vec<u8>, Vec<RawRow>) {
    let mut body = Vec::new();
    let mut items = Vec::with_capacity(vectors.len());
    for (index, v) in vectors.iter().enumerate() {
        let (bytes, scale) = dtype.pack(v, order);
        let start = body.len();
        body.extend(bytes);
        items.push(RawRow {
            index,
            embed_dtype: dtype.name(),
            endianness: order.name(),
            start,
            end: body.len(),
            shape: [v.len()],
            scale: scale.map(f64::from),
        });
    }
    (body, items)
}

/// base64 of one packed row, with its scale for int8 / uint8.
pub fn packed(v: &[f32], dtype: EmbedDtype, order: Endianness) -> (String, Option<f32>) {
    let (bytes, scale) = dtype.pack(v, order);
    (b64(&bytes), scale)
}

#[cfg(test)]
mod tests;
