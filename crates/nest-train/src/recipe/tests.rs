//! Unit tests of recipe loading, overrides and validation.
use super::*;
use std::path::Path;

fn write(s: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.toml");
    std::fs::write(&p, s).unwrap();
    (d, p)
}

/// `Recipe::load` with command-line style `--key value` / `--key=value` pairs (the CLI's own
/// parser lives in nest-cli; this is the tests' shorthand for the same overrides).
fn load(path: Option<&Path>, flags: &[String]) -> crate::Result<Recipe> {
    Recipe::load(path, &flag_overrides(flags))
}

pub(crate) fn flag_overrides(flags: &[String]) -> Overrides {
    let mut pairs = Vec::new();
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        let f = f.strip_prefix("--").expect("a --key flag");
        match f.split_once('=') {
            Some((k, v)) => pairs.push((k, v)),
            None => pairs.push((f, it.next().expect("a value").as_str())),
        }
    }
    Overrides::from_text(pairs)
}

const BASE: &str = "model = \"m\"\nloss = \"cosent\"\nmatryoshka_dims = [16, 32]\n[[data]]\npath = \"a.tsv\"\nformat = \"scored\"\n";

#[test]
fn loads_with_flag_overrides() {
    let (_d, p) = write(BASE);
    let r = load(
        Some(&p),
        &[
            "--lr".into(),
            "3e-5".into(),
            "--batch-size=16".into(),
            "--matryoshka-dims".into(),
            "[8, 16, 32]".into(),
        ],
    )
    .unwrap();
    assert_eq!(r.lr, 3e-5);
    assert_eq!(r.batch_size, 16);
    assert_eq!(r.matryoshka_dims, vec![8, 16, 32]);
    assert_eq!(r.scale, 20.0);
    let r = load(
        None,
        &[
            "--model".into(),
            "m".into(),
            "--loss".into(),
            "mnrl".into(),
            "--data".into(),
            "x.tsv:triplets:2".into(),
        ],
    )
    .unwrap();
    assert_eq!(r.data[0].format, DataFormat::Triplets);
    assert_eq!(r.data[0].weight, 2.0);
}

