//! Nothing lost, nothing puzzling (issue 37), end to end on the binary and a tiny model:
//! mistakes on a finished run leave it byte-identical, contradictory options are refused, a
//! run folder has one writer (a killed writer's lock does not block), and a failed start leaves
//! the disk as it was so the corrected command runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nest_core::lock::FolderLock;
use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

fn nest_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .current_dir(cwd)
        .args(["--threads", "1"])
        .args(args)
        .output()
        .unwrap()
}

fn ok_in(cwd: &Path, args: &[&str]) -> String {
    let o = nest_in(cwd, args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "nest {args:?} failed: {err}");
    err
}

/// Runs a command that must fail cleanly (exit 1, no panic); returns stderr.
fn fails_in(cwd: &Path, args: &[&str]) -> String {
    let o = nest_in(cwd, args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "nest {args:?} should exit 1: {err}"
    );
    assert!(!err.contains("panicked"), "nest {args:?} panicked: {err}");
    err
}

/// A folder with a tiny model, a scored TSV of `rows` pairs and a recipe `r.toml` over them
/// (batch 8, float32, no dropout).
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(rows: usize, extra: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_tiny_model(&d.join("tiny"), &TinySpec::new(Architecture::Bert)).unwrap();
        let words = ["the", "cat", "dog", "sat", "on", "mat", "man", "music"];
        let mut data = String::from("sentence1\tsentence2\tscore\n");
        for i in 0..rows {
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
        std::fs::write(d.join("train.tsv"), data).unwrap();
        let recipe = format!(
            "model = \"{}\"\nloss = \"cosent\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\n\
             lr = 5e-4\ndropout = 0.0\n{extra}\n[[data]]\npath = \"{}\"\nformat = \"scored\"\n",
            d.join("tiny").display(),
            d.join("train.tsv").display()
        );
        std::fs::write(d.join("r.toml"), recipe).unwrap();
        Fixture { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// Every file under `dir` (but the lock file, which records its last holder) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if e.file_name() != nest_core::lock::LOCK_FILE {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn mistakes_on_a_finished_run_leave_it_byte_identical() {
    let f = Fixture::new(40, "save_every = 2");
    let (r, run) = (f.path("r.toml"), f.path("run"));
    ok_in(f.root(), &["train", "--recipe", &r, "--run-dir", &run]);
    // data kept in the run's folder (a user's copy): an --overwrite would delete it
    std::fs::copy(f.path("train.tsv"), Path::new(&run).join("kept.tsv")).unwrap();
    let before = snapshot(Path::new(&run));
    assert!(before.contains_key(Path::new("final/model.safetensors")));
    let elsewhere = tempfile::tempdir().unwrap();
    let sts = f.path("train.tsv");
    let missing = f.path("missing.tsv");
    let missing_data = format!("{missing}:scored");
    let (final_model, kept) = (format!("{run}/final"), format!("{run}/kept.tsv:scored"));
    let mistakes: Vec<(Vec<&str>, &str)> = vec![
        // the data loss: resume and overwrite together, from another folder
        (vec!["train", "--resume", &run, "--overwrite"], "contradict"),
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--resume",
                &run,
                "--overwrite",
            ],
            "contradict",
        ),
        // an overwrite whose inputs are bad: refused before the old run is touched
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--overwrite",
                "--data",
                &missing_data,
            ],
            "missing.tsv",
        ),
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--overwrite",
                "--eval-data",
                &sts,
                "--eval-layers",
                "1-9",
            ],
            "eval_layers",
        ),
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--overwrite",
                "--batch-size",
                "1",
            ],
            "batch_size",
        ),
        (
            vec!["train", "--recipe", &r, "--run-dir", &run],
            "holds a run already",
        ),
        // inputs inside the run that --overwrite would delete with it: the run's own model
        // (training further from it) and data kept there
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--overwrite",
                "--model",
                &final_model,
            ],
            "holds the model",
        ),
        (
            vec![
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &run,
                "--overwrite",
                "--data",
                &kept,
            ],
            "holds the data",
        ),
        (
            vec!["train", "--resume", &run, "--lr", "1e-3"],
            "recipe differs",
        ),
    ];
    for (args, says) in &mistakes {
        let e = fails_in(elsewhere.path(), args);
        assert!(e.contains(says), "nest {args:?}: expected '{says}' in: {e}");
        assert!(
            snapshot(Path::new(&run)) == before,
            "nest {args:?} changed the finished run"
        );
    }
    // the overwrite that was meant replaces the run, and nothing of the old one stays behind
    ok_in(
        f.root(),
        &[
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &run,
            "--overwrite",
            "--lr",
            "1e-3",
        ],
    );
    let after = snapshot(Path::new(&run));
    assert_ne!(after, before);
    assert!(
        after.keys().all(|k| !k.starts_with(".replaced")),
        "{:?}",
        after.keys()
    );
    let saved = String::from_utf8_lossy(&after[Path::new("recipe.toml")]).into_owned();
    assert!(saved.contains("lr = 0.001"), "{saved}");
}

