//! Nest serving: an OpenAI-compatible embeddings server where each request picks its point on
//! the elastic grid (`dimensions`, and Nest's `layers` extension).
//!
//! - [`request`]: parsing and validation of request bodies; [`encoding`]: the vectors' wire
//!   forms (float, base64, int8, uint8, binary, ubinary, raw bytes);
//! - [`batcher`]: the bounded queue and token-bounded, per-layer dynamic batches;
//! - [`engine`]: model loading in the background, trained-point checks, worker threads;
//! - [`routes`]: the route table and router; `embeddings`: `POST /v1/embeddings`;
//!   [`response`]: the typed answer bodies and their schemas; [`error`]: the one place errors
//!   become statuses;
//! - [`search`]: `/v1/search` and `/v1/documents` over an index (`--index`);
//! - [`auth`]: API keys;
//! - [`metrics`]: Prometheus metrics. (The load and soak clients live in `nest-bench`.)

pub mod auth;
pub mod batcher;
mod embeddings;
pub mod encoding;
pub mod engine;
mod error;
mod inputs;
pub mod metrics;
pub mod openapi;
pub mod request;
pub mod response;
pub mod routes;
pub mod search;
mod state;

use std::sync::Arc;

pub use engine::{Engine, EngineConfig};
pub use error::{Error, Result};
pub use routes::Limits;

/// A bind failure with what to do about it (the port taken, a privileged port, an address this
/// machine does not have).
fn bind_error(addr: &str, e: std::io::Error) -> std::io::Error {
    use std::io::ErrorKind::*;
    let hint = match e.kind() {
        AddrInUse => "; another process listens there (another nest serve?): stop it or pass \
                      another --port"
            .to_string(),
        PermissionDenied => "; ports below 1024 need privileges: pass --port 8080 or higher".into(),
        AddrNotAvailable => format!(
            "; no network interface of this machine has the address of {addr}: --host \
             127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        ),
        _ => String::new(),
    };
    std::io::Error::new(e.kind(), format!("{e}{hint}"))
}

/// Serves until SIGTERM or Ctrl-C, then stops accepting connections, lets in-flight requests
/// finish, drains the queue and returns. When the model fails to load (in the background:
/// `/health` is 503 meanwhile), it stops the same way and returns the reason as an error. `on_listen` is called with the bound address (port 0
/// picks a free one). A client has `header_timeout` to send its request head (slowloris);
/// the body and the answer are bounded by `limits.request_timeout`.
pub async fn serve(
    configs: Vec<EngineConfig>,
    limits: Limits,
    access: auth::Access,
    index: Option<&std::path::Path>,
    addr: &str,
    on_listen: impl FnOnce(std::net::SocketAddr),
) -> Result<()> {
    let mut configs = configs;
    check_names(&configs)?;
    let search = match index {
        Some(dir) => Some(Arc::new(search::Searcher::open(dir, &mut configs[0])?)),
        None => None,
    };
    let header_timeout = limits
        .request_timeout
        .min(std::time::Duration::from_secs(10));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    let engines: Vec<Arc<Engine>> = configs.into_iter().map(Engine::start).collect();
    let failed = watch_failures(&engines);
    let engines = Arc::new(engines);
    let app = routes::router(routes::AppState {
        engines: Arc::clone(&engines),
        limits,
        access: Arc::new(access),
        search,
    })?;
    on_listen(listener.local_addr()?);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let close = |engines: &[Arc<Engine>]| engines.iter().for_each(|e| e.queue.close());
    loop {
        let stream = tokio::select! {
            conn = listener.accept() => match conn {
                Ok((stream, _)) => stream,
                // out of file descriptors and the like: wait a moment rather than spin
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
            _ = failed.notified() => {
                drop(listener);
                graceful.shutdown().await;
                close(&engines);
                let why: Vec<String> = engines
                    .iter()
                    .filter_map(|e| e.load_error().map(|w| format!("{}: {w}", e.config.served_name)))
                    .collect();
                return Err(Error::Unavailable(format!("the model failed to load: {}", why.join("; "))));
            }
        };
        let _ = stream.set_nodelay(true);
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
        let watched = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = watched.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
    close(&engines);
    Ok(())
}

/// The first model; an error when there is none or two share a served name.
fn check_names(configs: &[EngineConfig]) -> Result<&EngineConfig> {
    let Some(first) = configs.first() else {
        return Err(Error::Config("no model to serve".into()));
    };
    let mut names: Vec<&str> = configs.iter().map(|c| c.served_name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Config(format!(
            "two models are served as '{}'; give each its own name",
            w[0]
        )));
    }
    Ok(first)
}

/// One notification for any model that fails to load (the server then stops).
fn watch_failures(engines: &[Arc<Engine>]) -> Arc<tokio::sync::Notify> {
    let failed = Arc::new(tokio::sync::Notify::new());
    for e in engines {
        let (e, failed) = (Arc::clone(e), Arc::clone(&failed));
        tokio::spawn(async move {
            e.load_failed.notified().await;
            failed.notify_one();
        });
    }
    failed
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
