//! `nest mine` end to end on a tiny generated model: mined negatives equal a brute-force
//! ranking of `nest encode`'s vectors at the same point; every format, precision and sampling
//! runs; the documented behaviours (duplicates, a positive missing from the corpus, a range
//! with no candidates, an existing output, another command's unfinished run); `kill -9` at
//! random moments then the same command gives the uninterrupted run's file byte for byte; and
//! mine-then-train: a few MRL steps on the mined triplets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

fn nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = nest(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "nest {args:?} failed: {err}");
    err
}

fn fails(args: &[&str]) -> String {
    let o = nest(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "nest {args:?} should exit 1: {err}"
    );
    // what mining merged is said before the error, causes after it
    assert!(
        err.lines().any(|l| l.starts_with("error: ")) && !err.contains("panicked"),
        "{err}"
    );
    err
}

/// A text of `n` vocabulary words drawn from `i` (distinct `i` give mostly distinct texts).
fn text(i: usize, n: usize) -> String {
    let mut x = (i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(12345);
    (0..n)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            WORDS[(x >> 40) as usize % WORDS.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

struct Fixture {
    dir: tempfile::TempDir,
    model: String,
}

impl Fixture {
    /// `queries` pairs (query i, positive i) and a corpus of `extra` other texts plus the first
    /// positives, with duplicates.
    fn new(queries: usize, extra: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny");
        write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
        let mut q = String::new();
        for i in 0..queries {
            let pair = serde_json::json!({"query": text(i, 5), "positive": text(i + 10_000, 6)});
            q.push_str(&format!("{pair}\n"));
        }
        std::fs::write(dir.path().join("q.jsonl"), q).unwrap();
        let mut c = String::new();
        for i in 0..extra {
            c.push_str(&format!("{}\n", text(i + 50_000, 4 + i % 5)));
        }
        c.push_str(&format!("{}\n{}\n", text(50_000, 4), text(10_000, 6))); // a duplicate, a positive
        std::fs::write(dir.path().join("corpus.txt"), c).unwrap();
        let model = model.display().to_string();
        Fixture { dir, model }
    }

    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn mine(&self, out: &str, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["mine", "--model", &self.model];
        let (q, c, o) = (self.p("q.jsonl"), self.p("corpus.txt"), self.p(out));
        args.extend(["--queries", &q, "--corpus", &c, "--output", &o]);
        args.extend(extra);
        let err = ok(&args);
        eprintln!("{err}");
        lines(Path::new(&o))
    }
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn read_npy(p: &str) -> (Vec<f32>, usize) {
    let a: ndarray::Array2<f32> = ndarray_npy::read_npy(p).unwrap();
    let d = a.ncols();
    (a.into_raw_vec_and_offset().0, d)
}

/// Negatives equal a brute-force ranking of `nest encode`'s vectors at (layer 1, dim 16): the
/// corpus deduplicated, the positive struck out, the top 3 (scores compared at each rank, so a
/// tie may pick either row).
#[test]
fn negatives_are_the_brute_force_ranking_of_encoded_vectors() {
    let f = Fixture::new(40, 60);
    let rows = f.mine(
        "t.jsonl",
        &["--layer", "1", "--dim", "16", "--output-scores"],
    );
    // the corpus as mining builds it: the file's texts, first of duplicates kept, then positives
    let mut corpus: Vec<String> = Vec::new();
    let qs: Vec<serde_json::Value> = lines(&f.dir.path().join("q.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let file_texts = lines(&f.dir.path().join("corpus.txt"));
    let positives = qs
        .iter()
        .map(|q| q["positive"].as_str().unwrap().to_string());
    for t in file_texts.into_iter().chain(positives) {
        if !corpus.contains(&t) {
            corpus.push(t);
        }
    }
    std::fs::write(f.dir.path().join("c.txt"), corpus.join("\n") + "\n").unwrap();
    let queries: Vec<&str> = qs.iter().map(|q| q["query"].as_str().unwrap()).collect();
    std::fs::write(f.dir.path().join("qq.txt"), queries.join("\n") + "\n").unwrap();
    for (input, out) in [("c.txt", "c.npy"), ("qq.txt", "q.npy")] {
        let (i, o) = (f.p(input), f.p(out));
        ok(&[
            "encode", "--model", &f.model, "--layer", "1", "--dim", "16", "--input", &i,
            "--output", &o,
        ]);
    }
    let ((cv, d), (qv, _)) = (read_npy(&f.p("c.npy")), read_npy(&f.p("q.npy")));
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert_eq!(rows.len(), 3 * queries.len());
    for (i, q) in qs.iter().enumerate() {
        let qvec = &qv[i * d..(i + 1) * d];
        let pos = q["positive"].as_str().unwrap();
        let mut s: Vec<f32> = (0..corpus.len())
            .filter(|&r| corpus[r] != pos)
            .map(|r| dot(qvec, &cv[r * d..(r + 1) * d]))
            .collect();
        s.sort_by(|a, b| b.total_cmp(a));
        for (k, row) in rows[3 * i..3 * i + 3].iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(row).unwrap();
            assert_eq!(v["anchor"], q["query"]);
            let got = v["scores"][1].as_f64().unwrap() as f32;
            assert!(
                (got - s[k]).abs() < 1e-4,
                "query {i} rank {k}: {got} vs {}",
                s[k]
            );
            let n = v["negative"].as_str().unwrap();
            let r = corpus.iter().position(|t| t == n).unwrap();
            assert!((dot(qvec, &cv[r * d..(r + 1) * d]) - got).abs() < 1e-4);
        }
    }
}

#[test]
fn formats_precisions_and_sampling_run() {
    let f = Fixture::new(30, 50);
    let n = f.mine(
        "n.jsonl",
        &[
            "--output-format",
            "n-tuple",
            "--num-negatives",
            "4",
            "--output-scores",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&n[0]).unwrap();
    assert!(v["negative_4"].is_string() && v["scores"].as_array().unwrap().len() == 5);
    for p in ["int8", "binary"] {
        assert_eq!(
            f.mine(&format!("{p}.jsonl"), &["--precision", p]).len(),
            90,
            "{p}"
        );
    }
    let r1 = f.mine(
        "r1.jsonl",
        &["--sampling", "random", "--range-max", "20", "--seed", "3"],
    );
    let r2 = f.mine(
        "r2.jsonl",
        &["--sampling", "random", "--range-max", "20", "--seed", "3"],
    );
    let r3 = f.mine(
        "r3.jsonl",
        &["--sampling", "random", "--range-max", "20", "--seed", "4"],
    );
    assert_eq!(r1, r2, "a seed gives one draw");
    assert_ne!(r1, r3, "another seed another");
    let lp = f.mine("lp.jsonl", &["--output-format", "labeled-pair"]);
    assert_eq!(lp.len(), 30 * 4);
    let err = ok(&[
        "mine",
        "--model",
        &f.model,
        "--queries",
        &f.p("q.jsonl"),
        "--corpus",
        &f.p("corpus.txt"),
        "--output",
        &f.p("cheap.jsonl"),
        "--layer",
        "1",
        "--dim",
        "8",
        "--overlap-with",
        &f.p("r1.jsonl"),
    ]);
    assert!(err.contains("overlap: "), "{err}");
    let m = f.mine(
        "margin.jsonl",
        &["--absolute-margin", "0.0", "--output-scores"],
    );
    for l in &m {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["scores"][1].as_f64().unwrap() <= v["scores"][0].as_f64().unwrap());
    }
}

#[test]
fn documented_behaviours_and_clear_errors() {
    let f = Fixture::new(20, 30);
    let (q, c) = (f.p("q.jsonl"), f.p("corpus.txt"));
    let err = ok(&[
        "mine",
        "--model",
        &f.model,
        "--queries",
        &q,
        "--corpus",
        &c,
        "--output",
        &f.p("a.jsonl"),
    ]);
    assert!(err.contains("1 exact duplicate texts dropped"), "{err}");
    assert!(
        err.contains("19 positives were not in it and were added"),
        "{err}"
    );
    let base = |out: &str, more: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "mine",
            "--model",
            &f.model,
            "--queries",
            &q,
            "--corpus",
            &c,
            "--output",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push(f.p(out));
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let run_fail = |args: Vec<String>| fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let e = run_fail(base(
        "b.jsonl",
        &["--range-min", "500", "--range-max", "510"],
    ));
    assert!(e.contains("--range-min: 500 skips every candidate"), "{e}");
    let e = run_fail(base("b.jsonl", &["--range-min", "5", "--range-max", "5"]));
    assert!(
        e.contains("--range-min: must be smaller than --range-max"),
        "{e}"
    );
    let e = run_fail(base(
        "b.jsonl",
        &["--range-max", "2", "--num-negatives", "3"],
    ));
    assert!(e.contains("cannot mine 3 negatives"), "{e}");
    let before = std::fs::read(f.p("a.jsonl")).unwrap();
    let e = run_fail(base("a.jsonl", &[]));
    assert!(e.contains("exists") && e.contains("--overwrite"), "{e}");
    // the refused second run leaves the finished output byte for byte
    assert_eq!(std::fs::read(f.p("a.jsonl")).unwrap(), before);
    // a window past most candidates: fewer negatives, said
    let args = base("few.jsonl", &["--range-min", "47", "--range-max", "60"]);
    let err = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("could not find 3 negatives for"), "{err}");
    assert!(!err.contains("leaves those queries out"), "{err}");
    // an n-tuple leaves the short queries out of the file: said beside the figures that count
    // them (helper trial E: the summary's counts were not the file's)
    let nt = [
        "--range-min",
        "47",
        "--range-max",
        "60",
        "--output-format",
        "n-tuple",
    ];
    let args = base("few-nt.jsonl", &nt);
    let err = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("the n-tuple output leaves those queries out"),
        "{err}"
    );
    // another command's unfinished run is not resumed
    let (partial, state) = (f.p("u.jsonl.partial"), f.p("u.jsonl.mine-state.json"));
    std::fs::write(&partial, "").unwrap();
    std::fs::write(&state, r#"{"format":"nest-mine-state","version":1,"key":"x","queries_done":0,"lines":0,"bytes":0}"#).unwrap();
    let e = run_fail(base("u.jsonl", &[]));
    assert!(e.contains("another command"), "{e}");
    // a bad --model fails before the output is opened: the right command then starts clean
    let e = fails(&[
        "mine",
        "--model",
        &f.p("nope"),
        "--queries",
        &q,
        "--output",
        &f.p("m.jsonl"),
    ]);
    assert!(e.contains("nope"), "{e}");
    assert!(!Path::new(&f.p("m.jsonl.mine-state.json")).exists());
    let bad = f.p("bad.jsonl");
    std::fs::write(&bad, "{\"query\": \"x\"}\n").unwrap();
    let e = fails(&[
        "mine",
        "--model",
        &f.model,
        "--queries",
        &bad,
        "--output",
        &f.p("z.jsonl"),
    ]);
    assert!(
        e.contains("bad.jsonl, line 1") && e.contains("positive or answer"),
        "{e}"
    );
}

/// Runs `args`, SIGKILLs it after `after` unless it ended first; true if killed.
fn kill_after(args: &[String], after: Duration) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while t.elapsed() < after {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    true
}

#[test]
fn kill_9_then_the_same_command_gives_the_same_file() {
    let f = Fixture::new(600, 400);
    let args = |out: &PathBuf| -> Vec<String> {
        let v = [
            "--threads",
            "1",
            "mine",
            "--model",
            &f.model,
            "--queries",
            &f.p("q.jsonl"),
            "--corpus",
        ];
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.extend([
            f.p("corpus.txt"),
            "--output".into(),
            out.display().to_string(),
        ]);
        v.extend(
            [
                "--chunk-queries",
                "7",
                "--output-scores",
                "--sampling",
                "random",
                "--range-max",
                "30",
            ]
            .map(String::from),
        );
        v
    };
    let full = f.dir.path().join("full.jsonl");
    let t = Instant::now();
    ok(&args(&full).iter().map(String::as_str).collect::<Vec<_>>());
    let took = t.elapsed();
    let want = std::fs::read(&full).unwrap();
    let mut resumed = 0;
    for seed in 0..6u64 {
        let out = f.dir.path().join(format!("cut{seed}.jsonl"));
        let share = 0.3 + 0.6 * ((seed * 2654435761) % 1000) as f64 / 1000.0;
        if kill_after(&args(&out), took.mul_f64(share)) {
            assert!(
                !out.exists() || std::fs::read(&out).unwrap() == want,
                "no half output"
            );
            let state = f
                .dir
                .path()
                .join(format!("cut{seed}.jsonl.mine-state.json"));
            if state.exists() {
                let s: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
                resumed += usize::from(s["queries_done"].as_u64().unwrap() > 0);
            }
            if !out.exists() {
                ok(&args(&out).iter().map(String::as_str).collect::<Vec<_>>());
            }
        } else {
            eprintln!("seed {seed}: ended before the kill");
        }
        assert_eq!(std::fs::read(&out).unwrap(), want, "seed {seed}");
    }
    eprintln!("{resumed} of 6 kills resumed mid-output");
}

/// Mine, then train a few MRL (MNRL) steps on the mined triplets: `nest train` reads the
/// output as it is.
#[test]
fn mine_then_train() {
    let f = Fixture::new(48, 40);
    let rows = f.mine("triplets.jsonl", &["--num-negatives", "1"]);
    assert_eq!(rows.len(), 48);
    let recipe = format!(
        "model = \"{}\"\nloss = \"mnrl\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\nepochs = 1\nlr = 1e-4\n\
         [[data]]\npath = \"{}\"\nformat = \"triplets\"\n",
        f.model,
        f.p("triplets.jsonl")
    );
    std::fs::write(f.dir.path().join("r.toml"), recipe).unwrap();
    let run = f.p("run");
    ok(&[
        "--threads",
        "1",
        "train",
        "--recipe",
        &f.p("r.toml"),
        "--run-dir",
        &run,
    ]);
    assert!(Path::new(&run).join("final/model.safetensors").exists());
    let metrics = std::fs::read_to_string(Path::new(&run).join("metrics.jsonl")).unwrap();
    assert!(metrics.lines().count() >= 5, "{metrics}");
}
