//! `nest mine` at scale (docs/MINING.md, "Scaling out"), on a tiny generated model:
//! - split by rank under a torchrun-style launch (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT
//!   on loopback), 2 and 3 processes write the one-process file byte for byte, and a run whose
//!   processes are all killed then launched again still does;
//! - `--corpus-index`: mining through an index built by `nest index build --model` gives the
//!   negatives of mining the same corpus in memory at the same precision, alone and split by
//!   rank; an index of another point, without the level, or of another corpus is refused,
//!   the flag named.

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

mod support;
use support::finish;

/// The group timeout of every rank these tests start (NEST_DIST_TIMEOUT_S).
const DIST_TIMEOUT_S: u64 = 60;

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

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

fn run(args: &[String]) -> Output {
    support::nest(args, DIST_TIMEOUT_S, &[]).output().unwrap()
}

fn ok(args: &[String]) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "nest {args:?} failed: {err}");
}

fn fails(args: &[String]) -> String {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "nest {args:?} should exit 1: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn launch(world: usize, args: &[String]) -> Vec<Child> {
    support::launch(world, args, DIST_TIMEOUT_S)
}

fn run_ranks(world: usize, args: &[String]) {
    for (rank, (ok, err)) in finish(launch(world, args), Duration::from_secs(240))
        .into_iter()
        .enumerate()
    {
        assert!(ok, "rank {rank} of {world} failed: {err}");
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    model: String,
}

impl Fixture {
    /// 37 pairs (one query repeated) and a corpus of 70 texts with a duplicate, a positive,
    /// and a positive it lacks.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny");
        write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
        let mut q = String::new();
        for i in 0..36 {
            let pair = serde_json::json!({"query": text(i, 5), "positive": text(i + 10_000, 6)});
            q.push_str(&format!("{pair}\n"));
        }
        let again = serde_json::json!({"query": text(3, 5), "positive": text(10_007, 6)});
        q.push_str(&format!("{again}\n"));
        std::fs::write(dir.path().join("q.jsonl"), q).unwrap();
        let mut c = String::new();
        for i in 0..66 {
            c.push_str(&format!("{}\n", text(i + 50_000, 4 + i % 5)));
        }
        c.push_str(&format!("{}\n{}\n", text(50_000, 4), text(10_000, 6)));
        for i in 1..36 {
            c.push_str(&format!("{}\n", text(i + 10_000, 6)));
        }
        // the last positive (35) is in the corpus; leave one out: drop positive 20's line
        let c: String = c
            .lines()
            .filter(|l| *l != text(10_020, 6))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.path().join("corpus.txt"), c).unwrap();
        let model = model.display().to_string();
        Fixture { dir, model }
    }

    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn args(&self, out: &str, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = ["mine", "--model", &self.model, "--queries"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend([
            self.p("q.jsonl"),
            "--corpus".into(),
            self.p("corpus.txt"),
            "--output".into(),
            self.p(out),
            "--encode-chunk".into(),
            "8".into(),
            "--chunk-queries".into(),
            "3".into(),
        ]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn bytes(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.p(name)).unwrap()
    }

    /// Files left in the fixture folder besides the inputs and `keep`.
    fn litter(&self, keep: &[&str]) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                !["tiny", "q.jsonl", "corpus.txt"].contains(&n.as_str())
                    && !keep.iter().any(|k| n.starts_with(k))
            })
            .collect()
    }
}

#[test]
fn mining_split_by_rank_is_the_one_process_file() {
    let f = Fixture::new();
    let extra = [
        "--output-scores",
        "--sampling",
        "random",
        "--seed",
        "7",
        "--num-negatives",
        "2",
    ];
    ok(&f.args("one.jsonl", &extra));
    let one = f.bytes("one.jsonl");
    assert_eq!(one.iter().filter(|&&b| b == b'\n').count(), 37 * 2);
    for world in [2, 3] {
        let name = format!("w{world}.jsonl");
        run_ranks(world, &f.args(&name, &extra));
        assert!(f.bytes(&name) == one, "{world} processes differ from one");
    }
    assert!(
        f.litter(&["one.jsonl", "w2.jsonl", "w3.jsonl"]).is_empty(),
        "{:?}",
        f.litter(&[])
    );
    // a finished output is refused by every rank, unless --overwrite
    let args = f.args("w2.jsonl", &extra);
    for (ok, err) in finish(launch(2, &args), Duration::from_secs(120)) {
        assert!(!ok && err.contains("--overwrite"), "{err}");
    }
    let mut again = args.clone();
    again.push("--overwrite".into());
    run_ranks(2, &again);
    assert!(f.bytes("w2.jsonl") == one);

    // every process killed at a moment, then the same launch: the same file
    let args = f.args("killed.jsonl", &extra);
    let t = Instant::now();
    run_ranks(2, &f.args("timed.jsonl", &extra));
    let took = t.elapsed();
    for share in [0.5, 0.75, 0.9] {
        let _ = std::fs::remove_file(f.p("killed.jsonl"));
        let _ = finish(launch(2, &args), took.mul_f64(share));
        let left = f.litter(&[
            "one.jsonl",
            "w2.jsonl",
            "w3.jsonl",
            "timed.jsonl",
            "killed.jsonl",
        ]);
        eprintln!("killed at {share}: left {left:?}");
        if f.dir.path().join("killed.jsonl").exists() {
            continue; // it ended before the kill
        }
        run_ranks(2, &args);
        assert!(
            f.bytes("killed.jsonl") == one,
            "resumed after a kill at {share}"
        );
    }
}

