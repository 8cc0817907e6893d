//! The HTTP layer's cost, measured query by query: each query searched in-process (embed, then
//! the funnel: what `POST /v1/search` does without HTTP), then the same query sent to a running
//! `nest serve --index` over the same index, a few milliseconds apart. On a shared machine
//! whose speed drifts by 10-20% over minutes, two separate runs differ by more than the HTTP
//! layer costs; paired, the drift falls on both alike (`scripts/bench/http_overhead.sh`).

use std::time::Instant;

use nest_index::{Funnel, Index};
use serde::Serialize;

use crate::{Error, Result};

fn stopped() -> Error {
    Error::Internal("the client thread stopped".into())
}

/// In-process search and `POST /v1/search` alternating query by query (`nest bench search
/// --end-to-end --paired-url`).
pub struct Paired<'a> {
    pub idx: &'a Index,
    pub model: &'a nest_model::ElasticEncoder,
    /// The layer the index was embedded at.
    pub layer: usize,
    pub k: usize,
}

/// One funnel's paired figures.
#[derive(Debug, Clone, Serialize)]
pub struct PairedFunnel {
    pub data: &'static str,
    pub batch: usize,
    pub queries: usize,
    pub funnel: String,
    pub in_process_qps: f64,
    pub http_qps: f64,
    /// `http_qps / in_process_qps`.
    pub http_over_in_process: f64,
    pub in_process_p50_ms: f64,
    pub http_p50_ms: f64,
    /// Queries whose hits (ids, in order) were the same both ways.
    pub same_hits: usize,
}

