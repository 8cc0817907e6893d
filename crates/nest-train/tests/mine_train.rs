//! `[mine]` in a recipe (docs/MINING.md, "Mine and train in one recipe") on a tiny random model
//! and 48 pairs: round 0 is what `nest mine`'s pipeline writes with the untrained model, the
//! trainer trains on exactly that file, re-mining happens before the configured epochs, a run
//! stopped and resumed (also with a round's file lost at its boundary) replays the uninterrupted
//! run bit for bit, and bad `[mine]` values fail at load naming the key.

use std::path::{Path, PathBuf};

use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ElasticEncoder};
use nest_train::recipe::Overrides;
use nest_train::trainer::{round_file, train, Event, TrainOptions};
use nest_train::Recipe;

/// libtorch's RNG (dropout) is global to the process: tests that train run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const WORDS: [&str; 12] = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "music",
];

/// 48 (anchor, positive) pairs, every text distinct: the positive shares half the anchor's
/// words.
fn write_pairs(dir: &Path) -> PathBuf {
    let mut x: u64 = 99;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    let mut seen = std::collections::HashSet::new();
    while seen.len() < 96 {
        let a: Vec<&str> = (0..5).map(|_| WORDS[(next() % 12) as usize]).collect();
        let mut b: Vec<&str> = a[..2].to_vec();
        b.extend((0..3).map(|_| WORDS[(next() % 12) as usize]));
        let (a, b) = (a.join(" "), b.join(" "));
        if a == b || seen.contains(&a) || seen.contains(&b) {
            continue;
        }
        seen.insert(a.clone());
        seen.insert(b.clone());
        out.push_str(&serde_json::json!({"anchor": a, "positive": b}).to_string());
        out.push('\n');
    }
    let p = dir.join("pairs.jsonl");
    std::fs::write(&p, out).unwrap();
    p
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("tiny");
    write_tiny_model(&model, &TinySpec::new(Architecture::Bert)).unwrap();
    let pairs = write_pairs(d.path());
    (d, model, pairs)
}

fn overrides(f: &[(&str, String)]) -> Overrides {
    Overrides::from_text(f.iter().map(|(k, v)| (*k, v.as_str())))
}

/// MRL over MNRL, 3 epochs of 6 batches, checkpoints every 2 steps; `mine` is the `[mine]`
/// table (inline), `extra` more keys.
fn recipe(model: &Path, mine: Option<String>, extra: &[(&str, String)]) -> Recipe {
    let mut f: Vec<(&str, String)> = vec![
        ("model", model.display().to_string()),
        ("loss", "mnrl".into()),
        ("matryoshka_dims", "[8, 16, 32]".into()),
        ("batch_size", "8".into()),
        ("lr", "1e-3".into()),
        ("epochs", "3".into()),
        ("save_every", "2".into()),
        ("keep_last", "20".into()),
    ];
    if let Some(m) = mine {
        f.push(("mine", m));
    }
    f.extend(extra.iter().cloned());
    Recipe::load(None, &overrides(&f)).unwrap()
}

fn mine_table(pairs: &Path, every: usize) -> String {
    format!(
        "{{ queries = \"{}\", num_negatives = 1, every_epochs = {every}, dim = 16 }}",
        pairs.display()
    )
}

fn opts(run: &Path) -> TrainOptions {
    TrainOptions::new(run, tch::Device::Cpu)
}

/// Trains, returning the messages.
fn run(r: &Recipe, o: &TrainOptions) -> Vec<String> {
    let mut said = Vec::new();
    train(r, o, &mut |e| {
        if let Event::Message(m) = e {
            said.push(m)
        }
    })
    .unwrap();
    said
}

fn losses(run: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Some((v["step"].as_u64()?, v["loss"].as_f64()?.to_bits()))
        })
        .collect()
}

