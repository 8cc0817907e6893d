//! Parsing of `POST /v1/embeddings` bodies (OpenAI's embeddings API plus Nest's `layers`,
//! `prompt_name` and `prompt`).
//!
//! The body is read as untyped JSON first so that every problem gets a message naming the
//! field and what was expected, as OpenAI's API does, instead of serde's generic text.

use serde_json::Value;

use crate::{Error, Result};

mod fields;
pub use fields::UnknownFields;
pub(crate) use fields::{check as check_fields, names as field_names};

/// What to embed.
#[derive(Debug, Clone, PartialEq)]
pub enum Inputs {
    Texts(Vec<String>),
    /// Token-id arrays, taken as the model's complete input ids (special tokens included).
    Tokens(Vec<Vec<i64>>),
}

impl Inputs {
    pub fn len(&self) -> usize {
        match self {
            Inputs::Texts(t) => t.len(),
            Inputs::Tokens(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub use crate::encoding::{Encoding, Output};

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    pub inputs: Inputs,
    pub model: Option<String>,
    pub dimensions: Option<usize>,
    pub layers: Option<usize>,
    /// `encoding_format`, `embedding_types`, `embed_dtype`, `endianness`: the vectors' wire forms.
    pub output: Output,
    /// A prompt the model names (`config_sentence_transformers.json`), e.g. `"query"`.
    pub prompt_name: Option<String>,
    /// A prompt's text, prepended to every text input.
    pub prompt: Option<String>,
    /// TEI's `truncate`: `false` refuses an input past the max length (413), `true` or absent
    /// cuts it.
    pub truncate: Option<bool>,
}

pub(crate) fn string(v: &Value, param: &'static str) -> Result<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(Error::bad(
            Some(param),
            format!("'{param}' must be a string, got {}", kind(other)),
        )),
    }
}

pub(crate) fn positive(v: &Value, param: &'static str) -> Result<Option<usize>> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => match n.as_u64() {
            Some(k) if k >= 1 => Ok(Some(k as usize)),
            _ => Err(Error::bad(
                Some(param),
                format!("'{param}' must be a positive integer, got {n}"),
            )),
        },
        other => Err(Error::bad(
            Some(param),
            format!("'{param}' must be a positive integer, got {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn token(v: &Value) -> Option<i64> {
    v.as_u64().and_then(|t| i64::try_from(t).ok())
}

fn parse_input(v: &Value) -> Result<Inputs> {
    const WANT: &str = "'input' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
    let bad = |m: String| Error::bad(Some("input"), m);
    match v {
        Value::String(s) => Ok(Inputs::Texts(vec![s.clone()])),
        Value::Array(items) if items.is_empty() => Err(bad("'input' is an empty array".into())),
        Value::Array(items) => match &items[0] {
            Value::String(_) => items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("input[{i}] is {}, expected a string", kind(x))))
                })
                .collect::<Result<_>>()
                .map(Inputs::Texts),
            Value::Number(_) => items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    token(x).ok_or_else(|| {
                        bad(format!(
                            "input[{i}] is not a token id (a non-negative integer)"
                        ))
                    })
                })
                .collect::<Result<_>>()
                .map(|t| Inputs::Tokens(vec![t])),
            Value::Array(_) => items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    let arr = x.as_array().ok_or_else(|| {
                        bad(format!(
                            "input[{i}] is {}, expected an array of token ids",
                            kind(x)
                        ))
                    })?;
                    if arr.is_empty() {
                        return Err(bad(format!("input[{i}] is an empty token array")));
                    }
                    arr.iter()
                        .enumerate()
                        .map(|(j, t)| {
                            token(t).ok_or_else(|| {
                                bad(format!(
                                    "input[{i}][{j}] is not a token id (a non-negative integer)"
                                ))
                            })
                        })
                        .collect()
                })
                .collect::<Result<_>>()
                .map(Inputs::Tokens),
            other => Err(bad(format!("{WANT}; input[0] is {}", kind(other)))),
        },
        Value::Null => Err(bad("'input' is required".into())),
        other => Err(bad(format!("{WANT}; got {}", kind(other)))),
    }
}

/// A field of the request body: its name and what it means (the OpenAPI document's source).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub doc: &'static str,
}

