//! The new-user trial (runs/newuser/FINDINGS.md): each BAD or UNCLEAR finding that was fixed,
//! end to end on the binary and a tiny model. See docs/RELIABILITY.md, "The new-user trial".

use std::path::Path;
use std::process::{Command, Output};

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

/// A folder with a tiny model (`tiny/`) and a scored TSV of 8 pairs (`train.tsv`).
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_tiny_model(&d.join("tiny"), &TinySpec::new(Architecture::Bert)).unwrap();
    let words = ["the", "cat", "dog", "sat", "on", "mat", "man", "music"];
    let mut data = String::from("sentence1\tsentence2\tscore\n");
    for i in 0..8 {
        let a = format!("{} {}", words[i % 8], words[(i * 7) % 8]);
        let b = format!("{} {}", words[(i + 1) % 8], words[(i * 3) % 8]);
        data.push_str(&format!("{a}\t{b}\t{}\n", (i % 6) as f64 * 0.8));
    }
    std::fs::write(d.join("train.tsv"), data).unwrap();
    dir
}

/// #86, #87, #88, #89: distill's own flags work after stage keys; a stage key without its
/// prefix is pointed to `--stage1.KEY`; a finished stage rerun with other keys is refused,
/// the keys named, and `--overwrite` reruns it.
#[test]
fn distill_flags_in_any_order_and_a_changed_finished_stage() {
    let f = fixture();
    let d = f.path();
    let recipe = format!(
        "teacher = \"{m}\"\nstudent = \"{m}\"\n[stage2]\nloss = \"cosent\"\nbatch_size = 4\n\
         dropout = 0.0\ndata = [{{ path = \"{}\", format = \"scored\" }}]\n",
        d.join("train.tsv").display(),
        m = d.join("tiny").display()
    );
    std::fs::write(d.join("d.toml"), recipe).unwrap();
    // #86: --run-dir after a stage key
    ok_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--stage2.lr",
            "1e-4",
            "--run-dir",
            "run",
        ],
    );
    let saved = d.join("run/stage2/recipe.toml");
    assert!(d.join("run/stage2/final/nest.json").is_file());
    let before = std::fs::read(&saved).unwrap();
    // the same keys: skipped; --recipe after a stage key works too
    let e = ok_in(
        d,
        &[
            "distill",
            "--stage2.lr",
            "1e-4",
            "--run-dir",
            "run",
            "--recipe",
            "d.toml",
        ],
    );
    assert!(
        e.contains("stage 2 is done") && e.contains("skipped"),
        "{e}"
    );
    // #89: other keys on a finished stage: refused, the key named, nothing changed
    let e = fails_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            "run",
            "--stage2.lr",
            "5e-4",
        ],
    );
    assert!(e.contains("lr") && e.contains("--overwrite"), "{e}");
    assert_eq!(std::fs::read(&saved).unwrap(), before);
    // #88 + #89: --overwrite after a stage key is a flag, and reruns the finished stage
    let e = ok_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            "run",
            "--stage2.lr",
            "5e-4",
            "--overwrite",
            "--stage2.max-length",
            "16",
            "--threads",
            "1",
        ],
    );
    assert!(e.contains("rerun"), "{e}");
    // (helper trial C) `--threads` after a recipe flag was refused as a recipe key; a stage
    // trained at another max_length now says its final model keeps it
    assert!(
        e.contains("truncates texts at 16 tokens, the max_length it was trained with"),
        "{e}"
    );
    let now = std::fs::read_to_string(&saved).unwrap();
    assert!(now.contains("0.0005"), "{now}");
    // #87: a stage key without its stage
    let e = fails_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            "run",
            "--lr",
            "1e-4",
        ],
    );
    assert!(
        e.contains("--stage1.lr") && e.contains("--stage2.lr"),
        "{e}"
    );
    // a stage that does not exist (it advised --stage1.stage3.lr)
    let e = fails_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            "run",
            "--stage3.lr",
            "1e-4",
        ],
    );
    assert!(
        e.contains("stages 1 and 2: --stage1.lr / --stage2.lr") && !e.contains("stage1.stage3"),
        "{e}"
    );
}

/// #78: `--dims` is checked before any model loads or anything is embedded; #82: an existing
/// adaptor folder is refused without `--overwrite`, left as it was.
#[test]
fn compress_checks_dims_first_and_refuses_an_existing_adaptor() {
    let f = tempfile::tempdir().unwrap();
    let d = f.path();
    // the model and the BEIR folder do not exist: the dims are wrong first
    let e = fails_in(
        d,
        &[
            "compress",
            "--method",
            "smec",
            "--dims",
            "50,96,384",
            "--model",
            "no-model",
            "--beir",
            "no-beir",
            "--out",
            "a",
        ],
    );
    assert!(e.contains("--dims") && e.contains("not a halving"), "{e}");
    assert!(!d.join("a").exists());
    std::fs::create_dir(d.join("p")).unwrap();
    std::fs::write(d.join("p/adaptor.json"), "{}").unwrap();
    let args = [
        "compress",
        "--dims",
        "4,8",
        "--out",
        "p",
        "--embeddings",
        "c.npy",
        "--queries",
        "q.npy",
        "--qrels",
        "q.tsv",
    ];
    let e = fails_in(d, &args);
    assert!(e.contains("--overwrite") && e.contains("p"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.join("p/adaptor.json")).unwrap(),
        "{}"
    );
    // with --overwrite it goes on (and fails on the missing embeddings, naming them)
    let e = fails_in(d, &[&args[..], &["--overwrite"]].concat());
    assert!(e.contains("c.npy"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.join("p/adaptor.json")).unwrap(),
        "{}"
    );
    // dims wider than the model: refused once the model loads, before its corpus is embedded
    // (Python's compress(dims=[999], model=, beir=) embedded SciFact for minutes first)
    write_tiny_model(&d.join("tiny"), &TinySpec::new(Architecture::Bert)).unwrap();
    std::fs::create_dir_all(d.join("beir/qrels")).unwrap();
    let corpus: String = (0..50)
        .map(|i| format!("{{\"_id\": \"d{i}\", \"text\": \"the cat {i}\"}}\n"))
        .collect();
    std::fs::write(d.join("beir/corpus.jsonl"), corpus).unwrap();
    std::fs::write(
        d.join("beir/queries.jsonl"),
        "{\"_id\": \"q\", \"text\": \"cat\"}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("beir/qrels/train.tsv"),
        "query-id\tcorpus-id\tscore\nq\td1\t1\n",
    )
    .unwrap();
    let wide = [
        "compress", "--method", "pca", "--dims", "999", "--model", "tiny", "--beir", "beir",
        "--cache", "cache", "--out", "w",
    ];
    let e = fails_in(d, &wide);
    assert!(
        e.contains("dim 999 is larger than the embeddings' 32 dims"),
        "{e}"
    );
    assert!(
        !d.join("cache").exists() && !d.join("w").exists(),
        "nothing embedded or written"
    );
}

