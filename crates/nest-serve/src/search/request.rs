//! The bodies of `POST /v1/search`, `POST /v1/documents` and `POST /v1/documents/delete`:
//! their field tables (what the OpenAPI document describes) and their parsers.

use nest_index::collection::Existing;
use nest_index::{Filter, Funnel};
use serde_json::Value;

use crate::request::{self, Field, UnknownFields};
use crate::{Error, Result};

/// Every field `POST /v1/search` reads (the OpenAPI document's source).
pub const SEARCH_FIELDS: [Field; 9] = [
    Field { name: "query", doc: "a string or an array of strings" },
    Field { name: "k", doc: "hits per query (default 10)" },
    Field { name: "funnel", doc: "stages such as binary:384@1000>float32:384 (default: exact float32 at the index's full dim)" },
    Field { name: "filter", doc: "payload equality: {\"key\": value} or {\"key\": {\"$in\": [a, b]}}; every key must match" },
    Field { name: "model", doc: "the served model's name (optional)" },
    Field { name: "layers", doc: "must be the index's layer when given" },
    Field { name: "dimensions", doc: "must be the index's full dim when given (the funnel picks dims)" },
    Field { name: "prompt_name", doc: "a prompt the model names (default: its query prompt, else its default)" },
    Field { name: "prompt", doc: "a prompt text prepended to every query" },
];

/// Every field `POST /v1/documents` reads.
pub const DOCUMENT_FIELDS: [Field; 4] = [
    Field {
        name: "documents",
        doc: "an array of {\"id\": string, \"text\": string, \"payload\": object (optional)}",
    },
    Field {
        name: "existing",
        doc: "what to do with an id already in the index: \"keep\" it as it is (default; a retry is safe) or \"replace\" it (an upsert)",
    },
    Field {
        name: "model",
        doc: "the served model's name (optional)",
    },
    Field {
        name: "prompt_name",
        doc: "a prompt the model names (default: the one the index's documents were embedded with)",
    },
];

/// Every field `POST /v1/documents/delete` reads.
pub const DELETE_FIELDS: [Field; 2] = [
    Field {
        name: "ids",
        doc: "the ids of the documents to delete: a string or an array of strings",
    },
    Field {
        name: "model",
        doc: "the served model's name (optional)",
    },
];

/// A parsed `POST /v1/search` body.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub queries: Vec<String>,
    pub k: usize,
    pub funnel: Option<Funnel>,
    pub filter: Option<Filter>,
    pub model: Option<String>,
    pub layers: Option<usize>,
    pub dimensions: Option<usize>,
    pub prompt_name: Option<String>,
    pub prompt: Option<String>,
}

fn object(body: &[u8]) -> Result<serde_json::Map<String, Value>> {
    match request::json_body(body)? {
        Value::Object(o) => Ok(o),
        _ => Err(Error::bad(None, "the body must be a JSON object")),
    }
}

fn strings(v: &Value, param: &'static str) -> Result<Vec<String>> {
    let bad = |m: String| Error::bad(Some(param), m);
    match v {
        Value::String(s) if !s.is_empty() => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                other => Err(bad(format!(
                    "{param}[{i}] must be a non-empty string, got {other}"
                ))),
            })
            .collect(),
        Value::Null => Err(bad(format!("'{param}' is required"))),
        other => Err(bad(format!(
            "'{param}' must be a non-empty string or array of strings, got {other}"
        ))),
    }
}

/// Parses a search body.
pub fn parse_search(body: &[u8], unknown: UnknownFields) -> Result<SearchRequest> {
    let o = object(body)?;
    let names = request::field_names(&SEARCH_FIELDS);
    request::check_fields(&o, &names, "POST /v1/search", unknown)?;
    let get = |k: &str| o.get(k).unwrap_or(&Value::Null);
    let funnel = match get("funnel") {
        Value::Null => None,
        Value::String(s) => {
            Some(Funnel::parse(s).map_err(|e| Error::bad(Some("funnel"), e.to_string()))?)
        }
        other => {
            return Err(Error::bad(
                Some("funnel"),
                format!("'funnel' must be a string, got {other}"),
            ))
        }
    };
    let filter = match get("filter") {
        Value::Null => None,
        f => Some(Filter::parse(f).map_err(|e| Error::bad(Some("filter"), e.to_string()))?),
    };
    Ok(SearchRequest {
        queries: strings(get("query"), "query")?,
        k: request::positive(get("k"), "k")?.unwrap_or(10),
        funnel,
        filter,
        model: request::string(get("model"), "model")?,
        layers: request::positive(get("layers"), "layers")?,
        dimensions: request::positive(get("dimensions"), "dimensions")?,
        prompt_name: request::string(get("prompt_name"), "prompt_name")?,
        prompt: request::string(get("prompt"), "prompt")?,
    })
}

/// A parsed `POST /v1/documents` body.
#[derive(Debug, Clone)]
pub struct DocumentsRequest {
    /// (id, text, payload)
    pub documents: Vec<(String, String, Option<Value>)>,
    /// What to do with an id already present.
    pub existing: Existing,
    pub model: Option<String>,
    pub prompt_name: Option<String>,
}

