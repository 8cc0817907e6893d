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

#[test]
fn downloads_from_a_hub_endpoint_and_loads() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("served");
    write_tiny_model(&model, &TinySpec::new(Architecture::Mpnet)).unwrap();
    // 3 required + 5 optional files are asked for (3 optional ones exist, 2 answer 404)
    let (endpoint, server) = serve(model.clone(), 8);
    std::env::set_var("HF_ENDPOINT", &endpoint);
    std::env::set_var("NEST_CACHE", d.path().join("cache"));
    let dir = nest_model::hub::resolve("org/tiny").unwrap();
    assert_eq!(dir, d.path().join("cache").join("org--tiny"));
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 8, "{seen:?}");
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
