//! The `nest` binary end to end on a tiny generated model: encode in every format, STS grid
//! with its report files, info, and clear errors (exit code 1, no panic) for bad input.

use std::path::Path;
use std::process::{Command, Output};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

fn nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = nest(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "nest {args:?} failed: {err}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command that must fail cleanly; returns stderr.
fn fails(args: &[&str]) -> String {
    let o = nest(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "nest {args:?} should exit 1; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "nest {args:?} panicked: {err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn setup() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    std::fs::write(
        d.path().join("in.txt"),
        "the cat sat on the mat\na man is playing music\ndog\n",
    )
    .unwrap();
    let sts = "sentence1\tsentence2\tscore\n\
        the cat sat on the mat\tthe cat is on the mat\t4.5\n\
        a man is playing music\ta man is playing guitar\t3.8\n\
        dog\tmusic\t0.2\n\
        the dog sat\ta cat sat\t2.0\n";
    std::fs::write(d.path().join("sts.tsv"), sts).unwrap();
    let m = model.display().to_string();
    (d, m)
}

fn p(d: &Path, name: &str) -> String {
    d.join(name).display().to_string()
}

#[test]
fn encode_writes_each_format() {
    let (d, m) = setup();
    let input = p(d.path(), "in.txt");
    let npy = p(d.path(), "e.npy");
    ok(&[
        "encode", "--model", &m, "--layer", "1", "--dim", "8", "--input", &input, "--output", &npy,
    ]);
    let bytes = std::fs::read(&npy).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header = String::from_utf8_lossy(&bytes[..128]);
    assert!(header.contains("'shape': (3, 8)"), "{header}");
    let jsonl = p(d.path(), "e.jsonl");
    ok(&[
        "encode", "--model", &m, "--input", &input, "--output", &jsonl,
    ]);
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["embedding"].as_array().unwrap().len(), 32);
    let st = p(d.path(), "e.safetensors");
    ok(&[
        "encode", "--model", &m, "--dim", "16", "--input", &input, "--output", &st,
    ]);
    assert!(std::fs::metadata(&st).unwrap().len() > 3 * 16 * 4);
}

#[test]
fn eval_sts_writes_report_files() {
    let (d, m) = setup();
    let out = p(d.path(), "report");
    let stdout = ok(&[
        "eval",
        "sts",
        "--model",
        &m,
        "--data",
        &p(d.path(), "sts.tsv"),
        "--layers",
        "1-2",
        "--dims",
        "8,32",
        "--out",
        &out,
    ]);
    assert!(stdout.contains("dim\\layer"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("report/report.json")).unwrap(),
    )
    .unwrap();
    let t = &report["tasks"][0];
    assert_eq!(t["layers"], serde_json::json!([1, 2]));
    assert_eq!(t["dims"], serde_json::json!([8, 32]));
    assert_eq!(t["n_examples"], 4);
    assert_eq!(t["sha256"].as_str().unwrap().len(), 64);
    for row in t["scores"].as_array().unwrap() {
        for v in row.as_array().unwrap() {
            let v = v.as_f64().unwrap();
            assert!((-100.0..=100.0).contains(&v));
        }
    }
    let md = std::fs::read_to_string(d.path().join("report/report.md")).unwrap();
    assert!(md.contains("| dim \\ layer | 1 | 2 |"), "{md}");
    // one heatmap per task, named after the task (<parent folder>-<stem>)
    let svg_path = std::fs::read_dir(d.path().join("report"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "svg"))
        .expect("a heatmap .svg in the report folder");
    let svg = std::fs::read_to_string(svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("L2"));
}

#[test]
fn info_prints_the_elastic_axes() {
    let (_d, m) = setup();
    let out = ok(&["info", "--model", &m, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["layers"], 2);
    assert_eq!(v["hidden_size"], 32);
    assert_eq!(v["pooling"], "mean");
    let out = ok(&["info", "--model", &m]);
    assert!(out.contains("trained for    not recorded"), "{out}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let (d, m) = setup();
    let input = p(d.path(), "in.txt");
    let npy = p(d.path(), "e.npy");
    let missing = p(d.path(), "no-such-model");
    let e = fails(&[
        "encode", "--model", &missing, "--input", &input, "--output", &npy,
    ]);
    assert!(e.contains("model directory not found"), "{e}");
    let e = fails(&[
        "encode", "--model", &m, "--dim", "33", "--input", &input, "--output", &npy,
    ]);
    assert!(e.contains("--dim") && e.contains("1..=32"), "{e}");
    let e = fails(&[
        "encode", "--model", &m, "--dim", "0", "--input", &input, "--output", &npy,
    ]);
    assert!(e.contains("--dim"), "{e}");
    let e = fails(&[
        "encode", "--model", &m, "--layer", "3", "--input", &input, "--output", &npy,
    ]);
    assert!(e.contains("--layer") && e.contains("1..=2"), "{e}");
    std::fs::write(d.path().join("empty.txt"), "").unwrap();
    let e = fails(&[
        "encode",
        "--model",
        &m,
        "--input",
        &p(d.path(), "empty.txt"),
        "--output",
        &npy,
    ]);
    assert!(e.contains("empty.txt") && e.contains("no text"), "{e}");
    let e = fails(&[
        "encode",
        "--model",
        &m,
        "--input",
        &input,
        "--output",
        &p(d.path(), "e.csv"),
    ]);
    assert!(e.contains("expected .npy, .safetensors or .jsonl"), "{e}");
    std::fs::write(
        d.path().join("bad.tsv"),
        "sentence1\tsentence2\tscore\na\tb\t1\nonly two\tcolumns\n",
    )
    .unwrap();
    let e = fails(&[
        "eval",
        "sts",
        "--model",
        &m,
        "--data",
        &p(d.path(), "bad.tsv"),
    ]);
    assert!(
        e.contains("bad.tsv, line 3") && e.contains("2 columns, expected 3"),
        "{e}"
    );
    let e = fails(&[
        "eval",
        "sts",
        "--model",
        &m,
        "--data",
        &p(d.path(), "sts.tsv"),
        "--layers",
        "0-2",
    ]);
    assert!(e.contains("--layers"), "{e}");
    // unreadable / unsupported config
    let cfg = Path::new(&m).join("config.json");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("\"bert\"", "\"t5\"")).unwrap();
    let e = fails(&["info", "--model", &m]);
    assert!(
        e.contains("config.json") && e.contains("'t5' is not supported"),
        "{e}"
    );
    std::fs::write(&cfg, "[1, 2").unwrap();
    let e = fails(&["info", "--model", &m]);
    assert!(
        e.contains("config.json") && e.contains("invalid JSON"),
        "{e}"
    );
    std::fs::remove_file(&cfg).unwrap();
    let e = fails(&["info", "--model", &m]);
    assert!(e.contains("config.json") && e.contains("not found"), "{e}");
}
