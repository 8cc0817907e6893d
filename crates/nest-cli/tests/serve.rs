//! `nest serve` end to end on a tiny generated model: the OpenAI wire format (raw HTTP and the
//! official `openai` Python client), trained-point checks, limits, errors, concurrent requests
//! merged into batches, metrics, and graceful shutdown on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;
use serde_json::{json, Value};

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `nest serve --port 0 ARGS` and reads the bound address from its first stderr line.
fn spawn(args: &[&str]) -> Server {
    let child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32") // the figures these tests check are float32 (bf16/int8: tests/dtype.rs)
        .env_remove("NEST_API_KEY")
        .args(["serve", "--port", "0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    listening(child)
}

/// Reads the bound address from the server's stderr (the line with `http://`).
fn listening(mut child: Child) -> Server {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let addr = loop {
        let Some(Ok(line)) = lines.next() else {
            panic!("the server ended without listening: {seen:?}")
        };
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
        seen.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

fn start(model: &Path, extra: &[&str]) -> Server {
    let m = model.display().to_string();
    let mut args = vec![
        "--model",
        m.as_str(),
        "--max-client-batch-size",
        "4",
        "--max-batch-tokens",
        "64",
        "--max-body-bytes",
        "4096",
    ];
    args.extend_from_slice(extra);
    let s = spawn(&args);
    let t = Instant::now();
    while http(&s.addr, "GET", "/health", b"").0 != 200 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the server never became healthy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    s
}

/// One HTTP/1.1 request on a fresh connection; (status, body).
fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    http_with(addr, method, path, body, "")
}

/// [`http`] with more header lines (each ending in `\r\n`).
fn http_with(addr: &str, method: &str, path: &str, body: &[u8], headers: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = http_full(addr, method, path, body, headers);
    (status, body)
}

/// (status, response head, body).
fn http_full(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    headers: &str,
) -> (u16, String, Vec<u8>) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (0, String::new(), Vec::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        body.len()
    );
    if s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .is_err()
    {
        return (0, String::new(), Vec::new());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(out.len(), |p| p + 4);
    let mut body = out[split..].to_vec();
    if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (
        status,
        String::from_utf8_lossy(&out[..split]).into_owned(),
        body,
    )
}

fn dechunk(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = b[i..].windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(std::str::from_utf8(&b[i..i + p]).unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[i + p + 2..i + p + 2 + n]);
        i += p + 2 + n + 2;
    }
    out
}

fn post(addr: &str, body: &Value) -> (u16, Value) {
    let (s, b) = http(addr, "POST", "/v1/embeddings", body.to_string().as_bytes());
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

fn vectors(v: &Value) -> Vec<Vec<f32>> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            d["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn tiny(dir: &Path) -> std::path::PathBuf {
    let m = dir.join("tiny");
    write_tiny_model(&m, &TinySpec::new(Architecture::Bert)).unwrap();
    std::fs::write(
        m.join("nest.json"),
        r#"{"matryoshka_dims":[8,16,32],"trained_layers":[1,2]}"#,
    )
    .unwrap();
    m
}

#[test]
fn the_api_answers_like_openai_and_refuses_bad_requests_with_its_error_shape() {
    let d = tempfile::tempdir().unwrap();
    let s = start(&tiny(d.path()), &[]);
    let a = s.addr.as_str();
    let (st, r) = post(
        a,
        &json!({"input": ["the cat sat", "dog"], "model": "tiny", "user": "u"}),
    );
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        (r["object"].as_str(), r["model"].as_str()),
        (Some("list"), Some("tiny"))
    );
    let full = vectors(&r);
    assert_eq!((full.len(), full[0].len()), (2, 32));
    assert_eq!(r["data"][1]["index"], 1);
    assert!(r["usage"]["prompt_tokens"].as_u64().unwrap() > 2);
    for v in &full {
        assert!((v.iter().map(|x| x * x).sum::<f32>().sqrt() - 1.0).abs() < 1e-5);
    }
    // a prefix, renormalised; and /embeddings is the same route
    let (st, r) = http(
        a,
        "POST",
        "/embeddings",
        br#"{"input":"the cat sat","dimensions":8}"#,
    );
    assert_eq!(st, 200);
    let v8 = vectors(&serde_json::from_slice(&r).unwrap()).remove(0);
    let n: f32 = full[0][..8].iter().map(|x| x * x).sum::<f32>().sqrt();
    for (x, y) in v8.iter().zip(&full[0][..8]) {
        assert!((x - y / n).abs() < 1e-5);
    }
    // base64 = little-endian float32
    let (_, r) = post(
        a,
        &json!({"input": "the cat sat", "encoding_format": "base64"}),
    );
    let b64 = r["data"][0]["embedding"].as_str().unwrap();
    let bytes = base64_decode(b64);
    let dec: Vec<f32> = bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // (a batch of one vs. of two: the padding changes float sums in the last bits)
    assert!(dec.iter().zip(&full[0]).all(|(x, y)| (x - y).abs() < 1e-5));
    // token ids = the same text
    let tok = nest_model::tokenize::TextTokenizer::load(&d.path().join("tiny/tokenizer.json"), 512)
        .unwrap();
    let ids = tok.encode(&["the cat sat"]).unwrap().remove(0);
    let (st, r) = post(a, &json!({"input": [ids]}));
    assert_eq!(st, 200, "{r}");
    let vt = vectors(&r).remove(0);
    assert!(vt.iter().zip(&full[0]).all(|(x, y)| (x - y).abs() < 1e-5));
    let (st, _) = post(a, &json!({"input": ids}));
    assert_eq!(st, 200);
    // the layer exit equals `nest encode --layer 1`
    let (_, r) = post(a, &json!({"input": "the cat sat", "layers": 1}));
    let v1 = vectors(&r).remove(0);
    std::fs::write(d.path().join("in.txt"), "the cat sat\n").unwrap();
    let out = d.path().join("l1.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32") // the figures these tests check are float32 (bf16/int8: tests/dtype.rs)
        .env_remove("NEST_API_KEY")
        .args([
            "encode",
            "--model",
            &d.path().join("tiny").display().to_string(),
            "--layer",
            "1",
        ])
        .args([
            "--input",
            &d.path().join("in.txt").display().to_string(),
            "--output",
            &out.display().to_string(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line: Value = serde_json::from_str(
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let enc: Vec<f32> = line["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert!(
        v1.iter().zip(&enc).all(|(x, y)| (x - y).abs() < 1e-5),
        "serve layers=1 differs from encode --layer 1"
    );

    // every bad case: status, OpenAI's error shape, a message naming the problem
    let big = vec![b'x'; 5000];
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (br#"{"input":[]}"#.to_vec(), 400, "empty"),
        (br#"{"input":""}"#.to_vec(), 400, "empty string"),
        (br#"{"input":42}"#.to_vec(), 400, "input"),
        (br#"{"input":["a",{}]}"#.to_vec(), 400, "input[1]"),
        (
            br#"{"input":"a","dimensions":12}"#.to_vec(),
            400,
            "8, 16, 32",
        ),
        (
            br#"{"input":"a","dimensions":64}"#.to_vec(),
            400,
            "at most 32",
        ),
        (br#"{"input":"a","layers":3}"#.to_vec(), 400, "2 layers"),
        (
            br#"{"input":"a","layer":1}"#.to_vec(),
            400,
            "'layer' (did you mean 'layers'?)",
        ),
        (br#"{"input":"a","model":"gpt"}"#.to_vec(), 400, "gpt"),
        (br#"{"input":[[1,2,999999]]}"#.to_vec(), 400, "vocabulary"),
        (
            br#"{"input":["a","b","c","d","e"]}"#.to_vec(),
            413,
            "5 inputs",
        ),
        (
            format!(r#"{{"input":["{w}","{w}","{w}"]}}"#, w = "word ".repeat(30)).into_bytes(),
            413,
            "tokens",
        ),
        (br#"{"input": "a""#.to_vec(), 400, "JSON"),
        (big, 413, "limit"),
    ];
    for (body, want, needle) in cases {
        let (st, b) = http(a, "POST", "/v1/embeddings", &body);
        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        assert_eq!(st, want, "{shown}: {v}");
        let e = &v["error"];
        assert!(
            e["message"].as_str().unwrap_or("").contains(needle),
            "{shown}: {v}"
        );
        assert!(
            e["type"].is_string() && e.get("param").is_some() && e["code"].is_string(),
            "{v}"
        );
    }
    // models and metrics
    let (st, b) = http(a, "GET", "/v1/models", b"");
    let m: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(st, 200);
    assert_eq!(m["data"][0]["dimensions"], json!([8, 16, 32]));
    assert_eq!(m["data"][0]["layers"], json!([1, 2]));
    assert_eq!(
        m["data"][0]["dtype"], "float32",
        "what ran is reported: {m}"
    );
    let (_, b) = http(a, "GET", "/metrics", b"");
    let text = String::from_utf8_lossy(&b);
    for k in [
        "nest_requests_total{status=\"200\"}",
        "nest_requests_total{status=\"413\"}",
        "nest_request_duration_seconds_bucket",
        "nest_batch_inputs",
        "nest_queue_depth",
        "nest_model_dtype_info{dtype=\"float32\"} 1",
    ] {
        assert!(text.contains(k), "metrics lack {k}");
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|&c| c != b'=') {
        acc = (acc << 6) | A.iter().position(|&x| x == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn concurrent_requests_are_batched_without_changing_vectors_and_sigterm_drains() {
    let d = tempfile::tempdir().unwrap();
    let s = start(&tiny(d.path()), &["--allow-any-point"]);
    let texts = [
        "a",
        "the cat sat on the mat",
        "music",
        "a man is playing a guitar loudly",
        "dog",
        "x y z",
    ];
    let alone: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| {
            vectors(&post(&s.addr, &json!({"input": t, "dimensions": 20, "layers": 1})).1).remove(0)
        })
        .collect();
    let handles: Vec<_> = (0..24)
        .map(|i| {
            let addr = s.addr.clone();
            let t = texts[i % texts.len()];
            std::thread::spawn(move || {
                (
                    i,
                    post(
                        &addr,
                        &json!({"input": [t, t], "dimensions": 20, "layers": 1}),
                    ),
                )
            })
        })
        .collect();
    for h in handles {
        let (i, (st, r)) = h.join().unwrap();
        assert_eq!(st, 200, "{r}");
        for v in vectors(&r) {
            let want = &alone[i % texts.len()];
            assert!(
                v.iter().zip(want).all(|(x, y)| (x - y).abs() < 1e-5),
                "batched result differs for input {i}"
            );
        }
    }
    // batches really merged requests
    let (_, b) = http(&s.addr, "GET", "/metrics", b"");
    let text = String::from_utf8_lossy(&b).into_owned();
    let count = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let (sum, n) = (
        count("nest_batch_inputs_sum"),
        count("nest_batch_inputs_count"),
    );
    assert!(
        sum > n,
        "every batch held one input ({sum} inputs in {n} batches)"
    );
    // SIGTERM with a request in flight: it finishes, the process exits 0
    let addr = s.addr.clone();
    let inflight =
        std::thread::spawn(move || post(&addr, &json!({"input": ["a", "b", "c", "d"]})).0);
    std::thread::sleep(Duration::from_millis(5));
    let pid = s.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert_eq!(inflight.join().unwrap(), 200);
    let mut s = s;
    let t = Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            assert!(st.success(), "exit status {st}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the server did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two workers (each its own copy of the model, on one libtorch thread each) answer concurrent
/// requests with the vectors one worker gives.
#[test]
fn two_workers_answer_as_one_does() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    let one = start(&model, &["--allow-any-point"]);
    let two = start(&model, &["--allow-any-point", "--workers", "2"]);
    let texts = [
        "a",
        "the cat sat on the mat",
        "music",
        "a man is playing a guitar loudly",
    ];
    let body = |t: &str| json!({"input": [t, t, t], "dimensions": 16, "layers": 2});
    let want: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| vectors(&post(&one.addr, &body(t)).1).remove(0))
        .collect();
    let handles: Vec<_> = (0..32)
        .map(|i| {
            let addr = two.addr.clone();
            let b = body(texts[i % texts.len()]);
            std::thread::spawn(move || (i, post(&addr, &b)))
        })
        .collect();
    for h in handles {
        let (i, (st, r)) = h.join().unwrap();
        assert_eq!(st, 200, "{r}");
        for v in vectors(&r) {
            let d = v
                .iter()
                .zip(&want[i % texts.len()])
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(d < 1e-5, "request {i}: two workers differ from one by {d}");
        }
    }
}

/// A Python (`NEST_PYTHON`, default `python3`) and the `.deps/<folder>` path with which it can
/// import `module` (scripts/test.sh installs it there); `None`, with the reason printed, when it
/// cannot, which fails the test under CI.
fn python_with(module: &str, folder: &str) -> Option<(String, std::path::PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let py = std::env::var("NEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let pypath = root.join(".deps").join(folder);
    let has = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .env("PYTHONPATH", &pypath)
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        let required = std::env::var("NEST_REQUIRE_MODELS").is_ok_and(|v| v == "1")
            || std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!required, "{module} is missing and CI requires it: run scripts/test.sh (it installs it into .deps/{folder})");
        eprintln!("skipping: {py} cannot import {module} (scripts/test.sh installs it into .deps/{folder})");
        return None;
    }
    Some((py, pypath))
}

/// The official `openai` client, where Python has it (scripts/test.sh installs it into
/// `.deps/pyclient`); skipped with a reason elsewhere, required under CI.
#[test]
fn the_official_openai_python_client_works() {
    let Some((py, pypath)) = python_with("openai", "pyclient") else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let d = tempfile::tempdir().unwrap();
    let key = "nest-test-key-0123456789";
    let s = start(&tiny(d.path()), &["--api-key", key]);
    let o = Command::new(&py)
        .arg(root.join("tests/serve/openai_client.py"))
        .args([format!("http://{}", s.addr), "tiny".into(), key.into()])
        .env("PYTHONPATH", &pypath)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A server whose model cannot load exits non-zero with the reason (naming the broken file),
/// so a supervisor sees a failed process instead of a live one answering 503 forever.
#[test]
fn a_model_that_fails_to_load_stops_the_server_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let m = tiny(d.path());
    // valid JSON, but weights that do not match it: loading fails in the worker
    std::fs::write(m.join("model.safetensors"), b"not safetensors").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env_remove("NEST_API_KEY")
        .args(["serve", "--port", "0", "--model", &m.display().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = pipe.read_to_string(&mut stderr);
        stderr
    });
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the server kept running on a model that cannot load");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed to load") && stderr.contains("model.safetensors"),
        "{stderr}"
    );
}

/// A port another process holds is named with what to do; serving every interface without a
/// key warns (checked on the same taken port, so that nothing listens on every interface).
#[test]
fn a_taken_port_says_so_and_an_open_server_on_every_interface_warns() {
    let d = tempfile::tempdir().unwrap();
    let m = tiny(d.path()).display().to_string();
    let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env_remove("NEST_API_KEY")
        .args(["serve", "--port", &port, "--model", &m])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("another process listens there") && e.contains("--port"),
        "{e}"
    );
    // every interface, no key: a warning before anything binds
    let o = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env_remove("NEST_API_KEY")
        .args(["serve", "--port", &port, "--host", "0.0.0.0", "--model", &m])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--host 0.0.0.0 without --api-key: anyone who reaches this port"),
        "{e}"
    );
}

/// The tiny XLM-RoBERTa of `tests/fixtures/xlmr-tiny` with a `query: ` prompt that the pooling
/// leaves out (`include_prompt = false`).
fn xlmr_with_prompt(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/xlmr-tiny/model");
    let m = dir.join("xlmr");
    std::fs::create_dir_all(m.join("1_Pooling")).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), m.join(f.file_name())).unwrap();
        }
    }
    let pooling: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("1_Pooling/config.json")).unwrap())
            .unwrap();
    let mut pooling = pooling.as_object().unwrap().clone();
    pooling.insert("include_prompt".into(), json!(false));
    std::fs::write(
        m.join("1_Pooling/config.json"),
        Value::Object(pooling).to_string(),
    )
    .unwrap();
    std::fs::write(
        m.join("config_sentence_transformers.json"),
        json!({"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": null})
            .to_string(),
    )
    .unwrap();
    m
}

#[test]
fn prompts_by_name_or_text_match_sentence_transformers() {
    let d = tempfile::tempdir().unwrap();
    let s = start(&xlmr_with_prompt(d.path()), &[]);
    // the reference: sentence-transformers' encode(prompt="query: ") with include_prompt=False
    // (tests/reference/make_xlmr.py), normalised; sentence 0 of the parity sentences
    let fx: std::collections::HashMap<String, tch::Tensor> = tch::Tensor::read_safetensors(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/xlmr-tiny/reference.safetensors"),
    )
    .unwrap()
    .into_iter()
    .collect();
    let want = Vec::<f32>::try_from(fx["prompt_query_excluded"].get(0)).unwrap();
    let plain = Vec::<f32>::try_from(fx["embeddings"].get(0)).unwrap();
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let text = "A man is playing a guitar.";
    for body in [
        json!({"input": [text, "Hi"], "prompt_name": "query"}),
        json!({"input": text, "prompt": "query: "}),
    ] {
        let (st, r) = post(&s.addr, &body);
        assert_eq!(st, 200, "{r}");
        let v = vectors(&r).remove(0);
        assert!(
            cos(&v, &want) > 0.99999,
            "{body}: cosine {}",
            cos(&v, &want)
        );
    }
    let (_, r) = post(&s.addr, &json!({"input": text}));
    assert!(cos(&vectors(&r)[0], &plain) > 0.99999);
    let (st, r) = post(&s.addr, &json!({"input": text, "prompt_name": "passage"}));
    assert_eq!(st, 400, "{r}");
    assert_eq!(r["error"]["param"], "prompt_name", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("document, query"),
        "{r}"
    );
    let (st, r) = post(&s.addr, &json!({"input": text, "prompt": 3}));
    assert_eq!(
        (st, r["error"]["param"].as_str()),
        (400, Some("prompt")),
        "{r}"
    );
}

/// API keys: every route but /health needs `Authorization: Bearer <key>` (keys from
/// `--api-key`, NEST_API_KEY and `--api-key-file`); 401 in OpenAI's shape otherwise; bad keys
/// and key files are refused at start with where they came from.
#[test]
fn api_keys_guard_every_route_but_health() {
    let d = tempfile::tempdir().unwrap();
    let m = tiny(d.path());
    let file = d.path().join("keys.txt");
    std::fs::write(&file, "# the search team\nfile-key-0123456789abcdef\n").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .env(
            "NEST_API_KEY",
            "env-key-0123456789abcdef,env-key-2-0123456789ab",
        )
        .args(["serve", "--port", "0", "--model", &m.display().to_string()])
        .args(["--api-key-file", &file.display().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let s = listening(child);
    let t = Instant::now();
    while http(&s.addr, "GET", "/health", b"").0 != 200 {
        assert!(t.elapsed() < Duration::from_secs(60), "never healthy");
        std::thread::sleep(Duration::from_millis(50));
    }
    let body = json!({"input": "the cat"}).to_string();
    let (st, head, b) = http_full(&s.addr, "POST", "/v1/embeddings", body.as_bytes(), "");
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(st, 401, "{v}");
    assert_eq!(v["error"]["code"], "invalid_api_key", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("Bearer"),
        "{v}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    let wrong = "Authorization: Bearer env-key-0123456789abcdeF\r\n";
    let (st, b) = http_with(&s.addr, "POST", "/v1/embeddings", body.as_bytes(), wrong);
    assert_eq!(st, 401, "{}", String::from_utf8_lossy(&b));
    for path in ["/v1/models", "/metrics"] {
        assert_eq!(http(&s.addr, "GET", path, b"").0, 401, "{path}");
    }
    for key in [
        "env-key-0123456789abcdef",
        "env-key-2-0123456789ab",
        "file-key-0123456789abcdef",
    ] {
        let h = format!("Authorization: Bearer {key}\r\n");
        let (st, b) = http_with(&s.addr, "POST", "/v1/embeddings", body.as_bytes(), &h);
        assert_eq!(st, 200, "{key}: {}", String::from_utf8_lossy(&b));
        assert_eq!(http_with(&s.addr, "GET", "/metrics", b"", &h).0, 200);
    }
    drop(s);
    // refused at start, naming the source
    let bad = d.path().join("bad.txt");
    std::fs::write(&bad, "good-key-0123456789abcdef\nshort\n").unwrap();
    for (args, want) in [
        (vec!["--api-key-file", bad.to_str().unwrap()], "bad.txt:2"),
        (vec!["--api-key", "short"], "--api-key"),
        (vec!["--open-metrics"], "--open-metrics"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_nest"))
            .env_remove("NEST_API_KEY")
            .args(["serve", "--port", "0", "--model", &m.display().to_string()])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
}

/// Slow clients are cut off (a body that never completes: 408; a request head that never
/// completes: the connection closed), and CORS headers appear only for allowed origins.
#[test]
fn slow_clients_time_out_and_cors_is_opt_in() {
    let d = tempfile::tempdir().unwrap();
    let m = tiny(d.path());
    let s = start(
        &m,
        &[
            "--request-timeout",
            "2",
            "--cors-allow-origin",
            "https://app.example",
        ],
    );
    // a body announced as 100 bytes, 10 sent
    let t = Instant::now();
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\":")
        .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("--request-timeout"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // a head that never ends: closed by the server
    let t = Instant::now();
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // CORS: a preflight from the allowed origin is answered with it, another origin is not
    let pre = |origin: &str| {
        http_full(
            &s.addr,
            "OPTIONS",
            "/v1/embeddings",
            b"",
            &format!("Origin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization\r\n"),
        )
        .1
        .to_ascii_lowercase()
    };
    let ok = pre("https://app.example");
    assert!(
        ok.contains("access-control-allow-origin: https://app.example"),
        "{ok}"
    );
    assert!(!pre("https://evil.example").contains("access-control-allow-origin"));
    let (st, _) = post(&s.addr, &json!({"input": "still serving"}));
    assert_eq!(st, 200);
    drop(s);
    // no flag: no CORS headers at all
    let s = start(&m, &[]);
    let (_, head, _) = http_full(
        &s.addr,
        "POST",
        "/v1/embeddings",
        json!({"input": "x"}).to_string().as_bytes(),
        "Origin: https://app.example\r\n",
    );
    assert!(
        !head.to_ascii_lowercase().contains("access-control"),
        "{head}"
    );
}

/// The soak in its short form (the full one is a benchmark, docs/RELIABILITY.md): 16 clients
/// for 30 s with valid, oversized, malformed and unauthorised requests, every status as
/// expected; a burst beyond the queue gets 429s and the server answers again afterwards.
#[test]
fn a_short_soak_sees_only_expected_statuses_and_recovers_from_a_burst() {
    let d = tempfile::tempdir().unwrap();
    let m = tiny(d.path());
    let key = "soak-key-0123456789abcdef";
    let s = start(&m, &["--api-key", key, "--max-queued-inputs", "64"]);
    let texts = d.path().join("texts.txt");
    std::fs::write(
        &texts,
        "the cat sat on the mat\na man is playing music\nrain on the road\na bird over the sea\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_nest"))
        .args(["bench", "soak", "--url", &format!("http://{}", s.addr)])
        .args(["--clients", "16", "--seconds", "30", "--sample-every", "5"])
        .args(["--texts", &texts.display().to_string(), "--key", key])
        .args(["--max-client-batch-size", "4", "--burst", "256"])
        .args(["--pid", &s.child.id().to_string()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["unexpected"], 0, "{v}");
    for k in v["by_kind"].as_array().unwrap() {
        if k[0] != "bad_dimensions" {
            assert!(k[1].as_u64().unwrap() > 0, "{v}");
        }
    }
    eprintln!("burst: {} x 429, {} x 200", v["burst_429"], v["burst_200"]);
    assert!(v["burst_429"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["recovered"], true);
    assert!(v["samples"].as_array().unwrap().len() >= 5, "{v}");
    assert!(v["samples"][0]["rss_mib"].as_f64().unwrap() > 0.0, "{v}");
}

/// `GET /openapi.json` describes the API, and schemathesis (property-based, from the document)
/// finds no 5xx and no answer outside the document, with the key and without it (every answer
/// a documented 401 then). scripts/test.sh installs schemathesis into `.deps/schemathesis`;
/// skipped with a reason elsewhere, required under CI.
#[test]
fn schemathesis_finds_no_server_error_and_no_undocumented_answer() {
    let Some((py, pypath)) = python_with("schemathesis", "schemathesis") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let key = "schema-key-0123456789abcdef";
    let model = tiny(d.path());
    std::fs::write(
        d.path().join("docs.txt"),
        "the cat sat\na dog ran\nbirds fly south\n",
    )
    .unwrap();
    let (m, idx) = (
        model.display().to_string(),
        d.path().join("idx").display().to_string(),
    );
    let input = d.path().join("docs.txt").display().to_string();
    nest(&[
        "index",
        "build",
        "--model",
        &m,
        "--input",
        &input,
        "--out",
        &idx,
        "--dims",
        "8,32",
        "--precision",
        "float32,binary",
    ]);
    // with an index: /v1/search and /v1/documents are fuzzed too
    let s = start(&model, &["--api-key", key, "--index", &idx]);
    let (st, doc) = http(&s.addr, "GET", "/openapi.json", b"");
    assert_eq!(st, 200, "the document needs no key");
    let doc: Value = serde_json::from_slice(&doc).unwrap();
    assert_eq!(doc["openapi"], "3.0.3");
    assert!(doc["paths"]["/v1/search"]["post"].is_object());
    assert_eq!(
        doc["paths"]["/v1/embeddings"]["post"]["responses"]["413"]["content"]["application/json"]
            ["schema"]["$ref"],
        "#/components/schemas/Error"
    );
    assert_eq!(
        doc["components"]["schemas"]["EmbeddingRequest"]["properties"]["input"]["oneOf"][1]
            ["maxItems"],
        4,
        "the limits of this server"
    );
    let auth = format!("Authorization: Bearer {key}");
    for header in [Some(auth.as_str()), None] {
        let mut c = Command::new(&py);
        c.args(["-m", "schemathesis.cli", "run"])
            .arg(format!("http://{}/openapi.json", s.addr))
            .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
            .args(["--max-examples", "25", "--seed", "1", "--workers", "1"])
            .args(["--phases", "examples,coverage,fuzzing", "--request-timeout", "30"])
            .env("PYTHONPATH", &pypath)
            .env("SCHEMATHESIS_HOOKS", "")
            .current_dir(d.path());
        if let Some(h) = header {
            c.args(["-H", h]);
        }
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "with key: {}\n{}{}",
            header.is_some(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `encoding_format` int8 / uint8 / binary / ubinary / bytes, and Cohere's `embedding_types`:
/// every quantized form is, bit for bit, the index's own preparation of the float vector
/// (`nest_index::level::Prepared`, which `nest search` scores), so it ranks as the index would.
#[test]
fn quantized_encodings_are_the_index_codes_of_the_float_vector() {
    use nest_index::level::{Level, Precision, Prepared};
    let d = tempfile::tempdir().unwrap();
    let s = start(&tiny(d.path()), &[]);
    let a = s.addr.as_str();
    let texts = ["the cat sat", "dog", "a bird flew over"];
    let (st, r) = post(
        a,
        &json!({"input": texts, "dimensions": 16,
                "embedding_types": ["float", "int8", "uint8", "binary", "ubinary", "base64"]}),
    );
    assert_eq!(st, 200, "{r}");
    let nums = |v: &Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    };
    let mut floats = Vec::new();
    for item in r["data"].as_array().unwrap() {
        let e = &item["embeddings"];
        let f: Vec<f32> = e["float"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(f.len(), 16);
        let Prepared::Int8(q, scale) = Prepared::new(
            &f,
            Level {
                precision: Precision::Int8,
                dim: 16,
            },
        ) else {
            unreachable!()
        };
        assert_eq!(
            nums(&e["int8"]),
            q.iter().map(|&c| c as i64).collect::<Vec<_>>()
        );
        assert_eq!(
            nums(&e["uint8"]),
            q.iter().map(|&c| c as i64 + 128).collect::<Vec<_>>()
        );
        assert_eq!(item["scale"].as_f64().unwrap() as f32, scale);
        let Prepared::Binary(bits) = Prepared::new(
            &f,
            Level {
                precision: Precision::Binary,
                dim: 16,
            },
        ) else {
            unreachable!()
        };
        assert_eq!(
            nums(&e["ubinary"]),
            bits.iter().map(|&b| b as i64).collect::<Vec<_>>()
        );
        assert_eq!(
            nums(&e["binary"]),
            bits.iter().map(|&b| b as i64 - 128).collect::<Vec<_>>()
        );
        let dec: Vec<f32> = base64_decode(e["base64"].as_str().unwrap())
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(dec, f);
        assert!(item.get("embedding").is_none());
        floats.push(f);
    }
    // one form: OpenAI's shape, `embedding` holds the codes
    let (st, r) = post(
        a,
        &json!({"input": texts, "dimensions": 16, "encoding_format": "ubinary"}),
    );
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["data"][0]["embedding"].as_array().unwrap().len(), 2);
    assert!(r["data"][0].get("scale").is_none());
    // the raw body (vLLM's `bytes`): the rows, their layout and scales in the `metadata` header
    let body = json!({"input": texts, "dimensions": 16, "encoding_format": "bytes", "embed_dtype": "int8"});
    let (st, head, raw) = http_full(a, "POST", "/v1/embeddings", body.to_string().as_bytes(), "");
    assert_eq!(st, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/octet-stream"),
        "{head}"
    );
    let meta = head
        .lines()
        .find_map(|l| l.strip_prefix("metadata: "))
        .unwrap_or_else(|| panic!("no metadata header in {head}"));
    let meta: Value = serde_json::from_str(meta).unwrap();
    assert_eq!(raw.len(), 3 * 16);
    // base64 of packed int8 rows: the same codes, 4x fewer characters than float32's
    let body = json!({"input": texts, "dimensions": 16, "encoding_format": "base64", "embed_dtype": "int8"});
    let (_, packed) = post(a, &body);
    for (i, f) in floats.iter().enumerate() {
        let Prepared::Int8(q, scale) = Prepared::new(
            f,
            Level {
                precision: Precision::Int8,
                dim: 16,
            },
        ) else {
            unreachable!()
        };
        let m = &meta["data"][i];
        assert_eq!(
            (m["embed_dtype"].as_str(), m["shape"][0].as_u64()),
            (Some("int8"), Some(16))
        );
        let (lo, hi) = (
            m["start"].as_u64().unwrap() as usize,
            m["end"].as_u64().unwrap() as usize,
        );
        let row: Vec<i8> = raw[lo..hi].iter().map(|&b| b as i8).collect();
        assert_eq!(row, q);
        assert_eq!(m["scale"].as_f64().unwrap() as f32, scale);
        let b = base64_decode(packed["data"][i]["embedding"].as_str().unwrap());
        assert_eq!(b.iter().map(|&x| x as i8).collect::<Vec<_>>(), q);
        assert_eq!(packed["data"][i]["scale"].as_f64().unwrap() as f32, scale);
    }
    // bad forms are named
    for (body, needle) in [
        (
            json!({"input": "a", "encoding_format": "int4"}),
            "encoding_format",
        ),
        (
            json!({"input": "a", "encoding_format": "ubinary", "embedding_types": ["int8"]}),
            "not both",
        ),
        (
            json!({"input": "a", "encoding_format": "bytes", "embed_dtype": "fp4"}),
            "embed_dtype",
        ),
        (
            json!({"input": "a", "encoding_format": "bytes_only", "embed_dtype": "int8"}),
            "embed_dtype",
        ),
    ] {
        let (st, r) = post(a, &body);
        assert_eq!(st, 400, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(needle),
            "{r}"
        );
    }
}

/// Runs `nest ARGS` (float32), panicking with its stderr on failure; its stdout.
fn nest(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nest {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `nest serve --index`: `/v1/search` answers what `nest search` answers (ids and scores,
/// payload filters included), refuses another point, and `/v1/documents` adds durably: a
/// restarted server (and `nest search`) finds what was acknowledged.
#[test]
fn search_behind_the_api_equals_nest_search_and_adds_survive_a_restart() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    let m = model.display().to_string();
    let words = [
        "cat", "dog", "bird", "fish", "tree", "car", "road", "sun", "rain", "snow",
    ];
    let docs: String = (0..40)
        .map(|i| {
            let text = format!(
                "the {} and the {} {i}",
                words[i % 10],
                words[(i * 7 + 3) % 10]
            );
            let lang = ["en", "fr"][i % 2];
            format!(
                "{}\n",
                json!({"id": format!("d{i}"), "text": text, "lang": lang})
            )
        })
        .collect();
    std::fs::write(d.path().join("docs.jsonl"), docs).unwrap();
    let idx = d.path().join("idx").display().to_string();
    let input = d.path().join("docs.jsonl").display().to_string();
    nest(&[
        "index",
        "build",
        "--model",
        &m,
        "--input",
        &input,
        "--out",
        &idx,
        "--layer",
        "2",
        "--dims",
        "8,32",
        "--precision",
        "float32,int8,binary",
        "--payload",
    ]);
    let s = start(&model, &["--index", &idx]);
    let a = s.addr.as_str();
    let search = |body: Value| {
        let (st, b) = http(a, "POST", "/v1/search", body.to_string().as_bytes());
        (
            st,
            serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null),
        )
    };
    let cli = |q: &str, funnel: &str, filter: Option<&str>| -> Vec<(String, f32)> {
        let mut args = vec![
            "search", "--index", &idx, "--query", q, "--k", "5", "--funnel", funnel,
        ];
        if let Some(f) = filter {
            args.extend(["--filter", f]);
        }
        let line: Value = serde_json::from_str(nest(&args).lines().next().unwrap()).unwrap();
        line["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap() as f32,
                )
            })
            .collect()
    };
    let api = |r: &Value, i: usize| -> Vec<(String, f32)> {
        r["data"][i]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap() as f32,
                )
            })
            .collect()
    };
    let close = |x: &[(String, f32)], y: &[(String, f32)]| {
        // ids equal; scores equal up to the float noise of a batch of one vs. several
        x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-5)
    };
    for (funnel, filter) in [
        ("float32:32", None),
        ("binary:32@20>int8:32@10>float32:32", None),
        ("int8:8@15>float32:32", Some(r#"{"lang": "fr"}"#)),
    ] {
        let mut body = json!({"query": ["the cat and the sun", "rain"], "k": 5, "funnel": funnel});
        if let Some(f) = filter {
            body["filter"] = serde_json::from_str(f).unwrap();
        }
        let (st, r) = search(body);
        assert_eq!(st, 200, "{r}");
        assert_eq!(r["funnel"], funnel);
        for (i, q) in ["the cat and the sun", "rain"].iter().enumerate() {
            let (want, got) = (cli(q, funnel, filter), api(&r, i));
            assert!(
                close(&want, &got),
                "{funnel} {filter:?}: {want:?} vs {got:?}"
            );
            if filter.is_some() {
                assert!(r["data"][i]["hits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|h| h["payload"]["lang"] == "fr"));
            }
        }
    }
    // another point, a level the index lacks, a bad filter: 400 naming the field
    for (body, param) in [
        (json!({"query": "x", "layers": 1}), "layers"),
        (json!({"query": "x", "dimensions": 8}), "dimensions"),
        (json!({"query": "x", "funnel": "float32:16"}), "funnel"),
        (json!({"query": "x", "filter": [1]}), "filter"),
        (json!({"query": ""}), "query"),
        (json!({"query": "x", "model": "other"}), "model"),
    ] {
        let (st, r) = search(body.clone());
        assert_eq!(st, 400, "{body}: {r}");
        assert_eq!(r["error"]["param"], param, "{r}");
    }
    // a field the route does not read: 400 with the one meant
    let (st, r) = search(json!({"query": "x", "top_k": 3}));
    let m = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        st == 400 && m.contains("'top_k' (did you mean 'k'?)"),
        "{r}"
    );
    // a document's payload under another name is refused, not dropped (nothing is added)
    let meta = json!({"documents": [{"id": "m1", "text": "t", "metadata": {"lang": "fr"}}]});
    let (st, b) = http(a, "POST", "/v1/documents", meta.to_string().as_bytes());
    let m = String::from_utf8_lossy(&b);
    assert!(
        st == 400 && m.contains("'metadata' (did you mean 'payload'?)"),
        "{m}"
    );
    // ids the index's other doors refuse (a line break: `nest index build`; a NUL: pgvector's
    // export), and one id twice in a request: 400, nothing added (trial D: accepted)
    for (docs, says) in [
        (
            json!([{"id": "a\nb", "text": "t"}]),
            "must hold no line break",
        ),
        (
            json!([{"id": "a\u{0}b", "text": "t"}]),
            "must hold no NUL character",
        ),
        (
            json!([{"id": "d", "text": "t"}, {"id": "d", "text": "u"}]),
            "repeats documents[0]'s with another text or payload",
        ),
    ] {
        let body = json!({ "documents": docs }).to_string();
        let (st, b) = http(a, "POST", "/v1/documents", body.as_bytes());
        let m = String::from_utf8_lossy(&b);
        assert!(st == 400 && m.contains(says), "{m}");
    }
    // adds: acknowledged once durable; a retry is not a duplicate; found after a restart
    let add = json!({"documents": [
        {"id": "new1", "text": "a purple giraffe sings opera", "payload": {"lang": "fr"}},
        {"id": "d3", "text": "duplicate id"},
    ]});
    let (st, b) = http(a, "POST", "/v1/documents", add.to_string().as_bytes());
    let r: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        (
            r["added"].clone(),
            r["existing"].clone(),
            r["count"].clone()
        ),
        (json!(["new1"]), json!(["d3"]), json!(41))
    );
    let (_, b) = http(a, "POST", "/v1/documents", add.to_string().as_bytes());
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["existing"],
        json!(["new1", "d3"])
    );
    let q = json!({"query": "a purple giraffe sings opera", "k": 3, "filter": {"lang": "fr"}});
    let (_, r) = search(q.clone());
    assert_eq!(r["data"][0]["hits"][0]["id"], "new1", "{r}");
    drop(s);
    let s = start(&model, &["--index", &idx]);
    let (st, b) = http(&s.addr, "POST", "/v1/search", q.to_string().as_bytes());
    let r: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        (st, r["data"][0]["hits"][0]["id"].as_str()),
        (200, Some("new1")),
        "{r}"
    );
    let hits = cli(
        "a purple giraffe sings opera",
        "float32:32",
        Some(r#"{"lang": "fr"}"#),
    );
    assert_eq!(hits[0].0, "new1");
    // a server without --index has no search route; an index of another model is refused
    let plain = start(&model, &[]);
    let (st, b) = http(&plain.addr, "POST", "/v1/search", b"{}");
    let r: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        (st, r["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{r}"
    );
    let (st, b) = http(&plain.addr, "GET", "/v1/embeddings", b"");
    let r: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        (st, r["error"]["code"].as_str()),
        (405, Some("method_not_allowed")),
        "{r}"
    );
    assert!(
        r["error"]["message"].as_str().unwrap().contains("POST"),
        "{r}"
    );
    // the server holds its index: a second server, or a rebuild, is refused (what the one
    // added would go to a journal the other does not read, or be dropped)
    let refused = |args: &[&str]| -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_nest"))
            .args(args)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        e
    };
    let tiny_dir = model.display().to_string();
    let serve_idx = [
        "serve", "--port", "0", "--model", &tiny_dir, "--index", &idx,
    ];
    let e = refused(&serve_idx);
    assert!(
        e.contains("in use by another process") && e.contains("serves or rebuilds"),
        "{e}"
    );
    let build = [
        "index", "build", "--model", &tiny_dir, "--input", &input, "--out", &idx,
    ];
    let rebuild = [&build[..], &["--layer", "2", "--overwrite"]].concat();
    let e = refused(&rebuild);
    assert!(e.contains("in use by another process"), "{e}");
    drop(s);
    drop(plain);
    // stopped, a rebuild still drops nothing added without a choice; --keep-added keeps it
    let e = refused(&rebuild);
    assert!(
        e.contains("holds 1 documents added, replaced or deleted through `nest serve`"),
        "{e}"
    );
    nest(&[&rebuild[..], &["--keep-added"]].concat());
    assert_eq!(
        cli("a purple giraffe sings opera", "float32:32", None)[0].0,
        "new1"
    );
    // queries and added documents are cut at the index's max length, not another
    let e = refused(&[&serve_idx[..], &["--max-length", "8"]].concat());
    assert!(
        e.contains("built at max length 64, but --max-length is 8"),
        "{e}"
    );
    let other = d.path().join("other");
    write_tiny_model(&other, &TinySpec::new(Architecture::Bert)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nest"))
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            &other.display().to_string(),
            "--index",
            &idx,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("built with model"),
        "{err}"
    );
}

/// An index built with `--store-text` records it, and documents `/v1/documents` adds keep
/// their texts as the built ones do (they were stored without, so hits showed no text).
#[test]
fn documents_added_to_a_store_text_index_keep_their_texts() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    std::fs::write(d.path().join("docs.txt"), "the cat sat\na dog ran\n").unwrap();
    let idx = d.path().join("idx").display().to_string();
    let input = d.path().join("docs.txt").display().to_string();
    let m = model.display().to_string();
    let build = [
        "index", "build", "--model", &m, "--input", &input, "--out", &idx,
    ];
    nest(&[&build[..], &["--store-text"]].concat());
    let s = start(&model, &["--index", &idx]);
    let add = json!({"documents": [
        {"id": "n1", "text": "a purple giraffe", "payload": {"lang": "fr"}},
        {"id": "n2", "text": "an orange whale"},
    ]});
    let (st, b) = http(&s.addr, "POST", "/v1/documents", add.to_string().as_bytes());
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&b));
    let payloads: Vec<Value> = ["a purple giraffe", "an orange whale", "the cat sat"]
        .iter()
        .map(|q| {
            let body = json!({"query": q, "k": 1}).to_string();
            let (_, b) = http(&s.addr, "POST", "/v1/search", body.as_bytes());
            let r: Value = serde_json::from_slice(&b).unwrap();
            r["data"][0]["hits"][0]["payload"].clone()
        })
        .collect();
    assert_eq!(
        payloads,
        [
            json!({"lang": "fr", "text": "a purple giraffe"}),
            json!({"text": "an orange whale"}),
            json!({"text": "the cat sat"}),
        ]
    );
    // without --store-text an added document keeps only the payload it was given
    drop(s);
    nest(&[&build[..], &["--payload", "--overwrite", "--drop-added"]].concat());
    let s = start(&model, &["--index", &idx]);
    http(&s.addr, "POST", "/v1/documents", add.to_string().as_bytes());
    let body = json!({"query": "a purple giraffe", "k": 1}).to_string();
    let (_, b) = http(&s.addr, "POST", "/v1/search", body.as_bytes());
    let r: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        r["data"][0]["hits"][0]["payload"],
        json!({"lang": "fr"}),
        "{r}"
    );
}

/// `/v1/documents` with `"existing": "replace"` replaces a document (built or added) and
/// `/v1/documents/delete` deletes one, durably: a restarted server and `nest search` see the
/// index as it stands (trial D U4: an added document could be neither replaced nor deleted).
#[test]
fn documents_are_replaced_and_deleted_durably() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    let texts = "the cat sat\na dog ran\na bird flew\nthe sun shone\n";
    std::fs::write(d.path().join("docs.txt"), texts).unwrap();
    let idx = d.path().join("idx").display().to_string();
    let input = d.path().join("docs.txt").display().to_string();
    let m = model.display().to_string();
    nest(&[
        "index",
        "build",
        "--model",
        &m,
        "--input",
        &input,
        "--out",
        &idx,
        "--store-text",
    ]);
    let s = start(&model, &["--index", &idx]);
    let post = |addr: &str, path: &str, body: Value| {
        let (st, b) = http(addr, "POST", path, body.to_string().as_bytes());
        (
            st,
            serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null),
        )
    };
    let giraffe = json!({"documents": [{"id": "1", "text": "a purple giraffe"}]});
    let (_, r) = post(&s.addr, "/v1/documents", giraffe.clone());
    assert_eq!(
        (&r["existing"], &r["replaced"]),
        (&json!(["1"]), &json!([])),
        "{r}"
    );
    let mut replace = giraffe.clone();
    replace["existing"] = json!("replace");
    let (st, r) = post(&s.addr, "/v1/documents", replace);
    assert_eq!(
        (st, &r["replaced"], &r["count"]),
        (200, &json!(["1"]), &json!(4)),
        "{r}"
    );
    let (_, r) = post(
        &s.addr,
        "/v1/documents/delete",
        json!({"ids": ["2", "nope"]}),
    );
    assert_eq!(
        (&r["deleted"], &r["missing"], &r["count"]),
        (&json!(["2"]), &json!(["nope"]), &json!(3)),
        "{r}"
    );
    let (_, r) = post(&s.addr, "/v1/documents/delete", json!({"ids": "2"}));
    assert_eq!(
        r["missing"],
        json!(["2"]),
        "a retry deletes nothing more: {r}"
    );
    for (path, body, says) in [
        (
            "/v1/documents",
            json!({"documents": [{"id": "x", "text": "t"}], "existing": "upsert"}),
            "'existing' must be \"keep\" or \"replace\"",
        ),
        ("/v1/documents/delete", json!({"ids": []}), "'ids' must be"),
        (
            "/v1/documents/delete",
            json!({"id": "1"}),
            "(did you mean 'ids'?)",
        ),
    ] {
        let (st, r) = post(&s.addr, path, body);
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert!(st == 400 && m.contains(says), "{r}");
    }
    // what the index holds: "1" as replaced, no "2", the others as built
    let stands = |hits: Vec<(String, String)>| {
        let mut h = hits;
        h.sort();
        let want = [
            ("1", "a purple giraffe"),
            ("3", "a bird flew"),
            ("4", "the sun shone"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(i, t)| (i.to_string(), t.to_string()))
            .collect();
        assert_eq!(h, want);
    };
    let served = |addr: &str| -> Vec<(String, String)> {
        let (_, r) = post(addr, "/v1/search", json!({"query": "a dog ran", "k": 10}));
        let hits = r["data"][0]["hits"].as_array().unwrap().clone();
        hits.iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().into(),
                    h["payload"]["text"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    stands(served(&s.addr));
    drop(s);
    let s = start(&model, &["--index", &idx]);
    stands(served(&s.addr));
    drop(s);
    let line = nest(&[
        "search",
        "--index",
        &idx,
        "--query",
        "a dog ran",
        "--k",
        "10",
    ]);
    let r: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let cli: Vec<(String, String)> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().into(),
                h["payload"]["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    stands(cli);
    // `nest index info`: 4 built, "1" replaced (an added document), "2" deleted, 3 searched
    let info: Value = serde_json::from_str(&nest(&["index", "info", "--index", &idx])).unwrap();
    let counts = ["count", "documents", "added", "deleted"].map(|k| info[k].clone());
    assert_eq!(counts, [json!(4), json!(3), json!(1), json!(1)], "{info}");
}

/// An index embeds its documents with the model's document prompt and records it; `nest search`
/// and `/v1/search` embed queries with its query prompt, and `/v1/documents` embeds added
/// documents as the built ones were (all three used the default prompt, here none).
#[test]
fn an_index_embeds_documents_and_queries_with_their_prompts() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    std::fs::write(
        model.join("config_sentence_transformers.json"),
        json!({"prompts": {"query": "query: ", "passage": "passage: "}}).to_string(),
    )
    .unwrap();
    let m = model.display().to_string();
    let lines = [
        "the cat sat",
        "a dog ran",
        "birds fly south",
        "red car",
        "blue sea",
        "a purple giraffe",
    ];
    std::fs::write(d.path().join("all.txt"), lines.join("\n") + "\n").unwrap();
    std::fs::write(d.path().join("five.txt"), lines[..5].join("\n") + "\n").unwrap();
    let p = |name: &str| d.path().join(name).display().to_string();
    let build = |input: &str, out: &str, extra: &[&str]| {
        let args = [
            "index",
            "build",
            "--model",
            &m,
            "--input",
            &p(input),
            "--out",
            &p(out),
        ];
        nest(&[&args[..], extra].concat());
    };
    build("all.txt", "a", &[]);
    build("all.txt", "b", &["--prompt-name", "passage"]);
    build("all.txt", "c", &["--prompt", ""]);
    let source = |i: &str| -> Value {
        let m: Value = serde_json::from_str(
            &std::fs::read_to_string(d.path().join(i).join("index.json")).unwrap(),
        )
        .unwrap();
        m["source"]["document_prompt"].clone()
    };
    assert_eq!(
        (source("a"), source("c")),
        (json!("passage: "), Value::Null)
    );
    let level = |i: &str| {
        let dir = d.path().join(i);
        let f = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|f| f.extension().is_some_and(|e| e == "bin"))
            .unwrap();
        std::fs::read(f).unwrap()
    };
    assert!(
        level("a") == level("b"),
        "the default is the model's document prompt"
    );
    assert!(level("a") != level("c"));
    // queries: the model's query prompt by default
    let scores = |index: &str, extra: &[&str]| -> Vec<(String, f64)> {
        let args = [
            "search",
            "--index",
            &p(index),
            "--query",
            "a purple giraffe",
            "--k",
            "6",
        ];
        let line: Value =
            serde_json::from_str(nest(&[&args[..], extra].concat()).lines().next().unwrap())
                .unwrap();
        let hits = line["hits"].as_array().unwrap().iter();
        hits.map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
    };
    let cli = scores("a", &[]);
    assert_eq!(cli, scores("a", &["--prompt-name", "query"]));
    assert_ne!(cli, scores("a", &["--prompt", ""]));
    // the server: the same query prompt, and an added document embedded as the built ones
    build("five.txt", "five", &[]);
    let s = start(&model, &["--index", &p("five")]);
    let add = json!({"documents": [{"id": "6", "text": "a purple giraffe"}]});
    let (st, _) = http(&s.addr, "POST", "/v1/documents", add.to_string().as_bytes());
    assert_eq!(st, 200);
    let body = json!({"query": "a purple giraffe", "k": 6}).to_string();
    let (_, b) = http(&s.addr, "POST", "/v1/search", body.as_bytes());
    let r: Value = serde_json::from_slice(&b).unwrap();
    let api: Vec<(String, f64)> = r["data"][0]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(api.len(), cli.len(), "{r}");
    for ((i, x), (j, y)) in api.iter().zip(&cli) {
        assert!(i == j && (x - y).abs() < 1e-5, "{api:?} vs {cli:?}");
    }
    drop(s);
    // an index from before the prompt was recorded counts as built with the default prompt
    // (none here), as `nest mine --corpus-index` assumes: an added document matches
    build("five.txt", "old", &["--prompt", ""]);
    let manifest = d.path().join("old").join("index.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["source"]
        .as_object_mut()
        .unwrap()
        .remove("document_prompt");
    std::fs::write(&manifest, m.to_string()).unwrap();
    let s = start(&model, &["--index", &p("old")]);
    let (st, _) = http(&s.addr, "POST", "/v1/documents", add.to_string().as_bytes());
    assert_eq!(st, 200);
    let (_, b) = http(&s.addr, "POST", "/v1/search", body.as_bytes());
    let r: Value = serde_json::from_slice(&b).unwrap();
    let unprompted = scores("c", &[]);
    let six = |hits: &[(String, f64)]| hits.iter().find(|h| h.0 == "6").unwrap().1;
    let mut got = r["data"][0]["hits"].as_array().unwrap().iter();
    let got = got.find(|h| h["id"] == "6").unwrap()["score"]
        .as_f64()
        .unwrap();
    assert!(
        (got - six(&unprompted)).abs() < 1e-5,
        "{got} vs {unprompted:?}"
    );
    assert!(
        (got - six(&cli)).abs() > 1e-4,
        "the document prompt would give {cli:?}"
    );
}

/// Several models (and a model with an adaptor under another name) in one process: each
/// request is answered by the model it names, with the vectors a one-model server gives.
#[test]
fn several_models_in_one_process_each_answer_their_own_requests() {
    let d = tempfile::tempdir().unwrap();
    let bert = tiny(d.path());
    let mpnet = d.path().join("mpnet");
    write_tiny_model(&mpnet, &TinySpec::new(Architecture::Mpnet)).unwrap();
    let (b, m) = (bert.display().to_string(), mpnet.display().to_string());
    let both = start(&bert, &["--model", &format!("second={m}")]);
    let (st, r) = http(&both.addr, "GET", "/v1/models", b"");
    let r: Value = serde_json::from_slice(&r).unwrap();
    assert_eq!(st, 200);
    let ids: Vec<&str> = r["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tiny", "second"]);
    let ask = |addr: &str, model: Option<&str>| {
        let mut body = json!({"input": ["the cat sat", "dog"]});
        if let Some(m) = model {
            body["model"] = json!(m);
        }
        let (st, r) = post(addr, &body);
        assert_eq!(st, 200, "{r}");
        (vectors(&r), r["model"].as_str().unwrap().to_string())
    };
    // a server that ignores fields it does not read answers one OpenAI would refuse
    let alone_b = start(&bert, &["--ignore-unknown-fields"]);
    let extra = json!({"input": "x", "normalize": true});
    assert_eq!(post(&alone_b.addr, &extra).0, 200);
    let (st, r) = post(&both.addr, &extra);
    let m = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        st == 400 && m.contains("argument supplied: 'normalize'"),
        "{r}"
    );
    // an input past the max length (64 tokens): cut, the header counting it (helper trial D:
    // cut without a word), or refused with TEI's "truncate": false; one within it: no header
    // (--max-batch-tokens is 64 here: one long input a request)
    let long = "the cat sat on the mat ".repeat(20);
    for (body, status, cut) in [
        (json!({"input": [long.as_str()]}), 200, Some("1")),
        (
            json!({"input": [long.as_str()], "truncate": true}),
            200,
            Some("1"),
        ),
        (
            json!({"input": ["dog", "cat"], "truncate": false}),
            200,
            None,
        ),
        (
            json!({"input": ["dog", long.as_str()], "truncate": false}),
            413,
            None,
        ),
    ] {
        let (st, head, b) = http_full(
            &alone_b.addr,
            "POST",
            "/v1/embeddings",
            body.to_string().as_bytes(),
            "",
        );
        let head = head.to_ascii_lowercase();
        let said = head
            .lines()
            .find_map(|l| l.strip_prefix("x-truncated-inputs: "))
            .map(str::trim);
        assert_eq!((st, said), (status, cut), "{head}");
        if st == 413 {
            let m = String::from_utf8_lossy(&b);
            assert!(
                m.contains("input[1] has") && m.contains("past the model's max length"),
                "{m}"
            );
        }
    }
    let alone_m = start(&mpnet, &[]);
    let close = |x: &[Vec<f32>], y: &[Vec<f32>]| {
        x.len() == y.len()
            && x.iter().zip(y).all(|(a, b)| {
                a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-5)
            })
    };
    let (v_first, n_first) = ask(&both.addr, None);
    let (v_named, _) = ask(&both.addr, Some("tiny"));
    let (v_second, n_second) = ask(&both.addr, Some("second"));
    assert_eq!((n_first.as_str(), n_second.as_str()), ("tiny", "second"));
    assert!(close(&v_first, &ask(&alone_b.addr, None).0) && close(&v_named, &v_first));
    assert!(close(&v_second, &ask(&alone_m.addr, None).0));
    assert!(!close(&v_first, &v_second));
    let (st, r) = post(&both.addr, &json!({"input": "x", "model": "third"}));
    assert_eq!(st, 400);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("second"),
        "{r}"
    );
    // two models under one name are refused at start
    let out = Command::new(env!("CARGO_BIN_EXE_nest"))
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            &format!("x={b}"),
            "--model",
            &format!("x={m}"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("served as 'x'"),
        "{err}"
    );
}

/// `kill -9` while clients add documents and search: after a restart every acknowledged
/// document is found, and no id is in the journal twice.
#[test]
fn kill_9_during_adds_loses_nothing_acknowledged_and_duplicates_nothing() {
    let d = tempfile::tempdir().unwrap();
    let model = tiny(d.path());
    std::fs::write(
        d.path().join("docs.txt"),
        "the cat sat\na dog ran\nbirds fly south\n",
    )
    .unwrap();
    let (m, idx) = (
        model.display().to_string(),
        d.path().join("idx").display().to_string(),
    );
    let input = d.path().join("docs.txt").display().to_string();
    nest(&[
        "index", "build", "--model", &m, "--input", &input, "--out", &idx, "--dims", "32",
    ]);
    let mut s = start(&model, &["--index", &idx]);
    let addr = s.addr.clone();
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, acked) = (addr.clone(), std::sync::Arc::clone(&acked));
            std::thread::spawn(move || {
                for i in 0..1000 {
                    // ids overlap between workers: retries and races must not duplicate
                    let id = format!("n{}", (i * 4 + w) / 2);
                    let body =
                        json!({"documents": [{"id": id, "text": format!("note {id} about {w}")}]});
                    let (st, b) = http(&addr, "POST", "/v1/documents", body.to_string().as_bytes());
                    if st != 200 {
                        break; // killed
                    }
                    let r: Value = serde_json::from_slice(&b).unwrap();
                    for x in r["added"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .chain(r["existing"].as_array().unwrap())
                    {
                        acked.lock().unwrap().push(x.as_str().unwrap().to_string());
                    }
                    let _ = http(&addr, "POST", "/v1/search", br#"{"query":"note","k":3}"#);
                }
            })
        })
        .collect();
    // kill once some adds are through (however slow the machine), while the rest run
    let t = Instant::now();
    while acked.lock().unwrap().len() < 24 && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    for w in workers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 10,
        "only {} adds acknowledged before the kill",
        acked.len()
    );
    let journal = std::fs::read_to_string(d.path().join("idx/added.jsonl")).unwrap();
    let s = start(&model, &["--index", &idx]);
    let mut ids: Vec<String> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "an id is in the journal twice");
    for id in &acked {
        assert!(
            ids.binary_search(id).is_ok(),
            "{id} was acknowledged but is gone"
        );
    }
    // the restarted server holds them all
    for chunk in acked.chunks(4).take(10) {
        let body = json!({"documents": chunk.iter().map(|id| json!({"id": id, "text": "again"})).collect::<Vec<_>>()});
        let (st, b) = http(
            &s.addr,
            "POST",
            "/v1/documents",
            body.to_string().as_bytes(),
        );
        let r: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(st, 200, "{r}");
        assert!(r["added"].as_array().unwrap().is_empty(), "{r}");
    }
}
