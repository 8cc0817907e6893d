//! Out of memory ends a command as an error that says what lowers the memory, not as a panic
//! (issue 41: on a GPU, a batch the card cannot hold is a user's first mistake). The failures
//! are real libtorch allocation failures: a tiny model with 16 heads of one dimension and
//! 131,072 positions, under explicit attention, asks for a `[1, 16, L, L]` score matrix of
//! 1.1 TB for one text of that length, refused under a 256 GiB address-space limit (`ulimit
//! -v`) whatever the machine's overcommit setting.

use std::path::Path;
use std::process::Output;

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

const LONG: usize = 131_072;

fn nest_limited(cwd: &Path, args: &[&str]) -> Output {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v 268435456 && exec '{}' --threads 1 {}",
            env!("CARGO_BIN_EXE_nest"),
            quoted.join(" ")
        ))
        .env("NEST_DTYPE", "float32")
        .env("NEST_ATTENTION", "explicit")
        .env_remove("RUST_BACKTRACE")
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Runs a command that must fail with exit code 1 and no panic report; returns its stderr.
fn fails(cwd: &Path, args: &[&str]) -> String {
    let o = nest_limited(cwd, args);
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

/// A tiny model of `LONG` positions and texts of `LONG` words.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = TinySpec {
        hidden: 16,
        heads: 16,
        max_seq_length: LONG,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&d.join("tiny"), &spec).unwrap();
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
