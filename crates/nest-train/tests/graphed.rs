//! The recorded training step (`GraphedStep`, a CUDA graph on a GPU) on the CPU fake, which runs
//! the recorded body eagerly: the same steps as the eager trainer step, up to the padding to
//! 16-token buckets (float reordering: weights to 1e-5 after each step, dropout off since its
//! masks are drawn over the padded shape), shapes keyed as documented (with 2DMSE's drawn
//! layers), objectives without fixed draws left eager; and GradCache's chunk passes recorded
//! (`ChunkGraphs`) against eager GradCache and the plain batch.

use nest_train::recipe::Overrides;
use std::path::Path;

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};
use nest_train::objective::distill::TeacherTable;
use nest_train::trainer::{GraphMode, StepTimer};
use nest_train::Recipe;
use tch::{Device, Kind, Tensor};

fn pairs(n: usize, words: usize) -> Vec<(String, String)> {
    const W: [&str; 10] = [
        "the", "cat", "dog", "sat", "on", "mat", "man", "plays", "guitar", "music",
    ];
    (0..n)
        .map(|i| {
            let s = |o: usize| {
                (0..words + (i + o) % 5)
                    .map(|k| W[(i * 7 + k * 3 + o) % 10])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            (s(0), s(1))
        })
        .collect()
}

/// Dropout off: its masks are drawn over the padded shape, which the buckets change.
fn timer(model: &Path, objective: &str, mode: GraphMode) -> StepTimer {
    timer_with(model, objective, mode, &[])
}

fn timer_with(model: &Path, objective: &str, mode: GraphMode, extra: &[&str]) -> StepTimer {
    timer_taught(model, objective, mode, extra, None)
}

fn timer_taught(
    model: &Path,
    objective: &str,
    mode: GraphMode,
    extra: &[&str],
    teacher: Option<std::rc::Rc<TeacherTable>>,
) -> StepTimer {
    let mut enc = ElasticEncoder::load(model, Device::Cpu, Some(64)).unwrap();
    enc.set_dropout(0.0);
    let flags: Vec<String> = [
        "--model",
        &model.display().to_string(),
        "--data",
        "unused.tsv:pairs",
        "--loss",
        "mnrl",
        "--matryoshka-dims",
        "[8,16,32]",
        "--max-grad-norm",
        "0.5",
        "--seed",
        "42",
        "--objective",
        objective,
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    let recipe = Recipe::load(None, &overrides(&flags)).unwrap();
    let mut t = StepTimer::new(enc, vec![recipe], teacher, 1e-3).unwrap();
    t.set_graph_mode(mode);
    t
}

fn weights(t: &StepTimer) -> Vec<(String, Tensor)> {
    let mut v = t.encoder().vs.variables().into_iter().collect::<Vec<_>>();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The largest weight difference between two timers (key biases left out: see below).
fn assert_same_weights(a: &StepTimer, b: &StepTimer, tol: f64, what: &str) {
    for ((n, e), (_, g)) in weights(a).iter().zip(&weights(b)) {
        // softmax ignores a key bias: its exact gradient is 0, its computed one rounding
        // noise, which AdamW turns into steps of +-lr whose signs the padding can flip
        if n.ends_with("key.bias") {
            continue;
        }
        let diff = (e - g).abs().max().double_value(&[]);
        assert!(diff < tol, "{what}, {n}: max |difference| {diff}");
    }
}

/// Steps `eager` and `graphed` side by side through `batches` (the i-th as step i of epoch 0),
/// asserting after each step that their weights agree to `tol`.
fn side_by_side(
    eager: &mut StepTimer,
    graphed: &mut StepTimer,
    batches: &[&[(String, String)]],
    tol: f64,
    what: &str,
) {
    for (i, b) in batches.iter().enumerate() {
        eager.step(0, b, i as u64).unwrap();
        graphed.step(0, b, i as u64).unwrap();
        assert_same_weights(eager, graphed, tol, &format!("{what}, step {i}"));
    }
}

#[test]
fn a_recorded_step_trains_as_the_eager_step() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let mrl = r#"[{kind = "mrl"}]"#;
    let (mut eager, mut graphed) = (
        timer(&model, mrl, GraphMode::Off),
        timer(&model, mrl, GraphMode::On),
    );
    // batches of 8 pairs; lengths 4-8 and 14-18 words: two length buckets per column; then a
    // batch of 5 rows (eager: another row count than the recorded ones)
    let short = pairs(8 * 4, 4);
    let long = pairs(8 * 2, 14);
    let batches: Vec<&[(String, String)]> = short
        .chunks(8)
        .chain(long.chunks(8))
        .chain(std::iter::once(&short[..5]))
        .collect();
    side_by_side(&mut eager, &mut graphed, &batches, 1e-5, "mrl");
    let (shapes, failed) = graphed.graph_report();
    assert_eq!(failed, None);
    assert!((2..=4).contains(&shapes), "{shapes} shapes recorded");
    // the weights moved: the steps were not no-ops
    let fresh = ElasticEncoder::load(&model, Device::Cpu, Some(64)).unwrap();
    let moved: f64 = weights(&graphed)
        .iter()
        .map(|(n, w)| {
            let f = fresh.vs.variables()[n].shallow_clone();
            (w - f).abs().sum(Kind::Double).double_value(&[])
        })
        .sum();
    assert!(moved > 0.0);
}

/// GradCache (mini_batch_size 4 of batches of 16) with its chunk passes recorded: the same
/// steps as eager GradCache and as the plain batch (to 1e-5: the buckets' padding, and the
/// chunks' float reordering), two graphs per chunk shape, a last short chunk included.
#[test]
fn recorded_gradcache_chunks_train_as_the_eager_ones() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let mrl = r#"[{kind = "mrl"}]"#;
    let cached = ["--batch-size", "16", "--mini-batch-size", "4"];
    let mut plain = timer(&model, mrl, GraphMode::Off);
    let mut eager = timer_with(&model, mrl, GraphMode::Off, &cached);
    let mut graphed = timer_with(&model, mrl, GraphMode::On, &cached);
    // lengths 4-8 and 14-18 words, then a batch of 14 (a last chunk of 2 rows)
    let short = pairs(16 * 2, 4);
    let long = pairs(16, 14);
    let batches: Vec<&[(String, String)]> = short
        .chunks(16)
        .chain(long.chunks(16))
        .chain(std::iter::once(&short[..14]))
        .collect();
    for (i, b) in batches.iter().enumerate() {
        plain.step(0, b, i as u64).unwrap();
        eager.step(0, b, i as u64).unwrap();
        graphed.step(0, b, i as u64).unwrap();
        assert_same_weights(
            &eager,
            &graphed,
            1e-5,
            &format!("step {i}, eager GradCache"),
        );
        assert_same_weights(&plain, &graphed, 1e-5, &format!("step {i}, plain batch"));
    }
    let (graphs, failed) = graphed.graph_report();
    assert_eq!(failed, None);
    assert_eq!(graphs % 2, 0, "{graphs}: both passes of each chunk shape");
    assert!((4..=12).contains(&graphs), "{graphs} graphs recorded");
    assert_eq!(eager.graph_report(), (0, None));
}

/// 2DMSE draws a shallow layer per step: its steps are recorded once per shape and draw (here
/// one shape and three shallow layers of a 4-layer model), and train as the eager ones (to
/// 1e-5); alone and beside MRL in a composite. MRL + MIC (token states, nothing drawn): one
/// recording, the same steps.
#[test]
fn two_d_and_mic_steps_are_recorded_per_shape_and_draw() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    let spec = TinySpec {
        layers: 4,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&model, &spec).unwrap();
    for objective in [
        r#"[{kind = "2dmse", layer_weighting = "uniform"}]"#,
        r#"[{kind = "mrl"}, {kind = "2dmse", weight = 0.5}]"#,
        // MIC draws nothing: one recording for the shape
        r#"[{kind = "mrl"}, {kind = "mic", weight = 0.6}]"#,
    ] {
        let (mut eager, mut graphed) = (
            timer(&model, objective, GraphMode::Off),
            timer(&model, objective, GraphMode::On),
        );
        // 8 batches of 8 pairs of 4-8 words: one length bucket per column
        let data = pairs(64, 4);
        let batches: Vec<_> = data.chunks(8).collect();
        side_by_side(&mut eager, &mut graphed, &batches, 1e-5, objective);
        let (graphs, failed) = graphed.graph_report();
        assert_eq!(failed, None);
        // 2DMSE: one per layer drawn, more than the one shape, at most the three shallow layers
        let want = match objective.contains("2dmse") {
            true => 2..=3,
            false => 1..=1,
        };
        assert!(want.contains(&graphs), "{objective}: {graphs} graphs");
    }
}

