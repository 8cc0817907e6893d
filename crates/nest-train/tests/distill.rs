//! IBKD: HSIC (each kernel) and InfoNCE through `W` against PyTorch; the teacher cache's hit,
//! miss, changed teacher, truncated file and flipped byte; the two stages' resume across the
//! stage boundary.
//!
//! Fixture: `tests/reference/ibkd.py` (PyTorch 2.13, float64) wrote
//! `tests/fixtures/objectives/ibkd.safetensors`. Tolerance: `1e-9 * max(|torch|, 1)`.

use nest_train::recipe::Overrides;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};
use nest_train::distill::cache::TeacherCache;
use nest_train::distill::{self, DistillRecipe, Stages};
use nest_train::objective::distill::infonce_to_teacher;
use nest_train::objective::hsic::{gram, hsic, side_gram, Bandwidth, HsicConfig, Kernel};
use nest_train::trainer::TrainOptions;
use tch::{Kind, Tensor};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> HashMap<String, Tensor> {
    let p = root().join("tests/fixtures/objectives/ibkd.safetensors");
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

fn close(got: &Tensor, want: &Tensor, what: &str) {
    let (g, w) = (got.double_value(&[]), want.double_value(&[0]));
    eprintln!("{what}: nest {g:.12} torch {w:.12}");
    assert!(
        (g - w).abs() <= 1e-9 * w.abs().max(1.0),
        "{what}: {g} vs {w}"
    );
}

#[test]
fn hsic_and_infonce_through_w_match_pytorch() {
    let f = fixture();
    for (k, name) in [
        (Kernel::Rbf, "rbf"),
        (Kernel::Imq, "imq"),
        (Kernel::Linear, "linear"),
    ] {
        let kx = gram(&f["x"], k, 0.5);
        let err = (&kx - &f[&format!("gram_{name}")])
            .abs()
            .max()
            .double_value(&[]);
        assert!(err < 1e-12, "{name} Gram: {err}");
        let ks = gram(&f["s"], k, 0.5);
        close(
            &hsic(&kx, &ks),
            &f[&format!("hsic_{name}")],
            &format!("HSIC {name}"),
        );
    }
    // the options: median-heuristic bandwidth, rows normalised before the kernel
    for (k, bandwidth, normalize, name) in [
        (Kernel::Rbf, Bandwidth::Median, false, "hsic_rbf_median"),
        (Kernel::Rbf, Bandwidth::Fixed, true, "hsic_rbf_fixed_norm"),
        (Kernel::Rbf, Bandwidth::Median, true, "hsic_rbf_median_norm"),
        (Kernel::Imq, Bandwidth::Median, false, "hsic_imq_median"),
    ] {
        let c = HsicConfig {
            kernel: k,
            bandwidth,
            normalize,
            ..HsicConfig::default()
        };
        close(
            &hsic(&side_gram(&f["x"], &c), &side_gram(&f["s"], &c)),
            &f[name],
            name,
        );
    }
    let mapped = f["s"].linear(&f["w"], Some(&f["b"]));
    close(
        &infonce_to_teacher(&mapped, &f["teacher"], 0.1),
        &f["infonce"],
        "InfoNCE through W",
    );
    close(
        &(mapped - &f["teacher"]).square().mean(Kind::Double),
        &f["mse"],
        "MSE through W",
    );
}

/// A fake teacher: a text's vector is a function of its bytes; counts what it encodes.
/// The saturation diagnostic (mean off-diagonal Gram entry) against numpy
/// (`tests/reference/hsic_saturation.py`): the paper's gamma 0.5, the authors' 0.1 and the
/// median heuristic, on both sides. Tolerance `1e-9` relative.
#[test]
fn hsic_saturation_diagnostic_matches_numpy() {
    use nest_train::objective::hsic::mean_off_diagonal;
    let f = fixture();
    let want: HashMap<String, f64> = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/objectives/hsic_saturation.json"))
            .unwrap(),
    )
    .unwrap();
    for side in ["x", "s"] {
        for (name, gamma, bandwidth) in [
            ("0.5", 0.5, Bandwidth::Fixed),
            ("0.1", 0.1, Bandwidth::Fixed),
            ("median", 0.5, Bandwidth::Median),
        ] {
            let config = HsicConfig {
                gamma,
                bandwidth,
                ..HsicConfig::default()
            };
            let got = mean_off_diagonal(&side_gram(&f[side], &config)).double_value(&[]);
            let w = want[&format!("{side}_rbf_{name}")];
            assert!(
                (got - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{side} rbf {name}: {got} vs numpy {w}"
            );
        }
    }
}

fn fake(calls: &mut usize, scale: f32) -> impl FnMut(&[&str]) -> nest_train::Result<Tensor> + '_ {
    move |texts: &[&str]| {
        *calls += texts.len();
        let v: Vec<f32> = texts
            .iter()
            .flat_map(|t| (0..4).map(move |i| scale * (t.len() as f32 + i as f32)))
            .collect();
        Ok(Tensor::from_slice(&v).view([texts.len() as i64, 4]))
    }
}

