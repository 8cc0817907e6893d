//! The load generator of `nest bench serve`: `clients` concurrent clients, each sending
//! `POST /v1/embeddings` (or Nest's `/v1/search`) requests back to back for `seconds`,
//! counting errors, latencies and response bytes. On `/v1/embeddings` it speaks only the
//! OpenAI API, so the same run measures Nest and a peer server.

use std::time::{Duration, Instant};

use crate::{Error, Result};

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// The route, e.g. `/v1/embeddings` or `/v1/search`.
    pub path: String,
    /// The body field the texts go in (`input`; `query` for search).
    pub input_key: String,
    pub clients: usize,
    pub seconds: f64,
    /// Texts to send, cycled through.
    pub texts: Vec<String>,
    pub inputs_per_request: usize,
    /// Extra body fields (`dimensions`, `layers`, `model`).
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// What a load run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub requests: usize,
    pub errors: usize,
    pub inputs: usize,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub requests_per_s: f64,
    pub inputs_per_s: f64,
    /// Mean bytes of a successful response's body.
    pub response_bytes_mean: f64,
    /// The first error seen, if any.
    pub first_error: Option<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the load and reports.
pub async fn run(cfg: LoadConfig) -> Result<LoadReport> {
    if cfg.texts.is_empty() || cfg.clients == 0 || cfg.inputs_per_request == 0 {
        return Err(Error::bad(
            None,
            "the load needs texts, clients and inputs per request",
        ));
    }
    let client = reqwest::Client::builder()
        .timeout(cfg.timeout)
        .pool_max_idle_per_host(cfg.clients)
        .build()
        .map_err(|e| Error::Http(e.to_string()))?;
    let endpoint = format!("{}{}", cfg.url.trim_end_matches('/'), cfg.path);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(cfg.seconds);
    let mut tasks = Vec::new();
    for c in 0..cfg.clients {
        let client = client.clone();
        let endpoint = endpoint.clone();
        let cfg = cfg.clone();
        tasks.push(tokio::spawn(client_loop(
            c, client, endpoint, cfg, deadline,
        )));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let mut bytes = 0usize;
    for t in tasks {
        let (l, e, f, b) = t.await.map_err(|e| Error::Internal(e.to_string()))?;
        lat.extend(l);
        errors += e;
        bytes += b;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    let requests = lat.len();
    let inputs = requests * cfg.inputs_per_request;
    Ok(LoadReport {
        requests,
        errors,
        inputs,
        seconds,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        max_ms: lat.last().copied().unwrap_or(f64::NAN),
        requests_per_s: requests as f64 / seconds,
        inputs_per_s: inputs as f64 / seconds,
        response_bytes_mean: bytes as f64 / requests.max(1) as f64,
        first_error,
    })
}

/// One client: requests back to back until `deadline`; its latencies (ms), error count,
/// first error and response bytes.
async fn client_loop(
    c: usize,
    client: reqwest::Client,
    endpoint: String,
    cfg: LoadConfig,
    deadline: Instant,
) -> (Vec<f64>, usize, Option<String>, usize) {
    let mut bytes = 0;
    let mut lat = Vec::new();
    let mut errors = 0usize;
    let mut first_error = None;
    let mut next = c * cfg.inputs_per_request;
    while Instant::now() < deadline {
        let input: Vec<&String> = (0..cfg.inputs_per_request)
            .map(|k| &cfg.texts[(next + k) % cfg.texts.len()])
            .collect();
        next += cfg.inputs_per_request * cfg.clients;
        let mut body = cfg.extra.clone();
        body.insert(cfg.input_key.clone(), serde_json::json!(input));
        let t = Instant::now();
        match post_once(&client, &endpoint, &body).await {
            Ok(n) => {
                lat.push(t.elapsed().as_secs_f64() * 1e3);
                bytes += n;
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    (lat, errors, first_error, bytes)
}

/// One request, its whole body read (its length); an error names the status and the
/// server's message.
async fn post_once(
    client: &reqwest::Client,
    endpoint: &str,
    body: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<usize, String> {
    match client.post(endpoint).json(body).send().await {
        Ok(resp) if resp.status().is_success() => match resp.bytes().await {
            Ok(b) => Ok(b.len()),
            Err(e) => Err(e.to_string()),
        },
        Ok(resp) => {
            let st = resp.status();
            Err(format!("{st}: {}", resp.text().await.unwrap_or_default()))
        }
        Err(e) => Err(e.to_string()),
    }
}