/// Every field [`parse`] reads; a body with another is refused, as OpenAI's API refuses it, unless
/// the server ignores them ([`UnknownFields`]).
pub const FIELDS: [Field; 12] = [
    Field {
        name: "input",
        doc: "a string, an array of strings, an array of token ids or an array of token-id arrays",
    },
    Field {
        name: "model",
        doc: "the served model's name (optional)",
    },
    Field {
        name: "dimensions",
        doc: "prefix dims to keep (re-normalised); a dim the model was trained for",
    },
    Field {
        name: "layers",
        doc: "Nest: the exit layer (how many layers run)",
    },
    Field {
        name: "encoding_format",
        doc: "float (default), base64 (packed embed_dtype rows; little-endian float32 by default), int8, uint8, binary, ubinary (docs/SERVING.md), bytes (a raw body, its layout in the `metadata` header, as vLLM) or bytes_only (no header)",
    },
    Field {
        name: "embedding_types",
        doc: "Cohere's several-at-once: an array of encoding_format names; each item then carries `embeddings` {name: vector} (instead of encoding_format)",
    },
    Field {
        name: "embed_dtype",
        doc: "vLLM's: with encoding_format base64, bytes or bytes_only, the packed type: float32 (default), float16, bfloat16, int8, uint8, binary, ubinary",
    },
    Field {
        name: "endianness",
        doc: "vLLM's: byte order of packed floats: native, little (default) or big",
    },
    Field {
        name: "user",
        doc: "accepted and ignored",
    },
    Field {
        name: "prompt_name",
        doc: "Nest: a prompt the model names (config_sentence_transformers.json)",
    },
    Field {
        name: "prompt",
        doc: "Nest: a prompt text prepended to every text input",
    },
    Field {
        name: "truncate",
        doc: concat!(
            "text-embeddings-inference's: true (default here, as sentence-transformers) cuts an ",
            "input past the model's max length there, the `x-truncated-inputs` response header ",
            "counting them; false refuses it (413)"
        ),
    },
];

/// A request body as JSON: a body that is not UTF-8 is named so (serde_json's "invalid unicode
/// code point" pointed at a JSON escape the client never wrote), else serde_json's error.
pub(crate) fn json_body(body: &[u8]) -> Result<Value> {
    if let Err(e) = std::str::from_utf8(body) {
        return Err(Error::bad(
            None,
            format!(
                "the body is not UTF-8 (byte {} is not): JSON bodies are UTF-8",
                e.valid_up_to()
            ),
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        // a lone \uD800-\uDFFF escape read as "unexpected end of hex escape" (helper trial D)
        let m = e.to_string();
        let lone = m.contains("surrogate") || m.contains("hex escape");
        let hint = match lone {
            true => {
                " (a \\uD800-\\uDFFF escape is half of a pair, as \\uD83D\\uDE00 for one \
                     character: texts are Unicode, and a lone half is no character)"
            }
            false => "",
        };
        Error::bad(None, format!("the body is not valid JSON: {m}{hint}"))
    })
}

/// Parses a request body; fields outside [`FIELDS`] get what `unknown` says.
pub fn parse(body: &[u8], unknown: UnknownFields) -> Result<EmbeddingRequest> {
    let v = json_body(body)?;
    let Value::Object(obj) = v else {
        return Err(Error::bad(
            None,
            format!("the body must be a JSON object, got {}", kind(&v)),
        ));
    };
    check_fields(&obj, &field_names(&FIELDS), "POST /v1/embeddings", unknown)?;
    let get = |k: &str| obj.get(k).unwrap_or(&Value::Null);
    let inputs = parse_input(get("input"))?;
    let model = string(get("model"), "model")?;
    let output = Output::parse(
        get("encoding_format"),
        get("embedding_types"),
        get("embed_dtype"),
        get("endianness"),
    )?;
    if !matches!(get("user"), Value::Null | Value::String(_)) {
        return Err(Error::bad(Some("user"), "'user' must be a string"));
    }
    Ok(EmbeddingRequest {
        inputs,
        model,
        dimensions: positive(get("dimensions"), "dimensions")?,
        layers: positive(get("layers"), "layers")?,
        output,
        prompt_name: string(get("prompt_name"), "prompt_name")?,
        prompt: string(get("prompt"), "prompt")?,
        truncate: match get("truncate") {
            Value::Null => None,
            Value::Bool(b) => Some(*b),
            other => {
                return Err(Error::bad(
                    Some("truncate"),
                    format!("'truncate' must be true or false, got {}", kind(other)),
                ))
            }
        },
    })
}

#[cfg(test)]
mod tests;