#[test]
fn the_teacher_cache_hits_misses_and_rebuilds_what_is_damaged() {
    let d = tempfile::tempdir().unwrap();
    let teacher = d.path().join("teacher");
    std::fs::create_dir_all(&teacher).unwrap();
    std::fs::write(teacher.join("model.safetensors"), b"weights v1").unwrap();
    let cache = TeacherCache::for_teacher(d.path(), &teacher, 128).unwrap();
    let texts: Vec<String> = ["a", "bb", "ccc", "a"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut calls = 0;
    // miss: the three distinct texts are encoded, duplicates answered once
    let mut heard = Vec::new();
    let (x, st) = cache
        .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |done, total| {
            heard.push((done, total))
        })
        .unwrap();
    assert_eq!((calls, st.misses, st.hits, st.entries), (3, 3, 0, 3));
    assert_eq!(heard, [(2, 3), (3, 3)], "progress after each chunk");
    assert_eq!(x.size(), [4, 4]);
    assert_eq!(x.double_value(&[1, 0]), 2.0);
    assert_eq!(x.double_value(&[3, 3]), 4.0);
    // hit: nothing is encoded, the same vectors come back; a new text is added
    let more: Vec<String> = ["ccc", "dddd", "a"].iter().map(|s| s.to_string()).collect();
    let mut calls = 0;
    let (y, st) = cache
        .embed(&more, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
        .unwrap();
    assert_eq!((calls, st.hits, st.misses, st.entries), (1, 2, 1, 4));
    assert_eq!(y.double_value(&[1, 0]), 4.0);
    let mut calls = 0;
    let (z, _) = cache
        .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
        .unwrap();
    assert_eq!(calls, 0);
    assert!(z.equal(&x));
    // a changed teacher keys another file: everything is encoded again
    std::fs::write(teacher.join("model.safetensors"), b"weights v2").unwrap();
    let other = TeacherCache::for_teacher(d.path(), &teacher, 128).unwrap();
    assert_ne!(other.path, cache.path);
    let mut calls = 0;
    let _ = other
        .embed(&texts, 8, &mut fake(&mut calls, 2.0), &mut |_, _| {})
        .unwrap();
    assert_eq!(calls, 3);
    // so does another max length
    assert_ne!(
        TeacherCache::for_teacher(d.path(), &teacher, 64)
            .unwrap()
            .path,
        other.path
    );
    // a flipped byte and a truncated file are detected, reported and rebuilt
    let good = std::fs::read(&cache.path).unwrap();
    let mut bad = good.clone();
    let at = bad.len() - 40;
    bad[at] ^= 0x10;
    for (damaged, why) in [
        (bad, "checksum"),
        (good[..good.len() - 7].to_vec(), "truncated"),
    ] {
        std::fs::write(&cache.path, damaged).unwrap();
        let mut calls = 0;
        let (v, st) = cache
            .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
            .unwrap();
        let reason = st.discarded.expect("the damage is reported");
        assert!(reason.contains(why), "{reason}");
        assert_eq!(calls, 3, "rebuilt from the teacher, not read as garbage");
        assert!(v.equal(&x));
        let mut calls = 0;
        let (_, st) = cache
            .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
            .unwrap();
        assert_eq!(
            (calls, st.discarded),
            (0, None),
            "the rebuilt file is whole"
        );
    }
}

/// A fill cut short (Ctrl-C, a lost machine, a failing teacher) keeps what it encoded up to
/// its last save: the next run encodes only the rest (it lost everything before).
#[test]
fn an_interrupted_teacher_fill_keeps_what_it_saved() {
    let d = tempfile::tempdir().unwrap();
    let teacher = d.path().join("teacher");
    std::fs::create_dir_all(&teacher).unwrap();
    std::fs::write(teacher.join("model.safetensors"), b"weights").unwrap();
    let mut cache = TeacherCache::for_teacher(d.path(), &teacher, 128).unwrap();
    cache.save_every = std::time::Duration::ZERO; // save after every chunk
    let texts: Vec<String> = (0..10).map(|i| "x".repeat(i + 1)).collect();
    let mut calls = 0;
    let mut inner = fake(&mut calls, 1.0);
    let mut chunks = 0;
    let mut failing = |t: &[&str]| {
        chunks += 1;
        match chunks {
            4 => Err(nest_train::Error::Run {
                path: "teacher".into(),
                message: "the machine went away".into(),
            }),
            _ => inner(t),
        }
    };
    let e = cache.embed(&texts, 2, &mut failing, &mut |_, _| {});
    assert!(e.is_err());
    let mut calls = 0;
    let (x, st) = cache
        .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
        .unwrap();
    assert_eq!(
        (st.hits, st.misses, calls),
        (6, 4, 4),
        "three chunks of two were kept"
    );
    // the same vectors as one uninterrupted fill
    let fresh = TeacherCache::for_teacher(&d.path().join("other"), &teacher, 128).unwrap();
    let mut calls = 0;
    let (y, _) = fresh
        .embed(&texts, 2, &mut fake(&mut calls, 1.0), &mut |_, _| {})
        .unwrap();
    assert!(x.equal(&y));
}

fn write_texts(dir: &Path) -> (PathBuf, PathBuf) {
    let words = [
        "the", "a", "cat", "dog", "sat", "on", "mat", "man", "plays", "music", "red", "blue",
    ];
    let mut x: u64 = 7;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 12) as usize
    };
    let mut single = String::from("text\n");
    let mut triplets = String::from("anchor\tpositive\tnegative\n");
    for i in 0..64 {
        let s: Vec<&str> = (0..5).map(|_| words[next()]).collect();
        single.push_str(&format!("{} {i}\n", s.join(" ")));
        triplets.push_str(&format!(
            "{} {i}\t{} {i}\t{} x\n",
            s.join(" "),
            s[..3].join(" "),
            words[next()]
        ));
    }
    let (a, b) = (dir.join("texts.tsv"), dir.join("triplets.tsv"));
    std::fs::write(&a, single).unwrap();
    std::fs::write(&b, triplets).unwrap();
    (a, b)
}

