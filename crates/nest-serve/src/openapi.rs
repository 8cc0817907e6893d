//! `GET /openapi.json`: the OpenAPI 3.0 document of the server, built here from the route table
//! [`crate::routes::ROUTES`] (each route's [`Doc`]), the request fields [`crate::request::FIELDS`]
//! and the search tables parse, the response structs of [`crate::response`] (each with its
//! [`Schema`]), the statuses [`crate::Error`] maps to, and the server's limits and keys, so
//! that the document and the handlers cannot drift apart unnoticed (`schemathesis` checks
//! every answer against it: docs/RELIABILITY.md).

use serde_json::{json, Map, Value};

use crate::encoding::{EmbedDtype, Encoding};
use crate::request::{Field, UnknownFields, FIELDS};
use crate::response::ErrorBody;
use crate::routes::{Guard, ROUTES};

/// A named schema of the document's `components`: its name and how to build it for a server
/// taking at most `max_inputs` inputs per request.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    pub name: &'static str,
    pub build: fn(usize) -> Value,
}

/// A route's operation in the document (routes without one, such as the document itself and
/// the metrics text, are left out).
#[derive(Debug, Clone, Copy)]
pub struct Doc {
    pub summary: &'static str,
    /// The JSON body it reads (its error statuses then include the body's: 400, 413, 429,
    /// 500).
    pub request: Option<Schema>,
    /// What its 200 means.
    pub ok: &'static str,
    /// The JSON body of its 200.
    pub response: Schema,
    /// Whether its 200 may also be raw bytes (`application/octet-stream`).
    pub raw: bool,
}

/// `POST /v1/embeddings`'s body, from [`FIELDS`].
pub const EMBEDDING_REQUEST: Schema = Schema {
    name: "EmbeddingRequest",
    build: |max_inputs| body(&FIELDS, "input", |f| field_schema(f, max_inputs)),
};

/// `POST /v1/search`'s body, from [`crate::search::SEARCH_FIELDS`].
pub const SEARCH_REQUEST: Schema = Schema {
    name: "SearchRequest",
    build: |max_inputs| {
        body(&crate::search::SEARCH_FIELDS, "query", |f| {
            search_field_schema(f, max_inputs)
        })
    },
};

/// `POST /v1/documents`'s body, from [`crate::search::DOCUMENT_FIELDS`].
pub const DOCUMENTS_REQUEST: Schema = Schema {
    name: "DocumentsRequest",
    build: |max_inputs| {
        body(&crate::search::DOCUMENT_FIELDS, "documents", |f| {
            search_field_schema(f, max_inputs)
        })
    },
};

/// `POST /v1/documents/delete`'s body, from [`crate::search::DELETE_FIELDS`].
pub const DELETE_REQUEST: Schema = Schema {
    name: "DeleteRequest",
    build: |max_inputs| {
        body(&crate::search::DELETE_FIELDS, "ids", |f| {
            search_field_schema(f, max_inputs)
        })
    },
};

/// An object of `fields`, `required` among them.
fn body(fields: &[Field], required: &str, schema: impl Fn(&Field) -> Value) -> Value {
    let props: Map<String, Value> = fields
        .iter()
        .map(|f| (f.name.to_string(), schema(f)))
        .collect();
    json!({"type": "object", "required": [required], "properties": props})
}

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

/// The fields of `/v1/search` and `/v1/documents` (servers with `--index`).
fn search_field_schema(f: &Field, max_inputs: usize) -> Value {
    match f.name {
        "query" | "ids" => json!({"description": f.doc, "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": {"type": "string", "minLength": 1}},
        ]}),
        "k" | "layers" | "dimensions" => {
            json!({"type": "integer", "minimum": 1, "nullable": true, "description": f.doc})
        }
        "filter" => json!({"type": "object", "nullable": true, "description": f.doc}),
        "existing" => json!({
            "type": "string", "nullable": true, "enum": ["keep", "replace"], "description": f.doc,
        }),
        "documents" => {
            json!({"type": "array", "minItems": 1, "maxItems": max_inputs, "description": f.doc, "items": {
            "type": "object", "required": ["id", "text"], "properties": {
                "id": {"type": "string", "minLength": 1},
                "text": {"type": "string", "minLength": 1},
                "payload": {"type": "object", "nullable": true},
            }}})
        }
        _ => json!({"type": "string", "nullable": true, "description": f.doc}),
    }
}

/// `additionalProperties: false` on every object of `v` that names its properties (a request
/// body and its documents), as the server refuses other fields ([`UnknownFields::Reject`]).
fn close(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.contains_key("properties") {
                o.insert("additionalProperties".into(), Value::Bool(false));
            }
            o.values_mut().for_each(close);
        }
        Value::Array(a) => a.iter_mut().for_each(close),
        _ => {}
    }
}

