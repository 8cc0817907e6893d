//! `GET /openapi.json`: the OpenAPI 3.0 document of the server, built here from the request
//! fields [`crate::request::FIELDS`] parses, the statuses [`crate::Error`] maps to, and the
//! server's limits and keys, so that the document and the handlers cannot drift apart
//! unnoticed (`schemathesis` checks every answer against it: docs/RELIABILITY.md).

use serde_json::{json, Value};

use crate::encoding::{EmbedDtype, Encoding};
use crate::request::{Field, FIELDS};
use crate::routes::{Handler, ROUTES};

fn field_schema(f: &Field, max_inputs: usize) -> Value {
    match f.name {
        "input" => json!({
            "description": f.doc,
            "oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": {"type": "string", "minLength": 1}},
                {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}},
            ]
        }),
        "dimensions" | "layers" => {
            json!({"type": "integer", "minimum": 1, "nullable": true, "description": f.doc})
        }
        "encoding_format" => {
            let mut names = Encoding::names();
            names.extend(["bytes", "bytes_only"]);
            json!({"type": "string", "enum": names, "nullable": true, "description": f.doc})
        }
        "embedding_types" => json!({
            "type": "array", "minItems": 1, "nullable": true, "description": f.doc,
            "items": {"type": "string", "enum": Encoding::names()},
        }),
        "embed_dtype" => json!({
            "type": "string", "nullable": true, "description": f.doc, "enum": EmbedDtype::names(),
        }),
        "endianness" => json!({
            "type": "string", "nullable": true, "description": f.doc, "enum": ["native", "little", "big"],
        }),
        _ => json!({"type": "string", "nullable": true, "description": f.doc}),
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

/// The statuses a route answers with besides its success, with what they mean.
fn errors(keyed: bool, with_body: bool) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("408", "the request took longer than --request-timeout"),
        ("503", "the model is loading or failed to load"),
    ];
    if with_body {
        v.push(("400", "bad input: malformed JSON, wrong types, untrained points, unknown model, token ids outside the vocabulary"));
        v.push(("413", "more inputs, tokens or bytes than the limits"));
        v.push(("429", "the queue is full; retry later"));
        v.push(("500", "a failed forward pass"));
    }
    if keyed {
        v.push(("401", "no API key, or not one of the server's"));
    }
    v
}

fn responses(ok: Value, keyed: bool, with_body: bool) -> Value {
    let mut r = serde_json::Map::new();
    r.insert("200".into(), ok);
    for (code, what) in errors(keyed, with_body) {
        r.insert(code.into(), error_response(what));
    }
    Value::Object(r)
}