fn stage_losses(run: &Path) -> Vec<u64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<serde_json::Value>(l).ok()?["loss"]
                .as_f64()
                .map(f64::to_bits)
        })
        .collect()
}

#[test]
fn two_stages_resume_exactly_across_the_boundary() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (teacher, student) = (d.path().join("teacher"), d.path().join("student"));
    write_tiny_model(&teacher, &TinySpec::new(Architecture::Mpnet)).unwrap();
    write_tiny_model(&student, &TinySpec::new(Architecture::Bert)).unwrap();
    let (texts, triplets) = write_texts(d.path());
    let recipe = d.path().join("ibkd.toml");
    let common =
        "batch_size = 16\nepochs = 2\nsave_every = 2\nkeep_last = 10\neval_every = 0\nseed = 3\n";
    std::fs::write(
        &recipe,
        format!(
            "teacher = \"{}\"\nstudent = \"{}\"\ncache_dir = \"{}\"\nteacher_max_length = 32\n\n[stage1]\nloss = \"none\"\nlr = 1e-3\n{common}\
             data = [{{ path = \"{}\", format = \"single\" }}]\n\
             objective = [{{ kind = \"distill\", temperature = 0.1 }}, {{ kind = \"hsic\", weight = 1.0 }}]\n\n\
             [stage2]\nloss = \"mnrl\"\nlr = 3e-4\nprojection = 16\nmatryoshka_dims = [8, 16]\n{common}\
             data = [{{ path = \"{}\", format = \"triplets\" }}]\n\
             objective = [{{ kind = \"mrl\" }}, {{ kind = \"hsic\", weight = 0.5 }}]\n",
            teacher.display(),
            student.display(),
            d.path().join("cache").display(),
            texts.display(),
            triplets.display()
        ),
    )
    .unwrap();
    let (r, o1, o2) = DistillRecipe::load(&recipe, &Overrides::new()).unwrap();
    let opts = |stop: Option<u64>, resume: bool| TrainOptions {
        resume,
        stop_after_steps: stop,
        ..TrainOptions::new(PathBuf::new(), tch::Device::Cpu)
    };
    let mut log = Vec::new();
    let full = d.path().join("full");
    let out = distill::run(
        &r,
        (&o1, &o2),
        &full,
        Stages::Both,
        &opts(None, false),
        &mut |e| log.push(format!("{e:?}")),
    )
    .unwrap();
    assert_eq!(out.stages.len(), 2);
    assert_eq!(out.cache.as_ref().unwrap().misses, 64);
    assert!(out.final_dir.join("nest.json").exists());
    // the cut run: stage 1 stops early, then resumes; stage 2 stops early, then resumes
    let cut = d.path().join("cut");
    let o = distill::run(
        &r,
        (&o1, &o2),
        &cut,
        Stages::Both,
        &opts(Some(3), false),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        o.cache.unwrap().hits,
        64,
        "the second run reads the teacher from the cache"
    );
    assert!(
        !cut.join("stage2").exists(),
        "stage 2 waits for a finished stage 1"
    );
    let cut_run = |stages, stop, resume| {
        distill::run(
            &r,
            (&o1, &o2),
            &cut,
            stages,
            &opts(stop, resume),
            &mut |_| {},
        )
        .unwrap();
    };
    cut_run(Stages::First, None, true);
    cut_run(Stages::Both, Some(3), true);
    assert!(!cut.join("stage2/final").exists());
    cut_run(Stages::Both, None, true);
    for stage in ["stage1", "stage2"] {
        assert_eq!(
            stage_losses(&full.join(stage)),
            stage_losses(&cut.join(stage)),
            "{stage} losses differ"
        );
    }
    let read = |p: &Path, f: &str| std::fs::read(p.join("stage2/final").join(f)).unwrap();
    for f in ["model.safetensors", "2_Dense/model.safetensors"] {
        assert!(
            read(&full, f) == read(&cut, f),
            "the final students' {f} differ"
        );
    }
    // stage 2's projection head (section 3.4) was trained, exported as a Dense module, and the
    // exported student gives what the trained one gave
    let student2 = ElasticEncoder::load(&out.final_dir, tch::Device::Cpu, None).unwrap();
    assert_eq!(student2.output_dim(), 16);
    let dense = &student2.head.modules()[0];
    let start = Tensor::eye_m(16, 32, (tch::Kind::Float, tch::Device::Cpu));
    assert!(
        (&dense.weight - start).abs().max().double_value(&[]) > 1e-4,
        "the projection did not move from [I | 0]"
    );
    let modules = std::fs::read_to_string(out.final_dir.join("modules.json")).unwrap();
    assert!(
        modules.contains("\"2_Dense\"") && modules.contains("3_Normalize"),
        "{modules}"
    );
    let v = student2
        .embed(
            &["the cat sat"],
            nest_core::ElasticSpec { layer: 2, dim: 8 },
            Default::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(v.dim, 8);
    // W and the HSIC term were in stage 1 and logged; W never reaches the model
    let m = std::fs::read_to_string(full.join("stage1/metrics.jsonl")).unwrap();
    assert!(
        m.contains("distill/infonce@32") && m.contains("hsic/hsic"),
        "{m:.400}"
    );
    let exported: Vec<String> =
        Tensor::read_safetensors(full.join("stage1/final/model.safetensors"))
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
    assert!(
        exported.iter().all(|k| !k.contains("distill")),
        "{exported:?}"
    );
    // a distill component outside nest distill is refused with the reason
    let e = nest_train::Recipe::load(
        None,
        &overrides(&[
            "--model".into(),
            student.display().to_string(),
            "--data".into(),
            format!("{}:single", texts.display()),
            "--loss".into(),
            "none".into(),
            "--objective".into(),
            r#"[{kind = "distill"}]"#.into(),
        ]),
    )
    .unwrap();
    let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let err = e
        .build_objective(32, 2, &vs.root(), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("nest distill"), "{err}");
}

