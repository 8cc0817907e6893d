//! HTTP routes: the one route table [`ROUTES`] (path, method, guard, whether it needs
//! `--index`, handler and OpenAPI operation) that routing ([`router`]), the API-key check
//! (`auth`) and the OpenAPI document (`openapi`) all read, and the small handlers: `GET /health`,
//! `GET /v1/models`, `GET /metrics`, `GET /openapi.json`. Embeddings are answered in
//! `embeddings`, search in `search`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::engine::Engine;
pub(crate) use crate::inputs::run_inputs;
use crate::metrics::METRICS;
use crate::openapi::{self, Doc};
use crate::response::{self as resp, Health, ModelList};
pub use crate::state::{AppState, Limits};
use crate::{encoding, Error, Result};

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

/// A handler's answer to come.
pub type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What answers a route: the server's state and the request (a `GET` handler leaves its body
/// unread).
pub type Handle = fn(AppState, Request) -> Answer;

/// One route: its path, method, guard, whether it needs `--index`, its handler and its
/// operation in the OpenAPI document (none: left out of it).
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub path: &'static str,
    pub post: bool,
    pub guard: Guard,
    pub needs_index: bool,
    pub handler: Handle,
    pub doc: Option<Doc>,
}

impl Route {
    const fn new(path: &'static str, post: bool, guard: Guard, handler: Handle) -> Route {
        Route {
            path,
            post,
            guard,
            needs_index: false,
            handler,
            doc: None,
        }
    }

    /// A `GET` route.
    pub const fn get(path: &'static str, guard: Guard, handler: Handle) -> Route {
        Route::new(path, false, guard, handler)
    }

    /// A `POST` route.
    pub const fn post(path: &'static str, guard: Guard, handler: Handle) -> Route {
        Route::new(path, true, guard, handler)
    }

    /// Documented in `/openapi.json` as `doc`.
    pub const fn doc(self, doc: Doc) -> Route {
        Route {
            doc: Some(doc),
            ..self
        }
    }

    /// There only on servers with `--index`.
    pub const fn with_index(self) -> Route {
        Route {
            needs_index: true,
            ..self
        }
    }
}

const EMBEDDINGS: Doc = Doc {
    summary: "Embeddings (OpenAI's API, with Nest's `layers` and prompts)",
    request: Some(openapi::EMBEDDING_REQUEST),
    ok: "the vectors: JSON, or with encoding_format bytes / bytes_only the packed rows (bytes: their layout in the `metadata` header)",
    response: resp::EmbeddingList::SCHEMA,
    raw: true,
};

const MODELS: Doc = Doc {
    summary: "The served model, its trained dims and layers, and its arithmetic",
    request: None,
    ok: "the model",
    response: ModelList::SCHEMA,
    raw: false,
};

const HEALTH: Doc = Doc {
    summary: "200 once the model is loaded (never needs a key)",
    request: None,
    ok: "ready",
    response: Health::SCHEMA,
    raw: false,
};

const SEARCH: Doc = Doc {
    summary: "Search the index (--index): queries embedded at its point, a funnel, payload filters",
    request: Some(openapi::SEARCH_REQUEST),
    ok: "ok",
    response: resp::SearchList::SCHEMA,
    raw: false,
};

const DOCUMENTS: Doc = Doc {
    summary: "Add documents to the index durably (acknowledged once fsynced); ids already present are kept, or replaced with \"existing\": \"replace\"",
    request: Some(openapi::DOCUMENTS_REQUEST),
    ok: "ok",
    response: resp::Added::SCHEMA,
    raw: false,
};

const DELETE: Doc = Doc {
    summary: "Delete documents from the index by id, durably (acknowledged once fsynced)",
    request: Some(openapi::DELETE_REQUEST),
    ok: "ok",
    response: resp::Deleted::SCHEMA,
    raw: false,
};

