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
        // and says why (helper trial D: NaN without a reason)
        let why = t.warnings.join(" ");
        assert!(
            why.contains("a Spearman correlation") && why.contains("NaN"),
            "{}: {why}",
            t.task
        );
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

/// A model with one layer (issue 23): every command that takes a model finishes on it, and the
/// objectives that train shallow layers (2DMSE, ESE, MIPIC, MIC) either train the one layer
/// there is or refuse with a reason; nothing panics or hangs.
#[test]
fn a_one_layer_model_runs_every_command() {
    let d = tempfile::tempdir().unwrap();
    let s = |p: &std::path::Path| p.display().to_string();
    let m = d.path().join("one");
    let spec = TinySpec {
        layers: 1,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&m, &spec).unwrap();
    let ms = s(&m);
    finishes(&["info", "--model", &ms]);
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a cat\nthe rain falls\n").unwrap();
    let out = d.path().join("e.jsonl");
    finishes(&[
        "encode",
        "--model",
        &ms,
        "--layer",
        "1",
        "--dim",
        "8",
        "--input",
        &s(&input),
        "--output",
        &s(&out),
    ]);
    let data = d.path().join("sts.tsv");
    std::fs::write(
        &data,
        "sentence1\tsentence2\tscore\na cat\ta dog\t3\nrain\tsun\t1\nthe sea\ta bird\t2\nhi\tho\t4\n",
    )
    .unwrap();
    finishes(&[
        "eval",
        "sts",
        "--data",
        &s(&data),
        "--model",
        &ms,
        "--dims",
        "8,32",
        "--latency-texts",
        "0",
        "--out",
        &s(&d.path().join("rep")),
    ]);
    for (name, objective) in [
        ("mrl", r#"[{kind = "mrl"}]"#),
        ("2dmse", r#"[{kind = "2dmse"}]"#),
        ("ese", r#"[{kind = "ese", compression_size = 8}]"#),
        ("mipic", r#"[{kind = "mrl"}, {kind = "mipic"}]"#),
        ("mic", r#"[{kind = "mrl"}, {kind = "mic"}]"#),
    ] {
        let run = d.path().join(name);
        let o = Command::new(env!("CARGO_BIN_EXE_nest"))
            .env("NEST_DTYPE", "float32")
            .args([
                "train",
                "--model",
                &ms,
                "--data",
                &format!("{}:scored", s(&data)),
                "--loss",
                "cosent",
                "--matryoshka-dims",
                "[8, 32]",
                "--batch-size",
                "4",
                "--max-steps",
                "2",
                "--objective",
                objective,
                "--run-dir",
                &s(&run),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{name}: {err}");
        match o.status.success() {
            true => assert!(run.join("final/model.safetensors").exists(), "{name}"),
            false => assert!(
                err.contains("layer"),
                "{name}: refused without a reason: {err}"
            ),
        }
        eprintln!(
            "{name}: {}",
            if o.status.success() {
                "trained"
            } else {
                "refused"
            }
        );
    }
    finishes(&[
        "slim",
        "--model",
        &ms,
        "--keep-layers",
        "1",
        "--out",
        &s(&d.path().join("slim")),
    ]);
}