/// Round 0 as `nest mine`'s pipeline (the library's) mines it with the untrained model.
fn mined_by_the_library(model: &Path, pairs: &Path, out: &Path) -> Vec<u8> {
    use nest_index::mine::{MineOptions, OutputFormat, ResumableOutput};
    let enc = ElasticEncoder::load(model, tch::Device::Cpu, None).unwrap();
    let set = nest_train::mine::read_set(
        nest_train::mine::PairSource::Queries(pairs),
        None,
        &mut |_| {},
    )
    .unwrap();
    let o = MineOptions {
        num_negatives: 1,
        ..MineOptions::default()
    };
    let job = nest_train::mine::Job {
        window: nest_train::mine::window(&o, &set, "range_min").unwrap(),
        o,
        format: OutputFormat::Triplet,
        level: nest_index::Level {
            precision: nest_index::Precision::Float32,
            dim: 16,
        },
        scores: false,
        chunk: 5,
    };
    let e = nest_train::mine::Encoding {
        model: &enc,
        layer: enc.num_layers(),
        dim: 16,
        opts: nest_model::EncodeOptions::batch(32),
        prompts: Default::default(),
    };
    let mut w = ResumableOutput::open(out, "k", false).unwrap();
    let hidden = &|_: usize, _: &str| indicatif::ProgressBar::hidden();
    nest_train::mine::mine_rest(&job, &e, &set, &mut w, hidden, &mut |_| {}).unwrap();
    std::fs::read(w.finish().unwrap()).unwrap()
}

#[test]
fn mines_once_then_trains_on_exactly_that_file() {
    let _serial = serial();
    let (d, model, pairs) = setup();
    let once = d.path().join("once");
    let said = run(
        &recipe(&model, Some(mine_table(&pairs, 0)), &[]),
        &opts(&once),
    );
    let round0 = round_file(&once, 0);
    let bytes = std::fs::read(&round0).unwrap();
    assert_eq!(
        bytes,
        mined_by_the_library(&model, &pairs, &d.path().join("lib.jsonl")),
        "round 0 is nest mine's output with the untrained model"
    );
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 48);
    assert!(
        !round_file(&once, 1).exists(),
        "every_epochs = 0 mines once"
    );
    let mined: Vec<&String> = said.iter().filter(|m| m.contains("mining 48")).collect();
    assert_eq!(mined.len(), 1, "{said:?}");
    assert!(
        said.iter().any(|m| m.contains("round 0: 48 triplets")),
        "{said:?}"
    );
    // the same recipe training on a copy of that file as [[data]] is the same run
    let copy = d.path().join("copy.jsonl");
    std::fs::copy(&round0, &copy).unwrap();
    let data = ("data", format!("{}:triplets", copy.display()));
    let plain = d.path().join("plain");
    run(&recipe(&model, None, &[data]), &opts(&plain));
    assert_eq!(losses(&once), losses(&plain));
    assert!(losses(&once).len() >= 18, "3 epochs of at least 6 batches");
}

/// `output_format = "n-tuple"`: one row per positive with every negative (`negative_1..n`),
/// trained as the same file given as `[[data]]` trains.
#[test]
fn mines_n_tuples_and_trains_on_them() {
    let _serial = serial();
    let (d, model, pairs) = setup();
    let table = format!(
        "{{ queries = \"{}\", num_negatives = 2, output_format = \"n-tuple\", dim = 16 }}",
        pairs.display()
    );
    let one_epoch = [("epochs", "1".to_string())];
    let mined = d.path().join("mined");
    run(&recipe(&model, Some(table), &one_epoch), &opts(&mined));
    let round0 = round_file(&mined, 0);
    let text = std::fs::read_to_string(&round0).unwrap();
    assert!(text.lines().count() > 8, "{text:.300}");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            v["negative_1"].is_string()
                && v["negative_2"].is_string()
                && v.get("negative").is_none(),
            "{line}"
        );
    }
    let copy = d.path().join("copy.jsonl");
    std::fs::copy(&round0, &copy).unwrap();
    let mut extra = one_epoch.to_vec();
    extra.push(("data", format!("{}:triplets", copy.display())));
    let plain = d.path().join("plain");
    run(&recipe(&model, None, &extra), &opts(&plain));
    assert_eq!(losses(&mined), losses(&plain));
}