impl Paired<'_> {
    /// Each query in-process (embed, then the funnel, on this thread), then the same query
    /// through the server by a client thread (on `client_cpu`), while this thread waits: the
    /// two are timed a few milliseconds apart, so a machine whose speed drifts (a shared VM)
    /// slows both alike. One result per funnel (exact first).
    pub fn run(
        &self,
        texts: &[String],
        funnels: &[Funnel],
        url: &str,
        cpu: Option<usize>,
    ) -> Result<Vec<PairedFunnel>> {
        let (jobs, inbox) = std::sync::mpsc::channel::<Vec<u8>>();
        let (outbox, answers) = std::sync::mpsc::channel::<Result<(f64, Vec<u8>)>>();
        let url = url.to_string();
        let client = std::thread::spawn(move || -> Result<()> {
            if let Some(c) = cpu {
                pin_thread(c)?;
            }
            let mut http = Http1::connect(&url)?;
            for body in inbox {
                let t = Instant::now();
                let r = http.post("/v1/search", &body);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if outbox.send(r.map(|b| (ms, b))).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let result = self.measure(texts, funnels, &jobs, &answers);
        drop(jobs);
        let joined = client
            .join()
            .map_err(|_| Error::Internal("the client thread panicked".into()))?;
        match (result, joined) {
            (Ok(v), Ok(())) => Ok(v),
            (Ok(_), Err(e)) => Err(e),
            // the client's own error (a refused connection) says more than a closed channel
            (Err(_), Err(e)) => Err(e),
            (Err(e), Ok(())) => Err(e),
        }
    }

    fn measure(
        &self,
        texts: &[String],
        funnels: &[Funnel],
        jobs: &std::sync::mpsc::Sender<Vec<u8>>,
        answers: &std::sync::mpsc::Receiver<Result<(f64, Vec<u8>)>>,
    ) -> Result<Vec<PairedFunnel>> {
        let d = self.model.output_dim();
        let exact = Funnel::exact(self.idx.full_dim());
        let http = |t: &str, f: &Funnel| -> Result<(f64, Vec<String>)> {
            let body = serde_json::json!({"query": [t], "funnel": f.to_string(), "k": self.k});
            jobs.send(body.to_string().into_bytes())
                .map_err(|_| stopped())?;
            let (ms, answer) = answers.recv().map_err(|_| stopped())??;
            let v: serde_json::Value = serde_json::from_slice(&answer)
                .map_err(|e| Error::Http(format!("an answer that is not JSON: {e}")))?;
            let ids = v["data"][0]["hits"]
                .as_array()
                .ok_or_else(|| Error::Http("an answer without data[0].hits".into()))?
                .iter()
                .map(|h| h["id"].as_str().unwrap_or_default().to_string())
                .collect();
            Ok((ms, ids))
        };
        let local = |t: &str, f: &Funnel| -> Result<(f64, Vec<String>)> {
            let t1 = Instant::now();
            let pooled =
                self.model
                    .embed_layers(&[t], &[self.layer], Default::default(), &mut |_| {})?;
            let v = nest_model::pooling::to_vec_f32(&pooled[0]);
            let hits = self
                .idx
                .search(&[v[..d].to_vec()], f, self.k)
                .map_err(|e| Error::Config(e.to_string()))?;
            let ms = t1.elapsed().as_secs_f64() * 1e3;
            let ids = hits[0]
                .iter()
                .map(|h| self.idx.id(h.row as usize).to_string())
                .collect();
            Ok((ms, ids))
        };
        let mut out = Vec::new();
        for f in std::iter::once(&exact).chain(funnels) {
            if let Some(t) = texts.first() {
                local(t, f)?; // warm-up, both ways
                http(t, f)?;
            }
            let (mut lat_in, mut lat_http, mut same) = (Vec::new(), Vec::new(), 0);
            for t in texts {
                let (a, ids_in) = local(t, f)?;
                let (h, ids_http) = http(t, f)?;
                lat_in.push(a);
                lat_http.push(h);
                same += usize::from(ids_in == ids_http);
            }
            let qps = |l: &[f64]| 1e3 * l.len() as f64 / l.iter().sum::<f64>();
            let p50 = |l: &mut Vec<f64>| {
                l.sort_by(f64::total_cmp);
                l.get(l.len() / 2).copied().unwrap_or(f64::NAN)
            };
            let (q_in, q_http) = (qps(&lat_in), qps(&lat_http));
            out.push(PairedFunnel {
                data: "paired",
                batch: 1,
                queries: texts.len(),
                funnel: f.to_string(),
                in_process_qps: q_in,
                http_qps: q_http,
                http_over_in_process: q_http / q_in,
                in_process_p50_ms: p50(&mut lat_in),
                http_p50_ms: p50(&mut lat_http),
                same_hits: same,
            });
        }
        Ok(out)
    }
}

/// Moves the calling thread to `cpu` (`taskset -p` on its thread id, from `/proc/thread-self`).
fn pin_thread(cpu: usize) -> Result<()> {
    let link = std::fs::read_link("/proc/thread-self")
        .map_err(|e| Error::io("reading /proc/thread-self".into(), e))?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .ok_or_else(|| Error::Internal("/proc/thread-self names no thread".into()))?
        .to_string();
    let ok = std::process::Command::new("taskset")
        .args(["-p", "-c", &cpu.to_string(), &tid])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| Error::io("running taskset".into(), e))?
        .success();
    if !ok {
        return Err(Error::Config(format!(
            "taskset could not move the client thread to CPU {cpu}"
        )));
    }
    Ok(())
}

/// One keep-alive HTTP/1.1 connection for `--paired-url`: a request at a time, the answer read
/// by its Content-Length (what `nest serve` sends). Plain blocking `std::net`, so that nothing
/// but the request itself lies between the clock and the socket.
struct Http1 {
    stream: std::net::TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Http1 {
    fn connect(url: &str) -> Result<Self> {
        let host = url
            .strip_prefix("http://")
            .ok_or_else(|| Error::Config(format!("--paired-url {url}: expected http://HOST:PORT")))?
            .trim_end_matches('/')
            .to_string();
        let stream = std::net::TcpStream::connect(&host)
            .map_err(|e| Error::io(format!("--paired-url: connecting to {host}"), e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io(format!("--paired-url: {host}"), e))?;
        Ok(Http1 {
            stream,
            host,
            buf: Vec::new(),
        })
    }

    /// POSTs a JSON `body` to `path`: the answer's body, or an error naming its status.
    fn post(&mut self, path: &str, body: &[u8]) -> Result<Vec<u8>> {
        use std::io::{Read, Write};
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        let io = |e| Error::io(format!("POST {path}"), e);
        self.stream.write_all(&req).map_err(io)?;
        self.buf.clear();
        let mut chunk = [0u8; 16384];
        let mut read = |buf: &mut Vec<u8>| -> Result<()> {
            let n = self.stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err(Error::Http("the server closed the connection".into()));
            }
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        };
        let (start, len) = loop {
            read(&mut self.buf)?;
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..i]);
                let len = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| Error::Http("an answer without Content-Length".into()))?;
                break (i + 4, len);
            }
        };
        while self.buf.len() < start + len {
            read(&mut self.buf)?;
        }
        let answer = self.buf[start..start + len].to_vec();
        let status = String::from_utf8_lossy(self.buf.get(9..12).unwrap_or_default()).to_string();
        if status != "200" {
            return Err(Error::Http(format!(
                "{path}: HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            )));
        }
        Ok(answer)
    }
}