/// #52, #53, #54: slimming to an exit layer or a default dim the model was not trained for
/// warns (one line), and the slim model's nest.json says so; the range error names the flag
/// the user typed.
#[test]
fn slim_warns_about_untrained_points() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    // no nest.json: only the full point is trained
    let e = ok_in(
        d,
        &[
            "slim",
            "--model",
            &tiny,
            "--keep-layers",
            "1",
            "--out",
            "s0",
        ],
    );
    assert!(
        e.contains("warning: layer 1") && e.contains("no nest.json"),
        "{e}"
    );
    // the slim model's record and `nest info` name the original's last layer as the trained one,
    // and do not claim the nest.json slim wrote is missing
    let meta = std::fs::read_to_string(d.join("s0/nest.json")).unwrap();
    assert!(meta.contains("(trained: [2])"), "{meta}");
    let o = nest_in(d, &["info", "s0"]);
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(
        info.contains("nest.json lists no trained layers") && !info.contains("no nest.json"),
        "{info}"
    );
    std::fs::write(
        d.join("tiny/nest.json"),
        r#"{"matryoshka_dims": [8, 16], "trained_layers": [2], "objective": "mrl"}"#,
    )
    .unwrap();
    let e = ok_in(
        d,
        &[
            "slim",
            "--model",
            &tiny,
            "--keep-layers",
            "1",
            "--dim",
            "8",
            "--out",
            "s1",
        ],
    );
    let warnings: Vec<&str> = e.lines().filter(|l| l.starts_with("warning")).collect();
    assert_eq!(warnings.len(), 1, "{e}");
    assert!(
        warnings[0].contains("layer 1") && warnings[0].contains("[2]"),
        "{e}"
    );
    assert!(!warnings[0].contains("dim 8"), "{e}");
    let meta = std::fs::read_to_string(d.join("s1/nest.json")).unwrap();
    assert!(meta.contains("never trained as an exit"), "{meta}");
    let e = ok_in(
        d,
        &[
            "slim",
            "--model",
            &tiny,
            "--keep-layers",
            "2",
            "--dim",
            "12",
            "--out",
            "s2",
        ],
    );
    assert!(
        e.contains("warning: dim 12 was never trained") && e.contains("[8, 16, 32]"),
        "{e}"
    );
    let e = ok_in(
        d,
        &[
            "slim",
            "--model",
            &tiny,
            "--keep-layers",
            "2",
            "--dim",
            "16",
            "--out",
            "s3",
        ],
    );
    assert!(!e.contains("warning"), "{e}");
    let e = fails_in(
        d,
        &[
            "slim",
            "--model",
            &tiny,
            "--keep-layers",
            "9",
            "--out",
            "s4",
        ],
    );
    assert!(e.contains("--keep-layers 9"), "{e}");
    // an --out that holds files is kept unless --overwrite; the model's own folder never
    let slim = |out: &str, extra: &[&str]| {
        let mut args = vec!["slim", "--model", &tiny, "--keep-layers", "1", "--out", out];
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    fn as_str(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let before = std::fs::read(d.join("s3/nest.json")).unwrap();
    let e = fails_in(d, &as_str(&slim("s3", &[])));
    assert!(
        e.contains("already holds files") && e.contains("--overwrite"),
        "{e}"
    );
    assert_eq!(std::fs::read(d.join("s3/nest.json")).unwrap(), before);
    ok_in(d, &as_str(&slim("s3", &["--overwrite"])));
    let e = fails_in(d, &as_str(&slim(&tiny, &["--overwrite"])));
    assert!(e.contains("the model's own folder"), "{e}");
    assert!(d.join("tiny/model.safetensors").exists());
    // --overwrite replaces a model, not a folder of other things (`--out .`)
    std::fs::create_dir_all(d.join("notes")).unwrap();
    std::fs::write(d.join("notes/a.txt"), "kept").unwrap();
    let e = fails_in(d, &as_str(&slim("notes", &["--overwrite"])));
    assert!(e.contains("holds files but no model"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.join("notes/a.txt")).unwrap(),
        "kept"
    );
}

/// #70: a finished `index build` leaves no `.NAME.lock` beside the index; #72: a funnel whose
/// later stage is coarser than an earlier one warns, a coarse-to-fine one does not.
#[test]
fn index_build_leaves_no_lock_and_a_reversed_funnel_warns() {
    let f = fixture();
    let d = f.path();
    std::fs::write(d.join("docs.txt"), "a cat\na dog\nthe mat\nmusic man\n").unwrap();
    let tiny = d.join("tiny").display().to_string();
    ok_in(
        d,
        &[
            "index",
            "build",
            "--model",
            &tiny,
            "--input",
            "docs.txt",
            "--dims",
            "8,32",
            "--precision",
            "float32,binary",
            "--out",
            "idx",
        ],
    );
    assert!(d.join("idx/index.json").is_file());
    assert!(
        !d.join(".idx.lock").exists(),
        "the build's lock was left behind"
    );
    let search = |funnel: &str| {
        ok_in(
            d,
            &[
                "search", "--index", "idx", "--query", "a cat", "--k", "2", "--funnel", funnel,
            ],
        )
    };
    let e = search("float32:32>binary:8");
    let w: Vec<&str> = e.lines().filter(|l| l.starts_with("warning")).collect();
    assert_eq!(w.len(), 1, "{e}");
    assert!(
        w[0].contains("coarser") && w[0].contains("fewer bits, fewer dims"),
        "{e}"
    );
    let e = search("float32:32>float32:8");
    assert!(e.contains("fewer dims") && !e.contains("fewer bits"), "{e}");
    // fewer dims but more bits is another trade, not a reversal: no warning either way round
    // (it used to advise each order in favour of the other)
    for funnel in ["binary:32>float32:8", "float32:8>binary:32"] {
        assert!(!search(funnel).contains("warning"), "{funnel}");
    }
    let e = search("binary:8>float32:32");
    assert!(!e.contains("warning"), "{e}");
    // hits carry only ids (a plain text's line numbers) unless the texts are stored
    let args = ["index", "build", "--model", &tiny, "--input", "docs.txt"];
    ok_in(
        d,
        &[&args[..], &["--store-text", "--out", "idx", "--overwrite"]].concat(),
    );
    let o = nest_in(
        d,
        &["search", "--index", "idx", "--query", "a cat", "--k", "4"],
    );
    let hits = String::from_utf8_lossy(&o.stdout);
    assert!(
        hits.contains(r#""id":"1","payload":{"text":"a cat"}"#),
        "{hits}"
    );
    // a BEIR queries.jsonl: each answer names its query's id, to join with qrels
    std::fs::write(
        d.join("q.jsonl"),
        "{\"_id\": \"q7\", \"text\": \"a cat\"}\n{\"_id\": \"q9\", \"text\": \"a dog\"}\n",
    )
    .unwrap();
    let o = nest_in(
        d,
        &[
            "search",
            "--index",
            "idx",
            "--queries",
            "q.jsonl",
            "--k",
            "1",
        ],
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["query_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q7", "q9"]);
    assert_eq!(lines[0]["hits"][0]["id"], "1");
}

/// #27: `advise` on a report made with `--latency-texts 0` ranks by memory and says so, and
/// prints no NaN latency (the Pareto front's NaN fix: `report::tests` in nest-eval).
#[test]
fn advise_without_latencies_ranks_by_memory() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    ok_in(
        d,
        &[
            "eval",
            "sts",
            "--model",
            &tiny,
            "--data",
            "train.tsv",
            "--dims",
            "8,16,32",
            "--latency-texts",
            "0",
            "--out",
            "rep",
        ],
    );
    let o = nest_in(
        d,
        &[
            "advise",
            "--report",
            "rep/report.json",
            "--min-score",
            "-1000",
        ],
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("no latency") && err.contains("ranked by memory"),
        "{err}"
    );
    assert!(
        out.contains("(by memory)") && out.contains("dim 8,"),
        "{out}"
    );
    assert!(!out.contains("NaN"), "{out}");
    // the chosen cell is not listed again among the alternatives (NaN != NaN)
    let first = out.lines().find(|l| l.starts_with("cheapest")).unwrap();
    let cell = first
        .split("layer ")
        .nth(1)
        .unwrap()
        .split(" ->")
        .next()
        .unwrap();
    let parts: Vec<&str> = cell.split(", ").collect();
    let dim = parts[1].trim_start_matches("dim ");
    let again = format!("layer {:>2}, dim {:>4}, {:<7} ->", parts[0], dim, parts[2]);
    assert!(!out.contains(&again), "{out}");
}

/// #10, #11: encode warns (one line) on a TSV or on JSON lines not named `.jsonl`; #6, #47:
/// invalid UTF-8 is reported once, with its line, in `encode` and in `train`.
#[test]
fn encode_warns_on_a_tsv_and_invalid_utf8_names_its_line_once() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    let encode = |input: &str| {
        ok_in(
            d,
            &[
                "encode", "--model", &tiny, "--input", input, "--output", "e.npy",
            ],
        )
    };
    let e = encode("train.tsv");
    let w: Vec<&str> = e.lines().filter(|l| l.starts_with("warning")).collect();
    assert!(w.len() == 1 && w[0].contains("looks like a TSV"), "{e}");
    std::fs::write(d.join("j.txt"), "{\"text\": \"hello\"}\n").unwrap();
    assert!(encode("j.txt").contains(".jsonl"));
    std::fs::write(d.join("ok.txt"), "hello\nworld\n").unwrap();
    assert!(!encode("ok.txt").contains("warning"));
    // a point the model was not trained for is allowed, and said (the server refuses it)
    let at = |layer: &str, dim: &str| {
        let args = [
            "encode", "--model", &tiny, "--input", "ok.txt", "--output", "p.npy",
        ];
        ok_in(d, &[&args[..], &["--layer", layer, "--dim", dim]].concat())
    };
    let e = at("1", "32");
    let w: Vec<&str> = e.lines().filter(|l| l.starts_with("warning")).collect();
    assert!(
        w.len() == 1
            && w[0].contains("--layer 1 is not a trained exit (trained: 2)")
            && !w[0].contains("--dim 32"),
        "{e}"
    );
    assert!(at("2", "8").contains("--dim 8 is not a trained dim (trained: 32)"));
    assert!(!at("2", "32").contains("warning"));
    std::fs::write(d.join("bad.txt"), b"hello\nw\xe9rld\n").unwrap();
    for args in [
        vec![
            "encode", "--model", &tiny, "--input", "bad.txt", "--output", "b.npy",
        ],
        vec![
            "train",
            "--model",
            &tiny,
            "--data",
            "bad.txt:single",
            "--loss",
            "simcse",
            "--run-dir",
            "r",
        ],
    ] {
        let e = fails_in(d, &args);
        assert!(e.contains("line 2") && e.contains("UTF-8"), "{e}");
        assert_eq!(e.lines().filter(|l| l.contains("UTF-8")).count(), 1, "{e}");
    }
    // #39: a loss/format mismatch in the recipe's words, with what the loss takes
    let e = fails_in(
        d,
        &[
            "train",
            "--model",
            &tiny,
            "--data",
            "train.tsv:scored",
            "--loss",
            "mnrl",
            "--run-dir",
            "r",
        ],
    );
    assert!(
        e.contains("format scored, which loss mnrl cannot use (loss mnrl takes pairs or triplets)"),
        "{e}"
    );
    // helper trial E: mined triplets whose negatives are the other rows' positives, 4 rows at
    // batch 2: "too few examples" (there were enough); the cause is the shared texts
    let rows: String = (0..4)
        .map(|i| {
            let neg = |k: usize| format!("p{}", (i + k) % 4);
            let row = serde_json::json!({"anchor": format!("q{i}"), "positive": neg(0),
                "negative_1": neg(1), "negative_2": neg(2), "negative_3": neg(3)});
            format!("{row}\n")
        })
        .collect();
    std::fs::write(d.join("mined.jsonl"), rows).unwrap();
    let e = fails_in(
        d,
        &[
            "train",
            "--model",
            &tiny,
            "--data",
            "mined.jsonl:triplets",
            "--loss",
            "mnrl",
            "--batch-size",
            "2",
            "--run-dir",
            "rm",
        ],
    );
    assert!(
        e.contains("no batch of 2 examples can be formed without a text twice in it")
            && e.contains("lower batch_size"),
        "{e}"
    );
}

