//! A step that fails inside libtorch ends the run as an error (issue 41: a GPU user's first
//! mistake is a batch the card cannot hold): the step, libtorch's message and the settings that
//! lower the memory; the checkpoints before it intact and resumable; a run it was to replace put
//! back. The failure is real: a part of the objective asks libtorch for 512 TiB at one step,
//! past any machine's address space, so the CPU allocator refuses it as a GPU's would a batch.

use std::path::{Path, PathBuf};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};
use nest_train::objective::{BatchOutput, Composite, Objective, Part, StepContext, Term};
use nest_train::recipe::Overrides;
use nest_train::trainer::{train_with, TrainOptions};
use nest_train::{Error, Recipe};

/// Adds no term; at step `at` (1-based) asks for 2^47 floats, or panics as a bug would.
struct Hog {
    at: u64,
    bug: bool,
}

impl Objective for Hog {
    fn describe(&self) -> String {
        "hog".into()
    }
    fn terms(&self, _out: &BatchOutput, ctx: &StepContext) -> Vec<Term> {
        if ctx.step + 1 == self.at {
            assert!(!self.bug, "a bug at step {}", self.at);
            let _ = tch::Tensor::zeros([1i64 << 47], (tch::Kind::Float, tch::Device::Cpu));
        }
        Vec::new()
    }
    fn trained_dims(&self) -> Vec<usize> {
        vec![]
    }
    fn trained_layers(&self, _: usize) -> Vec<usize> {
        vec![]
    }
    // the same operations every step but the one it fails at: recordable
    fn recorded_draws(&self, _ctx: &StepContext, _: usize) -> Option<Vec<usize>> {
        Some(Vec::new())
    }
}

type Built = nest_train::Result<Box<dyn Objective>>;

/// One run at a time: a step re-seeds libtorch's one generator (dropout), which runs side by
/// side would share.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn with_hog(at: u64, bug: bool) -> impl Fn(&Recipe, &ElasticEncoder, &tch::nn::Path) -> Built {
    move |r, enc, p| {
        let base = r.build_objective(enc.hidden_size(), enc.num_layers(), p, None)?;
        Ok(Box::new(Composite {
            parts: vec![
                Part::new("recipe", 1.0, Box::new(base)),
                Part::new("hog", 1.0, Box::new(Hog { at, bug })),
            ],
        }))
    }
}

fn setup() -> (tempfile::TempDir, Recipe) {
    setup_with(&[])
}

fn setup_with(extra: &[&str]) -> (tempfile::TempDir, Recipe) {
    let d = tempfile::tempdir().unwrap();
    write_tiny_model(&d.path().join("tiny"), &TinySpec::new(Architecture::Bert)).unwrap();
    let words = ["the", "a", "cat", "dog", "sat", "on", "mat", "man"];
    let rows: String = (0..64)
        .map(|i| {
            let w = |k: usize| words[(i * 7 + k * 3) % words.len()];
            format!("{} {} {}\t{} {} {}\n", w(0), w(1), w(2), w(0), w(2), w(3))
        })
        .collect();
    std::fs::write(
        d.path().join("pairs.tsv"),
        format!("anchor\tpositive\n{rows}"),
    )
    .unwrap();
    let r = recipe(d.path(), extra);
    (d, r)
}

/// The recipe of the tiny model and pairs in `d`, with `extra` flags.
fn recipe(d: &Path, extra: &[&str]) -> Recipe {
    let flags: Vec<String> = [
        "--model",
        &d.join("tiny").display().to_string(),
        "--data",
        &format!("{}:pairs", d.join("pairs.tsv").display()),
        "--loss",
        "mnrl",
        "--matryoshka-dims",
        "[8, 32]",
        "--batch-size",
        "16",
        "--epochs",
        "1",
        "--save-every",
        "1",
        "--keep-last",
        "10",
        "--eval-every",
        "0",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    let pairs = flags.chunks(2).map(|c| (&c[0][2..], c[1].as_str()));
    Recipe::load(None, &Overrides::from_text(pairs)).unwrap()
}

fn opts(run: &Path) -> TrainOptions {
    TrainOptions::new(run, tch::Device::Cpu)
}

fn checkpoints(run: &Path) -> Vec<PathBuf> {
    nest_train::checkpoint::list(run)
        .into_iter()
        .map(|c| c.1)
        .collect()
}

#[test]
fn a_step_out_of_memory_stops_the_run_resumably_and_says_what_lowers_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, r) = setup();
    let run = d.path().join("run");
    let e = train_with(&r, &opts(&run), &with_hog(3, false), &mut |_| {}).unwrap_err();
    let Error::StepFailed {
        step,
        cause,
        advice,
        last_checkpoint,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*step, 3);
    assert!(cause.contains("can't allocate memory"), "{cause}");
    assert!(!cause.contains("frame #"), "{cause}");
    for lever in [
        "`batch_size` (16)",
        "`mini_batch_size` (e.g. 4",
        "`max_length`",
    ] {
        assert!(advice.contains(lever), "{lever}: {advice}");
    }
    assert!(
        advice.contains(" rows of 2 texts each, at most "),
        "{advice}"
    );
    let kept = checkpoints(&run);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(
        last_checkpoint.ends_with("step-00000002"),
        "{last_checkpoint}"
    );
    assert!(e.to_string().starts_with("step 3 failed: "), "{e}");

    // the run resumes from step 2 and ends as one that never failed
    let mut o = opts(&run);
    o.resume = true;
    let s = train_with(&r, &o, &with_hog(0, false), &mut |_| {}).unwrap();
    let whole = d.path().join("whole");
    let w = train_with(&r, &opts(&whole), &with_hog(0, false), &mut |_| {}).unwrap();
    assert_eq!((s.steps, s.resumed_from), (w.steps, Some(2)));
    assert!(w.steps > 3);
    assert_eq!(s.last_loss, w.last_loss);
}

