//! HTTP routes: `POST /v1/embeddings` (and `/embeddings`), `GET /health`, `GET /v1/models`,
//! `GET /metrics`, `GET /openapi.json`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::encoding::{self, EmbedDtype, Endianness, Output};
use crate::engine::Engine;
pub(crate) use crate::inputs::run_inputs;
use crate::metrics::METRICS;
use crate::request;
use crate::{Error, Result};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Never needs a key.
    Open,
    /// Open with `--open-metrics`, else like [`Guard::Key`].
    Metrics,
    /// Needs a key when the server has keys.
    Key,
}

/// What answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    OpenApi,
    Embeddings,
    Health,
    Models,
    Metrics,
    Search,
    Documents,
}

/// One route: its path, method, guard, whether it needs `--index`, and its handler.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub path: &'static str,
    pub post: bool,
    pub guard: Guard,
    pub needs_index: bool,
    pub handler: Handler,
}

const fn route(path: &'static str, post: bool, guard: Guard, handler: Handler) -> Route {
    let needs_index = matches!(handler, Handler::Search | Handler::Documents);
    Route {
        path,
        post,
        guard,
        needs_index,
        handler,
    }
}

/// Every route: the one table that routing ([`router`]), the key check (`auth`) and the OpenAPI
/// document (`openapi`) read.
pub const ROUTES: [Route; 9] = [
    route("/openapi.json", false, Guard::Open, Handler::OpenApi),
    route("/v1/embeddings", true, Guard::Key, Handler::Embeddings),
    route("/embeddings", true, Guard::Key, Handler::Embeddings),
    route("/health", false, Guard::Open, Handler::Health),
    route("/v1/models", false, Guard::Key, Handler::Models),
    route("/models", false, Guard::Key, Handler::Models),
    route("/metrics", false, Guard::Metrics, Handler::Metrics),
    route("/v1/search", true, Guard::Key, Handler::Search),
    route("/v1/documents", true, Guard::Key, Handler::Documents),
];

/// Per-request limits (`413` beyond them, `408` past the timeout) and who may call from a
/// browser.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_inputs: usize,
    pub max_tokens: usize,
    pub max_body_bytes: usize,
    /// The longest a request may take, reading its body included (a slow client is cut off).
    pub request_timeout: std::time::Duration,
    /// Origins allowed cross-origin (CORS); empty = no CORS headers, `*` = any origin.
    pub cors_origins: Vec<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_inputs: 32,
            max_tokens: 16384,
            max_body_bytes: 2 * 1024 * 1024,
            request_timeout: std::time::Duration::from_secs(60),
            cors_origins: Vec::new(),
        }
    }
}