/// #34, #38: a wrong-typed recipe value names its key and line; a list flag given as
/// `int8,binary` names the flag and shows the TOML form.
#[test]
fn type_errors_name_the_key_and_show_the_toml_list_form() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    std::fs::write(
        d.join("wt.toml"),
        format!("model = \"{tiny}\"\nbatch_size = \"four\"\n"),
    )
    .unwrap();
    let e = fails_in(d, &["train", "--recipe", "wt.toml"]);
    assert!(e.contains("line 2, key batch_size"), "{e}");
    // numbers separated by commas are a list since 2026-11-29; words still get the TOML form
    let e = fails_in(
        d,
        &["train", "--model", &tiny, "--quantization", "int8,binary"],
    );
    assert!(
        e.contains("--quantization") && e.contains(r#"--quantization '["int8", "binary"]'"#),
        "{e}"
    );
    // an objective is a table named by its kind: the form shown is one that works (it showed
    // '["2dmse"]', refused in turn), and following it trains
    let e = fails_in(d, &["train", "--model", &tiny, "--objective", "2dmse"]);
    let shown = r#"[{kind = "2dmse"}]"#;
    assert!(e.contains(&format!("--objective '{shown}'")), "{e}");
    let e = fails_in(d, &["train", "--model", &tiny, "--objective", shown]);
    assert!(!e.contains("objective"), "the form shown was refused: {e}");
}

