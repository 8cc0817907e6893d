//! The training engine on a tiny generated model: the loss goes down, a resumed run replays the
//! uninterrupted one bit for bit, a NaN loss stops the run with the last checkpoint intact, run
//! directories are protected, and the saved model loads back with its trained dims recorded.

use nest_train::recipe::Overrides;
use std::path::{Path, PathBuf};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};
use nest_train::trainer::{train, TrainOptions};
use nest_train::Recipe;

/// libtorch's RNG (dropout) is global to the process: tests that train run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

/// Scored pairs with a learnable signal: the score is the number of shared words.
fn write_data(dir: &Path) -> PathBuf {
    let mut s = String::from("sentence1\tsentence2\tscore\n");
    let mut x: u64 = 12345;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..96 {
        let a: Vec<&str> = (0..4).map(|_| WORDS[(next() % 12) as usize]).collect();
        let keep = (next() % 5) as usize;
        let mut b: Vec<&str> = a[..keep.min(4)].to_vec();
        while b.len() < 4 {
            b.push(WORDS[(next() % 12) as usize]);
        }
        let shared = a.iter().filter(|w| b.contains(w)).count();
        s.push_str(&format!("{}\t{}\t{}\n", a.join(" "), b.join(" "), shared));
    }
    let p = dir.join("pairs.tsv");
    std::fs::write(&p, s).unwrap();
    p
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let data = write_data(d.path());
    (d, model, data)
}

fn recipe(model: &Path, data: &Path, extra: &[&str]) -> Recipe {
    Recipe::load(None, &overrides(&recipe_flags(model, data, extra))).unwrap()
}

fn recipe_flags(model: &Path, data: &Path, extra: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = vec![
        "--model".into(),
        model.display().to_string(),
        "--data".into(),
        format!("{}:scored", data.display()),
        "--loss".into(),
        "cosent".into(),
        "--matryoshka-dims".into(),
        "[8, 16, 32]".into(),
        "--batch-size".into(),
        "16".into(),
        "--lr".into(),
        "1e-3".into(),
        "--epochs".into(),
        "3".into(),
        "--save-every".into(),
        "3".into(),
        "--keep-last".into(),
        "10".into(),
    ];
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

fn opts(run: &Path) -> TrainOptions {
    TrainOptions::new(run, tch::Device::Cpu)
}

fn losses(run: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Some((v["step"].as_u64()?, v["loss"].as_f64()?))
        })
        .collect()
}

/// Trains with `run` into `dir/full` uninterrupted and into `dir/cut` stopped after 4 steps
/// and resumed from its step-3 checkpoint; asserts that the two logged the same losses at the
/// same steps, bit for bit. Returns `(full, cut)`.
fn full_and_resumed(
    dir: &Path,
    run: impl Fn(&TrainOptions) -> nest_train::trainer::Summary,
) -> (PathBuf, PathBuf) {
    let (full, cut) = (dir.join("full"), dir.join("cut"));
    run(&opts(&full));
    run(&TrainOptions {
        stop_after_steps: Some(4),
        ..opts(&cut)
    });
    let s = run(&TrainOptions {
        resume: true,
        ..opts(&cut)
    });
    assert_eq!(s.resumed_from, Some(3));
    let (a, b) = (losses(&full), losses(&cut));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.0, y.0);
        assert_eq!(
            x.1.to_bits(),
            y.1.to_bits(),
            "step {}: {} vs {}",
            x.0,
            x.1,
            y.1
        );
    }
    (full, cut)
}

#[test]
fn loss_goes_down_and_the_model_is_saved() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("run");
    let r = recipe(
        &model,
        &data,
        &[
            "--epochs",
            "10",
            "--lr",
            "3e-3",
            "--warmup-ratio",
            "0.0",
            "--decay",
            "constant",
            "--max-steps",
            "100",
        ],
    );
    let mut said = Vec::new();
    let s = train(&r, &opts(&run), &mut |e| {
        if let nest_train::trainer::Event::Message(m) = e {
            said.push(m)
        }
    })
    .unwrap();
    assert_eq!(s.steps, 60);
    // a max_steps past the epochs says where the run stops (helper trial D: capped silently)
    let capped = "max_steps 100 is past the 60 steps of 10 epoch(s) over this data";
    assert!(said.iter().any(|m| m.contains(capped)), "{said:?}");
    let l = losses(&run);
    let first: f64 = l[..6].iter().map(|x| x.1).sum::<f64>() / 6.0;
    let last: f64 = l[l.len() - 6..].iter().map(|x| x.1).sum::<f64>() / 6.0;
    assert!(
        last < 0.8 * first,
        "mean loss of the first 6 steps {first}, of the last 6 {last}"
    );
    let enc = ElasticEncoder::load(&run.join("final"), tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.meta.matryoshka_dims, vec![8, 16, 32]);
    assert_eq!(enc.meta.trained_layers, vec![2]);
    // the seed beside the objective: what `nest eval seeds` tells seeds apart by
    assert_eq!(enc.meta.seed, Some(r.seed));
    // the padding report: length batching pads no more than random batching
    assert!(s.padding.padded_tokens <= s.padding_unbatched.padded_tokens);
}

