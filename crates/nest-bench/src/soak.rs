//! The soak of `nest bench soak`: `clients` clients for `seconds`, each cycling through a mix
//! of valid, oversized, malformed and (when the server has keys) unauthorised requests, every
//! answer checked against the status it must have; every `sample_every` seconds the p99
//! latency of the valid requests and the server's resident memory; at the end a burst that
//! fills the queue (429 expected) and a check that the server answers again afterwards.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Error, Result};

/// One soak.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    pub clients: usize,
    pub seconds: f64,
    pub sample_every: f64,
    /// The server's API key, when it has one (then unauthorised requests are in the mix).
    pub key: Option<String>,
    /// The server's `--max-client-batch-size` (oversized requests send one more input).
    pub max_inputs: usize,
    /// Concurrent requests of `max_inputs` inputs in the closing burst (0: no burst).
    pub burst: usize,
    /// The server's process id, for its resident memory (Linux `/proc`).
    pub pid: Option<u32>,
    pub texts: Vec<String>,
}

/// The kinds of request in the mix, with the status each must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Valid,
    Oversized,
    Malformed,
    BadDims,
    NoKey,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Valid => "valid",
            Kind::Oversized => "oversized",
            Kind::Malformed => "malformed",
            Kind::BadDims => "bad_dimensions",
            Kind::NoKey => "unauthorised",
        }
    }
    fn expected(self) -> u16 {
        match self {
            Kind::Valid => 200,
            Kind::Oversized => 413,
            Kind::Malformed | Kind::BadDims => 400,
            Kind::NoKey => 401,
        }
    }
    /// The mix: 7 of 10 valid, one each of the others (unauthorised only with a key).
    fn of(i: usize, keyed: bool) -> Kind {
        match i % 10 {
            7 => Kind::Oversized,
            8 => Kind::Malformed,
            9 if keyed => Kind::NoKey,
            9 => Kind::BadDims,
            _ => Kind::Valid,
        }
    }
}

/// One sampling window.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub at_s: f64,
    pub requests: usize,
    pub valid_p99_ms: f64,
    pub rss_mib: Option<f64>,
}

/// What a soak measured.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub clients: usize,
    pub seconds: f64,
    pub requests: usize,
    /// Requests per kind: `[kind, count]`.
    pub by_kind: Vec<(String, usize)>,
    /// Answers with another status than their kind must get (transport errors included).
    pub unexpected: usize,
    pub first_unexpected: Option<String>,
    pub valid_p50_ms: f64,
    pub valid_p99_ms: f64,
    pub samples: Vec<Sample>,
    /// Resident memory of the last sample over the first after warm-up (the second sample).
    pub rss_growth: Option<f64>,
    /// The closing burst: answers 429, 200 and other.
    pub burst_429: usize,
    pub burst_200: usize,
    pub burst_other: usize,
    /// Whether a valid request succeeded within 10 s after the burst.
    pub recovered: bool,
}

#[derive(Default)]
struct Tally {
    counts: [usize; 5],
    unexpected: usize,
    first_unexpected: Option<String>,
    valid_ms: Vec<f64>,
    window_ms: Vec<f64>,
    window_requests: usize,
}

fn rss_mib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

