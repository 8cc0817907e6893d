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
    serde_json::from_slice(body)
        .map_err(|e| Error::bad(None, format!("the body is not valid JSON: {e}")))
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The server's default: a field the endpoint does not read is refused.
    fn parse(body: &[u8]) -> Result<EmbeddingRequest> {
        super::parse(body, UnknownFields::Reject)
    }

    #[test]
    fn every_input_form() {
        let r = parse(
            br#"{"input":"hi","model":"m","dimensions":64,"encoding_format":"base64","user":"u"}"#,
        )
        .unwrap();
        assert_eq!(r.inputs, Inputs::Texts(vec!["hi".into()]));
        assert_eq!(
            (r.dimensions, r.output),
            (Some(64), Output::One(Encoding::Base64))
        );
        assert_eq!(parse(br#"{"input":["a","b"]}"#).unwrap().inputs.len(), 2);
        assert_eq!(
            parse(br#"{"input":[101,7,102]}"#).unwrap().inputs,
            Inputs::Tokens(vec![vec![101, 7, 102]])
        );
        assert_eq!(
            parse(br#"{"input":[[1,2],[3]],"layers":3}"#)
                .unwrap()
                .layers,
            Some(3)
        );
    }

    #[test]
    fn bad_bodies_name_the_field() {
        for (body, needle) in [
            (&b"\x7b"[..], "not valid JSON"),
            (
                b"{\"input\":\"caf\xe9\"}",
                "the body is not UTF-8 (byte 13 is not)",
            ),
            (b"[1]", "JSON object"),
            (
                br#"{"input":"a","truncate":1}"#,
                "'truncate' must be true or false",
            ),
            (b"{}", "'input' is required"),
            (br#"{"input":[]}"#, "empty array"),
            (br#"{"input":["a",1]}"#, "input[1]"),
            (br#"{"input":[1,-2]}"#, "input[1]"),
            (br#"{"input":[[1],[]]}"#, "input[1]"),
            (br#"{"input":{"a":1}}"#, "an object"),
            (br#"{"input":"a","dimensions":0}"#, "dimensions"),
            (br#"{"input":"a","dimensions":"64"}"#, "dimensions"),
            (br#"{"input":"a","layers":2.5}"#, "layers"),
            (
                br#"{"input":"a","encoding_format":"int4"}"#,
                "encoding_format",
            ),
            (br#"{"input":"a","model":5}"#, "model"),
            (br#"{"input":"a","user":5}"#, "user"),
        ] {
            let e = parse(body).unwrap_err();
            assert!(matches!(e, Error::BadRequest { .. }), "{body:?}");
            assert!(
                e.to_string().contains(needle),
                "{:?}: {e}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn every_documented_field_is_read() {
        let body = br#"{"input":["a"],"model":"m","dimensions":8,"layers":1,"encoding_format":"base64","user":"u","prompt_name":"query","prompt":"q: "}"#;
        let r = parse(body).unwrap();
        assert_eq!((r.dimensions, r.layers), (Some(8), Some(1)));
        assert_eq!(r.prompt_name.as_deref(), Some("query"));
        assert_eq!(r.prompt.as_deref(), Some("q: "));
        assert_eq!(r.model.as_deref(), Some("m"));
        assert!(matches!(r.output, Output::One(Encoding::Base64)));
        // a wrong type in any documented field but `user` is named in the error
        for f in FIELDS.iter().filter(|f| f.name != "input") {
            let body = format!(r#"{{"input":"a","{}":[1]}}"#, f.name);
            let e = parse(body.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(f.name), "{}: {e}", f.name);
        }
    }

    #[test]
    fn a_field_no_endpoint_reads_is_refused_unless_ignored() {
        let body = br#"{"input":"a","layer":3}"#;
        let e = parse(body).unwrap_err();
        assert!(matches!(e, Error::BadRequest { .. }));
        let m = e.to_string();
        assert!(
            m.starts_with(
                "unrecognized request argument supplied: 'layer' (did you mean 'layers'?)"
            ),
            "{m}"
        );
        assert!(
            m.contains("POST /v1/embeddings reads input, model, dimensions, layers"),
            "{m}"
        );
        let r = super::parse(body, UnknownFields::Ignore).unwrap();
        assert_eq!((r.layers, r.inputs.len()), (None, 1));
        // OpenAI's own fields and the wire forms of vLLM and Cohere are read, not refused
        let wire = r#""encoding_format":"base64","embed_dtype":"float16","endianness":"big""#;
        parse(format!(r#"{{"input":"a","user":"u",{wire}}}"#).as_bytes()).unwrap();
        parse(br#"{"input":"a","embedding_types":["float","int8"]}"#).unwrap();
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&b);
        }

        #[test]
        fn arbitrary_json_never_panics(s in r#"\{("(input|dimensions|layers|model|encoding_format|user)":(\[|\]|[0-9-]{1,3}|"[a-z]{0,3}"|null|true|,|\{\}){1,6},?){0,4}\}"#) {
            let _ = parse(s.as_bytes());
        }
    }
}