#[test]
fn unknown_keys_are_named_with_the_valid_ones() {
    let (_d, p) = write(&format!("learning_rate = 1\n{BASE}"));
    let e = load(Some(&p), &[]).unwrap_err().to_string();
    assert!(e.contains("learning_rate") && e.contains("lr"), "{e}");
    let (_d, p) = write(BASE);
    let e = load(Some(&p), &["--bogus".into(), "1".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus") && e.contains("batch_size"), "{e}");
}

#[test]
fn bad_values_are_refused() {
    let (_d, p) = write(BASE);
    let e = load(Some(&p), &["--matryoshka-dims".into(), "[32, 16]".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("increasing"), "{e}");
    let e = load(Some(&p), &["--loss".into(), "mnrl".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot use"), "{e}");
    let e = load(Some(&p), &["--lr".into(), "-1".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("lr must be > 0"), "{e}");
}

#[test]
fn objective_components_are_parsed_and_checked() {
    let (_d, p) = write(&format!(
        "{BASE}[[objective]]\nkind = \"mrl\"\n[[objective]]\nkind = \"2dmse\"\nkl_temperature = 1.0\nweight = 0.5\n[[objective]]\nkind = \"ese\"\n"
    ));
    let r = load(Some(&p), &[]).unwrap();
    assert_eq!(r.objective.len(), 3);
    match &r.objective[1] {
        ObjectiveSpec::TwoD(c) => {
            assert_eq!(c.kl_temperature, 1.0);
            assert_eq!(c.weight, 0.5);
            assert_eq!(c.layers_per_step, 1);
            assert!(c.align_prefix && c.detach_teacher);
        }
        o => panic!("{o:?}"),
    }
    // the saved recipe reads back the same
    let again: Recipe = toml::from_str(&r.to_toml()).unwrap();
    assert_eq!(again, r);
    // unknown keys name the valid ones; unknown kinds name the kinds
    let (_d, p) = write(&format!(
        "{BASE}[[objective]]\nkind = \"2dmse\"\nkl_temp = 1\n"
    ));
    let e = load(Some(&p), &[]).unwrap_err().to_string();
    assert!(e.contains("kl_temp") && e.contains("kl_temperature"), "{e}");
    let (_d, p) = write(&format!("{BASE}[[objective]]\nkind = \"3dmse\"\n"));
    let e = load(Some(&p), &[]).unwrap_err().to_string();
    assert!(
        e.contains("3dmse") && e.contains("2dmse") && e.contains("ese"),
        "{e}"
    );
    // values are checked
    let e = load(
        Some(&p),
        &[
            "--objective".into(),
            "[{kind = \"2dmse\", dims = [32, 16]}]".into(),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("objective[0] (2dmse)") && e.contains("increasing"),
        "{e}"
    );
    let cold = "[{kind = \"distill\", temperature = 1e-9}]";
    for (objective, says) in [
        ("[{kind = \"ese\", weight = 0}]", "weight must be > 0"),
        (cold, "temperature 1e-9 is below 0.001"),
    ] {
        let args = ["--objective".into(), objective.into()];
        let e = load(Some(&p), &args).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}

#[test]
fn differences_skip_resumable_keys() {
    let (_d, p) = write(BASE);
    let a = load(Some(&p), &[]).unwrap();
    let b = load(
        Some(&p),
        &["--epochs".into(), "3".into(), "--lr".into(), "1e-4".into()],
    )
    .unwrap();
    let d = a.differences(&b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].starts_with("lr:"));
}

#[test]
fn every_shipped_recipe_loads_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let what = path.display();
        if text.contains("[stage1]") {
            let (recipe, _, _) = crate::distill::DistillRecipe::load(&path, &Overrides::new())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            for stage in [1, 2] {
                recipe
                    .stage(stage, Path::new("models/student"), &Overrides::new())
                    .unwrap_or_else(|e| panic!("{what} stage {stage}: {e}"));
            }
        } else {
            load(Some(&path), &[]).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        n += 1;
    }
    assert!(
        n >= 10,
        "expected the shipped recipes in {}, found {n}",
        dir.display()
    );
}

#[test]
fn data_a_script_makes_names_the_script_when_missing_and_stays_out_of_the_identity() {
    let with = BASE.replace(
        "format = \"scored\"\n",
        "format = \"scored\"\nmade_by = \"python3 scripts/make.py\"\n",
    );
    let (_d, p) = write(&with);
    let r = load(Some(&p), &[]).unwrap();
    let (_e, q) = write(BASE);
    let plain = load(Some(&q), &[]).unwrap();
    // the recipes' paths resolve against their own (different) folders
    let dirless = |r: &Recipe, d: &Path| r.to_toml().replace(&d.display().to_string(), "DIR");
    assert_eq!(
        dirless(&r, _d.path()),
        dirless(&plain, _e.path()),
        "made_by is not part of the identity"
    );
    let mut spec = r.data[0].clone();
    spec.path = _d.path().join("missing.tsv");
    let e = crate::data::read_source(&spec).unwrap_err().to_string();
    assert!(
        e.contains("missing.tsv") && e.contains("made by `python3 scripts/make.py`"),
        "{e}"
    );
}

#[test]
fn a_bad_eval_grid_fails_at_load_naming_the_key() {
    let (_d, p) = write(BASE);
    for (flag, key) in [
        ("--eval-dims", "eval_dims"),
        ("--eval-layers", "eval_layers"),
    ] {
        let e = load(Some(&p), &[flag.into(), "16,abc".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("abc"), "{e}");
    }
    // well-formed values pass; their ranges are checked against the model later
    load(Some(&p), &["--eval-dims".into(), "16,4096".into()]).unwrap();
}

/// A layer or dim list key takes every form a user writes (text, one number, an array; a flag's
/// `64,384`), and a list flag takes numbers separated by commas.
#[test]
fn list_keys_take_text_numbers_and_arrays() {
    // (written, read) for eval_layers, then for eval_dims
    for (layers, dims) in [
        (("\"2-4\"", "2-4"), ("\"16,32\"", "16,32")),
        (("6", "6"), ("32", "32")),
        (("[2, 4, 6]", "2,4,6"), ("[16, 32]", "16,32")),
    ] {
        let keys = format!(
            "eval_layers = {}\neval_dims = {}\n[[data]]",
            layers.0, dims.0
        );
        let (_d, p) = write(&BASE.replacen("[[data]]", &keys, 1));
        let r = load(Some(&p), &[]).unwrap();
        assert_eq!(
            (r.eval_layers.as_str(), r.eval_dims.as_str()),
            (layers.1, dims.1)
        );
    }
    let (_d, p) = write(&BASE.replacen("[[data]]", "eval_layers = 2.5\n[[data]]", 1));
    let e = load(Some(&p), &[]).unwrap_err().to_string();
    assert!(e.contains("eval_layers") && e.contains("[2, 4, 6]"), "{e}");
    let (_d, p) = write(BASE);
    let flags = [
        "--eval-layers",
        "3",
        "--matryoshka-dims",
        "16, 32",
        "--eval-dims",
        "16,32",
    ];
    let r = load(Some(&p), &flags.map(String::from)).unwrap();
    assert_eq!(r.eval_layers, "3");
    assert_eq!(r.eval_dims, "16,32");
    assert_eq!(r.matryoshka_dims, vec![16, 32]);
}

/// Every quantization key's reading and refusal in one table (81 lines: the refusals are one
/// list of (flags, message) rows read top to bottom; split, each part would rebuild the recipes).
#[test]
// long: one table of (flags, message) rows (the reason is in the doc above)
fn quantization_keys_are_checked_naming_key_and_line() {
    let (_d, p) = write(&format!(
        "quantization = [\"int8\", \"binary\"]\nquantization_weight = 0.5\n{BASE}"
    ));
    let r = load(Some(&p), &[]).unwrap();
    let q = r.quantization();
    assert!(q.int8 && q.binary && q.weight == 0.5);
    assert!(q.binary_scale.is_none() && q.spread == 0.0);
    let levers = [
        "--quantization-binary-scale".to_string(),
        "5".into(),
        "--quantization-spread".into(),
        "1".into(),
    ];
    let q = load(Some(&p), &levers).unwrap().quantization();
    assert_eq!((q.binary_scale, q.spread), (Some(5.0), 1.0));
    assert!(r
        .cautions()
        .iter()
        .any(|c| c.starts_with("note: quantization:")));
    let again: Recipe = toml::from_str(&r.to_toml()).unwrap();
    assert_eq!(again, r);
    // off by default, and then absent from the saved recipe (older runs resume unchanged)
    let (_e, plain) = write(BASE);
    let r = load(Some(&plain), &[]).unwrap();
    assert!(!r.quantization().is_on() && !r.to_toml().contains("quantization"));
    // an unknown precision names the key, its line and the valid names
    let (_f, p) = write(&format!(
        "lr = 1e-5\nquantization = [\"int8\", \"int4\"]\n{BASE}"
    ));
    let e = load(Some(&p), &[]).unwrap_err().to_string();
    assert!(
        e.contains("line 2, key quantization") && e.contains("int4") && e.contains("binary"),
        "{e}"
    );
    let e = load(
        Some(&plain),
        &["--quantization".into(), "[\"float16\"]".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--quantization") && e.contains("float16"), "{e}");
    for (flags, says) in [
        (
            vec!["--quantization", "[\"int8\", \"int8\"]"],
            "lists int8 twice",
        ),
        (vec!["--quantization-weight", "2"], "quantization is empty"),
        (
            vec![
                "--quantization",
                "[\"binary\"]",
                "--quantization-weight",
                "0",
            ],
            "quantization_weight must be > 0",
        ),
        (
            vec![
                "--quantization",
                "[\"int8\"]",
                "--quantization-binary-scale",
                "5",
            ],
            "quantization_binary_scale is set but quantization does not list \"binary\"",
        ),
        (
            vec![
                "--quantization",
                "[\"binary\"]",
                "--quantization-spread",
                "-1",
            ],
            "quantization_spread must be > 0",
        ),
    ] {
        let flags: Vec<String> = flags.into_iter().map(String::from).collect();
        let e = load(Some(&plain), &flags).unwrap_err().to_string();
        assert!(e.contains(says), "{flags:?}: {e}");
    }
}

/// A flag's data path without `:FORMAT` (here unreadable; a readable one: `data/infer.rs`) reads
/// as pairs; a loss that takes another format says how to name it. An explicit other format
/// gets no such advice.
#[test]
fn a_data_flag_without_its_format_is_told_how_to_name_it() {
    let (_d, p) = write(BASE);
    let e = load(Some(&p), &["--data".into(), "s.tsv".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is format pairs") && e.contains("`--data s.tsv:scored` as a flag"),
        "{e}"
    );
    let flags = ["--data", "s.tsv:single"].map(String::from);
    let e = load(Some(&p), &flags).unwrap_err().to_string();
    assert!(e.ends_with("(loss cosent takes scored)"), "{e}");
}

/// A recipe given as flags alone that lacks a required key names that key and the flag that
/// gives it (it blamed the first flag given: `--batch-size: missing field `loss``).
#[test]
fn a_missing_key_is_named_not_the_first_flag() {
    let flags: Vec<String> = ["--batch-size", "8", "--model", "m", "--data", "a.tsv:pairs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let e = load(None, &flags).unwrap_err().to_string();
    assert!(
        e.contains("sets no `loss`") && e.contains("--loss VALUE") && !e.contains("--batch-size"),
        "{e}"
    );
    // a wrong value is still located at its flag
    let mut bad = flags.clone();
    bad.extend(["--loss".to_string(), "nope".to_string()]);
    let e = load(None, &bad).unwrap_err().to_string();
    assert!(e.contains("--loss"), "{e}");
}
