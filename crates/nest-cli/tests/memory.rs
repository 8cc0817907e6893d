//! Out of memory ends a command as an error that says what lowers the memory, not as a panic
//! (issue 41: on a GPU, a batch the card cannot hold is a user's first mistake). The failures
//! are real libtorch allocation failures: a tiny model with 16 heads of one dimension, under
//! explicit attention, asks for a `[rows, 16, L, L]` score matrix (1.1 TB for one text of
//! 131,072 tokens), refused under an address-space limit (`ulimit -v`) whatever the machine's
//! overcommit setting.

use std::path::Path;
use std::process::Output;

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

const LONG: usize = 131_072;

/// `nest ARGS` under an address-space limit of `kib` KiB (one thread each for libtorch, the
/// tokenizer and glibc's arenas, and mimalloc's first reservation small, so that the process's
/// own size hardly depends on the machine: without the last, mimalloc reserves 1 GiB when the
/// limit leaves room for it, and libtorch's model load failed under 1.5-1.7 GiB).
fn nest_limited(cwd: &Path, kib: u64, args: &[&str]) -> Output {
    nest_limited_env(cwd, kib, &[], args)
}

fn nest_limited_env(cwd: &Path, kib: u64, env: &[(&str, &str)], args: &[&str]) -> Output {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v {kib} && exec '{}' --threads 1 {}",
            env!("CARGO_BIN_EXE_nest"),
            quoted.join(" ")
        ))
        .env("NEST_DTYPE", "float32")
        .env("RAYON_NUM_THREADS", "1")
        .env("MALLOC_ARENA_MAX", "1")
        .env("MIMALLOC_ARENA_RESERVE", "64M")
        .envs(env.iter().copied())
        .env("NEST_ATTENTION", "explicit")
        .env_remove("RUST_BACKTRACE")
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Runs a command that must fail with exit code 1 and no panic report; returns its stderr.
fn fails(cwd: &Path, args: &[&str]) -> String {
    let o = nest_limited(cwd, 256 << 20, args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "nest {args:?}: {err}");
    for never in ["panicked", "frame #", "stack backtrace"] {
        assert!(
            !err.contains(never),
            "nest {args:?} printed {never:?}: {err}"
        );
    }
    err
}

/// A tiny model of `positions` positions (16 heads of one dimension) in `tiny/`.
fn tiny_model(d: &Path, positions: usize) {
    let spec = TinySpec {
        hidden: 16,
        heads: 16,
        max_seq_length: positions,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&d.join("tiny"), &spec).unwrap();
}

/// The tiny model of `LONG` positions and texts of `LONG` words.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_model(d, LONG);
    let text = |w: &str| vec![w; LONG].join(" ");
    std::fs::write(d.join("long.txt"), text("cat") + "\n").unwrap();
    let rows = format!(
        "{}\t{}\n{}\t{}\n",
        text("cat"),
        text("dog"),
        text("mat"),
        text("man")
    );
    std::fs::write(d.join("pairs.tsv"), format!("anchor\tpositive\n{rows}")).unwrap();
    dir
}

/// `texts.txt` in `d`: 64 texts, the first `long` of 1,100 words (1,024 tokens once truncated),
/// the rest of 6.
fn texts(d: &Path, long: usize) {
    let words = ["the", "cat", "dog", "sat", "on", "mat", "man", "a"];
    let texts: String = (0..64)
        .map(|i| {
            let n = if i < long { 1100 } else { 6 };
            let t: Vec<&str> = (0..n).map(|k| words[(i * 3 + k * 5) % 8]).collect();
            t.join(" ") + "\n"
        })
        .collect();
    std::fs::write(d.join("texts.txt"), texts).unwrap();
}