/// #37: a key spelled as sentence-transformers or Hugging Face's trainer spells it gets Nest's
/// name ("did you mean"); a wrong-typed key in a distillation stage names its line in the
/// recipe file, in its own stage when both stages set it.
#[test]
fn unknown_keys_get_nests_name_and_stage_errors_their_line() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    std::fs::write(d.join("ok.toml"), format!("model = \"{tiny}\"\n")).unwrap();
    let e = fails_in(
        d,
        &["train", "--recipe", "ok.toml", "--learning-rate", "1e-4"],
    );
    assert!(
        e.contains(
            "--learning-rate: unknown field `learning_rate`; did you mean `lr`? (expected one of"
        ),
        "{e}"
    );
    let e = fails_in(d, &["train", "--recipe", "ok.toml", "--steps", "5"]);
    assert!(e.contains("did you mean `max_steps`?"), "{e}");
    let e = fails_in(d, &["train", "--recipe", "ok.toml", "--warmup-steps", "5"]);
    assert!(e.contains("did you mean warmup_ratio (a share"), "{e}");
    std::fs::write(
        d.join("hf.toml"),
        format!("model = \"{tiny}\"\nnum_train_epochs = 1\n"),
    )
    .unwrap();
    let e = fails_in(d, &["train", "--recipe", "hf.toml"]);
    assert!(
        e.contains("line 2, key num_train_epochs") && e.contains("did you mean `epochs`?"),
        "{e}"
    );
    let recipe = format!(
        "teacher = \"{tiny}\"\nstudent = \"{tiny}\"\n[stage1]\nloss = \"none\"\nlr = 1e-3\n\
         data = [{{ path = \"{t}\", format = \"single\" }}]\n\
         [stage2]\nloss = \"cosent\"\nlr = \"fast\"\n\
         data = [{{ path = \"{t}\", format = \"scored\" }}]\n",
        t = d.join("train.tsv").display(),
    );
    std::fs::write(d.join("st.toml"), recipe).unwrap();
    let e = fails_in(d, &["distill", "--recipe", "st.toml", "--run-dir", "run"]);
    assert!(
        e.contains("st.toml [stage2]") && e.contains("line 9, key lr"),
        "{e}"
    );
    assert!(!d.join("run").exists(), "nothing written");
}