#[test]
fn resume_replays_the_run_bit_for_bit() {
    let _serial = serial();
    let (d, model, data) = setup();
    let r = recipe(&model, &data, &["--grad-accum", "2", "--eval-every", "0"]);
    // interrupted after 4 steps (the last checkpoint is step 3), then resumed
    let (full, cut) = full_and_resumed(d.path(), |o| train(&r, o, &mut |_| {}).unwrap());
    let wa = std::fs::read(full.join("final/model.safetensors")).unwrap();
    let wb = std::fs::read(cut.join("final/model.safetensors")).unwrap();
    assert!(wa == wb, "final weights differ");
    // a checkpoint from a process with other thread counts: resumed with a warning
    let other = d.path().join("other");
    let mut o = opts(&other);
    o.stop_after_steps = Some(4);
    train(&r, &o, &mut |_| {}).unwrap();
    let (_, last) = nest_train::checkpoint::list(&other).pop().unwrap();
    let sj = last.join("state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&sj).unwrap()).unwrap();
    assert_eq!(v["threads"], tch::get_num_threads() as i64);
    v["threads"] = 99.into();
    std::fs::write(&sj, v.to_string()).unwrap();
    let mut o = opts(&other);
    o.resume = true;
    let mut said = Vec::new();
    train(&r, &o, &mut |e| {
        if let nest_train::trainer::Event::Message(m) = e {
            said.push(m)
        }
    })
    .unwrap();
    assert!(
        said.iter()
            .any(|m| m.contains("99 libtorch thread(s)") && m.contains("not bit-exact")),
        "{said:?}"
    );
}

#[test]
fn nan_loss_stops_with_the_last_checkpoint_intact() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("run");
    let r = recipe(
        &model,
        &data,
        &[
            "--lr",
            "1e30",
            "--max-grad-norm",
            "0",
            "--warmup-ratio",
            "0.0",
            "--decay",
            "constant",
            "--save-every",
            "1",
        ],
    );
    let e = train(&r, &opts(&run), &mut |_| {}).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("non-finite loss"), "{msg}");
    let cks = nest_train::checkpoint::list(&run);
    assert!(!cks.is_empty(), "a checkpoint was written before the NaN");
    let (step, last) = cks.last().unwrap();
    assert!(msg.contains(&last.display().to_string()), "{msg}");
    // the checkpoint is complete and loadable
    let (state, _) = nest_train::checkpoint::load(last).unwrap();
    assert_eq!(state.step, *step);
    assert!(!run.join("final").exists());
}

#[test]
fn run_directories_are_protected() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("run");
    let r = recipe(&model, &data, &["--epochs", "1"]);
    train(&r, &opts(&run), &mut |_| {}).unwrap();
    let e = train(&r, &opts(&run), &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("--resume") && e.contains("--overwrite"), "{e}");
    let other = recipe(&model, &data, &["--epochs", "1", "--lr", "5e-4"]);
    let mut o = opts(&run);
    o.resume = true;
    let e = train(&other, &o, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("recipe differs") && e.contains("lr"), "{e}");
    let mut o = opts(&run);
    o.overwrite = true;
    train(&other, &o, &mut |_| {}).unwrap();
    // a start killed while writing its recipe leaves only the half-written temp file: a new
    // start takes the folder over (anything else in it still protects it)
    let killed = d.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    std::fs::write(killed.join(".recipe.toml.tmp4242"), "model = ").unwrap();
    train(&r, &opts(&killed), &mut |_| {}).unwrap();
    assert!(!killed.join(".recipe.toml.tmp4242").exists());
    let taken = d.path().join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join(".recipe.toml.tmp4242"), "").unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();
    let e = train(&r, &opts(&taken), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not empty"), "{e}");
    let mut o = opts(&d.path().join("nothing"));
    o.resume = true;
    assert!(train(&r, &o, &mut |_| {})
        .unwrap_err()
        .to_string()
        .contains("no run to resume"));
    // a recipe whose dims exceed the model
    let big = recipe(&model, &data, &["--matryoshka-dims", "[16, 64]"]);
    let e = train(&big, &opts(&d.path().join("big")), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dimension 64 is outside the model's 1..=32"),
        "{e}"
    );
}