/// The document for a server that takes at most `max_inputs` inputs per request; `keyed`:
/// whether it has API keys.
pub fn document(max_inputs: usize, keyed: bool, search: bool) -> Value {
    let security = if keyed {
        json!([{"bearer": []}])
    } else {
        json!([])
    };
    let embed = json!({
        "summary": "Embeddings (OpenAI's API, with Nest's `layers` and prompts)",
        "security": security,
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingRequest"}}}},
        "responses": responses(json!({"description": "the vectors: JSON, or with encoding_format bytes / bytes_only the packed rows (bytes: their layout in the `metadata` header)", "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingResponse"}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        }}), keyed, true),
    });
    let models = json!({
        "summary": "The served model, its trained dims and layers, and its arithmetic",
        "security": security,
        "responses": responses(json!({"description": "the model", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Models"}}}}), keyed, false),
    });
    let health = json!({
        "summary": "200 once the model is loaded (never needs a key)",
        "security": [],
        "responses": {
            "200": {"description": "ready", "content": {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": ["ok"]}}}}}},
            "408": error_response("the request took longer than --request-timeout"),
            "503": error_response("the model is loading or failed to load"),
        }
    });
    let (find, add) = search_ops(&security, max_inputs, keyed);
    // every route of the table the server has, but the document itself and the metrics text
    let mut paths = serde_json::Map::new();
    for r in ROUTES.iter().filter(|r| !r.needs_index || search) {
        let op = match r.handler {
            Handler::Embeddings => &embed,
            Handler::Models => &models,
            Handler::Health => &health,
            Handler::Search => &find,
            Handler::Documents => &add,
            Handler::OpenApi | Handler::Metrics => continue,
        };
        let method = if r.post { "post" } else { "get" };
        paths.insert(r.path.to_string(), json!({ method: op }));
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Nest embeddings server", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(max_inputs),
        }
    })
}

/// The operations of `/v1/search` and `/v1/documents` (servers with `--index`), from the
/// fields they read.
fn search_ops(security: &Value, max_inputs: usize, keyed: bool) -> (Value, Value) {
    use crate::search::{DOCUMENT_FIELDS, SEARCH_FIELDS};
    let schema = |f: &Field| match f.name {
        "query" => json!({"description": f.doc, "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": {"type": "string", "minLength": 1}},
        ]}),
        "k" | "layers" | "dimensions" => {
            json!({"type": "integer", "minimum": 1, "nullable": true, "description": f.doc})
        }
        "filter" => json!({"type": "object", "nullable": true, "description": f.doc}),
        "documents" => {
            json!({"type": "array", "minItems": 1, "maxItems": max_inputs, "description": f.doc, "items": {
            "type": "object", "required": ["id", "text"], "properties": {
                "id": {"type": "string", "minLength": 1},
                "text": {"type": "string", "minLength": 1},
                "payload": {"type": "object", "nullable": true},
            }}})
        }
        _ => json!({"type": "string", "nullable": true, "description": f.doc}),
    };
    let body = |fields: &[Field], required: &str| {
        let props: serde_json::Map<String, Value> = fields
            .iter()
            .map(|f| (f.name.to_string(), schema(f)))
            .collect();
        json!({"type": "object", "required": [required], "properties": props})
    };
    let hit = json!({"type": "object", "required": ["id", "score"], "properties": {
        "id": {"type": "string"}, "score": {"type": "number"}, "payload": {"type": "object"},
    }});
    let found = json!({"type": "object", "required": ["object", "funnel", "data"], "properties": {
        "object": {"type": "string", "enum": ["list"]},
        "funnel": {"type": "string"},
        "data": {"type": "array", "items": {"type": "object", "required": ["index", "hits"], "properties": {
            "object": {"type": "string"}, "index": {"type": "integer"}, "query": {"type": "string"},
            "hits": {"type": "array", "items": hit},
        }}},
    }});
    let added = json!({"type": "object", "required": ["added", "existing", "count"], "properties": {
        "object": {"type": "string"},
        "added": {"type": "array", "items": {"type": "string"}},
        "existing": {"type": "array", "items": {"type": "string"}},
        "count": {"type": "integer", "minimum": 0},
    }});
    let op = |summary: &str, req: Value, ok: Value| {
        json!({
            "summary": summary,
            "security": security,
            "requestBody": {"required": true, "content": {"application/json": {"schema": req}}},
            "responses": responses(json!({"description": "ok", "content": {"application/json": {"schema": ok}}}), keyed, true),
        })
    };
    (
        op(
            "Search the index (--index): queries embedded at its point, a funnel, payload filters",
            body(&SEARCH_FIELDS, "query"),
            found,
        ),
        op(
            "Add documents to the index durably (acknowledged once fsynced); ids already present are skipped",
            body(&DOCUMENT_FIELDS, "documents"),
            added,
        ),
    )
}

/// The request, response, model list and error bodies.
fn schemas(max_inputs: usize) -> Value {
    let props: serde_json::Map<String, Value> = FIELDS
        .iter()
        .map(|f| (f.name.to_string(), field_schema(f, max_inputs)))
        .collect();
    let vector = json!({"oneOf": [
        {"type": "array", "items": {"type": "number"}, "description": "float, or int8 / uint8 codes, or binary / ubinary packed bytes"},
        {"type": "string", "description": "base64 of the packed row (embed_dtype; little-endian float32 by default)"},
    ]});
    json!({
        "EmbeddingRequest": {"type": "object", "required": ["input"], "properties": props},
        "EmbeddingResponse": {
            "type": "object",
            "required": ["object", "data", "model", "usage"],
            "properties": {
                "object": {"type": "string", "enum": ["list"]},
                "data": {"type": "array", "items": {
                    "type": "object",
                    "required": ["object", "index"],
                    "properties": {
                        "object": {"type": "string", "enum": ["embedding"]},
                        "index": {"type": "integer", "minimum": 0},
                        "embedding": vector,
                        "embeddings": {"type": "object", "description": "with embedding_types: one vector per type name", "additionalProperties": vector},
                        "scale": {"type": "number", "description": "int8 / uint8: the codes' scale (x ~ code * scale; uint8: (code - 128) * scale)"},
                    }
                }},
                "model": {"type": "string"},
                "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"], "properties": {
                    "prompt_tokens": {"type": "integer", "minimum": 0},
                    "total_tokens": {"type": "integer", "minimum": 0},
                }},
            }
        },
        "Models": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"type": "string", "enum": ["list"]},
                "data": {"type": "array", "items": {"type": "object", "required": ["id", "object"], "properties": {
                    "id": {"type": "string"},
                    "object": {"type": "string", "enum": ["model"]},
                    "dimensions": {"type": "array", "items": {"type": "integer"}},
                    "layers": {"type": "array", "items": {"type": "integer"}},
                    "dtype": {"type": "string"},
                    "encodings": {"type": "array", "items": {"type": "string"}},
                }}},
            }
        },
        "Error": {
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
        },
    })
}