/// #84: while the teacher fills its cache (minutes on a real corpus), distill says how far it is,
/// as lines that a log keeps too; a second run, all cached, encodes nothing.
#[test]
fn distill_reports_the_teachers_progress() {
    let f = fixture();
    let d = f.path();
    let recipe = format!(
        "teacher = \"{m}\"\nstudent = \"{m}\"\ncache_dir = \"cache\"\nteacher_max_length = 32\n[stage1]\nloss = \"none\"\n\
         batch_size = 4\nmax_steps = 1\nobjective = [{{ kind = \"distill\" }}]\n\
         data = [{{ path = \"{}\", format = \"single\" }}]\n",
        d.join("texts.tsv").display(),
        m = d.join("tiny").display()
    );
    std::fs::write(d.join("t.toml"), &recipe).unwrap();
    let words = ["the cat", "a dog", "sat on", "the mat", "a man", "music"];
    let texts: String = words.iter().map(|w| format!("{w}\n")).collect();
    std::fs::write(d.join("texts.tsv"), format!("text\n{texts}")).unwrap();
    let e = ok_in(
        d,
        &[
            "distill",
            "--recipe",
            "t.toml",
            "--stage",
            "1",
            "--run-dir",
            "a",
        ],
    );
    assert!(e.contains("texts encoded (100%"), "{e}");
    let e = ok_in(
        d,
        &[
            "distill",
            "--recipe",
            "t.toml",
            "--stage",
            "1",
            "--run-dir",
            "b",
        ],
    );
    assert!(!e.contains("texts encoded"), "all cached: {e}");
    // without cache_dir, the cache is where the run's first start kept it, from whichever
    // folder the run is taken up again (the default, .nest-cache/teacher, is relative)
    std::fs::write(
        d.join("u.toml"),
        recipe.replace("cache_dir = \"cache\"\n", ""),
    )
    .unwrap();
    let e = ok_in(
        d,
        &[
            "distill",
            "--recipe",
            "u.toml",
            "--stage",
            "1",
            "--run-dir",
            "c",
        ],
    );
    assert!(e.contains("texts encoded (100%"), "{e}");
    assert!(d.join(".nest-cache/teacher").is_dir());
    let elsewhere = tempfile::tempdir().unwrap();
    let (u, c) = (d.join("u.toml"), d.join("c"));
    let (u, c) = (u.display().to_string(), c.display().to_string());
    let again = [
        "distill",
        "--recipe",
        &u,
        "--stage",
        "1",
        "--run-dir",
        &c,
        "--overwrite",
    ];
    let e = ok_in(elsewhere.path(), &again);
    assert!(!e.contains("texts encoded"), "the first start's cache: {e}");
    assert!(e.contains("where this run's first start kept it"), "{e}");
    assert!(!elsewhere.path().join(".nest-cache").exists());
}