/// A test objective with a trainable projector (as MIPIC's P_i): reconstruct the last layer's
/// pooled vector from its first 8 dims.
struct Projector {
    proj: tch::nn::Linear,
}

impl nest_train::objective::Objective for Projector {
    fn describe(&self) -> String {
        "projector".into()
    }
    fn terms(
        &self,
        out: &nest_train::objective::BatchOutput,
        _ctx: &nest_train::objective::StepContext,
    ) -> Vec<nest_train::objective::Term> {
        use tch::nn::Module;
        let e = out.columns[0].pooled(out.layers);
        let rec = self.proj.forward(&e.narrow(1, 0, 8));
        vec![nest_train::objective::Term {
            name: "reconstruct".into(),
            value: (rec - e.detach()).square().mean(tch::Kind::Float),
        }]
    }
    fn trained_dims(&self) -> Vec<usize> {
        vec![]
    }
    fn trained_layers(&self, _: usize) -> Vec<usize> {
        vec![]
    }
}

/// The recipe's objective (2DMSE with sampled layers and dims + ESE) plus the projector.
fn with_projector(
    r: &Recipe,
    enc: &ElasticEncoder,
    p: &tch::nn::Path,
) -> nest_train::Result<Box<dyn nest_train::objective::Objective>> {
    let base = r.build_objective(enc.hidden_size(), enc.num_layers(), p, None)?;
    let proj = tch::nn::linear(p / "proj", 8, enc.hidden_size() as i64, Default::default());
    use nest_train::objective::Part;
    Ok(Box::new(nest_train::objective::Composite {
        parts: vec![
            Part::new("recipe", 1.0, Box::new(base)),
            Part::new("proj", 1.0, Box::new(Projector { proj })),
        ],
    }))
}

