//! Data-parallel training and GradCache end to end, with the `nest` binary launched the way
//! torchrun launches it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) on loopback:
//! - 2 processes at global batch 16, 1 process with GradCache chunks of 4, and both at once
//!   train the same model as 1 plain process (dropout 0): the same loss at every step
//!   (relative 1e-5) and the same final weights (the difference at most 5e-3 of the distance
//!   training moved them; measured 0.8-1.2e-3, while in-batch negatives from the local half
//!   only, the control, land at more than 5e-2), for MRL and for 2DMSE;
//! - a 2-process run whose rank 1 is killed with SIGKILL stops rank 0 with an error (no hang),
//!   and `--resume auto` finishes it with the weights of the uninterrupted run;
//! - SIGTERM to rank 1 alone stops both ranks after the same step with a checkpoint (exit
//!   143), and `--resume auto` finishes it with the weights of the uninterrupted run;
//! - a bad launch environment is an error naming the variable, before any model is loaded;
//! - a multi-process `index build` onto an output in use stops every rank at once, and one
//!   killed midway goes on from the chunks each rank kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

mod support;
use support::{finish, free_port};

/// The group timeout of every rank these tests start (NEST_DIST_TIMEOUT_S).
const DIST_TIMEOUT_S: u64 = 30;

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