#[test]
fn a_failed_step_puts_back_the_run_it_was_to_replace() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, r) = setup();
    let run = d.path().join("run");
    train_with(&r, &opts(&run), &with_hog(0, false), &mut |_| {}).unwrap();
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let mut o = opts(&run);
    o.overwrite = true;
    let mut said = Vec::new();
    let e = train_with(&r, &o, &with_hog(2, true), &mut |ev| {
        if let nest_train::trainer::Event::Message(m) = ev {
            said.push(m)
        }
    })
    .unwrap_err();
    // a panic of Nest's own says so, with its place
    let Error::StepFailed { cause, advice, .. } = &e else {
        panic!("{e}")
    };
    assert!(
        cause.starts_with("Nest panicked: a bug at step 2 at ") && cause.contains("failure.rs"),
        "{cause}"
    );
    assert!(advice.is_empty(), "{advice}");
    assert!(
        said.iter().any(|m| m.contains("is back in place")),
        "{said:?}"
    );
    let back = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(back, metrics);
    assert!(run.join("final").is_dir());
    // a replacing run stopped (Ctrl-C, a step budget) says where the replaced one waits
    // (helper trial C, U10: nothing said)
    let mut o = opts(&run);
    o.overwrite = true;
    o.stop_after_steps = Some(1);
    let mut said = Vec::new();
    train_with(&r, &o, &with_hog(0, false), &mut |ev| {
        if let nest_train::trainer::Event::Message(m) = ev {
            said.push(m)
        }
    })
    .unwrap();
    let aside = run.join(".replaced");
    let kept = format!("the run this one replaces is kept in {}", aside.display());
    assert!(said.iter().any(|m| m.contains(&kept)), "{said:?}");
    assert!(aside.join("final").is_dir());
}

/// A step recorded as a CUDA graph (the CPU fake records nothing but runs the same path) that
/// runs out of memory while it is recorded: the recording fails with its reason, the capture is
/// ended (the panic does not unwind through it), and the levers name `cuda_graph = "off"`.
#[test]
fn a_recorded_step_out_of_memory_names_the_recording_and_cuda_graph() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, r) = setup_with(&["--cuda-graph", "on"]);
    let run = d.path().join("run");
    let e = train_with(&r, &opts(&run), &with_hog(1, false), &mut |_| {}).unwrap_err();
    let Error::StepFailed {
        step,
        cause,
        advice,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*step, 1);
    assert!(
        cause.starts_with("cuda_graph: recording the training step as a CUDA graph failed")
            && cause.contains("can't allocate memory"),
        "{cause}"
    );
    assert!(advice.contains("set `cuda_graph = \"off\"`"), "{advice}");
    assert!(
        advice.ends_with("a new cuda_graph resumes this one (`--resume`)"),
        "{advice}"
    );
    // the same process trains on, recorded, as a run that never failed
    let again = d.path().join("again");
    let s = train_with(&r, &opts(&again), &with_hog(0, false), &mut |_| {}).unwrap();
    assert!(s.steps > 3);
}

/// `cuda_graph` is resumable (what a recording's failure tells the user to change): a recorded
/// run stopped after step 2 resumes with `--cuda-graph off`, says what that costs, and logs
/// the losses of the uninterrupted recorded run up to float reordering.
#[test]
fn a_recorded_run_resumes_eagerly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d, on) = setup_with(&["--cuda-graph", "on", "--dropout", "0"]);
    let off = recipe(d.path(), &["--cuda-graph", "off", "--dropout", "0"]);
    let plain = |_: &Recipe, enc: &ElasticEncoder, p: &tch::nn::Path| -> Built {
        Ok(Box::new(on.build_objective(
            enc.hidden_size(),
            enc.num_layers(),
            p,
            None,
        )?))
    };
    let whole = d.path().join("whole");
    train_with(&on, &opts(&whole), &plain, &mut |_| {}).unwrap();
    let run = d.path().join("run");
    let mut o = opts(&run);
    o.stop_after_steps = Some(2);
    train_with(&on, &o, &plain, &mut |_| {}).unwrap();
    let mut o = opts(&run);
    o.resume = true;
    let mut said = Vec::new();
    let s = train_with(&off, &o, &plain, &mut |e| {
        if let nest_train::trainer::Event::Message(m) = e {
            said.push(m)
        }
    })
    .unwrap();
    assert_eq!(s.resumed_from, Some(2));
    let note = "cuda_graph on -> off: the steps from the checkpoint on are eager";
    assert!(said.iter().any(|m| m.starts_with(note)), "{said:?}");
    let losses = |run: &Path| -> Vec<f64> {
        let log = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["loss"].as_f64())
            .collect()
    };
    let (a, b) = (losses(&whole), losses(&run));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{a:?}\n{b:?}");
    }
}