#[test]
fn mines_again_before_each_epoch_and_resumes_exactly() {
    let _serial = serial();
    let (d, model, pairs) = setup();
    let r = recipe(&model, Some(mine_table(&pairs, 1)), &[]);
    let full = d.path().join("full");
    let said = run(&r, &opts(&full));
    assert_eq!(
        said.iter().filter(|m| m.contains("mining 48")).count(),
        3,
        "{said:?}"
    );
    let rounds: Vec<Vec<u8>> = (0..3)
        .map(|k| std::fs::read(round_file(&full, k)).unwrap())
        .collect();
    assert!(
        rounds[1] != rounds[0] || rounds[2] != rounds[0],
        "the trained model mines other negatives"
    );
    assert!(full.join("final/model.safetensors").is_file());
    // cut inside round 1 (checkpoint 8 is epoch 1, batch 2): rounds 0 and 1 read from disk
    let cut = d.path().join("cut");
    let mut o = opts(&cut);
    o.stop_after_steps = Some(9);
    run(&r, &o);
    let mut o = opts(&cut);
    o.resume = true;
    let said = run(&r, &o);
    assert_eq!(said.iter().filter(|m| m.contains("mining 48")).count(), 1);
    assert_eq!(losses(&full), losses(&cut));
    for (k, round) in rounds.iter().enumerate() {
        assert_eq!(&std::fs::read(round_file(&cut, k)).unwrap(), round);
    }
    // stopped at a round's boundary (the checkpoint of epoch 0's last step resumes at epoch 1,
    // batch 0) with round 1 cut while it was mined: it goes on, the same file and losses
    let epoch0 = std::fs::read_to_string(full.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"loss\"") && l.contains("\"epoch\":0"))
        .count() as u64;
    let r = recipe(
        &model,
        Some(mine_table(&pairs, 1)),
        &[("save_every", "1".into())],
    );
    let edge = d.path().join("edge");
    let mut o = opts(&edge);
    o.stop_after_steps = Some(epoch0);
    run(&r, &o);
    let r1 = round_file(&edge, 1);
    assert!(!r1.exists());
    // round 1 cut after 20 of its 48 queries, a torn chunk after them (one row per query:
    // every query finds its one negative)
    let (partial, state) = nest_index::mine::output::work_files(&r1);
    let (_, ck) = nest_train::checkpoint::list(&edge).pop().unwrap();
    let ck: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ck.join("state.json")).unwrap()).unwrap();
    let text = String::from_utf8(rounds[1].clone()).unwrap();
    let head: String = text.split_inclusive('\n').take(20).collect();
    std::fs::write(&partial, format!("{head}{{\"anchor\": \"to")).unwrap();
    let st = serde_json::json!({"format": "nest-mine-state", "version": 1,
        "key": format!("{}:round-1", ck["recipe_sha256"].as_str().unwrap()),
        "queries_done": 20, "lines": 20, "bytes": head.len()});
    std::fs::write(&state, st.to_string()).unwrap();
    let mut o = opts(&edge);
    o.resume = true;
    let said = run(&r, &o);
    assert!(
        said.iter()
            .any(|m| m.contains("resuming round 1: 20 of 48")),
        "{said:?}"
    );
    assert_eq!(losses(&full), losses(&edge));
    assert_eq!(std::fs::read(&r1).unwrap(), rounds[1]);
    // a later round of fewer triplets than round 0's (here round 1 given 24 of its 48 rows):
    // the schedule stays round 0's, so the run ends early, and says so (helper trial C, U5:
    // "22 optimizer steps" planned, 21 trained, nothing said)
    let short = d.path().join("short");
    let mut o = opts(&short);
    o.stop_after_steps = Some(epoch0);
    run(&r, &o);
    let half: String = text.split_inclusive('\n').take(24).collect();
    std::fs::create_dir_all(round_file(&short, 1).parent().unwrap()).unwrap();
    std::fs::write(round_file(&short, 1), half).unwrap();
    let mut o = opts(&short);
    o.resume = true;
    let said = run(&r, &o);
    let ends = format!(
        "the run ends at step {} of the {}",
        epoch0 + 3 + epoch0,
        3 * epoch0
    );
    assert!(said.iter().any(|m| m.contains(&ends)), "{ends}: {said:?}");
    let last = losses(&short).last().unwrap().0;
    assert_eq!(last, epoch0 + 3 + epoch0);
    // a round the run trained on, lost: refused, naming the file
    let lost = d.path().join("lost");
    let mut o = opts(&lost);
    o.stop_after_steps = Some(9);
    run(&r, &o);
    std::fs::remove_file(round_file(&lost, 0)).unwrap();
    let mut o = opts(&lost);
    o.resume = true;
    let e = train(&r, &o, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("round-0.jsonl") && e.contains("missing"), "{e}");
}

