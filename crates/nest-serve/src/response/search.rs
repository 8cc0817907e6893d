//! The answers of the search routes (`/v1/search`, `/v1/documents`, `/v1/documents/delete`),
//! each with its OpenAPI schema.

use serde::Serialize;
use serde_json::{json, Value};

use crate::openapi::Schema;

/// One hit of a search: the document's id, its score (widened to `f64`) and its payload when
/// it has one.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub id: String,
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// The hits of one query.
#[derive(Debug, Clone, Serialize)]
pub struct QueryHits {
    /// Always `"search_result"`.
    pub object: &'static str,
    pub index: usize,
    pub query: String,
    pub hits: Vec<Hit>,
}

/// `POST /v1/search`'s answer: the funnel run and each query's hits.
#[derive(Debug, Clone, Serialize)]
pub struct SearchList {
    /// Always `"list"`.
    pub object: &'static str,
    pub funnel: String,
    pub data: Vec<QueryHits>,
}

impl SearchList {
    pub const SCHEMA: Schema = Schema {
        name: "SearchResponse",
        build: |_| {
            let hit = json!({"type": "object", "required": ["id", "score"], "properties": {
                "id": {"type": "string"}, "score": {"type": "number"}, "payload": {"type": "object"},
            }});
            json!({"type": "object", "required": ["object", "funnel", "data"], "properties": {
                "object": {"type": "string", "enum": ["list"]},
                "funnel": {"type": "string"},
                "data": {"type": "array", "items": {"type": "object", "required": ["index", "hits"], "properties": {
                    "object": {"type": "string"}, "index": {"type": "integer"}, "query": {"type": "string"},
                    "hits": {"type": "array", "items": hit},
                }}},
            }})
        },
    };
}

/// `POST /v1/documents`'s answer: the ids added, those replaced (`"existing": "replace"`),
/// those already there and kept, and the index's size.
#[derive(Debug, Clone, Serialize)]
pub struct Added {
    /// Always `"documents"`.
    pub object: &'static str,
    pub added: Vec<String>,
    pub replaced: Vec<String>,
    pub existing: Vec<String>,
    pub count: usize,
}

impl Added {
    pub const SCHEMA: Schema = Schema {
        name: "DocumentsResponse",
        build: |_| {
            json!({"type": "object", "required": ["added", "replaced", "existing", "count"], "properties": {
                "object": {"type": "string"},
                "added": {"type": "array", "items": {"type": "string"}},
                "replaced": {"type": "array", "items": {"type": "string"}},
                "existing": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer", "minimum": 0},
            }})
        },
    };
}

/// `POST /v1/documents/delete`'s answer: the ids deleted, those not present, and the index's
/// size.
#[derive(Debug, Clone, Serialize)]
pub struct Deleted {
    /// Always `"documents"`.
    pub object: &'static str,
    pub deleted: Vec<String>,
    pub missing: Vec<String>,
    pub count: usize,
}

impl Deleted {
    pub const SCHEMA: Schema = Schema {
        name: "DeleteResponse",
        build: |_| {
            json!({"type": "object", "required": ["deleted", "missing", "count"], "properties": {
                "object": {"type": "string"},
                "deleted": {"type": "array", "items": {"type": "string"}},
                "missing": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer", "minimum": 0},
            }})
        },
    };
}