#[test]
fn one_writer_per_run_folder_and_a_killed_writers_lock_does_not_block() {
    let f = Fixture::new(40, "epochs = 400\nsave_every = 5\nkeep_last = 2");
    let (r, run) = (f.path("r.toml"), f.path("run"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(["--threads", "1", "train", "--recipe", &r, "--run-dir", &run])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let lock = Path::new(&run).join(".lock");
    while !(Path::new(&run).join("recipe.toml").exists()
        && std::fs::read_to_string(&lock).is_ok_and(|s| !s.is_empty()))
    {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the run never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = format!("pid {}", child.id());
    for args in [
        vec!["train", "--resume", &run],
        vec!["train", "--recipe", &r, "--run-dir", &run, "--overwrite"],
    ] {
        let e = fails_in(f.root(), &args);
        assert!(
            e.contains("in use") && e.contains(&pid),
            "nest {args:?}: {e}"
        );
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run must still be training"
    );
    child.kill().unwrap(); // SIGKILL: the OS releases the lock, the file stays
    child.wait().unwrap();
    assert!(lock.exists());
    // continue it for two more steps than it saved (max_steps may change on a resume)
    let saved = std::fs::read_dir(Path::new(&run).join("checkpoints"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("step-")?
                        .parse::<u64>()
                        .ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    let steps = (saved + 2).to_string();
    ok_in(
        f.root(),
        &["train", "--resume", &run, "--max-steps", &steps],
    );
    assert!(Path::new(&run).join("final/model.safetensors").exists());
}

#[test]
fn compress_index_and_distill_refuse_a_folder_in_use() {
    let f = Fixture::new(8, "");
    let me = format!("pid {}", std::process::id());
    // compress: the lock is taken before any input is read
    let out = f.path("adaptor");
    let held = FolderLock::take(Path::new(&out)).unwrap();
    let e = fails_in(
        f.root(),
        &[
            "compress",
            "--dims",
            "4,8",
            "--out",
            &out,
            "--embeddings",
            "c.npy",
            "--queries",
            "q.npy",
            "--qrels",
            "q.tsv",
        ],
    );
    assert!(e.contains("in use") && e.contains(&me), "{e}");
    drop(held);
    // and a failed start leaves no folder behind
    let fresh = f.path("adaptor2");
    let e = fails_in(
        f.root(),
        &[
            "compress",
            "--dims",
            "4,8",
            "--out",
            &fresh,
            "--embeddings",
            "c.npy",
            "--queries",
            "q.npy",
            "--qrels",
            "q.tsv",
        ],
    );
    assert!(e.contains("c.npy"), "{e}");
    assert!(
        !Path::new(&fresh).exists(),
        "a failed compress left {fresh}"
    );
    // index build: the lock sits beside the index (which is renamed into place)
    std::fs::write(f.root().join("docs.txt"), "a cat\na dog\n").unwrap();
    let idx = f.path("idx");
    let held = FolderLock::take_beside(Path::new(&idx)).unwrap();
    let args = [
        "index",
        "build",
        "--model",
        &f.path("tiny"),
        "--input",
        "docs.txt",
        "--out",
        &idx,
    ];
    let e = fails_in(f.root(), &args);
    assert!(e.contains("in use") && e.contains(&me), "{e}");
    drop(held);
    ok_in(f.root(), &args);
    // distill
    let recipe = format!(
        "teacher = \"{m}\"\nstudent = \"{m}\"\n[stage2]\nloss = \"cosent\"\nbatch_size = 4\n\
         data = [{{ path = \"{}\", format = \"scored\" }}]\n",
        f.path("train.tsv"),
        m = f.path("tiny")
    );
    std::fs::write(f.root().join("d.toml"), recipe).unwrap();
    let run = f.path("distilled");
    let held = FolderLock::take(Path::new(&run)).unwrap();
    let e = fails_in(
        f.root(),
        &["distill", "--recipe", "d.toml", "--run-dir", &run],
    );
    assert!(e.contains("in use") && e.contains(&me), "{e}");
    drop(held);
    let e = fails_in(
        f.root(),
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            &run,
            "--resume",
            "--overwrite",
        ],
    );
    assert!(e.contains("contradict"), "{e}");
}

#[test]
fn a_failed_start_leaves_the_disk_as_it_was_and_the_corrected_command_runs() {
    let f = Fixture::new(16, "");
    let (r, sts) = (f.path("r.toml"), f.path("train.tsv"));
    let new = f.path("new");
    let bad = [
        "train",
        "--recipe",
        &r,
        "--run-dir",
        &new,
        "--eval-data",
        &sts,
        "--eval-layers",
        "1-9",
    ];
    let e = fails_in(f.root(), &bad);
    assert!(e.contains("eval_layers"), "{e}");
    assert!(!Path::new(&new).exists(), "a failed start left {new}");
    // an empty folder made beforehand stays empty
    let empty = f.root().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty_s = empty.display().to_string();
    let e = fails_in(
        f.root(),
        &[
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &empty_s,
            "--model",
            &f.path("no-model"),
        ],
    );
    assert!(e.contains("no-model"), "{e}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // the corrected commands run, and --resume of the failed start says there is nothing
    let e = fails_in(f.root(), &["train", "--resume", &new]);
    assert!(!e.contains("holds a run"), "{e}");
    let said = ok_in(
        f.root(),
        &[
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &new,
            "--eval-data",
            &sts,
            "--eval-layers",
            "1-2",
        ],
    );
    // every layer evaluated is printed (the last one alone was, the others only logged)
    let line = said
        .lines()
        .find(|l| l.contains(" L1: d"))
        .unwrap_or_default();
    assert!(line.contains(" | L2: d"), "{said}");
    ok_in(f.root(), &["train", "--recipe", &r, "--run-dir", &empty_s]);
}

#[test]
fn recipe_paths_resolve_against_the_recipe_and_the_run_resumes_from_anywhere() {
    let f = Fixture::new(16, "");
    // a recipe kept in its own folder, with its data beside it and the model one folder up
    let exp = f.root().join("exp");
    std::fs::create_dir(&exp).unwrap();
    std::fs::rename(f.root().join("train.tsv"), exp.join("train.tsv")).unwrap();
    let recipe = "model = \"../tiny\"\nloss = \"cosent\"\nbatch_size = 8\nlr = 5e-4\n\
                  dropout = 0.0\nsave_every = 1\n[[data]]\npath = \"train.tsv\"\nformat = \"scored\"\n";
    std::fs::write(exp.join("r.toml"), recipe).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let run = f.path("run");
    let r = exp.join("r.toml").display().to_string();
    ok_in(
        elsewhere.path(),
        &[
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &run,
            "--max-steps",
            "1",
        ],
    );
    // the run records absolute paths, so it resumes from yet another folder
    let saved = std::fs::read_to_string(Path::new(&run).join("recipe.toml")).unwrap();
    let tiny = std::path::absolute(f.root().join("tiny")).unwrap();
    assert!(
        saved.contains(&format!("model = \"{}\"", tiny.display())),
        "{saved}"
    );
    let other = tempfile::tempdir().unwrap();
    let e = ok_in(
        other.path(),
        &["train", "--resume", &run, "--max-steps", "2"],
    );
    assert!(e.contains("resumed from"), "{e}");
    // a missing local model is reported as missing, naming the folder it was looked for in
    let bad = recipe.replace("../tiny", "../no-such-model");
    std::fs::write(exp.join("bad.toml"), bad).unwrap();
    let b = exp.join("bad.toml").display().to_string();
    let e = fails_in(
        elsewhere.path(),
        &["train", "--recipe", &b, "--run-dir", &f.path("bad")],
    );
    let looked = std::path::absolute(f.root().join("no-such-model")).unwrap();
    assert!(
        e.contains("model directory not found") && e.contains(&looked.display().to_string()),
        "{e}"
    );
    assert!(!e.contains("hub"), "{e}");
}

#[test]
fn type_errors_name_the_key_the_line_or_the_flag() {
    let f = Fixture::new(8, "");
    let r = f.path("r.toml");
    let e = fails_in(f.root(), &["train", "--recipe", &r, "--batch-size", "abc"]);
    assert!(
        e.contains("--batch-size") && e.contains("invalid type"),
        "{e}"
    );
    let text = std::fs::read_to_string(&r).unwrap();
    let wrong = text.replace("lr = 5e-4", "lr = \"fast\"");
    let line = wrong.lines().position(|l| l.starts_with("lr =")).unwrap() + 1;
    std::fs::write(f.root().join("w.toml"), &wrong).unwrap();
    let e = fails_in(f.root(), &["train", "--recipe", &f.path("w.toml")]);
    assert!(e.contains(&format!("line {line}, key lr")), "{e}");
    let weight = format!("{text}weight = \"heavy\"\n");
    std::fs::write(f.root().join("d.toml"), weight).unwrap();
    let e = fails_in(f.root(), &["train", "--recipe", &f.path("d.toml")]);
    assert!(e.contains("key data.weight") && e.contains("line "), "{e}");
}

/// Every file of a finished run's model and its logged (step, loss) bits.
fn outcome(run: &Path) -> (Vec<u8>, Vec<(u64, u64)>) {
    let losses = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["step"].as_u64()?, v["loss"].as_f64()?.to_bits()))
        })
        .collect();
    (
        std::fs::read(run.join("final/model.safetensors")).unwrap(),
        losses,
    )
}

#[test]
fn jsonl_training_data_trains_bit_for_bit_as_tsv() {
    let f = Fixture::new(24, "save_every = 0");
    let d = f.root();
    // the same scored pairs as JSON lines
    let tsv = std::fs::read_to_string(d.join("train.tsv")).unwrap();
    let mut jsonl = String::new();
    let mut triplets = String::from("anchor\tpositive\tnegative\n");
    let mut triplets_jsonl = String::new();
    for l in tsv.lines().skip(1) {
        let c: Vec<&str> = l.split('\t').collect();
        let score: f64 = c[2].parse().unwrap();
        jsonl.push_str(
            &serde_json::json!({"sentence1": c[0], "sentence2": c[1], "score": score}).to_string(),
        );
        jsonl.push('\n');
        let neg = format!("{} {}", c[1], c[0]);
        triplets.push_str(&format!("{}\t{}\t{neg}\n", c[0], c[1]));
        let t = serde_json::json!({"anchor": c[0], "positive": c[1], "negative": neg});
        triplets_jsonl.push_str(&format!("{t}\n"));
    }
    std::fs::write(d.join("train.jsonl"), jsonl).unwrap();
    std::fs::write(d.join("t.tsv"), triplets).unwrap();
    std::fs::write(d.join("t.jsonl"), triplets_jsonl).unwrap();
    let r = f.path("r.toml");
    let train = |data: &str, run: &str, loss: &str| {
        let data = format!(
            "{}:{}",
            f.path(data.split(':').next().unwrap()),
            data.split(':').nth(1).unwrap()
        );
        ok_in(
            d,
            &[
                "train",
                "--recipe",
                &r,
                "--run-dir",
                &f.path(run),
                "--data",
                &data,
                "--loss",
                loss,
            ],
        );
        outcome(&d.join(run))
    };
    let a = train("train.tsv:scored", "tsv", "cosent");
    let b = train("train.jsonl:scored", "jsonl", "cosent");
    assert_eq!(a.1.len(), 3);
    assert!(a == b, "scored: JSONL trained otherwise than TSV");
    let a = train("t.tsv:triplets", "t-tsv", "mnrl");
    let b = train("t.jsonl:triplets", "t-jsonl", "mnrl");
    assert!(a == b, "triplets: JSONL trained otherwise than TSV");
    // keys that fit no layout: the error lists the accepted ones
    std::fs::write(d.join("odd.jsonl"), "{\"query\": \"a\", \"doc\": \"b\"}\n").unwrap();
    let odd = format!("{}:pairs", f.path("odd.jsonl"));
    let e = fails_in(
        d,
        &[
            "train",
            "--recipe",
            &r,
            "--run-dir",
            &f.path("odd"),
            "--data",
            &odd,
            "--loss",
            "mnrl",
        ],
    );
    assert!(
        e.contains("odd.jsonl, line 1")
            && e.contains("anchor, positive")
            && e.contains("sentence1, sentence2"),
        "{e}"
    );
}

/// A `nest index build` (and a `nest encode`) killed (-9) after some chunks were embedded: the
/// same command embeds only the rest (it says so) and writes an index (a .npy) byte-identical
/// to an uncut run's; nothing of the cut run stays beside it. A build of other documents drops
/// the kept vectors.
#[test]
fn a_cut_index_build_or_encode_resumes_where_it_stopped() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // wide enough that a chunk takes a while: the kill lands between chunks, far from the end
    let spec = TinySpec {
        layers: 4,
        hidden: 256,
        max_seq_length: 128,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&root.join("m"), &spec).unwrap();
    let words = [
        "the", "cat", "dog", "sat", "on", "mat", "man", "music", "guitar",
    ];
    let docs: String = (0..400)
        .map(|i| {
            let text: Vec<&str> = (0..100).map(|j| words[(i * 7 + j * j) % 9]).collect();
            format!("{{\"id\": \"d{i}\", \"text\": \"{}\"}}\n", text.join(" "))
        })
        .collect();
    std::fs::write(root.join("docs.jsonl"), docs).unwrap();
    let args = |out: &str| -> Vec<String> {
        let (cmd, to) = match out.ends_with(".npy") {
            true => (&["encode"][..], "--output"),
            false => (&["index", "build"][..], "--out"),
        };
        let mut a: Vec<String> = ["--threads", "1"].iter().map(|s| s.to_string()).collect();
        a.extend(cmd.iter().map(|s| s.to_string()));
        let rest = [
            "--model",
            "m",
            "--input",
            "docs.jsonl",
            "--encode-chunk",
            "16",
            to,
            out,
        ];
        a.extend(rest.map(String::from));
        a
    };
    let run = |out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_nest"))
            .env("NEST_DTYPE", "float32")
            .current_dir(root)
            .args(args(out))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        err
    };
    // stopped once three chunks are kept (Ctrl-C, SIGTERM or kill -9); the same command goes
    // on from there, and a signal it could hear said so (it ended silently before)
    let cut = |out: &str, sig: i32| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
            .env("NEST_DTYPE", "float32")
            .current_dir(root)
            .args(args(out))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let third = root.join(format!(".{out}.embedded/chunk-000002.f32"));
        let t = Instant::now();
        while !third.exists() {
            assert!(child.try_wait().unwrap().is_none(), "ended before the kill");
            assert!(t.elapsed() < Duration::from_secs(120));
            std::thread::sleep(Duration::from_millis(2));
        }
        let pid = child.id().to_string();
        let sent = Command::new("kill").args([format!("-{sig}"), pid]).status();
        assert!(sent.unwrap().success());
        let o = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            o.status.signal(),
            Some(sig),
            "ended by the signal, as by default"
        );
        let said = String::from_utf8_lossy(&o.stderr);
        if sig != 9 {
            assert!(
                said.contains("texts are kept in")
                    && said.contains(&format!(".{out}.embedded (whole chunks of 16): the same"))
                    && said.contains("command continues after them"),
                "{said}"
            );
        }
        assert!(!root.join(out).exists());
        let err = run(out);
        assert!(
            err.contains("resuming: ") && err.contains("chunks of 16"),
            "{err}"
        );
        assert!(!root.join(format!(".{out}.embedded")).exists());
    };
    run("whole");
    cut("cut", 2);
    assert!(snapshot(&root.join("cut")) == snapshot(&root.join("whole")));
    run("whole.npy");
    cut("cut.npy", 15);
    std::fs::remove_file(root.join("cut.npy")).unwrap();
    cut("cut.npy", 9);
    let npy = |f: &str| std::fs::read(root.join(f)).unwrap();
    assert!(npy("cut.npy") == npy("whole.npy"));
    // vectors kept for other documents are dropped, with a line
    let e = root.join(".other.embedded");
    std::fs::create_dir_all(&e).unwrap();
    std::fs::write(e.join("state.json"), "{\"model\": \"another\"}").unwrap();
    std::fs::write(e.join("chunk-000000.f32"), [0u8; 16 * 32 * 4]).unwrap();
    let err = run("other");
    assert!(
        err.contains("dropped") && !err.contains("resuming"),
        "{err}"
    );
    assert!(snapshot(&root.join("other")) == snapshot(&root.join("whole")));
}