/// The last checkpoints of `full` and `cut` (weights, objective parameters, optimizer state) are
/// byte for byte the same; returns the full run's.
fn assert_same_checkpoints(full: &Path, cut: &Path) -> PathBuf {
    let last = |run: &Path| nest_train::checkpoint::list(run).pop().unwrap().1;
    let (pa, pb) = (last(full), last(cut));
    for f in [
        "model.safetensors",
        "objective.safetensors",
        "optimizer.safetensors",
    ] {
        let (x, y) = (
            std::fs::read(pa.join(f)).unwrap(),
            std::fs::read(pb.join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs between the full and the resumed run");
    }
    pa
}

fn tensors(p: &Path) -> std::collections::HashMap<String, tch::Tensor> {
    tch::Tensor::read_safetensors(p)
        .unwrap()
        .into_iter()
        .collect()
}

#[test]
fn resume_is_exact_with_sampling_and_objective_parameters() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny4");
    let spec = TinySpec {
        layers: 4,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&model, &spec).unwrap();
    let data = write_data(d.path());
    let r = recipe(
        &model,
        &data,
        &[
            "--eval-every",
            "0",
            "--objective",
            r#"[{kind = "2dmse", layers_per_step = 1, dims_per_step = 1}, {kind = "ese", compression_size = 8, weight = 0.5}]"#,
        ],
    );
    let (full, cut) = full_and_resumed(d.path(), |o| {
        nest_train::trainer::train_with(&r, o, &with_projector, &mut |_| {}).unwrap()
    });
    // every named term is logged, sampled dims included
    let log = std::fs::read_to_string(full.join("metrics.jsonl")).unwrap();
    assert!(log.contains("2dmse/kl@full") && log.contains("ese/last/compress"));
    assert!(log.contains("proj/reconstruct"));
    let pa = assert_same_checkpoints(&full, &cut);
    // the projector was trained (it moved from its seeded start) ...
    let obj = tensors(&pa.join("objective.safetensors"));
    let w = &obj["objective.proj.weight"];
    tch::manual_seed(r.seed as i64);
    let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let init = tch::nn::linear(vs.root() / "objective" / "proj", 8, 32, Default::default());
    let moved = (w - &init.ws).abs().max().double_value(&[]);
    assert!(moved > 0.0, "the projector was not updated");
    // ... and never reaches the exported model
    let exported = tensors(&full.join("final/model.safetensors"));
    assert!(
        exported
            .keys()
            .all(|k| !k.contains("objective") && !k.contains("proj")),
        "{:?}",
        exported.keys().collect::<Vec<_>>()
    );
    let enc = ElasticEncoder::load(&full.join("final"), tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.meta.trained_layers, vec![1, 2, 3, 4]);
    assert_eq!(enc.meta.matryoshka_dims, vec![8, 16, 32]);
}

/// MIPIC + MIC from a recipe: their projectors (`P_i`, `phi_i`) are trained, checkpointed and
/// resumed exactly, and never reach the exported model.
#[test]
fn mipic_and_mic_resume_exactly_and_their_projectors_stay_out_of_the_model() {
    let _serial = serial();
    let (d, model, data) = setup();
    let r = recipe(
        &model,
        &data,
        &[
            "--eval-every",
            "0",
            "--objective",
            r#"[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, min_k = 2}, {kind = "mic", weight = 0.6, layers = [1, 2]}]"#,
        ],
    );
    let (full, cut) = full_and_resumed(d.path(), |o| train(&r, o, &mut |_| {}).unwrap());
    let log = std::fs::read_to_string(full.join("metrics.jsonl")).unwrap();
    for t in [
        "mipic/sia/attention",
        "mipic/sia/cka",
        "mipic/pic",
        "mic/scr",
        "mic/sir",
    ] {
        assert!(log.contains(t), "{t} is not logged");
    }
    let pa = assert_same_checkpoints(&full, &cut);
    // P_8 started at [I | 0] and moved; phi's weights are there
    let obj = tensors(&pa.join("objective.safetensors"));
    let p8 = &obj["objective.c1_mipic.sia_p8"];
    let eye = tch::Tensor::eye_m(8, 32, (tch::Kind::Float, tch::Device::Cpu));
    assert!(
        (p8 - eye).abs().max().double_value(&[]) > 0.0,
        "P_8 was not updated"
    );
    assert!(obj.contains_key("objective.c1_mipic.pic_phi8.0.weight"));
    let exported = tensors(&full.join("final/model.safetensors"));
    assert!(
        exported
            .keys()
            .all(|k| !k.contains("sia_p") && !k.contains("pic_phi")),
        "{:?}",
        exported.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_slim_model_equals_early_exit_on_the_full_model() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny4");
    for arch in [Architecture::Bert, Architecture::Mpnet] {
        let spec = TinySpec {
            layers: 4,
            ..TinySpec::new(arch)
        };
        write_tiny_model(&model, &spec).unwrap();
        let full = ElasticEncoder::load(&model, tch::Device::Cpu, None).unwrap();
        let out = d.path().join("slim");
        nest_model::export::slim(&full, &out, 2, Some(16)).unwrap();
        let slim = ElasticEncoder::load(&out, tch::Device::Cpu, None).unwrap();
        assert_eq!(slim.num_layers(), 2);
        assert_eq!(slim.meta.default_dim, Some(16));
        let n_full = full.vs.variables().len();
        let n_slim = slim.vs.variables().len();
        assert!(n_slim < n_full, "{n_slim} vs {n_full} tensors");
        let texts = ["the cat sat on the mat", "a man is playing music", "dog"];
        let opts = nest_model::EncodeOptions::batch(2);
        let a = full
            .embed(
                &texts,
                nest_core::ElasticSpec { layer: 2, dim: 16 },
                opts,
                &mut |_| {},
            )
            .unwrap();
        let b = slim
            .embed(
                &texts,
                nest_core::ElasticSpec { layer: 2, dim: 16 },
                opts,
                &mut |_| {},
            )
            .unwrap();
        let diff = a
            .data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-6, "{arch:?}: {diff}");
        // a slim model cannot be slimmed beyond its layers
        assert!(nest_model::export::slim(&slim, &d.path().join("x"), 3, None).is_err());
    }
}

/// bf16 mixed precision: the products run in bf16 (the losses differ from float32's, a little),
/// the weights, optimizer state and export stay float32, nest.json records it, and a resumed run
/// replays the uninterrupted one bit for bit.
#[test]
fn bf16_mixed_precision_resumes_exactly_and_keeps_float32_weights() {
    let _serial = serial();
    let (d, model, data) = setup();
    let flags = ["--grad-accum", "2", "--eval-every", "0"];
    let r32 = recipe(&model, &data, &flags);
    let rbf = recipe(&model, &data, &[&flags[..], &["--dtype", "bf16"]].concat());
    let f32_run = d.path().join("f32");
    train(&r32, &opts(&f32_run), &mut |_| {}).unwrap();
    let (full, cut) = full_and_resumed(d.path(), |o| train(&rbf, o, &mut |_| {}).unwrap());
    let (a, c) = (losses(&full), losses(&f32_run));
    // bf16 really ran: the first loss differs from float32's, within bf16's rounding
    let (l16, l32) = (a[0].1, c[0].1);
    assert!(
        l16 != l32,
        "bf16 and float32 gave the same loss {l16}: bf16 did not engage"
    );
    assert!(
        (l16 - l32).abs() < 0.02 * l32.abs(),
        "bf16 loss {l16} vs float32 {l32}"
    );
    let wa = std::fs::read(full.join("final/model.safetensors")).unwrap();
    let wb = std::fs::read(cut.join("final/model.safetensors")).unwrap();
    assert!(wa == wb, "final weights differ");
    for (name, t) in tensors(&full.join("final/model.safetensors")) {
        assert_eq!(t.kind(), tch::Kind::Float, "{name} is not float32");
    }
    let ckpt = nest_train::checkpoint::list(&full).pop().unwrap().1;
    for (name, t) in tensors(&ckpt.join("optimizer.safetensors")) {
        assert_eq!(
            t.kind(),
            tch::Kind::Float,
            "optimizer {name} is not float32"
        );
    }
    let enc = ElasticEncoder::load(&full.join("final"), tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.meta.training_dtype.as_deref(), Some("bf16"));
}

#[test]
fn int8_training_is_refused_with_the_key_named() {
    let (_d, model, data) = setup();
    let mut r = recipe(&model, &data, &[]);
    r.dtype = nest_model::DtypeChoice::Fixed(nest_model::Dtype::Int8);
    let e = r.validate().unwrap_err();
    assert!(e.contains("dtype") && e.contains("inference only"), "{e}");
}

#[test]
fn bad_eval_grids_name_the_recipe_key() {
    let _g = serial();
    let (d, model, data) = setup();
    for (flag, value, key, needle) in [
        ("--eval-dims", "16,64", "eval_dims", "64"),
        ("--eval-layers", "1-3", "eval_layers", "layer 3"),
    ] {
        let r = recipe(&model, &data, &[flag, value]);
        let run = d.path().join(format!("{key}-{value}"));
        let e = train(&r, &opts(&run), &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(needle), "{flag} {value}: {e}");
        assert!(!e.contains("--dim"), "{e}");
    }
    // a malformed value fails when the recipe loads, before any model
    let flags = recipe_flags(&model, &data, &["--eval-dims", "16,x"]);
    let e = Recipe::load(None, &overrides(&flags))
        .unwrap_err()
        .to_string();
    assert!(e.contains("eval_dims") && e.contains("'x'"), "{e}");
}

/// Training prompts (issue 22): a data source's `prompts` are prepended to its texts and, with
/// the model's `include_prompt = false`, left out of the pooling, so that the training forward
/// pass gives what sentence-transformers gives for `encode(sentences, prompt="query: ")`
/// (`prompt_query` / `prompt_query_excluded` of tests/fixtures/xlmr-tiny, made by
/// tests/reference/make_xlmr.py); cosine >= 0.99999 per sentence. The parity sentences that a
/// TSV cannot hold (a tab, a double quote) are left out.
#[test]
fn training_prompts_match_sentence_transformers() {
    use nest_train::data::{load_sources, Batch};
    use nest_train::recipe::{DataFormat, DataSource, LossKind};
    use nest_train::trainer::batch_output;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut enc =
        ElasticEncoder::load(&fixtures.join("xlmr-tiny/model"), tch::Device::Cpu, None).unwrap();
    let fx: std::collections::HashMap<String, tch::Tensor> =
        tch::Tensor::read_safetensors(fixtures.join("xlmr-tiny/reference.safetensors"))
            .unwrap()
            .into_iter()
            .collect();
    let all: Vec<String> = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("parity/sentences.json")).unwrap(),
    )
    .unwrap();
    let keep: Vec<i64> = (0..all.len())
        .filter(|&i| !all[i].contains(['\t', '"']) && !all[i].trim().is_empty())
        .map(|i| i as i64)
        .collect();
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("single.tsv");
    let mut text = String::from("text\n");
    for &i in &keep {
        text.push_str(&all[i as usize]);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let spec = DataSource {
        path,
        format: DataFormat::Single,
        weight: 1.0,
        made_by: None,
        prompts: vec!["query: ".into()],
    };
    for (include, key) in [(true, "prompt_query"), (false, "prompt_query_excluded")] {
        enc.include_prompt = include;
        let tokenize =
            |t: &[&str]| -> nest_train::Result<Vec<Vec<i64>>> { Ok(enc.tokenizer.encode(t)?) };
        let sources = load_sources(std::slice::from_ref(&spec), &tokenize, include).unwrap();
        let src = &sources[0];
        assert_eq!(src.len(), keep.len(), "every kept sentence is one example");
        let b = Batch {
            source: 0,
            examples: (0..src.len()).collect(),
        };
        let out =
            tch::no_grad(|| batch_output(&enc, src, &b, LossKind::Mnrl, false, Default::default()));
        let got = out.columns[0].pooled(enc.num_layers());
        let want = fx[key].index_select(0, &tch::Tensor::from_slice(&keep));
        let cos =
            nest_model::pooling::l2_normalize(&got) * nest_model::pooling::l2_normalize(&want);
        let worst = cos
            .sum_dim_intlist(1, false, tch::Kind::Double)
            .min()
            .double_value(&[]);
        eprintln!("training prompt, include_prompt = {include}: min cosine {worst:.8}");
        assert!(worst >= 0.99999, "{key}: {worst}");
    }
    let bad = DataSource {
        prompts: vec!["a: ".into(), "b: ".into()],
        ..spec
    };
    let tokenize =
        |t: &[&str]| -> nest_train::Result<Vec<Vec<i64>>> { Ok(enc.tokenizer.encode(t)?) };
    let e = load_sources(&[bad], &tokenize, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("data[0].prompts") && e.contains("2 prompts"),
        "{e}"
    );
}