/// A parsed `POST /v1/documents/delete` body.
#[derive(Debug, Clone)]
pub struct DeleteRequest {
    pub ids: Vec<String>,
    pub model: Option<String>,
}

/// Parses a delete body.
pub fn parse_delete(body: &[u8], unknown: UnknownFields) -> Result<DeleteRequest> {
    let o = object(body)?;
    let names = request::field_names(&DELETE_FIELDS);
    request::check_fields(&o, &names, "POST /v1/documents/delete", unknown)?;
    let get = |k: &str| o.get(k).unwrap_or(&Value::Null);
    Ok(DeleteRequest {
        ids: strings(get("ids"), "ids")?,
        model: request::string(get("model"), "model")?,
    })
}

/// `existing`: "keep" (default) or "replace".
fn existing(v: &Value) -> Result<Existing> {
    match v {
        Value::Null => Ok(Existing::Keep),
        Value::String(s) if s == "keep" => Ok(Existing::Keep),
        Value::String(s) if s == "replace" => Ok(Existing::Replace),
        other => Err(Error::bad(
            Some("existing"),
            format!("'existing' must be \"keep\" or \"replace\", got {other}"),
        )),
    }
}

pub fn parse_documents(body: &[u8], unknown: UnknownFields) -> Result<DocumentsRequest> {
    let o = object(body)?;
    let names = request::field_names(&DOCUMENT_FIELDS);
    request::check_fields(&o, &names, "POST /v1/documents", unknown)?;
    let bad = |m: String| Error::bad(Some("documents"), m);
    let docs = match o.get("documents") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(other) => {
            return Err(bad(format!(
                "'documents' must be a non-empty array, got {other}"
            )))
        }
        None => return Err(bad("'documents' is required".into())),
    };
    let documents = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let Value::Object(item) = d else {
                return Err(bad(format!("documents[{i}] must be an object, got {d}")));
            };
            let what = format!("documents[{i}]");
            request::check_fields(item, &["id", "text", "payload"], &what, unknown)?;
            let field = |k: &str| d.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            let id = field("id")
                .ok_or_else(|| bad(format!("documents[{i}].id must be a non-empty string")))?;
            if let Some(problem) = nest_core::data::id_problem(id) {
                return Err(bad(format!("documents[{i}].id: {problem}")));
            }
            let text = field("text")
                .ok_or_else(|| bad(format!("documents[{i}].text must be a non-empty string")))?;
            if let Some(problem) = nest_core::data::text_problem(text) {
                return Err(bad(format!("documents[{i}].text: {problem}")));
            }
            let payload = match d.get("payload") {
                None | Some(Value::Null) => None,
                Some(p @ Value::Object(_)) => Some(p.clone()),
                Some(other) => {
                    return Err(bad(format!(
                        "documents[{i}].payload must be an object, got {other}"
                    )))
                }
            };
            Ok((id.to_string(), text.to_string(), payload))
        })
        .collect::<Result<Vec<_>>>()?;
    // one id twice with other contents is ambiguous (the first was kept, silently); the same
    // document twice (a client's retry batched with itself) is harmless
    let mut first = std::collections::HashMap::new();
    for (j, doc) in documents.iter().enumerate() {
        match first.get(doc.0.as_str()) {
            Some(&i) if documents[i] != *doc => {
                return Err(bad(format!(
                    "documents[{j}].id {:?} repeats documents[{i}]'s with another text or \
                     payload: one document per id in a request (an id already in the index is \
                     kept as it is, or replaced with \"existing\": \"replace\")",
                    doc.0
                )))
            }
            Some(_) => {}
            None => {
                first.insert(doc.0.as_str(), j);
            }
        }
    }
    Ok(DocumentsRequest {
        documents,
        existing: existing(o.get("existing").unwrap_or(&Value::Null))?,
        model: request::string(o.get("model").unwrap_or(&Value::Null), "model")?,
        prompt_name: request::string(o.get("prompt_name").unwrap_or(&Value::Null), "prompt_name")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One id twice: the same document (a retry batched with itself) is taken once; other
    /// contents under one id are refused, naming both positions (helper trial D).
    #[test]
    fn an_id_twice_is_one_document_or_refused() {
        let same = br#"{"documents": [{"id": "d", "text": "t"}, {"id": "d", "text": "t"}]}"#;
        let r = parse_documents(same, UnknownFields::Reject).unwrap();
        assert_eq!(r.documents.len(), 2);
        let other = br#"{"documents": [{"id": "d", "text": "t"}, {"id": "d", "text": "u"}]}"#;
        let e = parse_documents(other, UnknownFields::Reject).unwrap_err();
        assert!(
            e.to_string()
                .contains("documents[1].id \"d\" repeats documents[0]'s"),
            "{e}"
        );
        // a text of spaces alone has no words to be found by (trial D U2)
        let blank = br#"{"documents": [{"id": "d", "text": " \t "}]}"#;
        let e = parse_documents(blank, UnknownFields::Reject).unwrap_err();
        assert!(
            e.to_string()
                .contains("documents[0].text: text is empty (or only whitespace)"),
            "{e}"
        );
    }
}