fn p(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

/// A body that is not JSON (the array is never closed).
const MALFORMED: &[u8] = b"{\"input\": [\"unterminated\"}";

fn body(kind: Kind, cfg: &SoakConfig, i: usize) -> Vec<u8> {
    let text = |k: usize| cfg.texts[(i + k) % cfg.texts.len()].clone();
    match kind {
        Kind::Valid | Kind::NoKey => serde_json::json!({"input": [text(0), text(1)]}),
        Kind::Oversized => {
            serde_json::json!({"input": (0..=cfg.max_inputs).map(text).collect::<Vec<_>>()})
        }
        Kind::BadDims => serde_json::json!({"input": text(0), "dimensions": 7}),
        Kind::Malformed => return MALFORMED.to_vec(),
    }
    .to_string()
    .into_bytes()
}

/// Sends one request; its status (0 on a transport error, with the error).
async fn send(
    client: &reqwest::Client,
    endpoint: &str,
    key: Option<&str>,
    body: Vec<u8>,
) -> (u16, String) {
    let mut req = client
        .post(endpoint)
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    match req.send().await {
        Ok(r) => {
            let st = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            (st, text)
        }
        Err(e) => (0, e.to_string()),
    }
}

async fn client_loop(
    c: usize,
    client: reqwest::Client,
    endpoint: String,
    cfg: Arc<SoakConfig>,
    deadline: Instant,
    tally: Arc<Mutex<Tally>>,
) {
    let mut i = c * 7;
    while Instant::now() < deadline {
        let kind = Kind::of(i, cfg.key.is_some());
        let key = if kind == Kind::NoKey {
            None
        } else {
            cfg.key.as_deref()
        };
        let t = Instant::now();
        let (st, text) = send(&client, &endpoint, key, body(kind, &cfg, i)).await;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let mut g = tally.lock().unwrap_or_else(|e| e.into_inner());
        g.counts[kind as usize] += 1;
        g.window_requests += 1;
        if st != kind.expected() {
            g.unexpected += 1;
            g.first_unexpected
                .get_or_insert_with(|| format!("{}: got {st}: {text}", kind.name()));
        } else if kind == Kind::Valid {
            g.valid_ms.push(ms);
            g.window_ms.push(ms);
        }
        i += 1;
    }
}

/// Runs the soak and reports.
pub async fn run(cfg: SoakConfig) -> Result<SoakReport> {
    if cfg.texts.is_empty() || cfg.clients == 0 || cfg.sample_every <= 0.0 {
        return Err(Error::bad(
            None,
            "the soak needs texts, clients and a sampling period",
        ));
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .pool_max_idle_per_host(cfg.clients + cfg.burst)
        .build()
        .map_err(|e| Error::Http(e.to_string()))?;
    let endpoint = format!("{}/v1/embeddings", cfg.url.trim_end_matches('/'));
    let cfg = Arc::new(cfg);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(cfg.seconds);
    let tasks: Vec<_> = (0..cfg.clients)
        .map(|c| {
            tokio::spawn(client_loop(
                c,
                client.clone(),
                endpoint.clone(),
                Arc::clone(&cfg),
                deadline,
                Arc::clone(&tally),
            ))
        })
        .collect();
    let mut samples = Vec::new();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs_f64(cfg.sample_every)).await;
        let mut g = tally.lock().unwrap_or_else(|e| e.into_inner());
        let mut w = std::mem::take(&mut g.window_ms);
        w.sort_by(f64::total_cmp);
        samples.push(Sample {
            at_s: start.elapsed().as_secs_f64(),
            requests: std::mem::take(&mut g.window_requests),
            valid_p99_ms: p(&w, 0.99),
            rss_mib: cfg.pid.and_then(rss_mib),
        });
    }
    for t in tasks {
        t.await.map_err(|e| Error::Internal(e.to_string()))?;
    }
    let (burst_429, burst_200, burst_other) = burst(&client, &endpoint, &cfg).await;
    let recovered = recover(&client, &endpoint, &cfg).await;
    let g = tally.lock().unwrap_or_else(|e| e.into_inner());
    let mut valid = g.valid_ms.clone();
    valid.sort_by(f64::total_cmp);
    let rss: Vec<f64> = samples.iter().filter_map(|s| s.rss_mib).collect();
    let kinds = [
        Kind::Valid,
        Kind::Oversized,
        Kind::Malformed,
        Kind::BadDims,
        Kind::NoKey,
    ];
    Ok(SoakReport {
        clients: cfg.clients,
        seconds: start.elapsed().as_secs_f64(),
        requests: g.counts.iter().sum(),
        by_kind: kinds
            .iter()
            .map(|k| (k.name().to_string(), g.counts[*k as usize]))
            .collect(),
        unexpected: g.unexpected,
        first_unexpected: g.first_unexpected.clone(),
        valid_p50_ms: p(&valid, 0.5),
        valid_p99_ms: p(&valid, 0.99),
        rss_growth: (rss.len() >= 3).then(|| rss[rss.len() - 1] / rss[1]),
        samples,
        burst_429,
        burst_200,
        burst_other,
        recovered,
    })
}

/// `cfg.burst` concurrent requests of `max_inputs` inputs each: (429s, 200s, others).
async fn burst(
    client: &reqwest::Client,
    endpoint: &str,
    cfg: &Arc<SoakConfig>,
) -> (usize, usize, usize) {
    let tasks: Vec<_> = (0..cfg.burst)
        .map(|i| {
            let (client, endpoint, cfg) = (client.clone(), endpoint.to_string(), Arc::clone(cfg));
            tokio::spawn(async move {
                let texts: Vec<String> = (0..cfg.max_inputs)
                    .map(|k| cfg.texts[(i + k) % cfg.texts.len()].clone())
                    .collect();
                let b = serde_json::json!({"input": texts}).to_string().into_bytes();
                send(&client, &endpoint, cfg.key.as_deref(), b).await.0
            })
        })
        .collect();
    let mut out = (0, 0, 0);
    for t in tasks {
        match t.await.unwrap_or(0) {
            429 => out.0 += 1,
            200 => out.1 += 1,
            _ => out.2 += 1,
        }
    }
    out
}

/// Whether a valid request gets 200 within 10 s.
async fn recover(client: &reqwest::Client, endpoint: &str, cfg: &SoakConfig) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let b = body(Kind::Valid, cfg, 0);
        if send(client, endpoint, cfg.key.as_deref(), b).await.0 == 200 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