/// Parameter groups: with `warmup_ratio = 0.5` and `head_warmup_ratio = 0`, the first step's
/// encoder rate is 0 (warm-up starts at 0) while the heads run at `head_lr`: the encoder's
/// weights stay bit for bit, and MIPIC's `P_8` moves by exactly AdamW's first step,
/// `p (1 - lr wd) - lr g / (|g| + eps)` per element, i.e. by `lr` (1 + O(wd)) wherever g != 0.
#[test]
fn heads_run_at_their_own_rate_and_warm_up() {
    let _serial = serial();
    let (d, model, data) = setup();
    let head_lr = 0.05;
    let r = recipe(
        &model,
        &data,
        &[
            "--eval-every",
            "0",
            "--save-every",
            "1",
            "--max-steps",
            "1",
            "--warmup-ratio",
            "0.5",
            "--head-lr",
            &head_lr.to_string(),
            "--head-warmup-ratio",
            "0",
            "--weight-decay",
            "0",
            "--objective",
            r#"[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, min_k = 2}]"#,
        ],
    );
    let run = d.path().join("run");
    nest_train::trainer::train(&r, &opts(&run), &mut |_| {}).unwrap();
    let ck = nest_train::checkpoint::list(&run).pop().unwrap().1;
    let before = tensors(&model.join("model.safetensors"));
    let after = tensors(&ck.join("model.safetensors"));
    let mut compared = 0;
    for (k, v) in &before {
        let w = after.get(k).or_else(|| after.get(&format!("bert.{k}")));
        if let Some(w) = w {
            assert!(v.equal(w), "encoder weight {k} moved during its warm-up");
            compared += 1;
        }
    }
    assert!(compared > 10, "only {compared} encoder weights compared");
    let obj = tensors(&ck.join("objective.safetensors"));
    let p8 = &obj["objective.c1_mipic.sia_p8"];
    let eye = tch::Tensor::eye_m(8, 32, (tch::Kind::Float, tch::Device::Cpu));
    // the first AdamW step moves every element with a gradient by lr g / (|g| + eps) ~ +-lr
    let moved = (p8 - eye).abs();
    let max = moved.max().double_value(&[]);
    assert!(
        (max - head_lr).abs() < 1e-6,
        "P_8 moved by at most {max}, expected the first AdamW step {head_lr}"
    );
    let log = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(line["lr"].as_f64(), Some(0.0));
    assert_eq!(line["head_lr"].as_f64(), Some(head_lr));
}

