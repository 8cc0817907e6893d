//! `nest export pgvector` and `nest search --engine pgvector` against a real PostgreSQL 15 +
//! pgvector started by the test (initdb in a temporary folder, loopback port).
//! `scripts/setup/setup_pgvector.sh` installs both; without them the test skips with a reason
//! (under CI, `NEST_REQUIRE_MODELS=1`, it fails instead).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;
use serde_json::Value;

const BIN: &str = "/usr/lib/postgresql/15/bin";

struct Pg {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn as_pg(cmd: &str, args: &[&str]) -> Command {
    // initdb and postgres refuse to run as root: run them as the `postgres` user there
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &format!("{BIN}/{cmd}")])
            .args(args);
        c
    } else {
        let mut c = Command::new(format!("{BIN}/{cmd}"));
        c.args(args);
        c
    }
}

/// Spawns with stdout/stderr captured, to be collected with `wait_with_output`.
trait OutputLater {
    fn output_later(&mut self) -> Child;
}

impl OutputLater for Command {
    fn output_later(&mut self) -> Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_pg() -> Option<Pg> {
    let have = Path::new(BIN).join("initdb").exists()
        && Path::new("/usr/share/postgresql/15/extension/vector.control").exists();
    if !have {
        let required = std::env::var("NEST_REQUIRE_MODELS").is_ok_and(|v| v == "1")
            || std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!required, "PostgreSQL 15 + pgvector are missing and CI requires them: run scripts/setup/setup_pgvector.sh");
        eprintln!("skipping: PostgreSQL 15 + pgvector not installed (scripts/setup/setup_pgvector.sh installs them)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let _ = Command::new("chmod")
        .args(["777", &dir.path().display().to_string()])
        .status();
    let _ = Command::new("chown")
        .args(["postgres", &data.display().to_string()])
        .status();
    let o = as_pg(
        "initdb",
        &[
            "-D",
            &data.display().to_string(),
            "-U",
            "postgres",
            "-A",
            "trust",
        ],
    )
    .output()
    .unwrap();
    assert!(
        o.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let port = free_port();
    let child = as_pg(
        "postgres",
        &[
            "-D",
            &data.display().to_string(),
            "-p",
            &port.to_string(),
            "-h",
            "127.0.0.1",
            "-k",
            &dir.path().display().to_string(),
            "-c",
            "fsync=off",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let pg = Pg {
        child,
        port,
        _dir: dir,
    };
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "postgres did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    Some(pg)
}

fn nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32") // the figures these tests check are float32 (bf16/int8: tests/dtype.rs)
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = nest(args);
    assert!(
        o.status.success(),
        "nest {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ids(line: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn export_and_funnel_search_in_pgvector_agree_with_nest() {
    let Some(pg) = start_pg() else { return };
    let d = tempfile::tempdir().unwrap();
    let model: PathBuf = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let words = [
        "cat", "dog", "music", "guitar", "mat", "sun", "rain", "tree", "car", "road", "bird", "sea",
    ];
    let mut corpus = String::new();
    for i in 0..120 {
        let text = format!(
            "{} {} {} {}",
            words[i % 12],
            words[(i / 12) % 12],
            words[(i * 7) % 12],
            i
        );
        corpus.push_str(
            &serde_json::json!({"_id": format!("d{i}"), "text": text, "tag\tx": "a\\b"})
                .to_string(),
        );
        corpus.push('\n');
    }
    std::fs::write(d.path().join("c.jsonl"), corpus).unwrap();
    let idx = d.path().join("idx").display().to_string();
    let m = model.display().to_string();
    ok(&[
        "index",
        "build",
        "--model",
        &m,
        "--input",
        &d.path().join("c.jsonl").display().to_string(),
        "--dims",
        "8,32",
        "--precision",
        "float32,binary",
        "--payload",
        "--out",
        &idx,
    ]);
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        pg.port
    );
    ok(&[
        "export", "pgvector", "--index", &idx, "--dsn", &dsn, "--table", "docs",
    ]);
    // no silent replacement; a bad table name is refused before anything is sent
    let o = nest(&[
        "export", "pgvector", "--index", &idx, "--dsn", &dsn, "--table", "docs",
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--overwrite"));
    let o = nest(&[
        "export",
        "pgvector",
        "--index",
        &idx,
        "--dsn",
        &dsn,
        "--table",
        "docs;drop",
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("table"));
    // a table that is not there is named; a query model of another width is refused, as the
    // nest engine refuses it (helper trial E: "no --index to read the model from", and hits
    // ranked by a 16-dim model's queries against 32-dim documents)
    let wide = d.path().join("wide");
    let spec = TinySpec {
        hidden: 16,
        heads: 2,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&wide, &spec).unwrap();
    let w = wide.display().to_string();
    let search = [
        "search", "--engine", "pgvector", "--dsn", &dsn, "--query", "cat",
    ];
    for (more, says) in [
        (&["--table", "nope"][..], "no table 'nope' in this database"),
        (
            &["--table", "docs", "--model", &w],
            "the query model gives 16 dims, the table 'docs' holds 32",
        ),
    ] {
        let o = nest(&[&search[..], more].concat());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains(says), "{e}");
    }
    // a document a server added (the index's journal) is exported too: it was left out, while
    // `nest search` (and the server) return it; the searches below compare the two
    let q = d.path().join("q.txt");
    std::fs::write(&q, "a bird over the sea\n").unwrap();
    let (qi, qo) = (q.display().to_string(), d.path().join("q.jsonl"));
    let qo = qo.display().to_string();
    ok(&["encode", "--model", &m, "--input", &qi, "--output", &qo]);
    let e: Value = serde_json::from_str(std::fs::read_to_string(&qo).unwrap().trim()).unwrap();
    let added = serde_json::json!({"id": "added1", "payload": {"k": 1}, "vector": e["embedding"]});
    // and a built document a server deleted is not (the journal's `{"delete": id}`)
    let rain = [
        "search",
        "--index",
        &idx,
        "--query",
        "rain on the road",
        "--k",
        "1",
    ];
    let gone = ids(ok(&rain).trim()).remove(0);
    let delete = serde_json::json!({ "delete": gone });
    std::fs::write(
        d.path().join("idx/added.jsonl"),
        format!("{added}\n{delete}\n"),
    )
    .unwrap();
    ok(&[
        "export",
        "pgvector",
        "--index",
        &idx,
        "--dsn",
        &dsn,
        "--table",
        "docs",
        "--overwrite",
    ]);
    for funnel in [
        "float32:32",
        "binary:32@60>float32:8@20>float32:32",
        "float32:8@40>float32:32",
    ] {
        for q in ["cat dog music", "rain on the road", "a bird over the sea"] {
            let ours = ids(ok(&[
                "search", "--index", &idx, "--query", q, "--funnel", funnel, "--k", "5",
            ])
            .trim());
            let theirs = ids(ok(&[
                "search", "--engine", "pgvector", "--dsn", &dsn, "--table", "docs", "--index",
                &idx, "--query", q, "--funnel", funnel, "--k", "5",
            ])
            .trim());
            assert_eq!(theirs.len(), 5, "{funnel} {q}");
            assert!(
                !ours.contains(&gone) && !theirs.contains(&gone),
                "{funnel} {q}"
            );
            // pgvector stores halfvec (11-bit mantissa): near-ties may swap, so at least 4 of 5
            // shared and the same best hit
            let shared = theirs.iter().filter(|i| ours.contains(i)).count();
            assert!(
                shared >= 4 && ours[0] == theirs[0],
                "{funnel} {q}: nest {ours:?} vs pgvector {theirs:?}"
            );
        }
    }
    // the same export from 2 processes (as torchrun launches them) into another table: every
    // row once, the same exact search results (an exact scan: HNSW graphs depend on the order
    // rows arrived in, which differs when two processes copy at once)
    let port = free_port().to_string();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            Command::new(env!("CARGO_BIN_EXE_nest"))
                .args([
                    "export", "pgvector", "--index", &idx, "--dsn", &dsn, "--table", "docs2",
                ])
                .env("WORLD_SIZE", "2")
                .env("RANK", r.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .output_later()
        })
        .collect();
    for (r, o) in ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .enumerate()
    {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "rank {r}: {err}");
    }
    // every row once, with the same vector: an exact scan (a full-length float32 stage has no
    // HNSW index) of every row gives each id the same score in both tables
    let scores = |table: &str, q: &str| -> std::collections::BTreeMap<String, String> {
        let out = ok(&[
            "search",
            "--engine",
            "pgvector",
            "--dsn",
            &dsn,
            "--table",
            table,
            "--index",
            &idx,
            "--query",
            q,
            "--funnel",
            "float32:32",
            "--k",
            "500",
        ]);
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let s = h["score"].as_f64().unwrap();
                (h["id"].as_str().unwrap().to_string(), format!("{s:.6}"))
            })
            .collect()
    };
    for q in ["cat dog music", "rain on the road"] {
        let two = scores("docs2", q);
        assert_eq!(
            two.len(),
            120,
            "every row exactly once, the added one too, the deleted not"
        );
        assert_eq!(two, scores("docs", q), "{q}");
    }
    // int8 has no pgvector type: a clear error
    let o = nest(&[
        "search", "--engine", "pgvector", "--dsn", &dsn, "--table", "docs", "--index", &idx,
        "--query", "x", "--funnel", "int8:32",
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("int8"));
    // the table records its index's model and layer: without --index a search embeds the
    // queries as the documents were (it needed --index or --model before), hits carry the
    // rows' payloads, and an index of another layer is refused (it searched silently)
    let found = |extra: &[&str]| -> Value {
        let mut args = vec![
            "search", "--engine", "pgvector", "--dsn", &dsn, "--table", "docs",
        ];
        args.extend(extra);
        args.extend(["--query", "a bird over the sea", "--k", "3"]);
        serde_json::from_str(ok(&args).trim()).unwrap()
    };
    let (bare, indexed) = (found(&[]), found(&["--index", &idx]));
    assert_eq!(bare["hits"], indexed["hits"]);
    assert_eq!(bare["hits"][0]["id"], "added1", "{bare}");
    assert_eq!(bare["hits"][0]["payload"], serde_json::json!({"k": 1}));
    assert_eq!(bare["hits"][1]["payload"]["tag\tx"], "a\\b", "{bare}");
    // an index embedded otherwise than the table's documents is refused, naming the
    // difference: another layer, or (it searched silently) another document prompt
    let input = d.path().join("c.jsonl").display().to_string();
    for (name, extra, differs) in [
        ("idx1", ["--layer", "1"], "layer 2 -> 1"),
        (
            "idx_p",
            ["--prompt", "passage: "],
            "document_prompt null -> \"passage: \"",
        ),
    ] {
        let other = d.path().join(name).display().to_string();
        let build = [
            "index", "build", "--model", &m, "--input", &input, "--out", &other,
        ];
        ok(&[&build[..], &extra].concat());
        let o = nest(&[
            "search", "--engine", "pgvector", "--dsn", &dsn, "--table", "docs", "--index", &other,
            "--query", "x",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(differs), "{err}");
    }
}

/// `kill -9` of a one-process `nest export pgvector` at seeded random moments: the table is
/// all or nothing (one transaction), and a rerun then gives every row once with the
/// uninterrupted export's scores.
#[test]
fn an_export_killed_at_random_moments_is_all_or_nothing() {
    let Some(pg) = start_pg() else { return };
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let mut corpus = String::new();
    for i in 0..2000 {
        corpus.push_str(&format!(
            "{{\"_id\": \"d{i}\", \"text\": \"doc {i} of {}\"}}\n",
            i % 37
        ));
    }
    std::fs::write(d.path().join("c.jsonl"), corpus).unwrap();
    let idx = d.path().join("idx").display().to_string();
    ok(&[
        "index",
        "build",
        "--model",
        &model.display().to_string(),
        "--input",
        &d.path().join("c.jsonl").display().to_string(),
        "--dims",
        "8,32",
        "--precision",
        "float32,binary",
        "--out",
        &idx,
    ]);
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        pg.port
    );
    let export = |table: &str| -> Vec<String> {
        [
            "export", "pgvector", "--index", &idx, "--dsn", &dsn, "--table", table,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let rows = |table: &str| -> Option<Vec<(String, String)>> {
        let o = nest(&[
            "search",
            "--engine",
            "pgvector",
            "--dsn",
            &dsn,
            "--table",
            table,
            "--index",
            &idx,
            "--query",
            "doc 7",
            "--funnel",
            "float32:32",
            "--k",
            "5000",
        ]);
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(table), "a missing table is named: {err}");
            return None;
        }
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut r: Vec<(String, String)> = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let s = h["score"].as_f64().unwrap();
                (h["id"].as_str().unwrap().to_string(), format!("{s:.6}"))
            })
            .collect();
        r.sort();
        Some(r)
    };
    // ("full" itself is refused: a reserved word, found by this test)
    let o = nest(
        &export("full")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("reserved word"));
    let t = Instant::now();
    let a = export("whole");
    ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let t_full = t.elapsed();
    let want = rows("whole").unwrap();
    assert_eq!(want.len(), 2000);
    let mut kills = 0;
    for (seed, share) in [0.1, 0.3, 0.5, 0.7].into_iter().enumerate() {
        let table = format!("cut{seed}");
        let a = export(&table);
        let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
            .args(&a)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(t_full.mul_f64(share));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();
        // let the server notice the dead client and roll its transaction back
        std::thread::sleep(Duration::from_millis(500));
        match rows(&table) {
            Some(r) => assert_eq!(r, want, "seed {seed}: a visible table is complete"),
            None => {
                ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
                assert_eq!(rows(&table).unwrap(), want, "seed {seed}: the rerun");
            }
        }
    }
    assert!(
        kills >= 2,
        "only {kills} of 4 exports were killed before they ended"
    );
}