fn reference(s: &Schema) -> Value {
    json!({"$ref": format!("#/components/schemas/{}", s.name)})
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": reference(&ErrorBody::SCHEMA)}}
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

/// One operation; `keyed`: whether it needs a key on this server.
fn operation(d: &Doc, keyed: bool) -> Value {
    let security = if keyed {
        json!([{"bearer": []}])
    } else {
        json!([])
    };
    let mut content = Map::new();
    content.insert(
        "application/json".into(),
        json!({"schema": reference(&d.response)}),
    );
    if d.raw {
        content.insert(
            "application/octet-stream".into(),
            json!({"schema": {"type": "string", "format": "binary"}}),
        );
    }
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": d.ok, "content": content}),
    );
    for (code, what) in errors(keyed, d.request.is_some()) {
        responses.insert(code.into(), error_response(what));
    }
    let mut op = json!({"summary": d.summary, "security": security, "responses": responses});
    if let Some(r) = &d.request {
        op["requestBody"] =
            json!({"required": true, "content": {"application/json": {"schema": reference(r)}}});
    }
    op
}

/// The document for a server that takes at most `max_inputs` inputs per request; `keyed`:
/// whether it has API keys; `search`: whether it has an index (`/v1/search`, `/v1/documents`);
/// `unknown`: whether its request bodies are closed to fields they do not name.
pub fn document(max_inputs: usize, keyed: bool, search: bool, unknown: UnknownFields) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let mut add = |s: &Schema, request: bool| {
        if !schemas.contains_key(s.name) {
            let mut v = (s.build)(max_inputs);
            if request && unknown == UnknownFields::Reject {
                close(&mut v);
            }
            schemas.insert(s.name.to_string(), v);
        }
    };
    add(&ErrorBody::SCHEMA, false);
    for r in ROUTES.iter().filter(|r| !r.needs_index || search) {
        let Some(d) = &r.doc else { continue };
        d.request.iter().for_each(|s| add(s, true));
        add(&d.response, false);
        let method = if r.post { "post" } else { "get" };
        let op = operation(d, keyed && r.guard != Guard::Open);
        paths.insert(r.path.to_string(), json!({ method: op }));
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Nest embeddings server", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` under `v`.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r.clone());
                }
                o.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_has_every_documented_route_of_the_table_and_nothing_else() {
        for (keyed, search) in [(false, false), (true, false), (true, true)] {
            let doc = document(4, keyed, search, UnknownFields::Reject);
            let paths = doc["paths"].as_object().unwrap();
            for r in &ROUTES {
                let there = r.doc.is_some() && (search || !r.needs_index);
                let method = if r.post { "post" } else { "get" };
                assert_eq!(paths.contains_key(r.path), there, "{}", r.path);
                if there {
                    let op = &paths[r.path][method];
                    let open = r.guard == Guard::Open || !keyed;
                    assert_eq!(op["security"] == json!([]), open, "{}", r.path);
                    assert_eq!(op["responses"]["401"].is_object(), !open, "{}", r.path);
                    let body = r.doc.unwrap().request.is_some();
                    assert_eq!(op["requestBody"].is_object(), body, "{}", r.path);
                    assert_eq!(op["responses"]["400"].is_object(), body, "{}", r.path);
                }
            }
            assert_eq!(paths.len(), if search { 8 } else { 5 });
            let mut all = Vec::new();
            refs(&doc, &mut all);
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            for r in &all {
                let name = r.strip_prefix("#/components/schemas/").unwrap();
                assert!(schemas.contains_key(name), "{r}");
            }
            assert_eq!(schemas.contains_key("SearchRequest"), search);
        }
    }

    #[test]
    fn the_limits_reach_the_request_schemas() {
        let doc = document(7, false, true, UnknownFields::Reject);
        let s = &doc["components"]["schemas"];
        assert_eq!(
            s["EmbeddingRequest"]["properties"]["input"]["oneOf"][1]["maxItems"],
            7
        );
        assert_eq!(
            s["SearchRequest"]["properties"]["query"]["oneOf"][1]["maxItems"],
            7
        );
        assert_eq!(
            s["DocumentsRequest"]["properties"]["documents"]["maxItems"],
            7
        );
        assert_eq!(s["DocumentsRequest"]["required"], json!(["documents"]));
    }

    #[test]
    fn request_bodies_are_closed_unless_the_server_ignores_unknown_fields() {
        let closed = |u| {
            let doc = document(7, false, true, u);
            let s = &doc["components"]["schemas"];
            [
                &s["EmbeddingRequest"],
                &s["SearchRequest"],
                &s["DocumentsRequest"],
                &s["DocumentsRequest"]["properties"]["documents"]["items"],
            ]
            .map(|o| o["additionalProperties"] == false)
        };
        assert_eq!(closed(UnknownFields::Reject), [true; 4]);
        assert_eq!(closed(UnknownFields::Ignore), [false; 4]);
        // a filter and a payload are open objects either way
        let doc = document(7, false, true, UnknownFields::Reject);
        let s = &doc["components"]["schemas"];
        assert!(s["SearchRequest"]["properties"]["filter"]["additionalProperties"].is_null());
    }
}
