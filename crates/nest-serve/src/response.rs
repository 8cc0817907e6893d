//! The JSON bodies the server answers with, one typed struct each, and next to each struct the
//! OpenAPI schema that describes it ([`Schema`]), so that what serde writes and what
//! `/openapi.json` documents sit side by side.
//!
//! Numbers that are `f32` in the server (vector coordinates, scales, scores) are written as
//! the `f64` of the same value, so that a client reading doubles gets the exact float32.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::encoding::Encoding;
use crate::openapi::Schema;

/// Writes `f32` coordinates as the `f64` of each value.
fn widened<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for x in v {
        seq.serialize_element(&f64::from(*x))?;
    }
    seq.end()
}

/// One vector in one JSON wire form.
///
/// `Floats` for `float`, `Text` for `base64` (and packed rows), `Signed` for `int8` and
/// `binary`, `Unsigned` for `uint8` and `ubinary`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Wire {
    Floats(#[serde(serialize_with = "widened")] Vec<f32>),
    Text(String),
    Signed(Vec<i8>),
    Unsigned(Vec<u8>),
}

impl Wire {
    fn schema() -> Value {
        json!({"oneOf": [
            {"type": "array", "items": {"type": "number"}, "description": "float, or int8 / uint8 codes, or binary / ubinary packed bytes"},
            {"type": "string", "description": "base64 of the packed row (embed_dtype; little-endian float32 by default)"},
        ]})
    }
}

/// Several forms of one vector, keyed by their names in the order asked (Cohere's
/// `embedding_types`).
#[derive(Debug, Clone, PartialEq)]
pub struct ByName(pub Vec<(Encoding, Wire)>);

impl Serialize for ByName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (e, w) in &self.0 {
            map.serialize_entry(e.name(), w)?;
        }
        map.end()
    }
}

/// Token counts of a request (`usage`).
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

impl Usage {
    pub fn new(tokens: usize) -> Self {
        Usage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "required": ["prompt_tokens", "total_tokens"], "properties": {
            "prompt_tokens": {"type": "integer", "minimum": 0},
            "total_tokens": {"type": "integer", "minimum": 0},
        }})
    }
}

/// One item of an embeddings answer: `embedding` (one form) or `embeddings` (several, by
/// name), and `scale` beside int8 / uint8 codes.
#[derive(Debug, Clone, Serialize)]
pub struct Embedding {
    /// Always `"embedding"`.
    pub object: &'static str,
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Wire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<ByName>,
    /// The int8 codes' scale, widened to `f64`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
}

impl Embedding {
    pub fn new(index: usize) -> Self {
        Embedding {
            object: "embedding",
            index,
            embedding: None,
            embeddings: None,
            scale: None,
        }
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["object", "index"],
            "properties": {
                "object": {"type": "string", "enum": ["embedding"]},
                "index": {"type": "integer", "minimum": 0},
                "embedding": Wire::schema(),
                "embeddings": {"type": "object", "description": "with embedding_types: one vector per type name", "additionalProperties": Wire::schema()},
                "scale": {"type": "number", "description": "int8 / uint8: the codes' scale (x ~ code * scale; uint8: (code - 128) * scale)"},
            }
        })
    }
}

/// The JSON answer of `POST /v1/embeddings` (OpenAI's shape).
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingList<'a> {
    /// Always `"list"`.
    pub object: &'static str,
    pub data: Vec<Embedding>,
    pub model: &'a str,
    pub usage: Usage,
}

impl<'a> EmbeddingList<'a> {
    pub const SCHEMA: Schema = Schema {
        name: "EmbeddingResponse",
        build: |_| {
            json!({
                "type": "object",
                "required": ["object", "data", "model", "usage"],
                "properties": {
                    "object": {"type": "string", "enum": ["list"]},
                    "data": {"type": "array", "items": Embedding::schema()},
                    "model": {"type": "string"},
                    "usage": Usage::schema(),
                }
            })
        },
    };