/// `nest encode` of `texts.txt` through `tiny` at `batch` into `out` under `kib` KiB, which must
/// succeed; returns its stderr.
fn encodes(d: &Path, kib: u64, env: &[(&str, &str)], batch: &str, out: &str) -> String {
    let args = [
        "encode",
        "--model",
        "tiny",
        "--input",
        "texts.txt",
        "--output",
        out,
    ];
    let o = nest_limited_env(d, kib, env, &[&args[..], &["--batch-size", batch]].concat());
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

#[test]
fn out_of_memory_is_an_error_naming_what_lowers_it() {
    let dir = fixture();
    let d = dir.path();
    let err = fails(
        d,
        &[
            "encode", "--model", "tiny", "--input", "long.txt", "--output", "o.npy",
        ],
    );
    assert!(
        err.contains("error: out of memory: DefaultCPUAllocator: can't allocate memory")
            && err.contains("a smaller --batch-size"),
        "{err}"
    );
    assert!(!d.join("o.npy").exists());

    let err = fails(
        d,
        &[
            "train",
            "--model",
            "tiny",
            "--data",
            "pairs.tsv:pairs",
            "--loss",
            "mnrl",
            "--batch-size",
            "2",
            "--save-every",
            "0",
            "--run-dir",
            "run",
        ],
    );
    assert!(
        err.contains("error: step 1 failed: DefaultCPUAllocator: can't allocate memory")
            && err.contains("(out of memory: a batch of 2 rows of 2 texts each, at most 131072")
            && err.contains("lower `batch_size` (2)")
            && err.contains("set `mini_batch_size`"),
        "{err}"
    );
    assert!(d.join("run/recipe.toml").exists() && !d.join("run/final").exists());
}

/// A batch that does not fit is encoded in halves, warned once: the vectors of a batch size
/// that fits, bit for bit. 64 texts of 1,024 tokens at batch 64 ask for 4 GiB of scores (and as
/// much again for their softmax); under a 2 GiB limit the halves of 32 and 16 are refused too,
/// and those of 8 (about 1 GiB with the process's own 0.5) run.
#[test]
fn a_batch_that_does_not_fit_is_encoded_in_halves() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_model(d, 1024);
    texts(d, 64);
    let encode = |kib: u64, batch: &str, out: &str| encodes(d, kib, &[], batch, out);
    let err = encode(2 << 20, "64", "halves.npy");
    assert_eq!(
        err.matches("warning: a batch of 64 texts did not fit in memory")
            .count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("encoding it in halves") && !err.contains("panicked"),
        "{err}"
    );
    let err = encode(256 << 20, "8", "eights.npy");
    assert!(!err.contains("did not fit"), "{err}");
    let read = |f: &str| std::fs::read(d.join(f)).unwrap();
    assert_eq!(read("halves.npy"), read("eights.npy"));
}

/// A recording that runs out of memory turns off only shapes as large as its own: 8 texts of
/// 1,024 tokens then 56 of 8, at batch 8, recorded (`NEST_CUDA_GRAPHS=1`: the CPU fake runs a
/// recording's warm-up pass as a GPU does) under 1.3 GiB: the long batch's recording is refused
/// (512 MiB of scores and as much for their softmax), that batch is encoded eagerly in halves,
/// and the short batches are still recorded, their vectors those of an unlimited run's
/// recorded passes, bit for bit.
#[test]
fn a_recording_out_of_memory_keeps_smaller_shapes_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_model(d, 1024);
    texts(d, 8);
    let graphs = [("NEST_CUDA_GRAPHS", "1")];
    let encode = |kib: u64, out: &str| encodes(d, kib, &graphs, "8", out);
    let err = encode(1300 << 10, "limited.npy");
    let said = "warning: recording an encode pass of 8 x 1024 tokens ran out of memory";
    assert_eq!(err.matches(said).count(), 1, "{err}");
    assert!(err.contains("encoding it in halves"), "{err}");
    assert!(
        !err.contains("encoding through CUDA graphs failed"),
        "{err}"
    );
    let err = encode(256 << 20, "whole.npy");
    assert!(!err.contains("warning"), "{err}");
    // the short texts' rows, the files' last 56 x 16 float32 values
    let tail = |f: &str| {
        let b = std::fs::read(d.join(f)).unwrap();
        b[b.len() - 56 * 16 * 4..].to_vec()
    };
    assert_eq!(tail("limited.npy"), tail("whole.npy"));
}