/// The CORS layer of `origins` (`*` = any); `None` when there are none.
fn cors(origins: &[String]) -> Result<Option<tower_http::cors::CorsLayer>> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return Ok(None);
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| {
                axum::http::HeaderValue::from_str(o).map_err(|_| {
                    Error::Config(format!("--cors-allow-origin {o:?}: not a valid origin"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        AllowOrigin::list(values)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
    ))
}

/// 408 when the request (body read included) outlasts the limit.
async fn deadline(
    State(limit): State<std::time::Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => Error::Timeout(limit.as_secs()).into_response(),
    }
}

#[derive(Debug, Clone)]
pub struct AppState {
    /// Every served model; a request's `model` picks one, the first when it names none.
    pub engines: Arc<Vec<Arc<Engine>>>,
    pub limits: Limits,
    pub access: Arc<crate::auth::Access>,
    /// The index of `/v1/search` and `/v1/documents` (`--index`), when there is one.
    pub search: Option<Arc<crate::search::Searcher>>,
}

impl AppState {
    /// The engine a request names (`model`: a served name), the first when it names none.
    pub fn engine(&self, name: Option<&str>) -> Result<&Arc<Engine>> {
        let first = &self.engines[0];
        match name {
            None | Some("") => Ok(first),
            Some(n) => self
                .engines
                .iter()
                .find(|e| e.config.served_name == n)
                .ok_or_else(|| {
                    let names: Vec<&str> = self
                        .engines
                        .iter()
                        .map(|e| e.config.served_name.as_str())
                        .collect();
                    Error::bad(
                        Some("model"),
                        format!("model '{n}' is not served here; this server serves {names:?}"),
                    )
                }),
        }
    }
}

/// The router, with the body limit applied (axum's own limit answers 413 before parsing), the
/// API-key check (401 before the body is read), the request deadline and, outermost, CORS
/// when asked for (so that preflights and errors carry its headers).
pub fn router(state: AppState) -> Result<Router> {
    let limit = state.limits.max_body_bytes;
    let timeout = state.limits.request_timeout;
    let cors = cors(&state.limits.cors_origins)?;
    let access = Arc::clone(&state.access);
    let doc = Arc::new(crate::openapi::document(
        state.limits.max_inputs,
        !state.access.is_open(),
        state.search.is_some(),
    ));
    let mut app = Router::new();
    for r in ROUTES
        .iter()
        .filter(|r| !r.needs_index || state.search.is_some())
    {
        let method = match r.handler {
            Handler::OpenApi => {
                let doc = Arc::clone(&doc);
                get(move || {
                    let doc = Arc::clone(&doc);
                    async move { Json((*doc).clone()) }
                })
            }
            Handler::Embeddings => post(embeddings),
            Handler::Health => get(health),
            Handler::Models => get(models),
            Handler::Metrics => get(metrics),
            Handler::Search => post(crate::search::search),
            Handler::Documents => post(crate::search::documents),
        };
        debug_assert_eq!(
            r.post,
            matches!(
                r.handler,
                Handler::Embeddings | Handler::Search | Handler::Documents
            )
        );
        app = app.route(r.path, method);
    }
    let app = app
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            access,
            crate::auth::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(timeout, deadline))
        .with_state(state);
    Ok(match cors {
        Some(c) => app.layer(c),
        None => app,
    })
}

/// 404 in OpenAI's error shape, naming the routes there are.
async fn no_route(uri: axum::http::Uri) -> Response {
    let paths: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
    Error::NoRoute {
        message: format!(
            "no route {}; the routes are {}",
            uri.path(),
            paths.join(", ")
        ),
        method: false,
    }
    .into_response()
}

/// 405 in OpenAI's error shape, naming the method the route takes.
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let want = ROUTES
        .iter()
        .find(|r| r.path == uri.path())
        .map_or("another method", |r| if r.post { "POST" } else { "GET" });
    Error::NoRoute {
        message: format!("{} takes {want}, not {method}", uri.path()),
        method: true,
    }
    .into_response()
}

async fn health(State(s): State<AppState>) -> Response {
    match s.engines.iter().try_for_each(|e| e.info().map(|_| ())) {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ok"}))).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn models(State(s): State<AppState>) -> Result<Json<serde_json::Value>> {
    let data = s
        .engines
        .iter()
        .map(|e| model_entry(e))
        .collect::<Result<Vec<_>>>()?;
    Ok(Json(json!({"object": "list", "data": data})))
}

/// One `/v1/models` entry: the served name, its trained dims and layers, its arithmetic and
/// the encodings it returns.
fn model_entry(e: &Engine) -> Result<Value> {
    let info = e.info()?;
    Ok(json!({
        "id": e.config.served_name,
        "object": "model",
        "created": 0,
        "owned_by": "nest",
        "dimensions": info.offer.dims(),
        "layers": info.offer.layers(),
        "max_dimensions": info.offer.width(),
        "max_layers": info.offer.num_layers(),
        "allow_any_point": e.config.allow_any_point,
        "adaptor": e.config.adaptor.as_ref().map(|p| p.display().to_string()),
        "dtype": info.dtype.dtype.name(),
        "dtype_reason": info.dtype.reason,
        "encodings": encoding::Encoding::names(),
    }))
}

async fn metrics(State(s): State<AppState>) -> Response {
    let depth: usize = s.engines.iter().map(|e| e.queue.depth()).sum();
    METRICS.queue_depth.set(depth as i64);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        METRICS.render(),
    )
        .into_response()
}