#[test]
fn bad_mine_values_fail_at_load_naming_the_key() {
    let d = tempfile::tempdir().unwrap();
    let pairs = d.path().join("p.jsonl");
    let load = |table: &str, extra: &[(&str, &str)]| {
        let mut f: Vec<(&str, String)> = vec![
            ("model", "m".into()),
            ("loss", "mnrl".into()),
            ("mine", table.replace("Q", &pairs.display().to_string())),
        ];
        f.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        Recipe::load(None, &overrides(&f)).unwrap_err().to_string()
    };
    for (table, key) in [
        ("{queries = \"Q\", sampling = \"best\"}", "mine.sampling"),
        ("{queries = \"Q\", num_negatives = 0}", "mine.num_negatives"),
        (
            "{queries = \"Q\", range_min = 4, range_max = 2}",
            "mine.range_min",
        ),
        (
            "{queries = \"Q\", relative_margin = nan}",
            "mine.relative_margin",
        ),
        (
            "{queries = \"Q\", output_format = \"labeled-pair\"}",
            "mine.output_format",
        ),
        ("{queries = \"Q\", precision = \"int4\"}", "mine.precision"),
        ("{queries = \"Q\", dim = 0}", "mine.dim"),
        ("{queries = \"Q\", weight = -1.0}", "mine.weight"),
        ("{queries = \"Q\", every_epoch = 1}", "every_epochs"),
        ("{corpus = \"Q\"}", "queries"),
    ] {
        let e = load(table, &[]);
        assert!(e.contains(key), "{table}: {e}");
    }
    let e = load("{queries = \"Q\"}", &[("loss", "cosent")]);
    assert!(e.contains("mine") && e.contains("triplets"), "{e}");
    // in a recipe file: the line and the dotted key
    let file = d.path().join("r.toml");
    std::fs::write(
        &file,
        "model = \"m\"\nloss = \"mnrl\"\n\n[mine]\nqueries = \"p.jsonl\"\nevery_epochs = \"two\"\n",
    )
    .unwrap();
    let e = Recipe::load(Some(&file), &Overrides::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 6, key mine.every_epochs"), "{e}");
    // the point is checked against the model before anything is mined or written
    let _serial = serial();
    let (d, model, pairs) = setup();
    let table = format!("{{ queries = \"{}\", layer = 9 }}", pairs.display());
    let r = recipe(&model, Some(table), &[]);
    let run_dir = d.path().join("run");
    let e = train(&r, &opts(&run_dir), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("mine.layer"), "{e}");
    assert!(!round_file(&run_dir, 0).exists());
}
