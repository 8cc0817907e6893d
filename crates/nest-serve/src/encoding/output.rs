//! What a request asks the vectors to be sent as: `encoding_format`, `embedding_types`,
//! `embed_dtype` and `endianness`, read into one [`Output`].

use serde_json::Value;

use super::{EmbedDtype, Encoding, Endianness};
use crate::{Error, Result};

/// What a request asked for: one JSON form in OpenAI's shape (`encoding_format`), several in
/// Cohere's (`embedding_types`), base64 of packed rows (`encoding_format: "base64"` with
/// `embed_dtype`), or a raw body (`bytes`: its layout in a `metadata` header, as vLLM;
/// `bytes_only`: no header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    One(Encoding),
    Several(Vec<Encoding>),
    Packed(EmbedDtype, Endianness),
    Raw {
        dtype: EmbedDtype,
        order: Endianness,
        header: bool,
    },
}

fn named<T>(
    v: &Value,
    param: &'static str,
    parse: fn(&str) -> Option<T>,
    names: &str,
) -> Result<Option<T>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => parse(s).map(Some).ok_or_else(|| {
            Error::bad(
                Some(param),
                format!("'{param}' must be one of {names}, got {s:?}"),
            )
        }),
        other => Err(Error::bad(
            Some(param),
            format!("'{param}' must be one of {names}, got {other}"),
        )),
    }
}

impl Output {
    /// Reads `encoding_format`, `embedding_types`, `embed_dtype` and `endianness` (JSON
    /// values, `Null` when absent).
    pub fn parse(format: &Value, types: &Value, dtype: &Value, order: &Value) -> Result<Self> {
        let mut formats = Encoding::names();
        formats.extend(["bytes", "bytes_only"]);
        let formats = formats.join(", ");
        let bad = |p: &'static str, m: String| Error::bad(Some(p), m);
        // `embedding_types` decides; the official clients send `encoding_format` float or
        // base64 on their own, which is then left aside
        let format = match (types.is_null(), format.as_str()) {
            (false, Some("float" | "base64")) => &Value::Null,
            _ => format,
        };
        if !types.is_null() && !format.is_null() {
            return Err(bad(
                "embedding_types",
                "give 'encoding_format' (one type) or 'embedding_types' (several), not both".into(),
            ));
        }
        let packed = matches!(format.as_str(), Some("base64" | "bytes" | "bytes_only"));
        for (v, p) in [(dtype, "embed_dtype"), (order, "endianness")] {
            if !v.is_null() && !packed {
                return Err(bad(
                    p,
                    format!("'{p}' goes with \"encoding_format\" base64, bytes or bytes_only"),
                ));
            }
        }
        let (dt, order) = packing(dtype, order)?;
        match (format, types) {
            (Value::Null, Value::Null) => Ok(Output::One(Encoding::Float)),
            (Value::String(s), _) if s == "bytes" || s == "bytes_only" => {
                if s == "bytes_only" && dt.has_scale() {
                    return Err(bad("embed_dtype", format!("'embed_dtype' {} with bytes_only: no header for the rows' scales; use \"bytes\"", dt.name())));
                }
                Ok(Output::Raw {
                    dtype: dt,
                    order,
                    header: s == "bytes",
                })
            }
            (Value::String(s), _)
                if s == "base64" && (dt, order) != (EmbedDtype::Float32, Endianness::Little) =>
            {
                Ok(Output::Packed(dt, order))
            }
            (Value::String(s), _) => Encoding::parse(s).map(Output::One).ok_or_else(|| {
                bad(
                    "encoding_format",
                    format!("'encoding_format' must be one of {formats}, got {s:?}"),
                )
            }),
            (Value::Null, Value::Array(items)) if !items.is_empty() => several(items),
            (Value::Null, other) => Err(bad(
                "embedding_types",
                format!(
                    "'embedding_types' must be a non-empty array of {}, got {other}",
                    Encoding::names().join(", ")
                ),
            )),
            (other, _) => Err(bad(
                "encoding_format",
                format!("'encoding_format' must be one of {formats}, got {other}"),
            )),
        }
    }

    /// The JSON encodings to compute (none for packed or raw rows).
    pub fn encodings(&self) -> Vec<Encoding> {
        match self {
            Output::One(e) => vec![*e],
            Output::Several(v) => v.clone(),
            Output::Packed(..) | Output::Raw { .. } => Vec::new(),
        }
    }
}

/// Cohere's `embedding_types`: each name once, in the order asked.
fn several(items: &[Value]) -> Result<Output> {
    let mut v = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let e = x.as_str().and_then(Encoding::parse).ok_or_else(|| {
            Error::bad(
                Some("embedding_types"),
                format!(
                    "embedding_types[{i}] must be one of {}, got {x}",
                    Encoding::names().join(", ")
                ),
            )
        })?;
        if !v.contains(&e) {
            v.push(e);
        }
    }
    Ok(Output::Several(v))
}

/// `embed_dtype` and `endianness` (float32, little-endian when absent).
fn packing(dtype: &Value, order: &Value) -> Result<(EmbedDtype, Endianness)> {
    let names = EmbedDtype::names().join(", ");
    let dt = named(dtype, "embed_dtype", EmbedDtype::parse, &names)?;
    let order = named(
        order,
        "endianness",
        Endianness::parse,
        "native, little, big",
    )?;
    Ok((
        dt.unwrap_or(EmbedDtype::Float32),
        order.unwrap_or(Endianness::Little),
    ))
}
