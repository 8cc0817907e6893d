//! The `nest` binary end to end on a tiny generated model: encode in every format, STS grid
//! with its report files, info, and clear errors (exit code 1, no panic) for bad input.

use std::path::Path;
use std::process::{Command, Output};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

fn nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32") // the figures these tests check are float32 (bf16/int8: tests/dtype.rs)
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
fn slim_keeps_the_first_layers_and_a_default_dim() {
    let (d, m) = setup();
    let input = p(d.path(), "in.txt");
    let slim = p(d.path(), "slim");
    let stderr_ok = nest(&[
        "slim",
        "--model",
        &m,
        "--keep-layers",
        "1",
        "--dim",
        "8",
        "--out",
        &slim,
    ]);
    assert!(stderr_ok.status.success());
    let info = ok(&["info", "--model", &slim]);
    assert!(
        info.contains("1 layers") && info.contains("default dim    8"),
        "{info}"
    );
    // the slim model's default output equals the full model at --layer 1 --dim 8
    let (a, b) = (p(d.path(), "a.jsonl"), p(d.path(), "b.jsonl"));
    ok(&[
        "encode", "--model", &slim, "--input", &input, "--output", &a,
    ]);
    ok(&[
        "encode", "--model", &m, "--layer", "1", "--dim", "8", "--input", &input, "--output", &b,
    ]);
    let vecs = |f: &str| -> Vec<Vec<f64>> {
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                serde_json::from_value(v["embedding"].clone()).unwrap()
            })
            .collect()
    };
    let (va, vb) = (vecs(&a), vecs(&b));
    assert_eq!(va[0].len(), 8);
    for (x, y) in va.iter().flatten().zip(vb.iter().flatten()) {
        assert!((x - y).abs() < 1e-6, "{x} vs {y}");
    }
    let e = fails(&["slim", "--model", &m, "--layers", "3", "--out", &slim]);
    assert!(e.contains("--keep-layers 3 is outside 1..=2"), "{e}");
}

