//! `kill -9` at random moments (issue 23): for each command, an uninterrupted run first, then
//! runs killed after a seeded random share of its duration (several seeds; bounded in time).
//! After each kill no reader sees a half-written output (it is absent, refused with a clear
//! error, or complete), and the rerun (`--resume` for training) ends with exactly the
//! uninterrupted run's result.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::Architecture;

fn nest(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) {
    let o = nest(args);
    assert!(
        o.status.success(),
        "nest {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `args`, kills it with SIGKILL after `after` (or lets it end first); true if killed.
fn kill_after(args: &[&str], after: Duration) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while t.elapsed() < after {
        if let Some(st) = child.try_wait().unwrap() {
            eprintln!(
                "ended on its own after {:?} ({st}), before {after:?}",
                t.elapsed()
            );
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    true
}

/// Seeded shares of a run's duration in (0.02, 0.7) (the uninterrupted run may have paid for a
/// cold start the later ones do not): SplitMix64.
fn shares(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            z ^= z >> 31;
            0.02 + 0.68 * (z >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

fn timed(args: &[&str]) -> Duration {
    let t = Instant::now();
    ok(args);
    t.elapsed()
}

fn setup() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    (d, model.display().to_string())
}

fn words(i: usize) -> String {
    const W: [&str; 12] = [
        "cat", "dog", "music", "guitar", "mat", "sun", "rain", "tree", "car", "road", "bird", "sea",
    ];
    format!("{} {} {}", W[i % 12], W[(i / 12) % 12], W[(i * 7 + 3) % 12])
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Every file of a folder (relative name -> bytes), temporary leftovers excluded.
fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn train_killed_at_random_moments_resumes_to_the_same_model() {
    let (d, m) = setup();
    let mut data = String::from("sentence1\tsentence2\tscore\n");
    for i in 0..96 {
        data.push_str(&format!(
            "{}\t{}\t{}\n",
            words(i),
            words(i + 5),
            (i % 6) as f64
        ));
    }
    std::fs::write(d.path().join("train.tsv"), data).unwrap();
    let recipe = format!(
        "model = \"{m}\"\nloss = \"cosent\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\nepochs = 4\nlr = 5e-4\nsave_every = 3\nkeep_last = 2\n[[data]]\npath = \"{}\"\nformat = \"scored\"\n",
        s(&d.path().join("train.tsv"))
    );
    let r = d.path().join("r.toml");
    std::fs::write(&r, recipe).unwrap();
    let full = d.path().join("full");
    let train = |dir: &Path, resume: bool| -> Vec<String> {
        let mut a = vec!["--threads".into(), "1".into(), "train".into()];
        if resume {
            a.extend(["--resume".into(), s(dir)]);
        } else {
            a.extend(["--run-dir".into(), s(dir)]);
        }
        a.extend(["--recipe".into(), s(&r)]);
        a
    };
    let args = train(&full, false);
    let t_full = timed(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let want = files(&full.join("final"));
    // (step, loss, gradient norm) of every logged step (not the wall-clock seconds)
    let curve = |dir: &Path| -> Vec<(u64, u64, u64)> {
        std::fs::read_to_string(dir.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let f = |k: &str| v[k].as_f64().unwrap().to_bits();
                (v["step"].as_u64().unwrap(), f("loss"), f("grad_norm"))
            })
            .collect()
    };
    let mut kills = 0;
    for (seed, share) in shares(7, 4).into_iter().enumerate() {
        let cut = d.path().join(format!("cut{seed}"));
        // killed once at a random moment, then again during the resume half the time
        let first = train(&cut, false);
        kills += usize::from(kill_after(
            &first.iter().map(String::as_str).collect::<Vec<_>>(),
            t_full.mul_f64(share),
        ));
        let mut killed_again = false;
        loop {
            let resume = cut.join("recipe.toml").is_file();
            let args = train(&cut, resume);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if seed % 2 == 0 && !killed_again {
                killed_again = true;
                if kill_after(&args, t_full.mul_f64(share / 2.0)) {
                    continue;
                }
            } else {
                ok(&args);
            }
            break;
        }
        assert_eq!(
            files(&cut.join("final")),
            want,
            "seed {seed}: the final model differs"
        );
        assert_eq!(
            curve(&cut),
            curve(&full),
            "seed {seed}: the loss curve differs"
        );
    }
    assert!(
        kills >= 2,
        "only {kills} of 4 runs were killed before they ended"
    );
}

#[test]
fn index_build_killed_at_random_moments_is_absent_or_complete() {
    let (d, m) = setup();
    let mut corpus = String::new();
    for i in 0..400 {
        corpus.push_str(&format!(
            "{{\"_id\": \"d{i}\", \"text\": \"{}\"}}\n",
            words(i)
        ));
    }
    let input = d.path().join("c.jsonl");
    std::fs::write(&input, corpus).unwrap();
    let build = |out: &Path, overwrite: bool| -> Vec<String> {
        let mut a: Vec<String> = [
            "--threads",
            "1",
            "index",
            "build",
            "--model",
            &m,
            "--input",
            &s(&input),
            "--dims",
            "8,32",
            "--precision",
            "float32,binary",
            "--out",
            &s(out),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        if overwrite {
            a.push("--overwrite".into());
        }
        a
    };
    let full = d.path().join("full");
    let args = build(&full, false);
    let t_full = timed(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let want = files(&full);
    let mut kills = 0;
    for (seed, share) in shares(11, 4).into_iter().enumerate() {
        let out = d.path().join(format!("cut{seed}"));
        // a first complete build, then a killed --overwrite: the old index must survive whole
        let with_old = seed % 2 == 1;
        if with_old {
            let a = build(&out, false);
            ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        }
        let a = build(&out, with_old);
        let args: Vec<&str> = a.iter().map(String::as_str).collect();
        kills += usize::from(kill_after(&args, t_full.mul_f64(share)));
        if out.exists() {
            let ix = nest_index::Index::open(&out);
            assert!(
                ix.is_ok(),
                "seed {seed}: a visible index must open: {:?}",
                ix.err()
            );
            assert_eq!(
                files(&out),
                want,
                "seed {seed}: a visible index must be whole"
            );
        }
        let a = build(&out, out.exists());
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(files(&out), want, "seed {seed}");
    }
    assert!(
        kills >= 2,
        "only {kills} of 4 builds were killed before they ended"
    );
}

#[test]
fn compress_killed_at_random_moments_leaves_no_readable_half() {
    let (d, m) = setup();
    let dir = d.path();
    let docs: Vec<String> = (0..48).map(words).collect();
    let queries: Vec<String> = (0..48).map(|i| words(i)[..7].to_string()).collect();
    std::fs::write(dir.join("docs.txt"), docs.join("\n")).unwrap();
    std::fs::write(dir.join("queries.txt"), queries.join("\n")).unwrap();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    let mut test = qrels.clone();
    for i in 0..48 {
        let line = format!("{i}\t{i}\t1\n");
        if i < 36 {
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
            &s(&dir.join(i)),
            "--output",
            &s(&dir.join(o)),
        ]);
    }
    let compress = |out: &Path| -> Vec<String> {
        [
            "--threads",
            "1",
            "compress",
            "--method",
            "smec",
            "--dims",
            "32,16,8",
            "--embeddings",
            &s(&dir.join("c.npy")),
            "--queries",
            &s(&dir.join("q.npy")),
            "--qrels",
            &s(&dir.join("qrels.tsv")),
            "--test-qrels",
            &s(&dir.join("test.tsv")),
            "--batch-size",
            "6",
            "--epochs",
            "4",
            "--memory-size",
            "40",
            "--hard-negatives",
            "3",
            "--out",
            &s(out),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect()
    };
    let full = dir.join("full");
    let a = compress(&full);
    let t_full = timed(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let want = nest_model::Adaptor::load(&full).unwrap();
    let mut kills = 0;
    for (seed, share) in shares(13, 4).into_iter().enumerate() {
        let out = dir.join(format!("cut{seed}"));
        let a = compress(&out);
        let args: Vec<&str> = a.iter().map(String::as_str).collect();
        kills += usize::from(kill_after(&args, t_full.mul_f64(share)));
        if out.join("adaptor.json").exists() {
            // the JSON is written last: when it is there, the whole adaptor is
            let got = nest_model::Adaptor::load(&out);
            assert!(got.is_ok(), "seed {seed}: {:?}", got.err());
        } else if out.exists() {
            let e = nest_model::Adaptor::load(&out).unwrap_err().to_string();
            assert!(e.contains("adaptor.json"), "seed {seed}: {e}");
        }
        let _ = std::fs::remove_dir_all(&out);
        let a = compress(&out);
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let got = nest_model::Adaptor::load(&out).unwrap();
        assert_eq!(got.dims(), want.dims());
        assert_eq!(
            std::fs::read(out.join("adaptor.safetensors")).unwrap(),
            std::fs::read(full.join("adaptor.safetensors")).unwrap(),
            "seed {seed}: a rerun gives the uninterrupted adaptor"
        );
    }
    assert!(
        kills >= 2,
        "only {kills} of 4 runs were killed before they ended"
    );
}

#[test]
fn distill_killed_at_random_moments_resumes_to_the_same_student() {
    let (d, m) = setup();
    let teacher = d.path().join("teacher");
    let mut spec = TinySpec::new(Architecture::Mpnet);
    spec.seed = 11;
    write_tiny_model(&teacher, &spec).unwrap();
    let texts: String = (0..480).map(|i| format!("{} {i}\n", words(i))).collect();
    std::fs::write(d.path().join("texts.tsv"), format!("text\n{texts}")).unwrap();
    let triplets: String = (0..64)
        .map(|i| format!("{}\t{}\t{}\n", words(i), words(i + 1), words(i + 50)))
        .collect();
    std::fs::write(
        d.path().join("triplets.tsv"),
        format!("anchor\tpositive\tnegative\n{triplets}"),
    )
    .unwrap();
    // one recipe per run: each its own teacher cache, so kills land in its fill too
    let recipe = |name: &str| -> String {
        let common = "batch_size = 16\nepochs = 1\nsave_every = 5\neval_every = 0\nseed = 3\n";
        let r = d.path().join(format!("{name}.toml"));
        std::fs::write(
            &r,
            format!(
                "teacher = {:?}\nstudent = {m:?}\ncache_dir = {:?}\nteacher_max_length = 32\n\n\
                 [stage1]\nloss = \"none\"\nlr = 1e-3\n{common}\
                 data = [{{ path = {:?}, format = \"single\" }}]\n\
                 objective = [{{ kind = \"distill\", temperature = 0.1 }}, {{ kind = \"hsic\", weight = 1.0 }}]\n\n\
                 [stage2]\nloss = \"mnrl\"\nlr = 3e-4\nmatryoshka_dims = [8, 16]\n{common}\
                 data = [{{ path = {:?}, format = \"triplets\" }}]\n",
                s(&teacher),
                s(&d.path().join(format!("cache-{name}"))),
                s(&d.path().join("texts.tsv")),
                s(&d.path().join("triplets.tsv")),
            ),
        )
        .unwrap();
        s(&r)
    };
    let args = |name: &str, resume: bool| -> Vec<String> {
        let mut a: Vec<String> = ["--threads", "1", "distill", "--recipe"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        a.push(recipe(name));
        a.extend(["--run-dir".into(), s(&d.path().join(name))]);
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let a = args("full", false);
    let t_full = timed(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let want = files(&d.path().join("full/stage2/final"));
    let mut kills = 0;
    for (seed, share) in shares(17, 4).into_iter().enumerate() {
        let name = format!("cut{seed}");
        let a = args(&name, false);
        let first: Vec<&str> = a.iter().map(String::as_str).collect();
        kills += usize::from(kill_after(&first, t_full.mul_f64(share)));
        let a = args(&name, d.path().join(&name).exists());
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            files(&d.path().join(&name).join("stage2/final")),
            want,
            "seed {seed}: the student differs from the uninterrupted one"
        );
    }
    assert!(
        kills >= 2,
        "only {kills} of 4 runs were killed before they ended"
    );
}

/// Sends `sig` (a `kill` name: INT, TERM) to a process.
fn signal(pid: u32, sig: &str) {
    let sent = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{sig} {pid} failed");
}

/// Waits until a run has logged `n` steps (its metrics.jsonl, flushed per step).
fn wait_for_steps(run: &Path, n: usize, child: &mut std::process::Child) {
    let start = Instant::now();
    loop {
        let logged = std::fs::read_to_string(run.join("metrics.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if logged >= n {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {n} steps were logged"
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no steps logged"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn ctrl_c_or_sigterm_stops_training_with_a_checkpoint_and_resume_ends_as_uninterrupted() {
    let (d, m) = setup();
    let mut data = String::from("sentence1\tsentence2\tscore\n");
    for i in 0..96 {
        data.push_str(&format!("{}\t{}\t{}\n", words(i), words(i + 5), i % 6));
    }
    std::fs::write(d.path().join("train.tsv"), data).unwrap();
    // only the end's checkpoint of its own: the one a signal leaves is the stop's
    let recipe = format!(
        "model = \"{m}\"\nloss = \"cosent\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\nepochs = 30\nlr = 5e-4\nsave_every = 1000\n[[data]]\npath = \"{}\"\nformat = \"scored\"\n",
        s(&d.path().join("train.tsv"))
    );
    let r = d.path().join("r.toml");
    std::fs::write(&r, recipe).unwrap();
    let train = |dir: &Path, resume: bool| -> Vec<String> {
        let how = if resume { "--resume" } else { "--run-dir" };
        ["--threads", "1", "train", how, &s(dir), "--recipe", &s(&r)]
            .map(String::from)
            .to_vec()
    };
    let full = d.path().join("full");
    ok(&train(&full, false)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    let total = 30 * 96 / 8;
    for (sig, status) in [("INT", 130), ("TERM", 143)] {
        let run = d.path().join(format!("stopped-{sig}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
            .env("NEST_DTYPE", "float32")
            .args(train(&run, false))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_steps(&run, 3, &mut child);
        signal(child.id(), sig);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "SIG{sig}: {err}");
        // "stopped after step N, with a checkpoint in ..."
        let step: u64 = err
            .split("stopped after step ")
            .nth(1)
            .and_then(|t| t.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("SIG{sig}: no stop line in {err}"));
        assert!((3..total).contains(&step), "SIG{sig}: stopped at {step}");
        let ck = run.join(format!("checkpoints/step-{step:08}"));
        assert!(ck.is_dir(), "SIG{sig}: no checkpoint {}", ck.display());
        assert!(
            !run.join("final").exists(),
            "SIG{sig}: a final model after a stop"
        );
        // the printed command keeps the thread count (without it the resume warned that it
        // was not bit-exact)
        let printed = format!("`nest --threads 1 train --resume {}`", s(&run));
        assert!(err.contains(&printed), "SIG{sig}: {err}");
        ok(&train(&run, true)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>());
        assert_eq!(
            files(&run.join("final")),
            files(&full.join("final")),
            "SIG{sig}: the resumed model differs from the uninterrupted one"
        );
    }
}