/// The model's Dense head (`projection`; IBKD's widening `W` with `map = "identity"`) is in
/// the heads' group: during the encoder's warm-up it moves by exactly AdamW's first step at
/// `head_lr` while the transformer stays bit for bit.
#[test]
fn a_projection_head_runs_at_the_heads_rate() {
    let _serial = serial();
    let (d, model, data) = setup();
    let head_lr = 0.05;
    let flags = [
        "--eval-every",
        "0",
        "--save-every",
        "1",
        "--max-steps",
        "1",
        "--warmup-ratio",
        "0.5",
        "--head-lr",
        "0.05",
        "--head-warmup-ratio",
        "0",
        "--weight-decay",
        "0",
        "--projection",
        "48",
    ];
    let r = recipe(&model, &data, &flags);
    let run = d.path().join("run");
    nest_train::trainer::train(&r, &opts(&run), &mut |_| {}).unwrap();
    let ck = nest_train::checkpoint::list(&run).pop().unwrap().1;
    let before = tensors(&model.join("model.safetensors"));
    let after = tensors(&ck.join("model.safetensors"));
    for (k, v) in &before {
        if let Some(w) = after.get(k).or_else(|| after.get(&format!("bert.{k}"))) {
            assert!(v.equal(w), "encoder weight {k} moved during its warm-up");
        }
    }
    let start = tch::Tensor::eye_m(48, 32, (tch::Kind::Float, tch::Device::Cpu));
    let max = (&after["dense.linear.weight"] - start)
        .abs()
        .max()
        .double_value(&[]);
    assert!(
        (max - head_lr).abs() < 1e-6,
        "the projection moved by at most {max}, expected the first AdamW step {head_lr}"
    );
}

