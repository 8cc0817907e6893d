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
use serde_json::{json, Value};

use crate::{Error, Result};

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

/// The element type of a raw `bytes` response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawType {
    Float32,
    Int8,
    Uint8,
    Binary,
    Ubinary,
}

impl RawType {
    pub const ALL: [RawType; 5] = [
        RawType::Float32,
        RawType::Int8,
        RawType::Uint8,
        RawType::Binary,
        RawType::Ubinary,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RawType::Float32 => "float32",
            RawType::Int8 => "int8",
            RawType::Uint8 => "uint8",
            RawType::Binary => "binary",
            RawType::Ubinary => "ubinary",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        RawType::ALL.into_iter().find(|e| e.name() == s)
    }

    /// The JSON encoding whose bytes a row of this type carries.
    fn encoding(self) -> Encoding {
        match self {
            RawType::Float32 => Encoding::Float,
            RawType::Int8 => Encoding::Int8,
            RawType::Uint8 => Encoding::Uint8,
            RawType::Binary => Encoding::Binary,
            RawType::Ubinary => Encoding::Ubinary,
        }
    }

    /// Bytes of one row of `dim` coordinates.
    pub fn row_bytes(self, dim: usize) -> usize {
        match self {
            RawType::Float32 => 4 * dim,
            RawType::Int8 | RawType::Uint8 => dim,
            RawType::Binary | RawType::Ubinary => dim.div_ceil(8),
        }
    }

    /// Whether a trailer of one little-endian f32 scale per row follows the rows.
    pub fn has_scales(self) -> bool {
        self.encoding().has_scale()
    }
}

/// One served vector in the forms a request asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The vector's bytes per encoding, in the order asked.
    pub values: Vec<(Encoding, Value)>,
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

/// `v` in each of `encodings` (JSON values), with the int8 scale when one needs it.
pub fn encode(v: &[f32], encodings: &[Encoding]) -> Encoded {
    let q8 = encodings.iter().any(|e| e.has_scale()).then(|| int8(v));
    let bits = encodings
        .iter()
        .any(|e| matches!(e, Encoding::Binary | Encoding::Ubinary))
        .then(|| ubinary(v));
    let values = encodings
        .iter()
        .map(|&e| {
            let value = match e {
                Encoding::Float => json!(v),
                Encoding::Base64 => {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
                Encoding::Int8 => json!(q8.as_ref().map(|q| &q.0)),
                Encoding::Uint8 => json!(q8.as_ref().map(|q| q
                    .0
                    .iter()
                    .map(|&c| (c as i16 + 128) as u8)
                    .collect::<Vec<_>>())),
                Encoding::Ubinary => json!(bits),
                Encoding::Binary => json!(bits.as_ref().map(|b| b
                    .iter()
                    .map(|&x| (x as i16 - 128) as i8)
                    .collect::<Vec<_>>())),
            };
            (e, value)
        })
        .collect();
    Encoded {
        values,
        scale: q8.map(|q| q.1),
    }
}

/// Rows of `vectors` as one raw little-endian body of `ty`, then (int8 and uint8) one f32
/// scale per row.
pub fn raw(vectors: &[Vec<f32>], ty: RawType) -> Vec<u8> {
    let dim = vectors.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(vectors.len() * (ty.row_bytes(dim) + 4));
    let mut scales = Vec::new();
    for v in vectors {
        match ty {
            RawType::Float32 => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
            RawType::Int8 | RawType::Uint8 => {
                let (q, s) = int8(v);
                let shift = if ty == RawType::Uint8 { 128 } else { 0 };
                out.extend(q.iter().map(|&c| (c as i16 + shift) as u8));
                scales.push(s);
            }
            RawType::Ubinary => out.extend(ubinary(v)),
            RawType::Binary => out.extend(ubinary(v).iter().map(|&b| b.wrapping_sub(128))),
        }
    }
    for s in scales {
        out.extend(s.to_le_bytes());
    }
    out
}

/// What a request asked for: one encoding in OpenAI's shape (`encoding_format`), several in
/// Cohere's (`embedding_types`), or a raw body (`encoding_format: "bytes"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    One(Encoding),
    Several(Vec<Encoding>),
    Raw(RawType),
}