#[test]
fn mining_through_an_index_gives_the_in_memory_negatives() {
    let f = Fixture::new();
    let idx = f.p("idx");
    let build = |out: &str, extra: &[&str]| {
        let mut a: Vec<String> = vec![
            "index".into(),
            "build".into(),
            "--model".into(),
            f.model.clone(),
            "--input".into(),
            f.p("corpus.txt"),
            "--out".into(),
            out.into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        ok(&a);
    };
    build(&idx, &["--precision", "float32,int8,binary"]);
    for precision in ["float32", "int8", "binary"] {
        let p = ["--precision", precision, "--num-negatives", "3"];
        let mem = format!("mem-{precision}.jsonl");
        ok(&f.args(&mem, &p));
        let via = format!("via-{precision}.jsonl");
        let mut a = f.args(&via, &p);
        a.extend(["--corpus-index".into(), idx.clone()]);
        ok(&a);
        assert_eq!(
            String::from_utf8(f.bytes(&via)).unwrap(),
            String::from_utf8(f.bytes(&mem)).unwrap(),
            "{precision}: through the index"
        );
        if precision == "int8" {
            let ranks = format!("ranks-{precision}.jsonl");
            let mut a = f.args(&ranks, &p);
            a.extend(["--corpus-index".into(), idx.clone()]);
            run_ranks(2, &a);
            assert!(
                f.bytes(&ranks) == f.bytes(&via),
                "split by rank through the index"
            );
        }
    }
    // refusals name the flag and what was expected
    let with = |out: &str, extra: &[&str]| {
        let mut a = f.args(out, extra);
        a.extend(["--corpus-index".into(), idx.clone()]);
        a
    };
    let e = fails(&with("x.jsonl", &["--layer", "1"]));
    assert!(e.contains("--corpus-index") && e.contains("layer"), "{e}");
    // another document prompt than the index's (recorded: none here) is named with the fix
    let e = fails(&with("x.jsonl", &["--document-prompt", "passage: "]));
    assert!(
        e.contains("the prompt none") && e.contains("--document-prompt ''"),
        "{e}"
    );
    let e = fails(&with("x.jsonl", &["--dim", "8"]));
    assert!(
        e.contains("--corpus-index") && e.contains("float32:8"),
        "{e}"
    );
    let other = f.dir.path().join("tiny2");
    write_tiny_model(&other, &TinySpec::new(Architecture::Bert)).unwrap();
    let mut a = with("x.jsonl", &[]);
    let m = a.iter().position(|s| s == &f.model).unwrap();
    a[m] = other.display().to_string();
    let e = fails(&a);
    assert!(
        e.contains("--corpus-index") && e.contains("built with model"),
        "{e}"
    );
    let short: String = std::fs::read_to_string(f.p("corpus.txt"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(f.p("short.txt"), short).unwrap();
    let mut a = with("x.jsonl", &[]);
    let c = a.iter().position(|s| s.ends_with("corpus.txt")).unwrap();
    a[c] = f.p("short.txt");
    let e = fails(&a);
    assert!(
        e.contains("--corpus-index") && e.contains("not built from"),
        "{e}"
    );
    // the same ids (line numbers), one text changed: the index's content hash tells
    let mut lines: Vec<String> = std::fs::read_to_string(f.p("corpus.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines[0].push_str(" changed");
    std::fs::write(f.p("edited.txt"), lines.join("\n") + "\n").unwrap();
    let mut a = with("x.jsonl", &[]);
    a[c] = f.p("edited.txt");
    let e = fails(&a);
    assert!(
        e.contains("--corpus-index") && e.contains("same ids") && e.contains("other texts"),
        "{e}"
    );
    let a: Vec<String> = with("x.jsonl", &[])
        .into_iter()
        .filter(|s| s != "--corpus" && !s.ends_with("corpus.txt"))
        .collect();
    let e = fails(&a);
    assert!(e.contains("--corpus FILE"), "{e}");
    assert!(!Path::new(&f.p("x.jsonl")).exists());
}