/// A stage that `max_steps` cuts short has the teacher encode only the texts of the batches
/// it takes (the run's own plan: a text outside it would stop the run), and a longer run later
/// encodes only what it adds.
#[test]
fn a_short_stage_has_the_teacher_encode_only_the_texts_it_takes() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (teacher, student) = (d.path().join("teacher"), d.path().join("student"));
    write_tiny_model(&teacher, &TinySpec::new(Architecture::Mpnet)).unwrap();
    write_tiny_model(&student, &TinySpec::new(Architecture::Bert)).unwrap();
    let (texts, _) = write_texts(d.path());
    let recipe = d.path().join("ibkd.toml");
    let write = |steps: u64| {
        std::fs::write(
            &recipe,
            format!(
                "teacher = \"{}\"\nstudent = \"{}\"\ncache_dir = \"{}\"\nteacher_max_length = 32\n\n\
                 [stage1]\nloss = \"none\"\nlr = 1e-3\nbatch_size = 8\ngrad_accum = 2\nepochs = 2\n\
                 max_steps = {steps}\nlength_batching = true\neval_every = 0\nseed = 5\n\
                 data = [{{ path = \"{}\", format = \"single\" }}]\n\
                 objective = [{{ kind = \"distill\", temperature = 0.1 }}]\n",
                teacher.display(),
                student.display(),
                d.path().join("cache").display(),
                texts.display(),
            ),
        )
        .unwrap();
        DistillRecipe::load(&recipe, &Overrides::new()).unwrap()
    };
    let run = |steps: u64, dir: &str| {
        let (r, o1, o2) = write(steps);
        let opts = TrainOptions::new(PathBuf::new(), tch::Device::Cpu);
        let o = distill::run(
            &r,
            (&o1, &o2),
            &d.path().join(dir),
            Stages::First,
            &opts,
            &mut |_| {},
        );
        o.unwrap()
    };
    // 64 texts, 8 micro-batches of 8 an epoch: 2 steps take 4 micro-batches, 32 texts
    let o = run(2, "short");
    let c = o.cache.unwrap();
    assert_eq!((c.misses, c.hits, c.entries), (32, 0, 32));
    assert_eq!(o.stages[0].steps, 2);
    // 5 steps: all of the first epoch and a step of the second; only the other 32 are new
    let o = run(5, "longer");
    let c = o.cache.unwrap();
    assert_eq!((c.misses, c.entries), (32, 64));
    assert_eq!(o.stages[0].steps, 5);
}