/// One column of `metrics.jsonl`'s `terms` at every step.
fn term(run: &Path, name: &str) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["terms"][name].as_f64()
        })
        .collect()
}

/// Quantization-aware training end to end (issue 40): the recipe's `quantization` puts the
/// quantised task losses into MRL's and 2DMSE's terms, the per-precision losses are logged,
/// training lowers the quantised losses, and the run's recipe records the keys.
#[test]
fn quantization_aware_training_logs_and_lowers_the_quantised_losses() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("qat");
    let flags = [
        "--quantization",
        "[\"int8\", \"binary\"]",
        "--quantization-weight",
        "0.5",
        "--epochs",
        "10",
        "--lr",
        "3e-3",
        "--warmup-ratio",
        "0.0",
        "--decay",
        "constant",
        "--save-every",
        "0",
    ];
    let r = recipe(&model, &data, &flags);
    train(&r, &opts(&run), &mut |_| {}).unwrap();
    assert_eq!(term(&run, "mrl/cosent+int8+binary@8").len(), 60);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for p in ["float32", "int8", "binary"] {
        let l = term(&run, &format!("diag/quantization/{p}@8"));
        assert_eq!(l.len(), 60, "{p}");
        let (first, last) = (mean(&l[..6]), mean(&l[54..]));
        assert!(last < first, "{p}@8: first 6 steps {first}, last 6 {last}");
    }
    let saved: toml::Table = std::fs::read_to_string(run.join("recipe.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(saved["quantization"].to_string(), "[\"int8\", \"binary\"]");
    assert_eq!(saved["quantization_weight"].as_float(), Some(0.5));
    let enc = ElasticEncoder::load(&run.join("final"), tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.meta.matryoshka_dims, vec![8, 16, 32]);
    let objective = enc.meta.objective.unwrap_or_default();
    assert!(
        objective.contains("quantization(int8, binary) x 0.5"),
        "{objective}"
    );
    // 2DMSE: every task term (last and shallow layers) carries the quantised losses
    let two_d = d.path().join("qat-2d");
    let mut f = flags.to_vec();
    f.extend(["--max-steps", "2", "--objective", "[{kind = \"2dmse\"}]"]);
    train(&recipe(&model, &data, &f), &opts(&two_d), &mut |_| {}).unwrap();
    for name in [
        "2dmse/last/cosent+int8+binary@32",
        "2dmse/shallow/cosent+int8+binary@8",
        "diag/quantization/binary@32",
    ] {
        assert_eq!(term(&two_d, name).len(), 2, "{name}");
    }
}

/// A stop requested in-process (what Python's Ctrl-C does) ends the run after that step with a
/// checkpoint of it (no periodic one was due), no export; the resumed run then logs what the
/// uninterrupted one logged, bit for bit.
#[test]
fn a_requested_stop_checkpoints_its_step_and_resumes_exactly() {
    use nest_train::trainer::{stop, Event};
    let _serial = serial();
    let (d, model, data) = setup();
    let (full, cut) = (d.path().join("full"), d.path().join("cut"));
    let r = recipe(&model, &data, &["--save-every", "100"]);
    train(&r, &opts(&full), &mut |_| {}).unwrap();
    // outside a run's steps nothing waits for a request (the CLI then ends at once)
    assert!(!stop::request(), "no run is in its steps");
    let mut answered = None;
    let s = train(&r, &opts(&cut), &mut |e| {
        if let Event::Step { step: 4, .. } = e {
            answered = Some(stop::request());
        }
    })
    .unwrap();
    assert_eq!(answered, Some(true), "a run in its steps takes the request");
    assert!(
        !stop::request(),
        "the stopped run is no longer in its steps"
    );
    assert!(
        s.final_dir.as_os_str().is_empty(),
        "a stopped run exports nothing"
    );
    assert!(!cut.join("final").exists());
    assert!(cut.join("checkpoints/step-00000004").is_dir());
    assert_eq!(losses(&cut).len(), 4);
    let mut o = opts(&cut);
    o.resume = true;
    train(&r, &o, &mut |_| {}).unwrap();
    assert_eq!(losses(&cut), losses(&full));
}

/// A resume that extends a finished run (`--max-steps 8` on a run of 2) and is cut records the
/// new end in the run's recipe.toml: the next resume from that file goes on to step 8, not
/// back to 2 (which exported the cut run's checkpoint as the finished model).
#[test]
fn an_extended_resume_records_its_new_end() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("run");
    let short = recipe(&model, &data, &["--max-steps", "2", "--save-every", "1"]);
    assert_eq!(train(&short, &opts(&run), &mut |_| {}).unwrap().steps, 2);
    let longer = recipe(&model, &data, &["--max-steps", "8", "--save-every", "1"]);
    let mut o = opts(&run);
    o.resume = true;
    o.stop_after_steps = Some(5);
    let cut = train(&longer, &o, &mut |_| {}).unwrap();
    assert!(
        cut.final_dir.as_os_str().is_empty() && cut.steps < 8,
        "{}",
        cut.steps
    );
    let saved = run.join("recipe.toml");
    assert!(std::fs::read_to_string(&saved)
        .unwrap()
        .contains("max_steps = 8"));
    // the next resume as `nest train --resume RUN` makes it: from the run's own recipe
    let again = Recipe::load(Some(&saved), &Overrides::default()).unwrap();
    o.stop_after_steps = None;
    let s = train(&again, &o, &mut |_| {}).unwrap();
    assert_eq!((s.resumed_from, s.steps), (Some(cut.steps), 8));
    assert!(s.final_dir.join("model.safetensors").exists());
}