/// IBKD's objectives (distillation towards a cached teacher, HSIC with a fixed gamma and with
/// the median heuristic, beside MRL) and MIPIC (eq. 18: MRL + SIA + PIC): the teacher's rows of
/// each batch come in as the step's targets, and MIPIC's top-k counts are reckoned on the
/// device, so one recording serves the shape; the weights (the model's and the objectives'
/// own) follow the eager steps to 5e-5, and so do the logged terms and diagnostics
/// (`diag/...`, computed inside the recording).
#[test]
fn distillation_and_mipic_steps_are_recorded_with_their_diagnostics() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let data = pairs(64, 4);
    let anchors: Vec<String> = data.iter().map(|p| p.0.clone()).collect();
    // made without the shared generator (tests running side by side draw from it)
    let n = anchors.len() as i64 * 24;
    let vectors = (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 0.37)
        .sin()
        .view([-1, 24]);
    let teacher = std::rc::Rc::new(TeacherTable::new(&anchors, vectors));
    for objective in [
        // stage 1 (recipes/ibkd.toml)
        r#"[{kind = "distill", temperature = 0.1}, {kind = "hsic", normalize = true}]"#,
        r#"[{kind = "mrl"}, {kind = "distill", loss = "mse", dims = [8, 16]},
            {kind = "hsic", weight = 0.5, bandwidth = "median", normalize = true}]"#,
        r#"[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6},
            {kind = "hsic", weight = 0.1}]"#,
    ] {
        let t = |mode| timer_taught(&model, objective, mode, &[], Some(teacher.clone()));
        let (mut eager, mut graphed) = (t(GraphMode::Off), t(GraphMode::On));
        // the same start for the objectives' own parameters in both, made without the shared
        // generator (a draw from it depends on the tests running beside this one)
        let maps = eager.objective_variables();
        assert!(
            !maps.is_empty(),
            "distillation's maps W, MIPIC's projectors"
        );
        for (name, w) in graphed.objective_variables() {
            let start = (Tensor::arange(w.numel() as i64, (Kind::Float, Device::Cpu)) * 0.61)
                .sin()
                .view(w.size().as_slice())
                * 0.1;
            tch::no_grad(|| {
                w.shallow_clone().copy_(&start);
                maps[&name].shallow_clone().copy_(&start);
            });
        }
        for (i, b) in data.chunks(8).enumerate() {
            eager.step(0, b, i as u64).unwrap();
            graphed.step(0, b, i as u64).unwrap();
            // some weights' gradients lie near AdamW's epsilon, where the float reordering of
            // the padded shape (and of libtorch's threads, when tests run side by side) moves
            // a step by a few percent of the rate (1.5e-5 and 1.7e-5 at 1e-3 seen) while every
            // term agrees to 2e-7
            let tol = 5e-5;
            assert_same_weights(&eager, &graphed, tol, &format!("{objective}, step {i}"));
            let (e, g) = (eager.last_terms(), graphed.last_terms());
            let names = |v: &[(String, f64)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(e), names(g), "{objective}: the same terms logged");
            assert!(
                names(g).iter().any(|n| n.contains("diag/")),
                "{:?}",
                names(g)
            );
            for ((n, a), (_, b)) in e.iter().zip(g) {
                assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "{n}: {a} vs {b}");
            }
        }
        assert_eq!(graphed.graph_report(), (1, None), "{objective}");
        for (name, w) in graphed.objective_variables() {
            let diff = (w - &eager.objective_variables()[&name])
                .abs()
                .max()
                .double_value(&[]);
            assert!(diff < 5e-5, "{objective}, {name}: max |difference| {diff}");
        }
    }
}

