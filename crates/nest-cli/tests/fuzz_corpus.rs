//! Every fuzz target's corpus, replayed in CI (issue 23): the same bodies the libFuzzer targets
//! run (`fuzz/src/targets.rs`, included here by path), fed with
//! - the seed inputs (the repository's recipes and fixtures, the first lines of the shared
//!   datasets where they exist, hand-made valid files),
//! - every input of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` when present (what
//!   `scripts/setup/fuzz.sh` grew locally; the regressions are committed: inputs that once failed),
//! - deterministic random edits of each seed (bytes replaced, inserted or deleted, a line
//!   duplicated, the file truncated), `NEST_FUZZ_EDITS` per seed (default 300), for at most
//!   `NEST_FUZZ_SECONDS` per target (default 20; the seeds and saved corpora always run).
//!
//! A panic in a body fails the test and names the target and the input (written to
//! `target/fuzz-failures/<target>/`). With `NEST_FUZZ_SEEDS_DIR=<dir>` the seeds are also
//! written to `<dir>/<target>/` (what `scripts/setup/fuzz.sh` starts libFuzzer from).

#[allow(dead_code)]
#[path = "../../../fuzz/src/targets.rs"]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// splitmix64: a small deterministic generator (the edits must be the same on every machine).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `seed` with 1-5 random edits, the kinds `parsers.rs` uses.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(5) {
        let at = rng.below(b.len() + 1);
        let byte = match rng.below(4) {
            0 => rng.next() as u8,
            // bytes parsers care about
            1 => b"\t\n\r\",:{}[]0-9\xff"[rng.below(14)],
            2 => b"0123456789"[rng.below(10)],
            _ => 0,
        };
        match rng.below(5) {
            0 if at < b.len() => b[at] = byte,
            1 => b.insert(at, byte),
            2 if at < b.len() => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
            3 => {
                let start = b[..at]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |p| p + 1);
                let end = b[at..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| at + p + 1);
                let line = b[start..end].to_vec();
                b.splice(end..end, line);
            }
            4 => b.truncate(at),
            _ => {}
        }
    }
    b
}

/// The files of `dir`, sorted (none when it does not exist).
fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Runs `body` on `input`; on a panic, saves the input and returns where.
fn run(name: &str, body: targets::Body, input: &[u8], k: usize) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| body(input))) {
        Ok(()) => Ok(()),
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let dir = root().join("target/fuzz-failures").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join(format!("input-{k}"));
            std::fs::write(&p, input).unwrap();
            Err(format!(
                "{name}: input {k} panicked ({msg}); saved to {}",
                p.display()
            ))
        }
    }
}

#[test]
fn every_fuzz_target_survives_its_corpus() {
    let root = root();
    targets::set_root(&root);
    let data = std::env::var_os("NEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/datasets"));
    let edits: usize = std::env::var("NEST_FUZZ_EDITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let seconds: f64 = std::env::var("NEST_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20.0);
    let seeds_out = std::env::var_os("NEST_FUZZ_SEEDS_DIR").map(PathBuf::from);
    let mut failures = Vec::new();
    for &(name, body) in targets::TARGETS {
        let seeds = targets::seeds(name, &root, &data);
        assert!(!seeds.is_empty(), "{name}: no seed input");
        if let Some(out) = &seeds_out {
            let d = out.join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (k, s) in seeds.iter().enumerate() {
                std::fs::write(d.join(format!("seed-{k}")), s).unwrap();
            }
        }
        let mut inputs = seeds.clone();
        inputs.extend(corpus(&root.join("fuzz/regressions").join(name)));
        inputs.extend(corpus(&root.join("fuzz/corpus").join(name)));
        let fixed = inputs.len();
        let mut rng = Rng(0x5EED ^ name.len() as u64);
        for s in &seeds {
            for _ in 0..edits {
                inputs.push(mutate(s, &mut rng));
            }
        }
        let started = std::time::Instant::now();
        let (mut failed, mut ran) = (0, 0);
        for (k, input) in inputs.iter().enumerate() {
            // the seeds and the saved corpora always; the edits until the target's time is up
            if k >= fixed && started.elapsed().as_secs_f64() > seconds {
                break;
            }
            ran += 1;
            if let Err(e) = run(name, body, input, k) {
                failed += 1;
                if failed <= 3 {
                    failures.push(e);
                }
            }
        }
        eprintln!(
            "{name}: {ran} of {} inputs ({} seeds) in {:.1} s, {failed} failed",
            inputs.len(),
            seeds.len(),
            started.elapsed().as_secs_f64()
        );
    }
    targets::remove_scratch();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