/// A resume on changed training data (one text edited) is refused before any weight loads,
/// naming the change and `--allow-data-change`; with that option it continues.
#[test]
fn a_resume_on_changed_data_is_refused_unless_allowed() {
    let _serial = serial();
    let (d, model, data) = setup();
    let run = d.path().join("run");
    let r = recipe(&model, &data, &["--save-every", "2"]);
    let mut o = opts(&run);
    o.stop_after_steps = Some(2);
    train(&r, &o, &mut |_| {}).unwrap();
    let text = std::fs::read_to_string(&data).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let edited = lines[3].replacen(' ', "  ", 1);
    lines[3] = &edited;
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let mut o = opts(&run);
    o.resume = true;
    let e = train(&r, &o, &mut |_| {}).unwrap_err().to_string();
    assert!(
        e.contains("step-00000002")
            && e.contains("training data changed")
            && e.contains("--allow-data-change"),
        "{e}"
    );
    o.allow_data_change = true;
    let mut said = Vec::new();
    let s = train(&r, &o, &mut |e| {
        if let nest_train::trainer::Event::Message(m) = e {
            said.push(m)
        }
    })
    .unwrap();
    assert_eq!(s.resumed_from, Some(2));
    assert!(
        said.iter().any(|m| m.contains("other training data")),
        "{said:?}"
    );
}

/// A missing `[[data]]` file or `eval_data` fails before the model loads (no message of the
/// loaded model's yet), as a not-found I/O error naming the key.
#[test]
fn missing_inputs_fail_before_the_model_loads() {
    let _serial = serial();
    let (d, model, data) = setup();
    let nowhere = d.path().join("nowhere.tsv");
    for (flags, what) in [
        (vec![], "a [[data]] path"),
        (vec!["--eval-data", "EVAL"], "the recipe's eval_data"),
    ] {
        let flags: Vec<String> = flags
            .iter()
            .map(|f| f.replace("EVAL", &nowhere.display().to_string()))
            .collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let train_data = if what.contains("data]]") {
            &nowhere
        } else {
            &data
        };
        let r = recipe(&model, train_data, &flags);
        let mut said = Vec::new();
        let e = train(&r, &opts(&d.path().join("run")), &mut |e| {
            said.push(format!("{e:?}"))
        })
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("nowhere.tsv") && text.contains(what),
            "{text}"
        );
        assert!(
            matches!(&e, nest_train::Error::Core(nest_core::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(said.is_empty(), "nothing before the check: {said:?}");
        assert!(!d.path().join("run").exists(), "no run folder");
    }
}

/// `--key value` pairs as recipe overrides (the CLI's parser is nest-cli's; the tests write
/// their recipes as it would receive them).
fn overrides(f: &[String]) -> Overrides {
    Overrides::from_text(f.chunks(2).map(|c| (&c[0][2..], c[1].as_str())))
}