/// ESE draws nothing, but its PCA term (an SVD of each batch, which checks its result on the
/// host) keeps its steps eager; ESE without it (`pca = false`) is recorded, one graph for the
/// shape, and trains as the eager steps do.
#[test]
fn ese_is_recorded_only_without_its_pca() {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let ese = r#"[{kind = "ese", compression_size = 8}]"#;
    let mut t = timer(&model, ese, GraphMode::On);
    for (i, b) in pairs(16, 4).chunks(8).enumerate() {
        t.step(0, b, i as u64).unwrap();
    }
    assert_eq!(t.graph_report(), (0, None));
    let plain = r#"[{kind = "ese", compression_size = 8, pca = false}]"#;
    let (mut eager, mut graphed) = (
        timer(&model, plain, GraphMode::Off),
        timer(&model, plain, GraphMode::On),
    );
    let data = pairs(32, 4);
    let batches: Vec<_> = data.chunks(8).collect();
    side_by_side(&mut eager, &mut graphed, &batches, 1e-5, "ese without pca");
    assert_eq!(graphed.graph_report(), (1, None));
}

/// What the process holds on the "device" for `a_spent_memory_budget_leaves_new_shapes_eager`.
static HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Pools with a memory budget (what a GPU's have; here 800 of 1,000 bytes): once the process
/// holds more than the budget leaves, steps and GradCache chunks of a new shape run eagerly
/// (the same weights as the eager trainer's, to 1e-5), the shapes recorded before still
/// replay, and nothing is marked failed.
#[test]
fn a_spent_memory_budget_leaves_new_shapes_eager() {
    use nest_model::graph::Budget;
    use std::sync::atomic::Ordering::SeqCst;
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let mrl = r#"[{kind = "mrl"}]"#;
    let held = |_: Device| Some(HELD.load(SeqCst));
    for (rows, extra) in [
        (8, &[][..]),
        (16, &["--batch-size", "16", "--mini-batch-size", "4"]),
    ] {
        HELD.store(100, SeqCst);
        let mut eager = timer_with(&model, mrl, GraphMode::Off, extra);
        let mut graphed = timer_with(&model, mrl, GraphMode::On, extra);
        graphed.set_graph_budget(Budget::new(1000, 0.8), held);
        let (short, long) = (pairs(rows * 2, 4), pairs(rows, 14));
        let mut both = |b: &[(String, String)], step: u64, graphed: &mut StepTimer| {
            eager.step(0, b, step).unwrap();
            graphed.step(0, b, step).unwrap();
            assert_same_weights(&eager, graphed, 1e-5, &format!("{extra:?}, step {step}"));
        };
        both(&short[..rows], 0, &mut graphed);
        let (shapes, failed) = graphed.graph_report();
        assert!(shapes > 0 && failed.is_none(), "{shapes} {failed:?}");
        HELD.store(900, SeqCst);
        both(&long, 1, &mut graphed); // a new shape: eager
        both(&short[rows..], 2, &mut graphed); // a recorded one: replayed
        assert_eq!(
            graphed.graph_report(),
            (shapes, None),
            "{extra:?}: no new shape"
        );
    }
}

mod run {
    //! `nest train` with `cuda_graph = "on"` (the fake on the CPU) against the eager trainer,
    //! and its resume.

    use std::path::{Path, PathBuf};

    use nest_model::tiny::{write_tiny_model, TinySpec};
    use nest_model::Architecture;
    use nest_train::trainer::{train, Event, TrainOptions};
    use nest_train::Recipe;

    fn data(dir: &Path) -> PathBuf {
        let mut s = String::from("anchor\tpositive\n");
        for (a, b) in super::pairs(48, 3) {
            s.push_str(&format!("{a}\t{b}\n"));
        }
        let p = dir.join("pairs.tsv");
        std::fs::write(&p, s).unwrap();
        p
    }

    /// The run's messages (e.g. how many CUDA graphs it recorded).
    fn run(
        model: &Path,
        data: &Path,
        dir: &Path,
        extra: &[&str],
        resume: bool,
        stop: Option<u64>,
    ) -> Vec<String> {
        let mut flags: Vec<String> = [
            "--model",
            &model.display().to_string(),
            "--data",
            &format!("{}:pairs", data.display()),
            "--loss",
            "mnrl",
            "--matryoshka-dims",
            "[8, 16, 32]",
            "--batch-size",
            "8",
            "--lr",
            "1e-4",
            "--epochs",
            "2",
            "--save-every",
            "4",
            "--dropout",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        flags.extend(extra.iter().map(|s| s.to_string()));
        let r = Recipe::load(None, &crate::overrides(&flags)).unwrap();
        let o = TrainOptions {
            resume,
            stop_after_steps: stop,
            ..TrainOptions::new(dir, tch::Device::Cpu)
        };
        let mut said = Vec::new();
        train(&r, &o, &mut |e| {
            if let Event::Message(m) = e {
                said.push(m);
            }
        })
        .unwrap();
        said
    }

    fn losses(dir: &Path) -> Vec<f64> {
        logged(dir, "loss")
    }

    /// A step's logged `key` (`loss`, `grad_norm`), step by step.
    fn logged(dir: &Path, key: &str) -> Vec<f64> {
        std::fs::read_to_string(dir.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| {
                let v = serde_json::from_str::<serde_json::Value>(l).ok()?;
                v.get("lr")?;
                v[key].as_f64()
            })
            .collect()
    }

    /// The recorded steps log the eager steps' losses and gradient norms (to 1e-4 relative: the
    /// buckets' padding) and say that they recorded; a recorded run stopped at step 4 and
    /// resumed logs what the uninterrupted recorded run logged, bit for bit.
    #[test]
    fn a_recorded_run_trains_and_resumes_as_the_eager_one() {
        recorded_run_against_eager(&[]);
    }

    /// The same with GradCache chunks of 3 (batches of 8: chunks of 3, 3 and 2 rows).
    #[test]
    fn a_recorded_gradcache_run_trains_and_resumes_as_the_eager_one() {
        recorded_run_against_eager(&["--mini-batch-size", "3"]);
    }

    /// The same accumulating two micro-batches a step: each micro-batch's forward and
    /// backward replayed, the update eager.
    #[test]
    fn a_recorded_accumulating_run_trains_and_resumes_as_the_eager_one() {
        recorded_run_against_eager(&["--grad-accum", "2"]);
    }

    /// A run whose steps cannot be recorded (ESE's SVD checks its result on the host) says so
    /// at its start, and records nothing.
    #[test]
    fn a_run_that_cannot_record_says_so() {
        let d = tempfile::tempdir().unwrap();
        let model = d.path().join("tiny");
        write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
        let data = data(d.path());
        let ese = r#"[{kind = "ese", compression_size = 8}]"#;
        let flags = ["--cuda-graph", "on", "--objective", ese, "--max-steps", "2"];
        let said = run(&model, &data, &d.path().join("ese"), &flags, false, None);
        let eager = "cuda graphs: this run's steps run eagerly (its objective reads values back";
        assert!(said.iter().any(|m| m.starts_with(eager)), "{said:?}");
        assert!(!said.iter().any(|m| m.contains("recorded,")), "{said:?}");
    }

    fn recorded_run_against_eager(extra: &[&str]) {
        let on: Vec<&str> = ["--cuda-graph", "on"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let d = tempfile::tempdir().unwrap();
        let model = d.path().join("tiny");
        write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
        let data = data(d.path());
        let (eager, graphed, resumed) =
            (d.path().join("e"), d.path().join("g"), d.path().join("r"));
        let said = run(&model, &data, &eager, extra, false, None);
        assert!(!said.iter().any(|m| m.contains("cuda graphs")), "{said:?}");
        let said = run(&model, &data, &graphed, &on, false, None);
        assert!(!said.iter().any(|m| m.contains("run eagerly")), "{said:?}");
        assert!(
            said.iter()
                .any(|m| m.starts_with("cuda graphs: ") && !m.contains(": 0 ")),
            "{extra:?}: {said:?}"
        );
        let (e, g) = (losses(&eager), losses(&graphed));
        assert!(e.len() >= 8, "{} steps", e.len());
        assert_eq!(e.len(), g.len());
        for (i, (a, b)) in e.iter().zip(&g).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs(),
                "step {}: eager {a}, recorded {b}\n{e:?}\n{g:?}",
                i + 1
            );
        }
        // the gradients' scale too (AdamW's steps hardly show it)
        let norms = |d: &Path| logged(d, "grad_norm");
        for (i, (a, b)) in norms(&eager).iter().zip(&norms(&graphed)).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs(),
                "step {}: grad norm {a} vs {b}",
                i + 1
            );
        }
        run(&model, &data, &resumed, &on, false, Some(4));
        run(&model, &data, &resumed, &on, true, None);
        assert_eq!(losses(&resumed), g);
    }
}

/// `--key value` pairs as recipe overrides (the CLI's parser is nest-cli's; the tests write
/// their recipes as it would receive them).
fn overrides(f: &[String]) -> Overrides {
    Overrides::from_text(f.chunks(2).map(|c| (&c[0][2..], c[1].as_str())))
}