    pub fn new(data: Vec<Embedding>, model: &'a str, tokens: usize) -> Self {
        EmbeddingList {
            object: "list",
            data,
            model,
            usage: Usage::new(tokens),
        }
    }
}

/// Where one packed row lies in a raw body (vLLM's `metadata` item; Nest adds `scale`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawRow {
    pub index: usize,
    pub embed_dtype: &'static str,
    pub endianness: &'static str,
    /// The row's first byte.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    pub shape: [usize; 1],
    /// The int8 / uint8 codes' scale, widened to `f64`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
}

/// The `metadata` header of a raw (`bytes`) answer: its rows' layout, model and usage.
#[derive(Debug, Clone, Serialize)]
pub struct RawMeta<'a> {
    /// Always `"list"`.
    pub object: &'static str,
    pub model: &'a str,
    pub data: Vec<RawRow>,
    pub usage: Usage,
}

impl<'a> RawMeta<'a> {
    pub fn new(data: Vec<RawRow>, model: &'a str, tokens: usize) -> Self {
        RawMeta {
            object: "list",
            model,
            data,
            usage: Usage::new(tokens),
        }
    }
}

/// `GET /health`'s answer once every model is loaded.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// Always `"ok"`.
    pub status: &'static str,
}

impl Health {
    pub const OK: Health = Health { status: "ok" };
    pub const SCHEMA: Schema = Schema {
        name: "Health",
        build: |_| json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": ["ok"]}}}),
    };
}

/// One served model in `GET /v1/models`: its name, trained dims and layers, arithmetic and the
/// encodings it returns.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub id: String,
    /// Always `"model"`.
    pub object: &'static str,
    /// Always 0.
    pub created: u64,
    /// Always `"nest"`.
    pub owned_by: &'static str,
    pub dimensions: Vec<usize>,
    pub layers: Vec<usize>,
    pub max_dimensions: usize,
    pub max_layers: usize,
    pub allow_any_point: bool,
    /// The adaptor's path (`null` without one).
    pub adaptor: Option<String>,
    pub dtype: &'static str,
    pub dtype_reason: String,
    pub encodings: Vec<&'static str>,
}

impl Model {
    fn schema() -> Value {
        json!({"type": "object", "required": ["id", "object"], "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["model"]},
            "created": {"type": "integer"},
            "owned_by": {"type": "string"},
            "dimensions": {"type": "array", "items": {"type": "integer"}},
            "layers": {"type": "array", "items": {"type": "integer"}},
            "max_dimensions": {"type": "integer"},
            "max_layers": {"type": "integer"},
            "allow_any_point": {"type": "boolean"},
            "adaptor": {"type": "string", "nullable": true},
            "dtype": {"type": "string"},
            "dtype_reason": {"type": "string"},
            "encodings": {"type": "array", "items": {"type": "string"}},
        }})
    }
}

/// `GET /v1/models`'s answer.
#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    /// Always `"list"`.
    pub object: &'static str,
    pub data: Vec<Model>,
}

impl ModelList {
    pub const SCHEMA: Schema = Schema {
        name: "Models",
        build: |_| {
            json!({
                "type": "object",
                "required": ["object", "data"],
                "properties": {
                    "object": {"type": "string", "enum": ["list"]},
                    "data": {"type": "array", "items": Model::schema()},
                }
            })
        },
    };

    pub fn new(data: Vec<Model>) -> Self {
        ModelList {
            object: "list",
            data,
        }
    }
}

/// The body of every error (OpenAI's shape): `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong; `param` is `null` when no one field is at fault.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: &'static str,
}

impl ErrorBody {
    pub const SCHEMA: Schema = Schema {
        name: "Error",
        build: |_| {
            json!({
                "type": "object",
                "required": ["error"],
                "properties": {"error": {
                    "type": "object",
                    "required": ["message", "type", "code"],
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": {"type": "string", "nullable": true},
                        "code": {"type": "string"},
                    }
                }}
            })
        },
    };
}

mod search;
pub use search::{Added, Deleted, Hit, QueryHits, SearchList};

#[cfg(test)]
mod tests;