/// `nest bench encode` heads its table with the machine it measured on, in the file
/// `--markdown` appends to as on stdout, prints each layer's host phases, and with `--profile`
/// writes a profiler trace per layer.
#[test]
fn bench_encode_names_its_machine() {
    let (d, m) = setup();
    let md = p(d.path(), "bench.md");
    let traces = d.path().join("traces");
    let args = [
        "bench",
        "encode",
        "--model",
        &m,
        "--data",
        &p(d.path(), "sts.tsv"),
    ];
    let all = [
        &args[..],
        &["--layers", "1,2", "--repeats", "1", "--markdown", &md],
        &["--profile", traces.to_str().unwrap()],
    ]
    .concat();
    let o = nest(&all);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    // each layer's timed pass: when the host had queued its last batch, within the pass
    for layer in [1, 2] {
        let line = err
            .lines()
            .find(|l| {
                l.contains(&format!(
                    "layer {layer}: the host had queued every batch at"
                ))
            })
            .unwrap_or_else(|| panic!("layer {layer}'s host line: {err}"));
        let ms: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(ms.len(), 2, "{line}");
        assert!(0.0 < ms[0] && ms[0] <= ms[1], "{line}");
        let phases = format!("layer {layer}: the host's phases:");
        assert!(err
            .lines()
            .any(|l| l.contains(&phases) && l.contains(" batches queued in ")));
        let trace = traces.join(format!("nest-float32--float32--layer{layer}.json"));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{}: {e}; {err}", trace.display()));
        assert!(json["traceEvents"]
            .as_array()
            .is_some_and(|e| !e.is_empty()));
    }
    let torch = nest_model::machine::torch_version();
    for text in [stdout, std::fs::read_to_string(&md).unwrap()] {
        let first = text.lines().next().unwrap_or_default();
        assert!(first.starts_with("Measured on "), "{text}");
        assert!(
            first.contains(&format!("libtorch {torch}, on cpu")),
            "{first}"
        );
        assert!(text.contains("| 2 | nest "), "{text}");
    }
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
        "--precision",
        "float32,binary",
        "--latency-texts",
        "4",
        "--out",
        &out,
    ]);
    assert!(stdout.contains("dim\\layer"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("report/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["layers"], serde_json::json!([1, 2]));
    assert_eq!(report["dims"], serde_json::json!([8, 32]));
    assert_eq!(
        report["precisions"],
        serde_json::json!(["float32", "binary"])
    );
    assert_eq!(report["costs"]["latency_ms"].as_object().unwrap().len(), 2);
    // the latencies carry the machine they were measured on
    let machine = &report["costs"]["machine"];
    assert_eq!(machine["device"], "cpu");
    assert!(!machine["torch"].as_str().unwrap().is_empty(), "{machine}");
    let t = &report["tasks"][0];
    assert_eq!(t["n_examples"], 4);
    assert_eq!(t["main_metric"], "spearman");
    assert_eq!(t["files"][0]["sha256"].as_str().unwrap().len(), 64);
    let cells = t["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * 2 * 2);
    for c in cells {
        let v = c["metrics"]["spearman"].as_f64().unwrap();
        assert!((-100.0..=100.0).contains(&v), "{c}");
    }
    let md = std::fs::read_to_string(d.path().join("report/report.md")).unwrap();
    assert!(md.contains("| dim \\ layer | 1 | 2 |"), "{md}");
    assert!(md.contains("logical CPUs), "), "{md}");
    // plot names carry the task name, which comes from the temp folder: look them up by prefix
    let names: Vec<String> = std::fs::read_dir(d.path().join("report"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for prefix in ["heatmap-", "curve-", "cost-"] {
        let f = names
            .iter()
            .find(|n| n.starts_with(prefix) && n.ends_with(".svg"))
            .unwrap_or_else(|| panic!("no {prefix}*.svg in {names:?}"));
        let svg = std::fs::read_to_string(d.path().join("report").join(f)).unwrap();
        assert!(svg.starts_with("<svg"), "{f}");
    }
}

/// A miniature copy of the datasets layout (every task kind), made up for the tiny model.
fn mini_datasets(root: &Path) {
    let w = |rel: &str, s: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    let sts = "sentence1\tsentence2\tscore\nthe cat sat\tthe cat sat on the mat\t4.5\na man is playing\ta man is playing music\t4.0\ndog\tmusic\t0.2\nthe dog sat\ta cat sat\t2.0\n";
    w("stsb/test.tsv", sts);
    w("sick-r/test.tsv", sts);
    let cls_train = "text\tlabel\nthe cat sat\tcat\na cat is on the mat\tcat\nthe cat\tcat\na dog is playing\tdog\nthe dog sat\tdog\ndog dog\tdog\n";
    let cls_test = "text\tlabel\ncat on a mat\tcat\nthe dog is playing\tdog\n";
    for d in ["banking77", "tweeteval-emotion"] {
        w(&format!("{d}/train.tsv"), cls_train);
        w(&format!("{d}/test.tsv"), cls_test);
    }
    // a test label the train split never shows: warned about and counted as an error
    w(
        "tweeteval-emotion/test.tsv",
        &format!("{cls_test}a bird is singing\tbird\n"),
    );
    let pairs = "sentence1\tsentence2\tlabel\nthe cat sat\tthe cat sat on the mat\t1\ndog\tmusic\t0\na man is playing\ta man is playing music\t1\nthe dog\tguitar\t0\n";
    w("mrpc/test.tsv", pairs);
    w("wic/test.tsv", pairs);
    w("sick-e/test.tsv", "premise\thypothesis\tlabel\nthe cat sat\tthe cat sat on the mat\tentailment\ndog\tmusic\tneutral\na man\ta dog\tcontradiction\n");
    w("scifact/corpus.jsonl", "{\"_id\":\"1\",\"title\":\"cats\",\"text\":\"the cat sat on the mat\"}\n{\"_id\":\"2\",\"text\":\"a man is playing music\"}\n{\"_id\":\"3\",\"text\":\"the dog is playing\"}\n");
    w(
        "scifact/queries.jsonl",
        "{\"_id\":\"q1\",\"text\":\"cat on mat\"}\n{\"_id\":\"q2\",\"text\":\"music\"}\n",
    );
    w(
        "scifact/qrels/test.tsv",
        "query-id\tcorpus-id\tscore\nq1\t1\t1\nq2\t2\t1\nq2\t99\t1\n",
    );
}

#[test]
fn full_suite_compare_and_advise() {
    let (d, m) = setup();
    let data = d.path().join("datasets");
    mini_datasets(&data);
    let root = data.display().to_string();
    let a = p(d.path(), "a");
    let out = nest(&[
        "eval",
        "--model",
        &m,
        "--data-root",
        &root,
        "--dims",
        "8,32",
        "--precision",
        "float32,int8,binary",
        "--latency-texts",
        "4",
        "--out",
        &a,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("a corpus-id not in corpus.jsonl"),
        "the unknown qrels id is warned about: {err}"
    );
    assert!(
        err.contains("1 test row(s) have labels absent from") && err.contains("(bird)"),
        "{err}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("a/report.json")).unwrap())
            .unwrap();
    let kinds: Vec<&str> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "sts",
            "sts",
            "cls",
            "cls",
            "pair",
            "pair",
            "pair",
            "retrieval"
        ]
    );
    assert!(report["tasks"][3]["warnings"][0]
        .as_str()
        .unwrap()
        .contains("bird"));
    assert_eq!(report["tasks"][3]["n_examples"], 3);
    let retrieval = &report["tasks"][7];
    assert_eq!(retrieval["cells"].as_array().unwrap().len(), 2 * 2 * 3);
    for k in [
        "ndcg_at_10",
        "mrr_at_10",
        "recall_at_100",
        "recall_at_1000",
        "map_at_100",
    ] {
        assert!(retrieval["cells"][0]["metrics"][k].is_number(), "{k}");
    }
    // a second model: the same tiny shape with another seed
    let m2 = d.path().join("tiny2");
    let mut spec = TinySpec::new(Architecture::Bert);
    spec.seed = 11;
    write_tiny_model(&m2, &spec).unwrap();
    let b = p(d.path(), "b");
    ok(&[
        "eval",
        "--model",
        &m2.display().to_string(),
        "--data-root",
        &root,
        "--tasks",
        "sts,pair",
        "--dims",
        "8,32",
        "--latency-texts",
        "4",
        "--out",
        &b,
    ]);
    let cmp = p(d.path(), "cmp");
    let stdout = ok(&[
        "eval",
        "compare",
        &p(d.path(), "a/report.json"),
        &p(d.path(), "b/report.json"),
        "--out",
        &cmp,
    ]);
    assert!(
        stdout.contains("stsb/test") && stdout.contains("mean delta"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("banking77"),
        "only shared tasks are compared"
    );
    assert!(d.path().join("cmp/compare.md").is_file());
    assert!(
        stdout.contains("Holm") && stdout.contains("paired-bootstrap"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("cmp/compare.json")).unwrap())
            .unwrap();
    let cell = &json["tasks"][0]["cells"][0][0];
    assert!(
        cell["test"]["p"].is_number() && cell["p_holm"].is_number(),
        "{cell}"
    );
    assert!(d
        .path()
        .join("cmp/compare-stsb-test-float32-significant.svg")
        .is_file());
    // runs of one method as a side, and their spread; a report's folder names its report.json
    let stdout = ok(&[
        "eval",
        "compare",
        &p(d.path(), "a"),
        &format!("{},{}", p(d.path(), "a/report.json"), p(d.path(), "b")),
        "--resamples",
        "50",
        "--out",
        &cmp,
    ]);
    assert!(stdout.contains("mean ± sd over 2 runs"), "{stdout}");
    let stdout = ok(&[
        "eval",
        "seeds",
        &p(d.path(), "a/report.json"),
        &p(d.path(), "b/report.json"),
        "--out",
        &cmp,
    ]);
    assert!(
        stdout.contains("2 runs") && stdout.contains(" ± "),
        "{stdout}"
    );
    // a report without per-item scores: a clear error when a test is asked for, none without
    // (with one more STS file: the report averages the STS family)
    let sts12 = data.join("sts12/test.tsv");
    std::fs::create_dir_all(sts12.parent().unwrap()).unwrap();
    std::fs::copy(data.join("stsb/test.tsv"), &sts12).unwrap();
    let c = p(d.path(), "c");
    ok(&[
        "eval",
        "--model",
        &m2.display().to_string(),
        "--data-root",
        &root,
        "--tasks",
        "sts",
        "--sts-extra",
        &sts12.display().to_string(),
        "--dims",
        "8",
        "--latency-texts",
        "0",
        "--no-items",
        "--out",
        &c,
    ]);
    let md = std::fs::read_to_string(d.path().join("c/report.md")).unwrap();
    assert!(
        md.contains("sts average over 3 tasks (stsb/test, sick-r/test, sts12/test)"),
        "{md}"
    );
    // a BEIR folder of one's own beside SciFact: the same data scores the same
    let mine = data.join("mybeir");
    std::fs::create_dir_all(mine.join("qrels")).unwrap();
    for f in ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"] {
        std::fs::copy(data.join("scifact").join(f), mine.join(f)).unwrap();
    }
    let r = p(d.path(), "r");
    ok(&[
        "eval",
        "--model",
        &m2.display().to_string(),
        "--data-root",
        &root,
        "--tasks",
        "retrieval",
        "--retrieval-extra",
        &format!("{}:test", mine.display()),
        "--dims",
        "8",
        "--latency-texts",
        "0",
        "--out",
        &r,
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("r/report.json")).unwrap())
            .unwrap();
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[1]["task"], "mybeir/test");
    assert_eq!(
        tasks[0]["cells"][0]["metrics"],
        tasks[1]["cells"][0]["metrics"]
    );
    // the same model again into that folder, on other tasks: the retrieval plots go with the
    // report they drew (they stayed, beside a report without those tasks)
    let plots = || -> Vec<String> {
        let names = std::fs::read_dir(d.path().join("r")).unwrap().flatten();
        let mut v: Vec<String> = names
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".svg"))
            .collect();
        v.sort();
        v
    };
    assert!(
        plots().contains(&"curve-mybeir-test.svg".to_string()),
        "{:?}",
        plots()
    );
    std::fs::write(d.path().join("r/notes.svg"), "mine").unwrap();
    ok(&[
        "eval",
        "--model",
        &m2.display().to_string(),
        "--data-root",
        &root,
        "--tasks",
        "sts",
        "--dims",
        "8",
        "--latency-texts",
        "0",
        "--out",
        &r,
    ]);
    let after = plots();
    assert!(
        after
            .iter()
            .all(|n| !n.contains("mybeir") && !n.contains("scifact"))
            && after.iter().any(|n| n.contains("stsb"))
            && after.contains(&"notes.svg".to_string()),
        "{after:?}"
    );
    let e = fails(&[
        "eval",
        "--model",
        &m2.display().to_string(),
        "--data-root",
        &root,
        "--tasks",
        "sts",
        "--retrieval-extra",
        &mine.display().to_string(),
    ]);
    assert!(
        e.contains("--retrieval-extra adds to the retrieval family"),
        "{e}"
    );
    let e = fails(&[
        "eval",
        "compare",
        &p(d.path(), "a/report.json"),
        &p(d.path(), "c/report.json"),
    ]);
    assert!(
        e.contains("c/report.json") && e.contains("--no-items"),
        "{e}"
    );
    ok(&[
        "eval",
        "compare",
        &p(d.path(), "a/report.json"),
        &p(d.path(), "c/report.json"),
        "--resamples",
        "0",
        "--out",
        &cmp,
    ]);
    // advise: a floor every cell meets gives the cheapest cell; an impossible one a clear error
    let stdout = ok(&[
        "advise",
        "--report",
        &p(d.path(), "a/report.json"),
        "--min-score",
        "-1000",
        "--task",
        "sts",
        "--by",
        "memory",
    ]);
    assert!(
        stdout.contains("layer") && stdout.contains("dim 8, binary"),
        "{stdout}"
    );
    let e = fails(&[
        "advise",
        "--report",
        &p(d.path(), "a/report.json"),
        "--min-score",
        "1000",
        "--task",
        "stsb/test",
    ]);
    assert!(
        e.contains("no cell reaches 1000") && e.contains("the best is"),
        "{e}"
    );
    let e = fails(&[
        "advise",
        "--report",
        &p(d.path(), "a/report.json"),
        "--min-score",
        "1",
        "--task",
        "nope",
    ]);
    assert!(e.contains("matches no task"), "{e}");
    // --within: the floor is the full point's score minus the margin; 0 keeps only cells as good
    let stdout = ok(&[
        "advise",
        "--report",
        &p(d.path(), "a/report.json"),
        "--within",
        "0",
        "--task",
        "stsb/test",
    ]);
    assert!(
        stdout.contains("full point: layer") && stdout.contains("cheapest point"),
        "{stdout}"
    );
    let o = nest(&["advise", "--report", &p(d.path(), "a/report.json")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("--min-score"), "{e}");
}

#[test]
fn inspect_writes_diagnostics() {
    let (d, m) = setup();
    let out = p(d.path(), "ins");
    let stdout = ok(&[
        "inspect",
        "--model",
        &m,
        "--data",
        &p(d.path(), "sts.tsv"),
        "--dim",
        "8",
        "--boundaries",
        "8,16",
        "--positive-min",
        "3.5",
        "--out",
        &out,
    ]);
    assert!(stdout.contains("effective rank"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("ins/inspect.json")).unwrap())
            .unwrap();
    assert_eq!(v["variance"].as_array().unwrap().len(), 32);
    assert_eq!(v["n_positive_pairs"], 2);
    let dims: Vec<u64> = v["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["dim"].as_u64().unwrap())
        .collect();
    assert_eq!(dims, vec![8, 16, 32]);
    for p in v["prefixes"].as_array().unwrap() {
        let er = p["effective_rank"].as_f64().unwrap();
        assert!(er >= 1.0 && er <= p["dim"].as_f64().unwrap() + 1e-9, "{p}");
        assert!(p["uniformity"].as_f64().unwrap() <= 0.0);
    }
    assert!(
        d.path().join("ins/variance.svg").is_file() && d.path().join("ins/crosscorr.svg").is_file()
    );
}

#[test]
fn info_prints_the_elastic_axes() {
    let (_d, m) = setup();
    let out = ok(&["info", "--model", &m, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["layers"], 2);
    assert_eq!(v["hidden_size"], 32);
    assert_eq!(v["pooling"], "mean");
    assert_eq!(v["machine"]["device"], "cpu");
    let out = ok(&["info", "--model", &m]);
    assert!(out.contains("trained for    not recorded"), "{out}");
    assert!(
        out.contains("machine        ") && out.contains(", on cpu"),
        "{out}"
    );
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

/// `kill -9` at an arbitrary moment (after the second checkpoint appears), then `--resume`: the
/// loss curve equals the uninterrupted run's, bit for bit.
#[test]
fn train_resumes_exactly_after_kill_9() {
    let (d, m) = setup();
    let mut data = String::from("sentence1\tsentence2\tscore\n");
    let words = ["the", "cat", "dog", "sat", "on", "mat", "man", "music"];
    for i in 0..160usize {
        let a = format!(
            "{} {} {}",
            words[i % 8],
            words[(i / 8) % 8],
            words[(i * 7) % 8]
        );
        let b = format!(
            "{} {} {}",
            words[(i + 1) % 8],
            words[(i / 8) % 8],
            words[(i * 3) % 8]
        );
        data.push_str(&format!("{a}\t{b}\t{}\n", (i % 6) as f64 * 0.8));
    }
    std::fs::write(d.path().join("train.tsv"), data).unwrap();
    let recipe = format!(
        "model = \"{m}\"\nloss = \"cosent\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\nepochs = 6\nlr = 5e-4\nsave_every = 2\nkeep_last = 100\n[[data]]\npath = \"{}\"\nformat = \"scored\"\n",
        d.path().join("train.tsv").display()
    );
    std::fs::write(d.path().join("r.toml"), recipe).unwrap();
    let r = p(d.path(), "r.toml");
    let full = p(d.path(), "full");
    ok(&[
        "--threads",
        "1",
        "train",
        "--recipe",
        &r,
        "--run-dir",
        &full,
    ]);
    // a checkpoint is no model, but `nest export checkpoint` writes its model (helper trial C,
    // U6: a cut run had no usable model): the newest checkpoint's is final/, bit for bit
    let step4 = format!("{full}/checkpoints/step-00000004");
    let o = nest(&["info", "--model", &step4]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("nest export checkpoint"),
        "{err}"
    );
    let last = p(d.path(), "last");
    ok(&["export", "checkpoint", &full, "--out", &last]);
    for f in [
        "model.safetensors",
        "nest.json",
        "config.json",
        "modules.json",
    ] {
        let read = |dir: &str| std::fs::read(Path::new(dir).join(f)).unwrap();
        assert!(
            read(&last) == read(&format!("{full}/final")),
            "{f} differs from final/'s"
        );
    }
    let o = nest(&["export", "checkpoint", &step4, "--out", &last]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--overwrite"), "{err}");
    ok(&[
        "export",
        "checkpoint",
        &step4,
        "--out",
        &last,
        "--overwrite",
    ]);
    ok(&["info", "--model", &last]);
    let read = |dir: &str, f: &str| std::fs::read(Path::new(dir).join(f)).unwrap();
    let fin = format!("{full}/final");
    assert!(read(&last, "nest.json") == read(&fin, "nest.json"));
    // never over the run's own final/ (helper trial D: replaced it with step 4's)
    let o = nest(&["export", "checkpoint", &step4, "--out", &fin, "--overwrite"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("is the run's own final/"),
        "{err}"
    );
    assert!(
        read(&last, "model.safetensors") != read(&fin, "model.safetensors"),
        "step 4's"
    );
    let cut = d.path().join("cut");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32") // the figures these tests check are float32 (bf16/int8: tests/dtype.rs)
        .args([
            "--threads",
            "1",
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &cut.display().to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !cut.join("checkpoints/step-00000004").is_dir() && t0.elapsed().as_secs() < 120 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !cut.join("final").exists(),
        "the run was killed before it finished"
    );
    ok(&[
        "--threads",
        "1",
        "train",
        "--resume",
        &cut.display().to_string(),
        "--recipe",
        &r,
    ]);
    let read = |dir: &Path| -> Vec<(u64, u64)> {
        std::fs::read_to_string(dir.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                Some((v["step"].as_u64()?, v["loss"].as_f64()?.to_bits()))
            })
            .collect()
    };
    let (a, b) = (read(Path::new(&full)), read(&cut));
    assert_eq!(a.len(), 120);
    assert_eq!(a, b, "resumed loss curve differs");
    assert_eq!(
        std::fs::read(Path::new(&full).join("final/model.safetensors")).unwrap(),
        std::fs::read(cut.join("final/model.safetensors")).unwrap()
    );
    // resuming a finished run says so (new-user trial #44), rather than "trained 120 steps"
    let c = cut.display().to_string();
    let o = nest(&["--threads", "1", "train", "--resume", &c, "--recipe", &r]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("already finished (step 120 of 120)"),
        "{err}"
    );
    // a bare --resume continues the --run-dir run, wherever it stands; a recipe flag after it
    // is not taken for its folder; a max_steps past the data's epochs says what to raise
    for args in [
        vec!["--run-dir", &c, "--resume", "--max-steps", "500"],
        vec!["--resume", "--max-steps", "500", "--run-dir", &c],
        vec!["--max-steps", "500", "--run-dir", &c, "--resume"],
    ] {
        let o = nest(&[&["--threads", "1", "train"][..], &args].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success()
                && err.contains("already finished (step 120 of 120) (max_steps 500")
                && err.contains("raise --epochs"),
            "{args:?}: {err}"
        );
    }
    let o = nest(&["--threads", "1", "train", "--resume", "--max-steps", "500"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--run-dir RUN_DIR --resume"), "{err}");
    // extending the finished run (6 epochs of 20 steps to 7) says what it does to the rate
    // and to final/ (helper trial C: it replaced final/ and raised the rate without a word)
    let o = nest(&["--threads", "1", "train", "--resume", &c, "--epochs", "7"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success()
            && err.contains("extending a finished run from step 120 to 140")
            && err.contains("final/ is replaced"),
        "{err}"
    );
}

fn read_npy(path: &str) -> tch::Tensor {
    let a: ndarray::Array2<f32> = ndarray_npy::read_npy(path).unwrap();
    let (r, c) = a.dim();
    tch::Tensor::from_slice(a.as_standard_layout().as_slice().unwrap()).view([r as i64, c as i64])
}

#[test]
fn compress_trains_resumes_and_encode_applies_the_adaptor() {
    let (d, m) = setup();
    let dir = d.path();
    // a small retrieval set embedded by the tiny model (32 dims): docs and queries that share words
    let words = [
        "cat", "dog", "music", "guitar", "mat", "house", "river", "tree", "car", "road", "sun",
        "rain",
    ];
    let docs: Vec<String> = (0..24)
        .map(|i| {
            format!(
                "{} {} {}",
                words[i % 12],
                words[(i * 5 + 1) % 12],
                words[(i * 7 + 3) % 12]
            )
        })
        .collect();
    let queries: Vec<String> = (0..24)
        .map(|i| format!("{} {}", words[i % 12], words[(i * 5 + 1) % 12]))
        .collect();
    std::fs::write(dir.join("docs.txt"), docs.join("\n")).unwrap();
    std::fs::write(dir.join("queries.txt"), queries.join("\n")).unwrap();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    let mut test = qrels.clone();
    for i in 0..24 {
        let line = format!("{i}\t{i}\t1\n");
        if i < 18 {
            qrels.push_str(&line)
        } else {
            test.push_str(&line)
        }
    }
    std::fs::write(dir.join("qrels.tsv"), &qrels).unwrap();
    std::fs::write(dir.join("test.tsv"), &test).unwrap();
    for (i, o) in [("docs.txt", "c.npy"), ("queries.txt", "q.npy")] {
        ok(&[
            "encode",
            "--model",
            &m,
            "--input",
            &p(dir, i),
            "--output",
            &p(dir, o),
        ]);
    }
    let out = p(dir, "adaptor");
    let flags = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "compress",
            "--embeddings",
            &p(dir, "c.npy"),
            "--queries",
            &p(dir, "q.npy"),
            "--qrels",
            &p(dir, "qrels.tsv"),
            "--test-qrels",
            &p(dir, "test.tsv"),
            "--batch-size",
            "6",
            "--epochs",
            "3",
            "--memory-size",
            "40",
            "--hard-negatives",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| ok(&flags(extra).iter().map(String::as_str).collect::<Vec<_>>());
    let table = run(&["--method", "smec", "--dims", "32,16,8", "--out", &out]);
    assert!(
        table.contains("| 8 |") && table.contains("| 32 |"),
        "{table}"
    );
    // each dim's score beside the original vectors cut to it (helper trial C, U9)
    assert!(table.starts_with("| dim | val nDCG@10 | truncated | test nDCG@10 | truncated |"));
    let row = table.lines().find(|l| l.starts_with("| 8 |")).unwrap();
    assert!(!row.contains('-') && row.matches('|').count() == 6, "{row}");
    // x100, as `nest eval` prints nDCG@10 (it printed fractions: helper trial E)
    let cells: Vec<f64> = row
        .split('|')
        .skip(2)
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    assert!(
        cells.len() == 4 && cells.iter().all(|&c| (0.0..=100.0).contains(&c)),
        "{row}"
    );
    assert!(
        cells.iter().any(|&c| c > 1.0) && row.contains(&format!("{:.2}", cells[0])),
        "{row}"
    );
    let a = nest_model::Adaptor::load(Path::new(&out)).unwrap();
    assert_eq!(a.dims(), vec![8, 16, 32]);
    // `nest info` reads an adaptor folder too (a positional path, as `--model`)
    let info = ok(&["info", &out]);
    assert!(
        info.contains("method         smec (1 head)")
            && info.contains("dims           [8, 16, 32] from 32 input dims")
            && info.contains("trained on     embedding files")
            && info.contains("| 8 |"),
        "{info}"
    );
    // --dims in increasing order, as every other command takes them: the same adaptor
    let up = p(dir, "smec-up");
    let up_flags = flags(&["--method", "smec", "--dims", "8,16,32", "--out", &up]);
    let o = nest(&up_flags.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("warning: validation holds 4 queries"),
        "{err}"
    );
    let bytes = |d: &str| std::fs::read(Path::new(d).join("adaptor.safetensors")).unwrap();
    assert!(
        bytes(&out) == bytes(&up),
        "increasing --dims trains the same adaptor"
    );
    // more hard negatives than the corpus holds: what it has (this panicked in libtorch's topk)
    let many = p(dir, "smec-many");
    let mut flags_many = flags(&["--method", "smec", "--dims", "8,16,32", "--out", &many]);
    let at = flags_many
        .iter()
        .position(|f| f == "--hard-negatives")
        .unwrap();
    flags_many[at + 1] = "30".into();
    ok(&flags_many.iter().map(String::as_str).collect::<Vec<_>>());
    // the test scoring as a report with each test query's nDCG@10, the same as adaptor.json's
    let report = nest_eval::Report::read(&Path::new(&out).join("report.json")).unwrap();
    let t = &report.tasks[0];
    assert!(t.task.ends_with("/test") && t.n_examples == 6, "{}", t.task);
    for c in &t.cells {
        let items = &c.items.as_ref().unwrap().0;
        let mean = items.iter().map(|&x| x as f64).sum::<f64>() / items.len() as f64;
        let recorded = a.meta.info["test_ndcg_at_10"][c.dim.to_string()]
            .as_f64()
            .unwrap();
        assert!((100.0 * mean - c.metrics["ndcg_at_10"]).abs() < 1e-4);
        assert!(
            (100.0 * recorded - c.metrics["ndcg_at_10"]).abs() < 1e-9,
            "{c:?}"
        );
    }
    let frozen = a.heads[0].0.narrow(0, 8, 24).copy();
    // resume with a smaller stage: no data flags needed, earlier stages untouched; in place
    // only with --overwrite (the new stage retrains the first 8 rows: every dim's vectors
    // change), the adaptor as it was, byte for byte, when refused
    let before = std::fs::read(Path::new(&out).join("adaptor.json")).unwrap();
    let e = fails(&["compress", "--resume", &out, "--dims", "4"]);
    assert!(e.contains("first 8 rows") && e.contains("--out NEW"), "{e}");
    // a dim at or above the smallest: what a resume adds, not an order error
    let e = fails(&["compress", "--resume", &out, "--dims", "16", "--overwrite"]);
    assert!(
        e.contains("16: a resume adds stages below the adaptor's smallest dim (8"),
        "{e}"
    );
    // another method named: it trained the adaptor's own, silently (helper trial E)
    let e = fails(&[
        "compress",
        "--resume",
        &out,
        "--dims",
        "4",
        "--overwrite",
        "--method",
        "pca",
    ]);
    assert!(
        e.contains("--method: pca: the adaptor at") && e.contains("was trained with smec"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(Path::new(&out).join("adaptor.json")).unwrap(),
        before
    );
    ok(&["compress", "--resume", &out, "--dims", "4", "--overwrite"]);
    let b = nest_model::Adaptor::load(Path::new(&out)).unwrap();
    assert_eq!(b.dims(), vec![4, 8, 16, 32]);
    assert!(b.heads[0].0.narrow(0, 8, 24).equal(&frozen));
    // encode --adaptor equals the adaptor applied to the model's full output
    let full = p(dir, "full.npy");
    ok(&[
        "encode",
        "--model",
        &m,
        "--input",
        &p(dir, "queries.txt"),
        "--output",
        &full,
    ]);
    let small = p(dir, "small.npy");
    ok(&[
        "encode",
        "--model",
        &m,
        "--adaptor",
        &out,
        "--dim",
        "8",
        "--input",
        &p(dir, "queries.txt"),
        "--output",
        &small,
    ]);
    let want = b.apply(&read_npy(&full), 8).unwrap();
    let got = read_npy(&small);
    assert_eq!(got.size(), vec![24, 8]);
    assert!(f64::try_from((got - want).abs().max()).unwrap() < 1e-5);
    // bad input: named
    let e = fails(
        &flags(&[
            "--method",
            "smec",
            "--dims",
            "32,20,10",
            "--out",
            &p(dir, "x"),
        ])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    assert!(e.contains("32 -> 20 is not a halving"), "{e}");
    let e = fails(
        &flags(&["--method", "pca", "--dims", "64,32", "--out", &p(dir, "x")])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(
        e.contains("dim 64 is larger than the embeddings' 32"),
        "{e}"
    );
    let e = fails(&[
        "encode",
        "--model",
        &m,
        "--adaptor",
        &out,
        "--dim",
        "5",
        "--input",
        &p(dir, "queries.txt"),
        "--output",
        &small,
    ]);
    assert!(e.contains("serves dims [4, 8, 16, 32], not 5"), "{e}");
    std::fs::write(
        dir.join("bad.tsv"),
        "query-id\tcorpus-id\tscore\n0\t99\t1\n",
    )
    .unwrap();
    let e = fails(&[
        "compress",
        "--method",
        "mrl",
        "--dims",
        "32,16",
        "--out",
        &p(dir, "x"),
        "--embeddings",
        &p(dir, "c.npy"),
        "--queries",
        &p(dir, "q.npy"),
        "--qrels",
        &p(dir, "bad.tsv"),
    ]);
    assert!(
        e.contains("bad.tsv") && e.contains("line 2") && e.contains("corpus id '99'"),
        "{e}"
    );
}

/// `--dtype`: bf16 and int8 encode close to float32, a bad name is refused naming the flag, and
/// `nest eval --dtype a,b` writes one report per arithmetic (recorded in it) and their compare.
#[test]
fn dtype_encodes_close_to_float32_and_eval_scores_each() {
    let (d, m) = setup();
    let input = p(d.path(), "in.txt");
    let out = |dt: &str| {
        let f = p(d.path(), &format!("e-{dt}.npy"));
        ok(&[
            "encode", "--model", &m, "--dtype", dt, "--input", &input, "--output", &f,
        ]);
        read_npy(&f)
    };
    let f32 = out("float32");
    for (dt, min) in [("bf16", 0.995), ("int8", 0.98)] {
        let e = out(dt);
        let cos: Vec<f64> =
            Vec::try_from((&e * &f32).sum_dim_intlist(1, false, tch::Kind::Double)).unwrap();
        assert!(
            cos.iter().all(|&c| c >= min),
            "{dt}: cosines vs float32 {cos:?}"
        );
        assert!(
            e != f32,
            "{dt} gave float32's exact vectors: the conversion did not run"
        );
    }
    // a value clap refuses: its usage error (exit 2), naming the flag and the choices
    let o = nest(&[
        "encode", "--model", &m, "--dtype", "fp16", "--input", &input, "--output", "x.npy",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--dtype") && e.contains("expected auto, float32, bf16 or int8"),
        "{e}"
    );
    let e = fails(&[
        "encode",
        "--model",
        &m,
        "--dtype",
        "bf16,int8",
        "--input",
        &input,
        "--output",
        "x.npy",
    ]);
    assert!(e.contains("--dtype takes one value"), "{e}");
    let sts = p(d.path(), "sts.tsv");
    let rep = d.path().join("rep");
    ok(&[
        "eval",
        "sts",
        "--model",
        &m,
        "--data",
        &sts,
        "--dims",
        "8,32",
        "--dtype",
        "float32,int8",
        "--latency-texts",
        "0",
        "--out",
        &rep.display().to_string(),
    ]);
    for dt in ["float32", "int8"] {
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rep.join(dt).join("report.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(r["model"]["dtype"], dt);
    }
    assert!(rep.join("int8/compare-vs-float32").is_dir());
    // advise over both reports names the arithmetic it chose
    let both = format!(
        "{},{}",
        rep.join("float32/report.json").display(),
        rep.join("int8/report.json").display()
    );
    let out = ok(&[
        "advise",
        "--report",
        &both,
        "--min-score",
        "-100",
        "--by",
        "memory",
    ]);
    assert!(
        out.contains("dtype float32") || out.contains("dtype int8"),
        "{out}"
    );
    // another model's report among them is refused (its cells were ranked as this model's)
    let int8 = std::fs::read_to_string(rep.join("int8/report.json")).unwrap();
    let mut other: serde_json::Value = serde_json::from_str(&int8).unwrap();
    other["model"]["path"] = "models/another".into();
    let other_path = d.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let mixed = format!(
        "{},{}",
        rep.join("float32/report.json").display(),
        other_path.display()
    );
    let e = fails(&["advise", "--report", &mixed, "--min-score", "-100"]);
    assert!(
        e.contains("a report of models/another") && e.contains("once per model"),
        "{e}"
    );
    // nest info says what auto would pick here, and why
    let info: serde_json::Value =
        serde_json::from_str(&ok(&["info", "--model", &m, "--json"])).unwrap();
    let pick = info["dtype_auto"]["dtype"].as_str().unwrap();
    assert!(pick == "float32" || pick == "bf16", "{info}");
    assert!(!info["dtype_auto"]["reason"].as_str().unwrap().is_empty());
}