/// Every route: the one table that routing ([`router`]), the key check (`auth`) and the OpenAPI
/// document (`openapi`) read. An endpoint is one row here and its handler.
pub const ROUTES: [Route; 10] = [
    Route::get("/openapi.json", Guard::Open, |s, r| {
        Box::pin(openapi_json(s, r))
    }),
    Route::post("/v1/embeddings", Guard::Key, |s, r| {
        Box::pin(crate::embeddings::embeddings(s, r))
    })
    .doc(EMBEDDINGS),
    Route::post("/embeddings", Guard::Key, |s, r| {
        Box::pin(crate::embeddings::embeddings(s, r))
    })
    .doc(EMBEDDINGS),
    Route::get("/health", Guard::Open, |s, r| Box::pin(health(s, r))).doc(HEALTH),
    Route::get("/v1/models", Guard::Key, |s, r| Box::pin(models(s, r))).doc(MODELS),
    Route::get("/models", Guard::Key, |s, r| Box::pin(models(s, r))).doc(MODELS),
    Route::get("/metrics", Guard::Metrics, |s, r| Box::pin(metrics(s, r))),
    Route::post("/v1/search", Guard::Key, |s, r| {
        Box::pin(crate::search::search(s, r))
    })
    .with_index()
    .doc(SEARCH),
    Route::post("/v1/documents", Guard::Key, |s, r| {
        Box::pin(crate::search::documents(s, r))
    })
    .with_index()
    .doc(DOCUMENTS),
    Route::post("/v1/documents/delete", Guard::Key, |s, r| {
        Box::pin(crate::search::delete(s, r))
    })
    .with_index()
    .doc(DELETE),
];

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

/// The router, with the body limit applied (axum's own limit answers 413 before parsing), the
/// API-key check (401 before the body is read), the request deadline and, outermost, CORS
/// when asked for (so that preflights and errors carry its headers).
pub fn router(state: AppState) -> Result<Router> {
    let limit = state.limits.max_body_bytes;
    let timeout = state.limits.request_timeout;
    let cors = cors(&state.limits.cors_origins)?;
    let access = Arc::clone(&state.access);
    let mut app = Router::new();
    for r in ROUTES
        .iter()
        .filter(|r| !r.needs_index || state.search.is_some())
    {
        let h = r.handler;
        let f = move |State(s): State<AppState>, req: Request| h(s, req);
        app = app.route(r.path, if r.post { post(f) } else { get(f) });
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

async fn openapi_json(s: AppState, _: Request) -> Response {
    let doc = openapi::document(
        s.limits.max_inputs,
        !s.access.is_open(),
        s.search.is_some(),
        s.limits.unknown_fields,
    );
    Json(doc).into_response()
}

async fn health(s: AppState, _: Request) -> Response {
    match s.engines.iter().try_for_each(|e| e.info().map(|_| ())) {
        Ok(()) => (StatusCode::OK, Json(Health::OK)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn models(s: AppState, _: Request) -> Response {
    s.engines
        .iter()
        .map(|e| model_entry(e))
        .collect::<Result<Vec<_>>>()
        .map(|data| Json(ModelList::new(data)))
        .into_response()
}

/// One `/v1/models` entry: the served name, its trained dims and layers, its arithmetic and
/// the encodings it returns.
fn model_entry(e: &Engine) -> Result<resp::Model> {
    let info = e.info()?;
    Ok(resp::Model {
        id: e.config.served_name.clone(),
        object: "model",
        created: 0,
        owned_by: "nest",
        dimensions: info.offer.dims().to_vec(),
        layers: info.offer.layers().to_vec(),
        max_dimensions: info.offer.width(),
        max_layers: info.offer.num_layers(),
        allow_any_point: e.config.allow_any_point,
        adaptor: e.config.adaptor.as_ref().map(|p| p.display().to_string()),
        dtype: info.dtype.dtype.name(),
        dtype_reason: info.dtype.reason.clone(),
        encodings: encoding::Encoding::names(),
    })
}

async fn metrics(s: AppState, _: Request) -> Response {
    let depth: usize = s.engines.iter().map(|e| e.queue.depth()).sum();
    METRICS.queue_depth.set(depth as i64);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        METRICS.render(),
    )
        .into_response()
}

/// The body of a request, or the error a rejected one gets (413 past the byte limit, else
/// 400).
pub(crate) async fn read_body(s: &AppState, req: Request) -> Result<Bytes> {
    Bytes::from_request(req, &()).await.map_err(|rej| {
        match rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            true => Error::too_large(
                None,
                format!(
                    "the body is over the {}-byte limit",
                    s.limits.max_body_bytes
                ),
            ),
            false => Error::bad(None, rej.body_text()),
        }
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