/// Triplets from a fixed generator: anchor, a positive sharing words, a random negative.
fn write_triplets(path: &Path) {
    let mut s = String::from("anchor\tpositive\tnegative\n");
    let mut x: u64 = 99;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 12) as usize
    };
    for _ in 0..64 {
        let a: Vec<&str> = (0..5).map(|_| WORDS[next()]).collect();
        let mut p = a[..3].to_vec();
        p.push(WORDS[next()]);
        let n: Vec<&str> = (0..4).map(|_| WORDS[next()]).collect();
        s.push_str(&format!(
            "{}\t{}\t{}\n",
            a.join(" "),
            p.join(" "),
            n.join(" ")
        ));
    }
    std::fs::write(path, s).unwrap();
}

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_model(&dir.path().join("tiny"), &TinySpec::new(Architecture::Bert)).unwrap();
        write_triplets(&dir.path().join("triplets.tsv"));
        Setup { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A recipe file: MNRL on triplets, dims 8/16/32, dropout 0; `keys` replace or add
    /// top-level keys, `tables` is appended (e.g. `[[objective]]`).
    fn recipe(&self, name: &str, keys: &[(&str, &str)], tables: &str) -> PathBuf {
        let mut base = vec![
            (
                "model",
                format!("{:?}", self.path("tiny").display().to_string()),
            ),
            ("loss", "\"mnrl\"".to_string()),
            ("matryoshka_dims", "[8, 16, 32]".into()),
            ("batch_size", "16".into()),
            ("lr", "1e-3".into()),
            ("epochs", "2".into()),
            ("dropout", "0.0".into()),
            ("save_every", "0".into()),
            ("seed", "3".into()),
        ];
        for (k, v) in keys {
            base.retain(|(b, _)| b != k);
            base.push((k, v.to_string()));
        }
        let mut text: String = base.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        text.push_str(&format!(
            "{tables}\n[[data]]\npath = {:?}\nformat = \"triplets\"\n",
            self.path("triplets.tsv").display().to_string(),
        ));
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn nest(args: &[String], env: &[(&str, String)]) -> Command {
    support::nest(args, DIST_TIMEOUT_S, env)
}

fn train_args(recipe: &Path, run: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "train".into(),
        "--recipe".into(),
        recipe.display().to_string(),
        "--run-dir".into(),
        run.display().to_string(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Starts `world` ranks of one job.
fn launch(world: usize, args: &[String]) -> Vec<Child> {
    support::launch(world, args, DIST_TIMEOUT_S)
}

fn run_ok(world: usize, args: &[String]) {
    for (rank, (ok, err)) in finish(launch(world, args), Duration::from_secs(300))
        .into_iter()
        .enumerate()
    {
        assert!(ok, "rank {rank} of {args:?} failed: {err}");
    }
}

fn run_single(args: &[String]) {
    let out = nest(args, &[]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn losses(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["loss"].as_f64())
        .collect()
}

fn weights(model: &Path) -> HashMap<String, tch::Tensor> {
    tch::Tensor::read_safetensors(model.join("model.safetensors"))
        .unwrap()
        .into_iter()
        .collect()
}

/// `||a - b|| / ||a - start||` over every float weight: how far apart two runs' final weights
/// are, relative to how far training moved them (Adam turns rounding noise in a near-zero
/// gradient into a full-size step on that coordinate, so an elementwise bound says little).
fn relative_weight_diff(start: &Path, a: &Path, b: &Path) -> f64 {
    let (w0, wa, wb) = (
        weights(start),
        weights(&a.join("final")),
        weights(&b.join("final")),
    );
    assert_eq!(wa.len(), wb.len());
    let (mut diff, mut moved) = (0.0, 0.0);
    for (k, t) in &wa {
        if !t.is_floating_point() {
            continue;
        }
        let d = |x: &tch::Tensor| x.to_kind(tch::Kind::Double);
        diff += (d(t) - d(&wb[k]))
            .square()
            .sum(tch::Kind::Double)
            .double_value(&[]);
        moved += (d(t) - d(&w0[k]))
            .square()
            .sum(tch::Kind::Double)
            .double_value(&[]);
    }
    assert!(moved > 0.0, "training did not move the weights");
    (diff / moved).sqrt()
}

fn assert_same_run(s: &Setup, reference: &Path, other: &Path, what: &str) {
    let (a, b) = (losses(reference), losses(other));
    assert_eq!(a.len(), b.len(), "{what}: step counts");
    assert!(a.len() >= 6, "{what}: {a:?}");
    for (s, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * x.abs().max(1.0),
            "{what}: step {} loss {x} vs {y}",
            s + 1
        );
    }
    let d = relative_weight_diff(&s.path("tiny"), reference, other);
    eprintln!("{what}: relative weight difference {d:.2e}");
    assert!(
        d <= 5e-3,
        "{what}: final weights differ by {d} of the distance trained"
    );
}

/// One method: plain 1 process against 2 processes, 1 process + GradCache, 2 + GradCache.
fn equivalence(s: &Setup, name: &str, extra: &str) {
    let recipe = s.recipe(&format!("{name}.toml"), &[], extra);
    let plain = s.path(&format!("{name}-plain"));
    run_single(&train_args(&recipe, &plain, &[]));
    let cached = s.path(&format!("{name}-cached"));
    run_single(&train_args(&recipe, &cached, &["--mini-batch-size", "4"]));
    assert_same_run(
        s,
        &plain,
        &cached,
        &format!("{name}: GradCache (chunks of 4)"),
    );
    let dp = s.path(&format!("{name}-dp"));
    run_ok(2, &train_args(&recipe, &dp, &[]));
    assert_same_run(s, &plain, &dp, &format!("{name}: 2 processes"));
    let both = s.path(&format!("{name}-dp-cached"));
    run_ok(2, &train_args(&recipe, &both, &["--mini-batch-size", "4"]));
    assert_same_run(
        s,
        &plain,
        &both,
        &format!("{name}: 2 processes + GradCache"),
    );
    // only rank 0 writes the run's metrics; rank 1 logs its own throughput and traffic
    let r1 = std::fs::read_to_string(dp.join("ranks/rank1.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(r1.lines().last().unwrap()).unwrap();
    assert!(last["comm_bytes"].as_u64().unwrap() > 0, "{last}");
    // rank 0's TensorBoard event file holds the loss curve; rank 1 writes none
    let events: Vec<_> = std::fs::read_dir(dp.join("tensorboard"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let bytes = std::fs::read(events[0].path()).unwrap();
    assert!(bytes.windows(10).any(|w| w == b"train/loss"));
    assert!(!dp.join("ranks/rank0.jsonl").exists());
}

#[test]
fn mrl_spread_over_processes_and_chunks_trains_the_same_model() {
    let s = Setup::new();
    equivalence(&s, "mrl", "");
    // the control: what a data-parallel run without the gather computes (each process's
    // in-batch negatives only: batches of 8, gradients summed over 2) is far from the plain run
    let recipe = s.path("mrl.toml");
    let local = s.path("mrl-local-negatives");
    run_single(&train_args(
        &recipe,
        &local,
        &["--batch-size", "8", "--grad-accum", "2"],
    ));
    let d = relative_weight_diff(&s.path("tiny"), &s.path("mrl-plain"), &local);
    eprintln!("mrl: local negatives only: relative weight difference {d:.2e}");
    assert!(
        d > 5e-2,
        "the control should differ from the plain run: {d}"
    );
}

/// A recipe's `[mine]` under data parallelism: each round is mined split by rank (rank 0
/// merges), every rank trains on the merged file, and the run is the one-process run: round 0's
/// file byte for byte, the losses and weights within the data-parallel tolerance, round 1
/// mined again with the weights after epoch 1.
#[test]
fn mining_inside_a_data_parallel_run_is_the_one_process_run() {
    let s = Setup::new();
    let table = format!(
        "[mine]\nqueries = {:?}\nnum_negatives = 1\nevery_epochs = 1\nbatch_size = 8\n",
        s.path("triplets.tsv").display().to_string()
    );
    let recipe = s.recipe("mined.toml", &[], &table);
    let plain = s.path("mined-plain");
    run_single(&train_args(&recipe, &plain, &[]));
    let dp = s.path("mined-dp");
    run_ok(2, &train_args(&recipe, &dp, &[]));
    let round =
        |run: &Path, k: usize| std::fs::read(run.join(format!("mined/round-{k}.jsonl"))).unwrap();
    assert!(
        round(&plain, 0) == round(&dp, 0),
        "round 0: the same file from 1 and 2 processes"
    );
    assert!(!round(&dp, 1).is_empty());
    assert!(
        !dp.join("mined/round-0.part-00000-of-00002.jsonl").exists(),
        "rank 0 merged the parts"
    );
    assert_same_run(&s, &plain, &dp, "[mine]: 2 processes");
}

/// Scored pairs whose texts run from 2 to 9 words, so that sorting a batch by length (GradCache)
/// reorders its rows; the score is the shared share of words.
fn write_scored(path: &Path) {
    let mut s = String::from("sentence1\tsentence2\tscore\n");
    for i in 0..64usize {
        let a: Vec<&str> = (0..2 + i % 8)
            .map(|k| WORDS[(i * 7 + k * 5) % 12])
            .collect();
        let keep = (i * 3) % (a.len() + 1);
        let mut b = a[..keep].to_vec();
        b.extend((0..2 + (i * 5) % 6).map(|k| WORDS[(i + k * 11) % 12]));
        let score = 5.0 * keep as f64 / b.len() as f64;
        s.push_str(&format!("{}\t{}\t{score:.3}\n", a.join(" "), b.join(" ")));
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn cosent_with_grad_cache_keeps_each_score_with_its_pair() {
    // GradCache encodes a batch sorted by length; the gold scores (and the texts a teacher is
    // looked up by) must follow the rows, or CoSENT learns from shuffled labels
    let s = Setup::new();
    write_scored(&s.path("scored.tsv"));
    let recipe = s.recipe("cosent.toml", &[("loss", "\"cosent\"")], "");
    let text = std::fs::read_to_string(&recipe)
        .unwrap()
        .replace("triplets.tsv", "scored.tsv")
        .replace("format = \"triplets\"", "format = \"scored\"");
    std::fs::write(&recipe, text).unwrap();
    let plain = s.path("cosent-plain");
    run_single(&train_args(&recipe, &plain, &[]));
    let cached = s.path("cosent-cached");
    run_single(&train_args(&recipe, &cached, &["--mini-batch-size", "4"]));
    assert_same_run(&s, &plain, &cached, "cosent: GradCache (chunks of 4)");
}

#[test]
fn two_d_mse_spread_over_processes_and_chunks_trains_the_same_model() {
    let extra = "[[objective]]\nkind = \"2dmse\"\nlayers_per_step = 1\nkl_temperature = 0.3\n";
    equivalence(&Setup::new(), "2dmse", extra);
}

#[test]
fn a_killed_rank_stops_the_job_and_resume_auto_finishes_it() {
    let s = Setup::new();
    let keys = [
        ("epochs", "100"),
        ("max_steps", "300"),
        ("save_every", "5"),
        ("keep_last", "100"),
    ];
    let recipe = s.recipe("long.toml", &keys, "");
    let whole = s.path("whole");
    run_ok(2, &train_args(&recipe, &whole, &[]));

    let run = s.path("killed");
    let args = train_args(&recipe, &run, &["--resume", "auto"]);
    let mut ranks = launch(2, &args);
    let start = Instant::now();
    while !run.join("checkpoints/step-00000005").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no checkpoint appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut victim = ranks.pop().unwrap();
    assert!(
        victim.try_wait().unwrap().is_none(),
        "rank 1 ended before it could be killed"
    );
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    let killed_at = Instant::now();
    let (ok, err) = finish(ranks, Duration::from_secs(120)).pop().unwrap();
    assert!(!ok, "rank 0 should fail when rank 1 dies");
    assert!(err.contains("rank 0") && err.contains("failed"), "{err}");
    assert!(
        killed_at.elapsed() < Duration::from_secs(60),
        "rank 0 took {:?} to notice",
        killed_at.elapsed()
    );

    // what torchrun --max-restarts does: the same command again
    run_ok(2, &args);
    let d = relative_weight_diff(&s.path("tiny"), &whole, &run);
    eprintln!("resumed 2-process run: relative weight difference {d:.2e}");
    assert!(
        d <= 1e-6,
        "resumed run differs from the uninterrupted one by {d}"
    );
}

/// Waits for `child` (SIGKILL at the deadline): its exit code and stderr.
fn exit_code(mut child: Child, deadline: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().ok();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err)
}

#[test]
fn sigterm_to_one_rank_stops_every_rank_after_the_same_step_with_a_checkpoint() {
    let s = Setup::new();
    let keys = [
        ("epochs", "100"),
        ("max_steps", "300"),
        ("save_every", "1000"),
    ];
    let recipe = s.recipe("long.toml", &keys, "");
    let whole = s.path("whole");
    run_ok(2, &train_args(&recipe, &whole, &[]));

    let run = s.path("stopped");
    let args = train_args(&recipe, &run, &["--resume", "auto"]);
    let ranks = launch(2, &args);
    let start = Instant::now();
    while std::fs::read_to_string(run.join("metrics.jsonl")).map_or(0, |t| t.lines().count()) < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no steps logged"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // a scheduler's SIGTERM to rank 1 alone: rank 0 learns it at the step's agreement
    let sent = Command::new("kill")
        .args(["-TERM", &ranks[1].id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let ends: Vec<_> = ranks
        .into_iter()
        .map(|c| exit_code(c, Duration::from_secs(120)))
        .collect();
    for (rank, (code, err)) in ends.iter().enumerate() {
        assert_eq!(*code, Some(143), "rank {rank}: {err}");
    }
    let step: u64 = ends[0]
        .1
        .split("stopped after step ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("rank 0 says no stop step: {}", ends[0].1));
    assert!((3..300).contains(&step), "stopped at {step}");
    assert!(run.join(format!("checkpoints/step-{step:08}")).is_dir());

    // what torchrun --max-restarts does: the same command again
    run_ok(2, &args);
    let d = relative_weight_diff(&s.path("tiny"), &whole, &run);
    eprintln!("2-process run stopped by SIGTERM and resumed: relative weight difference {d:.2e}");
    assert!(
        d <= 1e-6,
        "resumed run differs from the uninterrupted one by {d}"
    );
}

#[test]
fn a_bad_launch_environment_is_an_error_before_any_model_loads() {
    let s = Setup::new();
    let recipe = s.recipe("r.toml", &[], "");
    let args = train_args(&recipe, &s.path("bad"), &[]);
    let port = free_port().to_string();
    let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
        (vec![("WORLD_SIZE", "2".into())], "RANK"),
        (
            vec![("WORLD_SIZE", "2".into()), ("RANK", "2".into())],
            "RANK is 2",
        ),
        (
            vec![("WORLD_SIZE", "x".into()), ("RANK", "0".into())],
            "WORLD_SIZE",
        ),
        (
            vec![("WORLD_SIZE", "2".into()), ("RANK", "1".into())],
            "MASTER_ADDR",
        ),
        (
            vec![
                ("WORLD_SIZE", "2".into()),
                ("RANK", "1".into()),
                ("MASTER_ADDR", "127.0.0.1".into()),
                ("MASTER_PORT", port),
                ("NEST_DIST_TIMEOUT_S", "2".into()),
            ],
            "could not join",
        ),
    ];
    for (env, needle) in cases {
        let start = Instant::now();
        let out = nest(&args, &env).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{env:?}: {err}");
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{env:?}: {err}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{env:?} took {:?}",
            start.elapsed()
        );
        assert!(
            !err.contains("objective"),
            "{env:?}: got past the launch check: {err}"
        );
    }
}

#[test]
fn what_cannot_be_spread_is_refused_with_the_reason() {
    let s = Setup::new();
    let mic = "[[objective]]\nkind = \"mic\"\n";
    let recipe = s.recipe("mic.toml", &[], mic);
    let out = nest(
        &train_args(&recipe, &s.path("mic"), &["--mini-batch-size", "4"]),
        &[],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("mini_batch_size") && err.contains("SCR"),
        "{err}"
    );
    let recipe = s.recipe("odd.toml", &[], "");
    let res = finish(
        launch(
            2,
            &train_args(&recipe, &s.path("odd"), &["--batch-size", "15"]),
        ),
        Duration::from_secs(120),
    );
    for (ok, err) in res {
        assert!(!ok);
        assert!(
            err.contains("batch_size 15") && err.contains("WORLD_SIZE 2"),
            "{err}"
        );
    }
}

#[test]
fn encoding_by_rank_writes_parts_that_are_the_single_process_output() {
    let s = Setup::new();
    let input = s.path("in.txt");
    let lines: Vec<String> = (0..41)
        .map(|i| {
            (0..(i % 6 + 1))
                .map(|k| WORDS[(i * 7 + k) % 12])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let model = s.path("tiny").display().to_string();
    let args = |out: &Path| -> Vec<String> {
        [
            "encode",
            "--model",
            &model,
            "--input",
            &input.display().to_string(),
        ]
        .iter()
        .map(|x| x.to_string())
        .chain(["--output".to_string(), out.display().to_string()])
        .collect()
    };
    run_single(&args(&s.path("one.jsonl")));
    run_ok(3, &args(&s.path("three.jsonl")));
    let rows = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let one = rows(&s.path("one.jsonl"));
    let three: Vec<serde_json::Value> = (0..3)
        .flat_map(|r| rows(&s.path(&format!("three.part-{r:05}-of-00003.jsonl"))))
        .collect();
    assert_eq!(one.len(), 41);
    assert_eq!(three.len(), 41);
    for (i, (a, b)) in one.iter().zip(&three).enumerate() {
        assert_eq!(b["index"].as_u64(), Some(i as u64), "global row numbers");
        let (a, b) = (
            a["embedding"].as_array().unwrap(),
            b["embedding"].as_array().unwrap(),
        );
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-5, "row {i}: {x} vs {y}");
        }
    }
}

#[test]
fn an_index_built_by_rank_is_the_single_process_index() {
    let s = Setup::new();
    let input = s.path("docs.jsonl");
    let docs: String = (0..29)
        .map(|i| {
            let text = (0..(i % 5 + 2))
                .map(|k| WORDS[(i * 5 + k) % 12])
                .collect::<Vec<_>>()
                .join(" ");
            if i % 4 == 0 {
                format!("{{\"text\": \"{text}\", \"n\": {i}}}\n") // an id from the record number
            } else {
                format!("{{\"_id\": \"d{i}\", \"text\": \"{text}\", \"n\": {i}}}\n")
            }
        })
        .collect();
    std::fs::write(&input, docs).unwrap();
    let model = s.path("tiny").display().to_string();
    let args = |out: &Path| -> Vec<String> {
        let input = input.display().to_string();
        let out = out.display().to_string();
        [
            "index", "build", "--model", &model, "--input", &input, "--out", &out,
        ]
        .iter()
        .map(|x| x.to_string())
        .chain(
            [
                "--payload",
                "--precision",
                "float32,int8",
                "--dims",
                "16,32",
            ]
            .map(String::from),
        )
        .collect()
    };
    run_single(&args(&s.path("one")));
    run_ok(2, &args(&s.path("two")));
    assert!(!s.path("two.parts").exists(), "rank 0 removes the parts");
    let (one, two) = (
        nest_index::Index::open(&s.path("one")).unwrap(),
        nest_index::Index::open(&s.path("two")).unwrap(),
    );
    assert_eq!(one.len(), 29);
    assert_eq!(two.len(), 29);
    let hash = |i: &nest_index::Index| i.manifest().source["documents_sha256"].clone();
    assert!(hash(&one).is_string(), "{:?}", one.manifest().source);
    assert_eq!(hash(&one), hash(&two), "the same documents' content hash");
    let level = nest_index::Level {
        precision: nest_index::Precision::Float32,
        dim: 32,
    };
    for r in 0..29 {
        assert_eq!(one.id(r), two.id(r), "row {r}");
        assert_eq!(one.payload(r), two.payload(r), "row {r}");
        let (a, b) = (one.vector(level, r).unwrap(), two.vector(level, r).unwrap());
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(worst <= 1e-5, "row {r}: {worst}");
    }
    assert_eq!(one.id(4), "5", "record numbers stay global");
}

#[test]
fn a_multi_process_index_build_on_a_busy_output_stops_every_rank_at_once() {
    let s = Setup::new();
    let input = s.path("docs.txt");
    std::fs::write(&input, "the cat sat\na dog is playing\nmusic on the mat\n").unwrap();
    let out = s.path("busy");
    let args: Vec<String> = [
        "index",
        "build",
        "--model",
        &s.path("tiny").display().to_string(),
        "--input",
        &input.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    // another build holds the output (this test process takes its lock)
    let held = nest_core::lock::FolderLock::take_beside(&out).unwrap();
    let start = Instant::now();
    let results = finish(launch(2, &args), Duration::from_secs(120));
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "the ranks stop at once, not at the 30 s group timeout: {took:?}"
    );
    let (ok0, err0) = &results[0];
    let (ok1, err1) = &results[1];
    assert!(
        !ok0 && err0.contains("in use by another process"),
        "rank 0: {err0}"
    );
    assert!(
        !ok1 && err1.contains("rank(s) [0] failed"),
        "rank 1: {err1}"
    );
    assert!(
        !out.exists() && !s.path("busy.parts").exists(),
        "nothing written"
    );
    // the holder's lock file is its own: the refused build did not take it away
    assert!(held.path().exists());
    drop(held);
    // once the first build is gone, the same command builds (a stale lock file does not block)
    run_ok(2, &args);
    assert_eq!(nest_index::Index::open(&out).unwrap().len(), 3);
}

#[test]
fn a_cut_index_build_by_rank_goes_on_from_its_kept_chunks() {
    let s = Setup::new();
    // wide enough that a chunk takes a while: the kill lands between chunks, far from the end
    let spec = TinySpec {
        layers: 4,
        hidden: 256,
        max_seq_length: 128,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&s.path("wide"), &spec).unwrap();
    let docs: String = (0..300)
        .map(|i| {
            let text: Vec<&str> = (0..100).map(|j| WORDS[(i * 7 + j * j) % 12]).collect();
            format!("{{\"_id\": \"d{i}\", \"text\": \"{}\"}}\n", text.join(" "))
        })
        .collect();
    std::fs::write(s.path("docs.jsonl"), docs).unwrap();
    let args = |out: &str| -> Vec<String> {
        let p = |n: &str| s.path(n).display().to_string();
        [
            "--threads",
            "1",
            "index",
            "build",
            "--model",
            &p("wide"),
            "--input",
            &p("docs.jsonl"),
            "--out",
            &p(out),
            "--encode-chunk",
            "16",
        ]
        .map(String::from)
        .to_vec()
    };
    run_ok(2, &args("whole"));
    // both ranks killed once each has kept two chunks
    let ranks = launch(2, &args("cut"));
    let kept = |r: usize| s.path(&format!("cut.parts/.part-{r:05}.npy.embedded"));
    let t = Instant::now();
    while !(0..2).all(|r| kept(r).join("chunk-000001.f32").exists()) {
        assert!(!s.path("cut").exists(), "the build ended before the kill");
        assert!(t.elapsed() < Duration::from_secs(120));
        std::thread::sleep(Duration::from_millis(2));
    }
    let results = finish(ranks, Duration::ZERO);
    assert!(results.iter().all(|(ok, _)| !ok), "both ranks killed");
    assert!(!s.path("cut").exists());
    // the same command embeds only what is missing, and builds the same index
    let results = finish(launch(2, &args("cut")), Duration::from_secs(300));
    for (rank, (ok, err)) in results.iter().enumerate() {
        assert!(ok, "rank {rank}: {err}");
        assert!(
            err.contains("resuming: ") && err.contains("chunks of 16"),
            "rank {rank}: {err}"
        );
    }
    assert!(
        !s.path("cut.parts").exists(),
        "rank 0 removes the parts and the kept chunks"
    );
    let files = |dir: &str| -> Vec<(std::ffi::OsString, Vec<u8>)> {
        let mut f: Vec<_> = std::fs::read_dir(s.path(dir))
            .unwrap()
            .flatten()
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        f.sort();
        f
    };
    assert!(
        files("cut") == files("whole"),
        "the resumed index is the uncut one, byte for byte"
    );
}

#[test]
fn ibkd_distillation_runs_both_stages_data_parallel() {
    let s = Setup::new();
    let teacher = s.path("teacher");
    let mut spec = TinySpec::new(Architecture::Mpnet);
    spec.seed = 11;
    write_tiny_model(&teacher, &spec).unwrap();
    let texts: String = (0..48)
        .map(|i| {
            format!(
                "{} {} {}\n",
                WORDS[i % 12],
                WORDS[(i * 5) % 12],
                WORDS[(i * 7) % 12]
            )
        })
        .collect();
    std::fs::write(s.path("texts.tsv"), format!("text\n{texts}")).unwrap();
    let common =
        "batch_size = 16\nepochs = 1\nsave_every = 0\neval_every = 0\nseed = 3\ndropout = 0.0\n";
    let recipe = s.path("ibkd.toml");
    std::fs::write(
        &recipe,
        format!(
            "teacher = {:?}\nstudent = {:?}\ncache_dir = {:?}\nteacher_max_length = 32\n\n\
             [stage1]\nloss = \"none\"\nlr = 1e-3\n{common}\
             data = [{{ path = {:?}, format = \"single\" }}]\n\
             objective = [{{ kind = \"distill\", temperature = 0.1 }}, {{ kind = \"hsic\", weight = 1.0 }}]\n\n\
             [stage2]\nloss = \"mnrl\"\nlr = 3e-4\nmatryoshka_dims = [8, 16]\n{common}\
             data = [{{ path = {:?}, format = \"triplets\" }}]\n",
            teacher.display().to_string(),
            s.path("tiny").display().to_string(),
            s.path("cache").display().to_string(),
            s.path("texts.tsv").display().to_string(),
            s.path("triplets.tsv").display().to_string(),
        ),
    )
    .unwrap();
    let run = s.path("ibkd");
    let args: Vec<String> = [
        "distill",
        "--recipe",
        &recipe.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    run_ok(2, &args);
    assert!(run.join("stage2/final/model.safetensors").exists());
    for stage in ["stage1", "stage2"] {
        assert!(losses(&run.join(stage)).len() >= 3, "{stage}");
        assert!(
            run.join(stage).join("ranks/rank1.jsonl").exists(),
            "{stage}"
        );
    }
}