/// `map = "identity"` with `projection = <teacher dim>`: the student's Dense head is stage 1's
/// `W` (wider than the student), trained with the encoder, exported, kept and trained through
/// stage 2, so the final student's vector is `W s`; without the head the recipe is refused,
/// naming the key that fixes it.
#[test]
fn the_identity_map_makes_w_the_students_exported_head() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (teacher, student) = (d.path().join("teacher"), d.path().join("student"));
    let wide = TinySpec {
        hidden: 48,
        ..TinySpec::new(Architecture::Mpnet)
    };
    write_tiny_model(&teacher, &wide).unwrap();
    write_tiny_model(&student, &TinySpec::new(Architecture::Bert)).unwrap();
    let (texts, triplets) = write_texts(d.path());
    let recipe = |projection: &str| {
        let path = d.path().join(format!("ibkd{}.toml", projection.len()));
        let common = "batch_size = 16\nepochs = 1\nsave_every = 0\neval_every = 0\nseed = 3\n";
        std::fs::write(
            &path,
            format!(
                "teacher = \"{}\"\nstudent = \"{}\"\ncache_dir = \"{}\"\nteacher_max_length = 32\n\n\
                 [stage1]\nloss = \"none\"\nlr = 1e-3\n{projection}{common}\
                 data = [{{ path = \"{}\", format = \"single\" }}]\n\
                 objective = [{{ kind = \"distill\", map = \"identity\" }}, {{ kind = \"hsic\" }}]\n\n\
                 [stage2]\nloss = \"mnrl\"\nlr = 1e-3\n{common}\
                 data = [{{ path = \"{}\", format = \"triplets\" }}]\n",
                teacher.display(),
                student.display(),
                d.path().join("cache").display(),
                texts.display(),
                triplets.display()
            ),
        )
        .unwrap();
        DistillRecipe::load(&path, &Overrides::new()).unwrap()
    };
    let opts = TrainOptions::new(PathBuf::new(), tch::Device::Cpu);
    let (r, o1, o2) = recipe("");
    let run = d.path().join("no-head");
    let err = distill::run(&r, (&o1, &o2), &run, Stages::Both, &opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("identity") && err.contains("projection = 48"),
        "{err}"
    );
    let (r, o1, o2) = recipe("projection = 48\n");
    let run = d.path().join("ws");
    let out = distill::run(&r, (&o1, &o2), &run, Stages::Both, &opts, &mut |_| {}).unwrap();
    let start = Tensor::eye_m(48, 32, (Kind::Float, tch::Device::Cpu));
    let head = |dir: &Path| {
        let enc = ElasticEncoder::load(dir, tch::Device::Cpu, None).unwrap();
        assert_eq!(enc.output_dim(), 48, "{}", dir.display());
        enc.head.modules()[0].weight.shallow_clone()
    };
    let (w1, w2) = (head(&run.join("stage1/final")), head(&out.final_dir));
    assert!(
        (&w1 - &start).abs().max().double_value(&[]) > 1e-4,
        "stage 1 did not move W from [I; 0]"
    );
    assert!(
        (&w2 - &w1).abs().max().double_value(&[]) > 1e-6,
        "stage 2 did not train W"
    );
    let m = std::fs::read_to_string(run.join("stage1/metrics.jsonl")).unwrap();
    assert!(m.contains("distill/infonce@48"), "{m:.400}");
    let nest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("stage1/final/nest.json")).unwrap())
            .unwrap();
    assert!(nest.to_string().contains("W s"), "{nest}");
}

/// `--key value` pairs as recipe overrides (the CLI's parser is nest-cli's; the tests write
/// their recipes as it would receive them).
fn overrides(f: &[String]) -> Overrides {
    Overrides::from_text(f.chunks(2).map(|c| (&c[0][2..], c[1].as_str())))
}
