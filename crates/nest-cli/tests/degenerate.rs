//! Well-formed but degenerate data end to end (issue 23): constant gold scores and a single
//! pair (Spearman undefined: reported as NaN, the command finishes; this used to hang while
//! plotting an infinite axis), and a corpus smaller than k. Every command runs under a deadline.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

/// Runs nest with `args`; fails if it takes longer than 120 s or exits non-zero. Returns stdout.
fn finishes(args: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(120) {
            c.kill().unwrap();
            panic!("nest {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "nest {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn undefined_metrics_are_reported_and_small_corpora_searched() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("tiny");
    write_tiny_model(&m, &TinySpec::new(Architecture::Bert)).unwrap();
    let m = m.display().to_string();
    let root = d.path().join("root");
    for (task, body) in [
        (
            "stsb",
            "a cat\ta dog\t3\nrain\tsun\t3\nthe sea\ta bird\t3\n",
        ),
        ("sick-r", "a cat\ta dog\t3\n"),
    ] {
        std::fs::create_dir_all(root.join(task)).unwrap();
        std::fs::write(
            root.join(task).join("test.tsv"),
            format!("sentence1\tsentence2\tscore\n{body}"),
        )
        .unwrap();
    }
    let out = d.path().join("rep");
    finishes(&[
        "eval",
        "--model",
        &m,
        "--data-root",
        &root.display().to_string(),
        "--tasks",
        "sts",
        "--layers",
        "2",
        "--dims",
        "32",
        "--latency-texts",
        "0",
        "--out",
        &out.display().to_string(),
    ]);
    let report = nest_eval::Report::read(&out.join("report.json")).unwrap();
    for t in &report.tasks {
        assert!(t.cells[0].metrics["spearman"].is_nan(), "{}", t.task);
    }
    assert!(out.join("report.md").exists());
    // a corpus of 2 documents searched for 10
    let c = d.path().join("c.jsonl");
    std::fs::write(
        &c,
        "{\"_id\": \"a\", \"text\": \"a cat\"}\n{\"_id\": \"b\", \"text\": \"rain\"}\n",
    )
    .unwrap();
    let idx = d.path().join("idx").display().to_string();
    finishes(&[
        "index",
        "build",
        "--model",
        &m,
        "--input",
        &c.display().to_string(),
        "--dims",
        "8,32",
        "--precision",
        "float32,binary",
        "--out",
        &idx,
    ]);
    let hits = finishes(&[
        "search",
        "--index",
        &idx,
        "--query",
        "cat",
        "--funnel",
        "binary:32@5>float32:32",
        "--k",
        "10",
    ]);
    let v: serde_json::Value = serde_json::from_str(hits.trim()).unwrap();
    assert_eq!(v["hits"].as_array().unwrap().len(), 2, "{v}");
}
