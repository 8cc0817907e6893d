//! `POST /v1/embeddings` (and `/embeddings`): a parsed request run through the served model at
//! its point, answered as JSON in OpenAI's shape ([`EmbeddingList`]) or as raw packed rows.

use std::time::Instant;

use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::encoding::{self, EmbedDtype, Endianness, Output};
use crate::metrics::METRICS;
use crate::request;
use crate::response::{ByName, Embedding, EmbeddingList, RawMeta, Wire};
use crate::routes::{answer, check_count, read_body, run_inputs, AppState};
use crate::Result;

/// The handler: the answer, or the error's; its latency observed.
pub(crate) async fn embeddings(s: AppState, req: Request) -> Response {
    let t0 = Instant::now();
    let body = read_body(&s, req).await;
    let resp = answer(body, |b| async move { embed(&s, &b).await }).await;
    METRICS.latency.observe(t0.elapsed().as_secs_f64());
    resp
}

async fn embed(s: &AppState, body: &[u8]) -> Result<Response> {
    let req = request::parse(body, s.limits.unknown_fields)?;
    let engine = s.engine(req.model.as_deref())?;
    let info = engine.info()?;
    check_count(s, req.inputs.len(), "input")?;
    let point = info.point(req.dimensions, req.layers, engine.config.allow_any_point)?;
    let (prompt, skip) = info.prompt(req.prompt_name.as_deref(), req.prompt.as_deref())?;
    let at = (point.layer, point.dim);
    let truncate = req.truncate.unwrap_or(true);
    let done = run_inputs(s, engine, req.inputs, at, prompt, (skip, truncate)).await?;
    let (vectors, tokens) = (&done.vectors, done.tokens);
    let name = &engine.config.served_name;
    let mut resp = match req.output {
        Output::Raw {
            dtype,
            order,
            header,
        } => raw_response(vectors, (dtype, order, header), name, tokens),
        output => Json(json_response(vectors, &output, name, tokens)).into_response(),
    };
    if done.cut > 0 {
        // the body stays OpenAI's; the count of inputs cut at the max length goes beside it
        resp.headers_mut()
            .insert(TRUNCATED_HEADER, header::HeaderValue::from(done.cut));
    }
    Ok(resp)
}

/// The response header counting the inputs cut at the model's max length (absent: none was).
pub const TRUNCATED_HEADER: &str = "x-truncated-inputs";

/// OpenAI's body (`embedding`: one form) or, for several forms, each item's `embeddings`
/// keyed by name (Cohere's `embedding_types`); `scale` beside int8 and uint8 codes.
fn json_response<'a>(
    vectors: &[Vec<f32>],
    output: &Output,
    model: &'a str,
    tokens: usize,
) -> EmbeddingList<'a> {
    let encodings = output.encodings();
    let data = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let mut item = Embedding::new(index);
            if let Output::Packed(dtype, order) = output {
                let (b64, scale) = encoding::packed(v, *dtype, *order);
                item.embedding = Some(Wire::Text(b64));
                item.scale = scale.map(f64::from);
                return item;
            }
            let mut e = encoding::encode(v, &encodings);
            match output {
                Output::One(_) => item.embedding = Some(e.values.swap_remove(0).1),
                _ => item.embeddings = Some(ByName(e.values)),
            }
            item.scale = e.scale.map(f64::from);
            item
        })
        .collect();
    EmbeddingList::new(data, model, tokens)
}

/// A raw body of packed rows; with `header`, vLLM's `metadata` header (JSON: `model`,
/// `data` of `index`, `embed_dtype`, `endianness`, `start`, `end`, `shape` and Nest's `scale`,
/// `usage`).
fn raw_response(
    vectors: &[Vec<f32>],
    (dtype, order, header): (EmbedDtype, Endianness, bool),
    model: &str,
    tokens: usize,
) -> Response {
    let (body, items) = encoding::raw(vectors, dtype, order);
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/octet-stream"),
    );
    if header {
        let meta = serde_json::to_string(&RawMeta::new(items, model, tokens)).ok();
        if let Some(v) = meta.and_then(|m| axum::http::HeaderValue::from_str(&m).ok()) {
            h.insert("metadata", v);
        }
    }
    r
}