async fn embeddings(
    State(s): State<AppState>,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let t0 = Instant::now();
    let resp = answer(body_bytes(&s, body), |b| async move { embed(&s, &b).await }).await;
    METRICS.latency.observe(t0.elapsed().as_secs_f64());
    resp
}

/// The body, or the error a rejected one gets (413 past the byte limit, else 400).
pub(crate) fn body_bytes(
    s: &AppState,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Bytes> {
    body.map_err(|rej| match rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
        true => Error::too_large(
            None,
            format!(
                "the body is over the {}-byte limit",
                s.limits.max_body_bytes
            ),
        ),
        false => Error::bad(None, rej.body_text()),
    })
}

/// Runs a handler on a read body; its error becomes the response (and is counted).
pub(crate) async fn answer<F, Fut>(body: Result<Bytes>, f: F) -> Response
where
    F: FnOnce(Bytes) -> Fut,
    Fut: std::future::Future<Output = Result<Response>>,
{
    let result = match body {
        Ok(b) => f(b).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(r) => {
            METRICS.errors(200);
            r
        }
        Err(e) => e.into_response(),
    }
}

/// 413 when a request carries more inputs than `--max-client-batch-size`.
pub(crate) fn check_count(s: &AppState, n: usize, param: &'static str) -> Result<()> {
    if n > s.limits.max_inputs {
        return Err(Error::too_large(
            Some(param),
            format!(
                "{n} inputs in one request; the limit is {} (--max-client-batch-size)",
                s.limits.max_inputs
            ),
        ));
    }
    Ok(())
}

async fn embed(s: &AppState, body: &[u8]) -> Result<Response> {
    let req = request::parse(body)?;
    let engine = s.engine(req.model.as_deref())?;
    let info = engine.info()?;
    check_count(s, req.inputs.len(), "input")?;
    let point = info.point(req.dimensions, req.layers, engine.config.allow_any_point)?;
    let (prompt, skip) = info.prompt(req.prompt_name.as_deref(), req.prompt.as_deref())?;
    let (vectors, tokens) = run_inputs(
        s,
        engine,
        req.inputs,
        (point.layer, point.dim),
        prompt,
        skip,
    )
    .await?;
    let name = &engine.config.served_name;
    Ok(match req.output {
        Output::Raw {
            dtype,
            order,
            header,
        } => raw_response(&vectors, (dtype, order, header), name, tokens),
        output => Json(json_response(&vectors, &output, name, tokens)).into_response(),
    })
}

/// OpenAI's body (`embedding`: one form) or, for several forms, each item's `embeddings`
/// keyed by name (Cohere's `embedding_types`); `scale` beside int8 and uint8 codes.
fn json_response(vectors: &[Vec<f32>], output: &Output, model: &str, tokens: usize) -> Value {
    let encodings = output.encodings();
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let mut item = json!({"object": "embedding", "index": index});
            if let Output::Packed(dtype, order) = output {
                let (b64, scale) = encoding::packed(v, *dtype, *order);
                item["embedding"] = json!(b64);
                if let Some(s) = scale {
                    item["scale"] = json!(s);
                }
                return item;
            }
            let e = encoding::encode(v, &encodings);
            match output {
                Output::One(_) => item["embedding"] = e.values[0].1.clone(),
                _ => {
                    let map: serde_json::Map<String, Value> = e
                        .values
                        .into_iter()
                        .map(|(k, v)| (k.name().to_string(), v))
                        .collect();
                    item["embeddings"] = Value::Object(map);
                }
            }
            if let Some(scale) = e.scale {
                item["scale"] = json!(scale);
            }
            item
        })
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })
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
        let meta = json!({
            "object": "list", "model": model, "data": items,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        });
        if let Ok(v) = axum::http::HeaderValue::from_str(&meta.to_string()) {
            h.insert("metadata", v);
        }
    }
    r
}