/// #14: usage errors exit 2 (clap's convention) and the README says so; #25: advise without a
/// floor names both ways to give one.
#[test]
fn usage_errors_exit_2_as_the_readme_says() {
    let readme = include_str!("../../../README.md");
    assert!(readme.contains("exits with code 2"));
    let d = tempfile::tempdir().unwrap();
    let o = nest_in(d.path(), &["encode", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    let o = nest_in(d.path(), &["advise", "--report", "r.json"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--min-score") && e.contains("--within"), "{e}");
}

/// #29: inspect's missing default data is named as the default of --data; #57: train with
/// nothing says what to pass; #74: search --index given the manifest file says it takes the
/// folder.
#[test]
fn defaults_and_wrong_paths_say_what_to_pass() {
    let d = tempfile::tempdir().unwrap();
    let e = fails_in(d.path(), &["inspect", "--model", "m"]);
    assert!(e.contains("the default of --data"), "{e}");
    let e = fails_in(d.path(), &["train"]);
    assert!(e.contains("--recipe FILE"), "{e}");
    std::fs::write(d.path().join("index.json"), "{}").unwrap();
    let e = fails_in(
        d.path(),
        &["search", "--index", "index.json", "--query", "a"],
    );
    assert!(e.contains("takes the index folder"), "{e}");
    // a relative --data-root says where it was looked for (helper trial C, U3)
    let args = [
        "eval",
        "--model",
        "m",
        "--tasks",
        "sts",
        "--data-root",
        "../nowhere",
    ];
    let e = fails_in(d.path(), &args);
    let at = d.path().parent().unwrap().join("nowhere");
    let want = format!(
        "--data-root ../nowhere ({} from the current folder)",
        at.display()
    );
    assert!(e.contains(&want), "{e}");
    // a queue smaller than the largest request: refused at the start (trial D: such requests
    // got 429 "retry later" for ever)
    let args = ["serve", "--model", "m", "--max-queued-inputs", "10"];
    let e = fails_in(d.path(), &args);
    assert!(
        e.contains("--max-queued-inputs 10 is below --max-client-batch-size 32"),
        "{e}"
    );
}

/// A misspelt `NEST_*` variable is said at the start (with the name meant), and the command
/// still runs; the variables Nest reads are not mentioned.
#[test]
fn a_misspelt_environment_variable_is_named_with_the_one_meant() {
    let f = fixture();
    let d = f.path();
    std::fs::write(d.join("ok.txt"), "hello\n").unwrap();
    let tiny = d.join("tiny").display().to_string();
    let args = [
        "encode", "--model", &tiny, "--input", "ok.txt", "--output", "e.npy",
    ];
    // the misspelt name is built, so that the scan of the names the code uses
    // (architecture.rs) does not count it as one
    let typo = format!("NEST_{}", "CUDA_GRAPH");
    let o = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .env("NEST_WORD_CACHE", "1")
        .env(&typo, "0")
        .current_dir(d)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let w: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(w.len(), 1, "{err}");
    assert!(
        w[0].contains(&format!("{typo} is set, but Nest reads no such variable"))
            && w[0].contains("did you mean NEST_CUDA_GRAPHS?"),
        "{err}"
    );
}

/// 2026-11-29: `nest mine --output neg.tsv` wrote JSON lines under a TSV name, which
/// `nest train --data neg.tsv:triplets` then refused; the name is now checked first, before
/// the model loads, and nothing is written. A folder that is not a model (a run's) says
/// where its model is.
#[test]
fn mine_output_names_its_format_and_a_run_folder_names_its_model() {
    let f = fixture();
    let d = f.path();
    let pairs = "anchor\tpositive\nthe cat\ta cat\nthe dog\ta dog\n";
    std::fs::write(d.join("pairs.tsv"), pairs).unwrap();
    let mine = |out| {
        [
            "mine",
            "--model",
            "tiny",
            "--queries",
            "pairs.tsv",
            "--output",
            out,
        ]
    };
    let e = fails_in(d, &mine("neg.tsv"));
    assert!(e.contains("neg.tsv") && e.contains("name it .jsonl"), "{e}");
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().starts_with("neg")),
        "nothing written: {left:?}"
    );
    ok_in(d, &mine("neg.jsonl"));
    std::fs::create_dir_all(d.join("run")).unwrap();
    std::fs::rename(d.join("tiny"), d.join("run/final")).unwrap();
    let e = fails_in(d, &["info", "--model", "run"]);
    assert!(e.contains("pass run/final"), "{e}");
}

/// 2026-11-29: `nest search --index` on a folder that is no index says so (a not-found error
/// still); `--filter` on an index built without `--payload` warns that nothing stored can match.
#[test]
fn search_names_a_folder_that_is_no_index_and_a_filter_without_payloads() {
    let f = fixture();
    let d = f.path();
    std::fs::write(
        d.join("docs.txt"),
        "the cat sat\nthe dog ran\nmusic on a mat\n",
    )
    .unwrap();
    let e = fails_in(d, &["search", "--index", "tiny", "--query", "cat"]);
    assert!(
        e.contains("tiny/index.json: the folder is not a Nest index"),
        "{e}"
    );
    let build = [
        "index", "build", "--model", "tiny", "--input", "docs.txt", "--out", "ix",
    ];
    ok_in(d, &build);
    let search = [
        "search",
        "--index",
        "ix",
        "--query",
        "cat",
        "--filter",
        r#"{"lang": "en"}"#,
    ];
    let err = ok_in(d, &search);
    assert!(err.contains("the index stores no payloads"), "{err}");
    // a filter that can match nothing says why (helper trial D: `[]` and exit 0, no hint)
    let docs = "{\"_id\": \"a\", \"text\": \"the cat\", \"year\": 2001}\n\
                {\"_id\": \"b\", \"text\": \"a dog\", \"year\": 2002}\n";
    std::fs::write(d.join("docs.jsonl"), docs).unwrap();
    let build = [
        "index",
        "build",
        "--model",
        "tiny",
        "--input",
        "docs.jsonl",
        "--payload",
        "--out",
        "py",
    ];
    ok_in(d, &build);
    for (filter, why) in [
        (
            r#"{"nokey": "a"}"#,
            "no document's payload has the key 'nokey'",
        ),
        (
            r#"{"year": "2001"}"#,
            "the payloads hold numbers under 'year' (2001, ...)",
        ),
        (r#"{"year": 1999}"#, "'year' holds 2001, 2002"),
    ] {
        let search = [
            "search", "--index", "py", "--query", "cat", "--filter", filter,
        ];
        let err = ok_in(d, &search);
        assert!(err.contains(why), "{filter}: {err}");
    }
    let err = ok_in(
        d,
        &[
            "search",
            "--index",
            "py",
            "--query",
            "cat",
            "--filter",
            r#"{"year": 2001}"#,
        ],
    );
    assert!(!err.contains("matched no document"), "{err}");
}

/// `--input -` reads standard input and `--output -` writes JSON lines to standard output, as
/// Unix tools do; the rows equal the file route's.
#[test]
fn encode_reads_standard_input_and_writes_standard_output() {
    use std::io::Write;
    let f = fixture();
    let d = f.path();
    std::fs::write(d.join("s.txt"), "the cat\na dog sat\n").unwrap();
    let args = [
        "encode", "--model", "tiny", "--input", "s.txt", "--output", "e.jsonl",
    ];
    ok_in(d, &args);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .current_dir(d)
        .args([
            "--threads",
            "1",
            "encode",
            "--model",
            "tiny",
            "--input",
            "-",
            "--output",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the cat\na dog sat\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("to standard output (JSON lines)"), "{err}");
    let file = std::fs::read_to_string(d.join("e.jsonl")).unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), file);
    assert_eq!(file.lines().count(), 2);
}

/// The default `--model` is relative to the current folder: run from anywhere else without
/// `--model`, the error says that it was the default, where it was looked for and what to pass
/// (it named a missing folder and suggested `scripts/setup.sh`, which had run).
#[test]
fn the_default_model_missing_here_says_it_was_the_default() {
    let f = tempfile::tempdir().unwrap();
    std::fs::write(f.path().join("in.txt"), "a text\n").unwrap();
    let e = fails_in(
        f.path(),
        &["encode", "--input", "in.txt", "--output", "e.npy"],
    );
    assert!(
        e.contains("the default when none is given") && e.contains("pass --model DIR"),
        "{e}"
    );
}

/// `nest eval --out rep` pasted with another `--model`: the report of the first model is kept
/// (byte for byte) unless `--overwrite`; the same model, however its path is written, replaces
/// its own report.
#[test]
fn eval_keeps_another_models_report_unless_overwrite() {
    let f = fixture();
    let d = f.path();
    write_tiny_model(&d.join("other"), &TinySpec::new(Architecture::Bert)).unwrap();
    let eval = |model: &str, extra: &[&str], ok: bool| {
        let args = [
            "eval",
            "sts",
            "--model",
            model,
            "--data",
            "train.tsv",
            "--dims",
            "8,32",
            "--latency-texts",
            "0",
            "--out",
            "rep",
        ];
        let args = [&args[..], extra].concat();
        if ok {
            ok_in(d, &args)
        } else {
            fails_in(d, &args)
        }
    };
    eval("tiny", &[], true);
    eval("./tiny/", &[], true);
    let before = std::fs::read(d.join("rep/report.json")).unwrap();
    let err = eval("other", &[], false);
    assert!(
        err.contains("--out: rep/report.json holds the report of another model (./tiny/")
            && err.contains("pass --overwrite"),
        "{err}"
    );
    assert_eq!(std::fs::read(d.join("rep/report.json")).unwrap(), before);
    eval("other", &["--overwrite"], true);
    let after = std::fs::read_to_string(d.join("rep/report.json")).unwrap();
    assert!(after.contains("\"path\": \"other\""), "{after}");
}

/// An output that is one of the command's inputs, or a folder holding one, is refused before
/// anything is written, `--overwrite` or not: the input is left byte-identical.
#[test]
fn an_output_never_replaces_an_input() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    std::fs::create_dir_all(d.join("idx")).unwrap();
    let docs = "{\"id\": \"a\", \"text\": \"the cat\"}\n{\"id\": \"b\", \"text\": \"a dog\"}\n";
    std::fs::write(d.join("idx/docs.jsonl"), docs).unwrap();
    let q = "{\"query\": \"the cat\", \"positive\": \"a cat sat\"}\n";
    std::fs::write(d.join("q.jsonl"), q).unwrap();
    let config = std::fs::read(d.join("tiny/config.json")).unwrap();
    let m = ["--model", tiny.as_str()];
    let refused = |args: &[&str], what: &str| {
        let err = fails_in(d, &[args, &m[..]].concat());
        assert!(
            err.contains(what) && err.contains("would destroy the input"),
            "{err}"
        );
    };
    refused(
        &[
            "encode",
            "--input",
            "idx/docs.jsonl",
            "--output",
            "idx/docs.jsonl",
        ],
        "--output: idx/docs.jsonl is the --input idx/docs.jsonl",
    );
    let mine = ["mine", "--queries", "q.jsonl", "--output", "./q.jsonl"];
    refused(&mine, "is the --queries q.jsonl");
    refused(&[&mine[..], &["--overwrite"]].concat(), "is the --queries");
    let index = [
        "index",
        "build",
        "--input",
        "idx/docs.jsonl",
        "--out",
        "idx",
        "--overwrite",
    ];
    refused(&index, "--out: idx holds the --input idx/docs.jsonl");
    let into_model = [
        "index",
        "build",
        "--input",
        "q.jsonl",
        "--out",
        &tiny,
        "--overwrite",
    ];
    refused(&into_model, "is the --model");
    let compress = [
        "compress",
        "--method",
        "smec",
        "--dims",
        "8,16",
        "--embeddings",
        "idx/docs.jsonl",
        "--queries",
        "q.jsonl",
        "--qrels",
        "q.jsonl",
        "--out",
        "idx",
        "--overwrite",
    ];
    let err = fails_in(d, &compress);
    assert!(err.contains("--out: idx holds the --embeddings"), "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("idx/docs.jsonl")).unwrap(),
        docs
    );
    assert_eq!(std::fs::read_to_string(d.join("q.jsonl")).unwrap(), q);
    assert_eq!(std::fs::read(d.join("tiny/config.json")).unwrap(), config);
}

/// Helper trial D: an index records its model folder absolutely (a search from another folder
/// found no model, or another folder's of that name) and a hash of its weights (retrained in
/// place, the queries were embedded by other weights than the documents, silently); a document
/// without text, or an id holding a NUL (pgvector refused the whole export later), is refused
/// at the build, naming its line.
#[test]
fn an_index_knows_its_model_from_anywhere_and_refuses_documents_it_cannot_serve() {
    let f = fixture();
    let d = f.path();
    let docs =
        "{\"_id\": \"a\", \"text\": \"the cat sat\"}\n{\"_id\": \"b\", \"text\": \"a dog\"}\n";
    std::fs::write(d.join("docs.jsonl"), docs).unwrap();
    let build = |input: &str, out: &str| {
        let args = [
            "index", "build", "--model", "tiny", "--input", input, "--out", out,
        ];
        nest_in(d, &args)
    };
    assert!(build("docs.jsonl", "idx").status.success());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("idx/index.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["source"]["model"],
        d.join("tiny").display().to_string()
    );
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    let search = ["search", "--index", "../idx", "--query", "cat", "--k", "1"];
    let err = ok_in(&d.join("elsewhere"), &search);
    assert!(!err.contains("warning"), "{err}");
    // the folder retrained in place (here: another tiny model's weights)
    let other = TinySpec {
        seed: 8,
        ..TinySpec::new(Architecture::Bert)
    };
    write_tiny_model(&d.join("other"), &other).unwrap();
    std::fs::copy(
        d.join("other/model.safetensors"),
        d.join("tiny/model.safetensors"),
    )
    .unwrap();
    let err = ok_in(&d.join("elsewhere"), &search);
    assert!(
        err.contains("holds other weights than those that embedded"),
        "{err}"
    );
    for (line, says) in [
        (
            "{\"_id\": \"e\", \"text\": \"\"}",
            "line 2: id \"e\": text is empty",
        ),
        (
            "{\"_id\": \"n\\u0000x\", \"text\": \"t\"}",
            "must hold no NUL character",
        ),
    ] {
        std::fs::write(
            d.join("bad.jsonl"),
            format!("{}\n{line}\n", docs.lines().next().unwrap()),
        )
        .unwrap();
        let o = build("bad.jsonl", "bad");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{err}");
        assert!(!d.join("bad").exists());
    }
}

/// `--resume` where there is no run (a mistyped --run-dir): `nest train` said "recipe.toml: No
/// such file", `nest distill` started a new run from scratch without a word (helper trial E);
/// both now say there is no run to resume, and write nothing.
#[test]
fn a_resume_of_nothing_says_so_and_writes_nothing() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    let e = fails_in(d, &["train", "--resume", "runs/typo"]);
    assert!(
        e.contains("runs/typo: no run to resume here (no recipe.toml)"),
        "{e}"
    );
    let recipe = format!(
        "teacher = \"{tiny}\"\nstudent = \"{tiny}\"\n[stage1]\nloss = \"none\"\n\
         data = [{{ path = \"train.tsv\", format = \"scored\" }}]\n\
         objective = [{{ kind = \"distill\" }}]\n"
    );
    std::fs::write(d.join("d.toml"), recipe).unwrap();
    let e = fails_in(
        d,
        &[
            "distill",
            "--recipe",
            "d.toml",
            "--run-dir",
            "runs/typo",
            "--resume",
            "--stage",
            "1",
        ],
    );
    assert!(e.contains("no run to resume here (no such folder)"), "{e}");
    assert!(!d.join("runs").exists());
}