impl Output {
    /// Reads `encoding_format`, `embedding_types` and `bytes_type` (JSON values, `Null` when
    /// absent).
    pub fn parse(format: &Value, types: &Value, bytes_type: &Value) -> Result<Self> {
        let names = Encoding::names().join(", ");
        let bad = |p: &'static str, m: String| Error::bad(Some(p), m);
        if !types.is_null() && !format.is_null() {
            return Err(bad(
                "embedding_types",
                "give 'encoding_format' (one type) or 'embedding_types' (several), not both".into(),
            ));
        }
        if !bytes_type.is_null() && format.as_str() != Some("bytes") {
            return Err(bad(
                "bytes_type",
                "'bytes_type' goes with \"encoding_format\": \"bytes\"".into(),
            ));
        }
        match (format, types) {
            (Value::Null, Value::Null) => Ok(Output::One(Encoding::Float)),
            (Value::String(s), _) if s == "bytes" => {
                let ty = match bytes_type {
                    Value::Null => RawType::Float32,
                    Value::String(t) => RawType::parse(t).ok_or_else(|| {
                        bad("bytes_type", format!("'bytes_type' must be one of float32, int8, uint8, binary, ubinary, got {t:?}"))
                    })?,
                    other => return Err(bad("bytes_type", format!("'bytes_type' must be a string, got {other}"))),
                };
                Ok(Output::Raw(ty))
            }
            (Value::String(s), _) => Encoding::parse(s).map(Output::One).ok_or_else(|| {
                bad(
                    "encoding_format",
                    format!("'encoding_format' must be one of {names} or bytes, got {s:?}"),
                )
            }),
            (Value::Null, Value::Array(items)) if !items.is_empty() => {
                let mut v = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    let e = x.as_str().and_then(Encoding::parse).ok_or_else(|| {
                        bad(
                            "embedding_types",
                            format!("embedding_types[{i}] must be one of {names}, got {x}"),
                        )
                    })?;
                    if !v.contains(&e) {
                        v.push(e);
                    }
                }
                Ok(Output::Several(v))
            }
            (Value::Null, other) => Err(bad(
                "embedding_types",
                format!("'embedding_types' must be a non-empty array of {names}, got {other}"),
            )),
            (other, _) => Err(bad(
                "encoding_format",
                format!("'encoding_format' must be one of {names} or bytes, got {other}"),
            )),
        }
    }

    /// The JSON encodings to compute (none for a raw body).
    pub fn encodings(&self) -> Vec<Encoding> {
        match self {
            Output::One(e) => vec![*e],
            Output::Several(v) => v.clone(),
            Output::Raw(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_offsets_and_bits() {
        let mut v = [0.5f32, -0.25, 0.0, 0.125, -0.5, 0.75, 0.1, -0.1, 0.2];
        nest_core::vector::l2_normalize(&mut v);
        let e = encode(
            &v,
            &[
                Encoding::Int8,
                Encoding::Uint8,
                Encoding::Binary,
                Encoding::Ubinary,
            ],
        );
        let (q, s) = int8(&v);
        assert_eq!(e.scale, Some(s));
        assert!((s - v[5] / 127.0).abs() < 1e-9);
        assert_eq!(q[5], 127);
        assert_eq!(q[2], 0);
        let u: Vec<u8> = serde_json::from_value(e.values[1].1.clone()).unwrap();
        assert!(u.iter().zip(&q).all(|(&u, &c)| u as i16 == c as i16 + 128));
        // bits: 1 0 0 1 0 1 1 0 | 1 (padded)
        let ub: Vec<u8> = serde_json::from_value(e.values[3].1.clone()).unwrap();
        assert_eq!(ub, vec![0b1001_0110, 0b1000_0000]);
        let b: Vec<i8> = serde_json::from_value(e.values[2].1.clone()).unwrap();
        assert_eq!(
            b,
            vec![150i16 - 128, 0]
                .iter()
                .map(|&x| x as i8)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn raw_rows_then_scales() {
        let rows = vec![vec![0.6f32, -0.8], vec![0.0, 1.0]];
        let f = raw(&rows, RawType::Float32);
        assert_eq!(f.len(), 16);
        assert_eq!(&f[4..8], &(-0.8f32).to_le_bytes());
        let q = raw(&rows, RawType::Int8);
        assert_eq!(q.len(), 2 * 2 + 2 * 4);
        assert_eq!(q[1] as i8, -127);
        assert_eq!(&q[4..8], &int8(&rows[0]).1.to_le_bytes());
        assert_eq!(raw(&rows, RawType::Ubinary), vec![0b1000_0000, 0b0100_0000]);
        assert_eq!(raw(&rows, RawType::Binary), vec![0, 0b1100_0000]);
    }

    #[test]
    fn requests_name_the_field() {
        let s = |x: &str| Value::String(x.into());
        assert_eq!(
            Output::parse(&Value::Null, &Value::Null, &Value::Null).unwrap(),
            Output::One(Encoding::Float)
        );
        assert_eq!(
            Output::parse(&s("ubinary"), &Value::Null, &Value::Null).unwrap(),
            Output::One(Encoding::Ubinary)
        );
        assert_eq!(
            Output::parse(&s("bytes"), &Value::Null, &s("int8")).unwrap(),
            Output::Raw(RawType::Int8)
        );
        let types = serde_json::json!(["int8", "float", "int8"]);
        assert_eq!(
            Output::parse(&Value::Null, &types, &Value::Null).unwrap(),
            Output::Several(vec![Encoding::Int8, Encoding::Float])
        );
        for (f, t, b, needle) in [
            (s("int4"), Value::Null, Value::Null, "encoding_format"),
            (s("float"), types.clone(), Value::Null, "not both"),
            (
                Value::Null,
                serde_json::json!([]),
                Value::Null,
                "embedding_types",
            ),
            (
                Value::Null,
                serde_json::json!(["x"]),
                Value::Null,
                "embedding_types[0]",
            ),
            (s("float"), Value::Null, s("int8"), "bytes_type"),
            (s("bytes"), Value::Null, s("int4"), "bytes_type"),
        ] {
            let e = Output::parse(&f, &t, &b).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}

/// Against `tests/fixtures/quantize_encodings.json` (`tests/reference/quantize_encodings.py`:
/// numpy packings, and sentence-transformers' `quantize_embeddings` called on the same
/// vectors for `binary` / `ubinary`). Normalised vectors within 1e-7 (float sums in another
/// order), the int8 scale within 2 ulp, every code, bit and base64 string exact.
#[cfg(test)]
mod reference {
    use super::*;

    fn ints(v: &Value) -> Vec<i64> {
        v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
    }

    #[test]
    fn every_encoding_matches_numpy_and_sentence_transformers() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/quantize_encodings.json");
        let fx: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut checked = 0;
        for set in ["dim20", "dim16"] {
            let inputs = &fx[set]["inputs"];
            for case in fx[set]["cases"].as_array().unwrap() {
                let dim = case["dim"].as_u64().unwrap() as usize;
                for (i, row) in case["rows"].as_array().unwrap().iter().enumerate() {
                    let x: Vec<f32> = inputs[i].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
                    let v = nest_core::vector::prefix_normalized(&x, dim);
                    let want: Vec<f32> = row["normalized"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
                    assert!(v.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-7), "{set} dim {dim} row {i}");
                    // encode the reference's vector, so that every byte can be compared
                    let e = encode(&want, &Encoding::ALL);
                    let got = |k: Encoding| e.values.iter().find(|(n, _)| *n == k).unwrap().1.clone();
                    assert_eq!(got(Encoding::Base64), row["base64"], "{set} {dim} {i}");
                    assert_eq!(ints(&got(Encoding::Int8)), ints(&row["nest_int8"]), "{set} {dim} {i}");
                    assert_eq!(ints(&got(Encoding::Uint8)), ints(&row["nest_uint8"]));
                    assert_eq!(ints(&got(Encoding::Ubinary)), ints(&row["ubinary"]));
                    assert_eq!(ints(&got(Encoding::Binary)), ints(&row["binary"]));
                    // the index prepares a query by normalising it again: the scale may move by
                    // an ulp of the (already unit) vector's re-normalisation
                    let (s, want_s) = (e.scale.unwrap(), row["nest_int8_scale"].as_f64().unwrap() as f32);
                    assert!((s - want_s).abs() <= 2.0 * f32::EPSILON * want_s, "{s} vs {want_s}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 15, "{checked} rows checked");
    }
}
