//! The hub download path against a local HTTP server (loopback only) that serves a generated
//! tiny model in the hub's URL layout: `<endpoint>/<org>/<name>/resolve/main/<file>`. Its own
//! test binary, since it sets `HF_ENDPOINT` and `NEST_CACHE` for the process.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};

/// Serves files of `root` for `max_requests` requests, 404 for anything else.
fn serve(root: PathBuf, max_requests: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for stream in listener.incoming().take(max_requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                    break;
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            seen.push(path.clone());
            let file = path
                .strip_prefix("/org/tiny/resolve/main/")
                .map(|f| root.join(f));
            match file.filter(|f| f.is_file()) {
                Some(f) => {
                    let body = std::fs::read(f).unwrap();
                    write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .unwrap();
                    stream.write_all(&body).unwrap();
                }
                None => {
                    write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    .unwrap();
                }
            }
        }
        seen
    });
    (addr, handle)
}

/// The tests set process-wide variables: one at a time.
static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}/model"))
}

#[test]
fn downloads_from_a_hub_endpoint_and_loads() {
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("HF_HUB_CACHE", "/nonexistent-hf-cache");
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("served");
    write_tiny_model(&model, &TinySpec::new(Architecture::Mpnet)).unwrap();
    // 3 required + 6 optional files are asked for (3 optional ones exist, 3 answer 404), and
    // the two files of modules.json's 2_Normalize folder (404: Normalize has none)
    let (endpoint, server) = serve(model.clone(), 11);
    std::env::set_var("HF_ENDPOINT", &endpoint);
    std::env::set_var("NEST_CACHE", d.path().join("cache"));
    let dir = nest_model::hub::resolve("org/tiny").unwrap();
    assert_eq!(dir, d.path().join("cache").join("org--tiny"));
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 11, "{seen:?}");
    for f in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "1_Pooling/config.json",
    ] {
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(model.join(f)).unwrap(),
            "{f}"
        );
    }
    let enc = ElasticEncoder::load(&dir, tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.num_layers(), 2);
    // a second resolve uses the cache: no server is listening any more
    assert_eq!(nest_model::hub::resolve("org/tiny").unwrap(), dir);
    // an unknown repository: a clear error naming the URL and the status
    let (endpoint, server) = serve(model, 1);
    std::env::set_var("HF_ENDPOINT", &endpoint);
    let e = nest_model::hub::resolve("org/missing")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("org/missing/resolve/main/config.json") && e.contains("HTTP 404"),
        "{e}"
    );
    server.join().unwrap();
}

/// EmbeddingGemma through the hub: the module folders that modules.json names (`2_Dense`,
/// `3_Dense`) are downloaded too, and the model loads with both Dense modules and gives the
/// vectors of the local folder.
#[test]
fn a_hub_download_brings_the_dense_modules() {
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("HF_HUB_CACHE", "/nonexistent-hf-cache");
    let d = tempfile::tempdir().unwrap();
    let local = fixture("embeddinggemma-tiny");
    // 3 required + 6 optional (5 present, nest.json 404) + 2 files for each of 2_Dense,
    // 3_Dense and 4_Normalize (404)
    let (endpoint, server) = serve(local.clone(), 15);
    std::env::set_var("HF_ENDPOINT", &endpoint);
    std::env::set_var("NEST_CACHE", d.path().join("cache"));
    let dir = nest_model::hub::resolve("org/tiny").unwrap();
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 15, "{seen:?}");
    assert!(dir.join(".complete").is_file());
    let got = ElasticEncoder::load(&dir, tch::Device::Cpu, None).unwrap();
    let want = ElasticEncoder::load(&local, tch::Device::Cpu, None).unwrap();
    assert_eq!(got.head.describe(), "32 -> 128 -> 32");
    let texts = ["a frog jumps", "the cat sat on the mat"];
    let opts = nest_model::EncodeOptions::batch(2);
    let a = got.embed_layers(&texts, &[4], opts, &mut |_| {}).unwrap();
    let b = want.embed_layers(&texts, &[4], opts, &mut |_| {}).unwrap();
    assert!(
        a[0].equal(&b[0]),
        "the downloaded model gives the local vectors"
    );
}

/// A model that huggingface_hub or sentence-transformers already downloaded is read from their
/// cache (`models--org--name/refs/main` -> `snapshots/<rev>/`) without any request: the endpoint
/// here listens nowhere.
#[test]
fn the_hugging_face_cache_is_read_without_a_request() {
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("hf/models--org--gemma");
    let snap = repo.join("snapshots/0123abcd");
    copy_dir(&fixture("embeddinggemma-tiny"), &snap);
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
    std::env::set_var("HF_HUB_CACHE", d.path().join("hf"));
    std::env::set_var("HF_ENDPOINT", "http://127.0.0.1:9");
    std::env::set_var("NEST_CACHE", d.path().join("nest-cache"));
    assert_eq!(nest_model::hub::resolve("org/gemma").unwrap(), snap);
    let enc = ElasticEncoder::load(&snap, tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.head.modules().len(), 2);
    // a repository the cache lacks goes to the endpoint, which fails clearly
    let e = nest_model::hub::resolve("org/other")
        .unwrap_err()
        .to_string();
    assert!(e.contains("org/other/resolve/main/config.json"), "{e}");
    std::env::set_var("HF_HUB_CACHE", "/nonexistent-hf-cache");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), t).unwrap();
        }
    }
}