/// A stage's `projection` over a student that already has a Dense head: refused before any
/// stage trains (stage 2 refused it after stage 1 had trained: helper trial E).
#[test]
fn a_projection_over_a_students_head_is_refused_before_training() {
    let f = fixture();
    let d = f.path();
    let tiny = d.join("tiny").display().to_string();
    std::fs::write(
        d.join("texts.txt"),
        "the cat sat\na dog ran\nthe sun\nsome rain\n",
    )
    .unwrap();
    let recipe = format!(
        "teacher = \"{tiny}\"\nstudent = \"{tiny}\"\nteacher_max_length = 64\n\
         [stage1]\nloss = \"none\"\nbatch_size = 2\nmax_steps = 1\nsave_every = 0\n\
         data = [{{ path = \"texts.txt\", format = \"single\" }}]\n\
         objective = [{{ kind = \"distill\" }}]\n\
         [stage2]\nloss = \"cosent\"\nmax_steps = 1\nsave_every = 0\n\
         data = [{{ path = \"train.tsv\", format = \"scored\" }}]\n"
    );
    std::fs::write(d.join("s2.toml"), &recipe).unwrap();
    let long = recipe.replace("teacher_max_length = 64\n", "");
    std::fs::write(d.join("long.toml"), long).unwrap();
    let headed = [
        "distill",
        "--recipe",
        "s2.toml",
        "--stage",
        "2",
        "--run-dir",
        "h",
    ];
    let o = nest_in(d, &[&headed[..], &["--stage2.projection", "16"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let student = d.join("h/stage2/final").display().to_string();
    let again = [
        "distill",
        "--recipe",
        "s2.toml",
        "--run-dir",
        "p",
        "--student",
        &student,
        "--stage2.projection",
        "8",
    ];
    let e = fails_in(d, &again);
    assert!(
        e.contains("projection = 8: the student")
            && e.contains("already has a Dense head (32 -> 16)"),
        "{e}"
    );
    assert!(!d.join("p").exists());
    // the teacher's errors as the student's: a run folder names the model below it, a max
    // length past the teacher's position table names teacher_max_length (trial E U3)
    let stage1 = [
        "distill",
        "--recipe",
        "s2.toml",
        "--stage",
        "1",
        "--run-dir",
    ];
    let e = fails_in(d, &[&stage1[..], &["t1", "--teacher", "h"]].concat());
    assert!(e.contains("the folder holds a model below it"), "{e}");
    let long = [
        "distill",
        "--recipe",
        "long.toml",
        "--stage",
        "1",
        "--run-dir",
        "t2",
    ];
    let e = fails_in(d, &long);
    assert!(
        e.contains("teacher_max_length: 128 is outside 1..=64"),
        "{e}"
    );
    // odd pairs and unused teachers are said (U4, U5): here the teacher is the student
    let o = nest_in(d, &[&stage1[..], &["n1"]].concat());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && said.contains("note: the teacher is the student itself"),
        "{said}"
    );
    let hsic = ["--stage1.objective", "[{kind = \"hsic\"}]"];
    let o = nest_in(d, &[&stage1[..], &["n2"], &hsic[..]].concat());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && said.contains("has no distill term: the teacher is not used"),
        "{said}"
    );
    assert!(!said.contains("teacher cache"), "{said}");
}
