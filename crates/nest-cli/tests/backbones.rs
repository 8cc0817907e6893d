//! Every new backbone trains and exports like MiniLM (issue 22): on the tiny random models of
//! `tests/fixtures/<arch>-tiny` (made by transformers; parity in crates/nest-model/tests), a
//! 3-step MRL run (CoSENT at dims 8 and 32, the same batch each step) lowers the loss; the
//! exported `final/` loads back in Nest with the architecture's pooling and prompts, encodes at
//! an early exit and a prefix, and differs from the untrained model; `nest slim` of it loads too.

use std::path::{Path, PathBuf};
use std::process::Command;

fn nest(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) {
    let (good, err) = nest(args);
    assert!(good, "nest {args:?} failed:\n{err}");
}

fn fixture(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{arch}-tiny/model"))
}

fn jsonl_vectors(p: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

fn trains_and_exports(arch: &str) {
    let d = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.display().to_string();
    let pairs = [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.6),
        (
            "A woman is slicing an onion.",
            "Someone cuts an onion.",
            4.0,
        ),
        ("The cat sat on the mat.", "The dog sat on the log.", 1.8),
        ("Stock markets fell sharply.", "A new species of frog.", 0.1),
        ("Hi", "End.", 0.5),
        ("The quick brown fox jumps.", "A fox jumps quickly.", 3.9),
        (
            "Numbers: 3.14159 and 42%.",
            "Scientists discovered a frog.",
            0.2,
        ),
        ("Two sentences here.", "And a second one!", 1.0),
    ];
    let mut data = String::from("sentence1\tsentence2\tscore\n");
    for (a, b, y) in pairs {
        data.push_str(&format!("{a}\t{b}\t{y}\n"));
    }
    let train = d.path().join("train.tsv");
    std::fs::write(&train, data).unwrap();
    let recipe = format!(
        "model = \"{}\"\nloss = \"cosent\"\nmatryoshka_dims = [8, 32]\nbatch_size = 8\nepochs = 3\nlr = 1e-3\nwarmup_ratio = 0.0\n[[data]]\npath = \"{}\"\nformat = \"scored\"\n",
        s(&fixture(arch)),
        s(&train)
    );
    let r = d.path().join("r.toml");
    std::fs::write(&r, recipe).unwrap();
    let run = d.path().join("run");
    ok(&[
        "--threads",
        "1",
        "train",
        "--recipe",
        &s(&r),
        "--run-dir",
        &s(&run),
    ]);
    let losses: Vec<f64> = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("loss").and_then(|x| x.as_f64()))
        .collect();
    assert!(losses.len() >= 3, "{arch}: {losses:?}");
    assert!(
        losses.last().unwrap() < losses.first().unwrap(),
        "{arch}: the loss did not go down: {losses:?}"
    );
    let input = d.path().join("in.txt");
    std::fs::write(
        &input,
        "A man is playing a guitar.\nThe cat sat on the mat.\n",
    )
    .unwrap();
    let (before, after) = (d.path().join("before.jsonl"), d.path().join("after.jsonl"));
    let point = ["--layer", "2", "--dim", "16"];
    let final_ = run.join("final");
    for (model, out) in [(fixture(arch), &before), (final_.clone(), &after)] {
        let mut args = vec!["encode", "--model"];
        let (m, o, i) = (s(&model), s(out), s(&input));
        args.extend([m.as_str(), "--input", i.as_str(), "--output", o.as_str()]);
        args.extend(point);
        ok(&args);
    }
    let (b, a) = (jsonl_vectors(&before), jsonl_vectors(&after));
    assert_eq!((a.len(), a[0].len()), (2, 16), "{arch}");
    let diff: f64 = a[0].iter().zip(&b[0]).map(|(x, y)| (x - y).abs()).sum();
    assert!(diff > 1e-4, "{arch}: training changed nothing");
    let slim = d.path().join("slim");
    ok(&[
        "slim",
        "--model",
        &s(&final_),
        "--keep-layers",
        "2",
        "--out",
        &s(&slim),
    ]);
    // the slim model holds only the kept layers' weights
    let size = |p: &Path| {
        std::fs::metadata(p.join("model.safetensors"))
            .unwrap()
            .len()
    };
    assert!(size(&slim) < size(&final_), "{arch}: slim kept every layer");
    let out = d.path().join("slim.jsonl");
    ok(&[
        "encode",
        "--model",
        &s(&slim),
        "--input",
        &s(&input),
        "--output",
        &s(&out),
    ]);
    let (_, info) = nest(&["info", "--model", &s(&slim), "--json"]);
    let _ = info;
    // the Dense modules (EmbeddingGemma's two) are exported in order, each in its own folder
    let modules = std::fs::read_to_string(final_.join("modules.json")).unwrap();
    let source = std::fs::read_to_string(fixture(arch).join("modules.json")).unwrap();
    for folder in ["2_Dense", "3_Dense"] {
        assert_eq!(
            modules.contains(folder),
            source.contains(folder),
            "{arch}: {folder}"
        );
    }
}

#[test]
fn xlm_roberta_trains_and_exports() {
    trains_and_exports("xlmr");
}

#[test]
fn modernbert_trains_and_exports() {
    trains_and_exports("modernbert");
}

#[test]
fn qwen3_trains_and_exports() {
    trains_and_exports("qwen3");
}

#[test]
fn gemma3_trains_and_exports() {
    trains_and_exports("gemma3");
}

#[test]
fn embeddinggemma_trains_and_exports() {
    trains_and_exports("embeddinggemma");
}

/// `nest eval` reads each side of a task with its prompt, as sentence-transformers'
/// `encode_query` / `encode_document` do: on the tiny EmbeddingGemma (prompts `query` and
/// `document`), retrieval queries and documents get them without a flag, and the report records
/// them; naming the same prompts gives the same cells; `--prompt-name query` changes the STS
/// similarities; an unknown prompt name is an error naming the flag.
#[test]
fn eval_reads_each_side_with_its_prompt() {
    let d = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.display().to_string();
    let data = d.path().join("data");
    let w = |rel: &str, text: &str| {
        let p = data.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("stsb/test.tsv", "sentence1\tsentence2\tscore\nthe cat sat\tthe cat sat on the mat\t4.5\na man is playing\ta man is playing music\t4.0\ndog\tmusic\t0.2\nthe dog sat\ta cat sat\t2.0\n");
    w("sick-r/test.tsv", "sentence1\tsentence2\tscore\nthe cat sat\ta cat sat\t4.0\ndog\tmusic\t0.5\na frog\tthe frog jumps\t3.0\n");
    w("scifact/corpus.jsonl", "{\"_id\":\"1\",\"title\":\"cats\",\"text\":\"the cat sat on the mat\"}\n{\"_id\":\"2\",\"text\":\"a man is playing music\"}\n{\"_id\":\"3\",\"text\":\"the dog is playing\"}\n{\"_id\":\"4\",\"text\":\"a frog jumps\"}\n");
    w(
        "scifact/queries.jsonl",
        "{\"_id\":\"q1\",\"text\":\"cat on mat\"}\n{\"_id\":\"q2\",\"text\":\"music\"}\n{\"_id\":\"q3\",\"text\":\"frog\"}\n",
    );
    w(
        "scifact/qrels/test.tsv",
        "query-id\tcorpus-id\tscore\nq1\t1\t1\nq2\t2\t1\nq3\t4\t1\n",
    );
    let model = s(&fixture("embeddinggemma"));
    let eval = |name: &str, extra: &[&str]| -> serde_json::Value {
        let out = d.path().join(name);
        let (root, o) = (s(&data), s(&out));
        let mut args = vec!["eval", "--model", &model, "--data-root", &root];
        args.extend(["--tasks", "sts,retrieval", "--latency-texts", "0"]);
        args.extend(["--out", &o]);
        args.extend(extra);
        ok(&args);
        let text = std::fs::read_to_string(out.join("report.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let auto = eval("auto", &[]);
    let prompts = &auto["model"]["prompts"];
    assert_eq!(prompts["query"], "task: search result | query: ");
    assert_eq!(prompts["document"], "title: none | text: ");
    assert!(prompts["text"].is_null(), "{prompts}");
    let named = eval(
        "named",
        &[
            "--query-prompt-name",
            "query",
            "--document-prompt-name",
            "document",
        ],
    );
    let cells = |r: &serde_json::Value, t: usize| r["tasks"][t]["cells"].clone();
    for t in 0..3 {
        assert_eq!(cells(&auto, t), cells(&named, t), "task {t}");
    }
    let bare = eval("bare", &["--query-prompt", "", "--document-prompt", ""]);
    assert_ne!(
        cells(&auto, 2)[0]["items"],
        cells(&bare, 2)[0]["items"],
        "the retrieval prompts change the query scores"
    );
    let query = eval("query", &["--prompt-name", "query"]);
    assert_eq!(
        query["model"]["prompts"]["text"],
        "task: search result | query: "
    );
    assert_ne!(
        cells(&auto, 0)[0]["items"],
        cells(&query, 0)[0]["items"],
        "a prompt for every text changes the STS similarities"
    );
    let (good, err) = nest(&[
        "eval",
        "--model",
        &model,
        "--data-root",
        &s(&data),
        "--tasks",
        "sts",
        "--query-prompt-name",
        "nope",
        "--out",
        &s(&d.path().join("bad")),
    ]);
    assert!(
        !good && err.contains("--query-prompt-name") && err.contains("nope"),
        "{err}"
    );
}

/// MIPIC (SIA + PIC) trains on the rotary backbones too: SIA queries the token the model's
/// pooling reads (position 0 for ModernBERT's \[CLS\] and Gemma 3's mean pooling, the last real
/// token for Qwen3's last-token pooling); two steps of MRL + MIPIC with SimCSE give finite SIA
/// and PIC terms that are not all zero.
#[test]
fn mipic_trains_on_the_rotary_backbones() {
    for arch in ["modernbert", "qwen3", "gemma3"] {
        let d = tempfile::tempdir().unwrap();
        let s = |p: &Path| p.display().to_string();
        let cfg: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(arch).join("config.json")).unwrap(),
        )
        .unwrap();
        let hidden = cfg["hidden_size"].as_u64().unwrap();
        let train = d.path().join("train.txt");
        let texts =
            "A man is playing a guitar.\nThe cat sat on the mat.\nStock markets fell sharply \
                     today.\nA fox jumps over the lazy dog in the garden.\nHi\nTwo short words.\n\
                     Scientists discovered a new frog.\nRain is expected tomorrow.\n";
        std::fs::write(&train, texts).unwrap();
        let recipe = format!(
            "model = \"{}\"\nloss = \"simcse\"\nmatryoshka_dims = [8, {hidden}]\nbatch_size = 4\n\
             epochs = 1\nlr = 1e-3\nwarmup_ratio = 0.0\nobjective = [{{kind = \"mrl\", weight = 0.4}}, \
             {{kind = \"mipic\", weight = 0.6, min_k = 2}}]\n[[data]]\npath = \"{}\"\nformat = \"single\"\n",
            s(&fixture(arch)),
            s(&train)
        );
        let r = d.path().join("r.toml");
        std::fs::write(&r, recipe).unwrap();
        let run = d.path().join("run");
        ok(&[
            "--threads",
            "1",
            "train",
            "--recipe",
            &s(&r),
            "--run-dir",
            &s(&run),
        ]);
        let steps: Vec<serde_json::Value> = std::fs::read_to_string(run.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("terms").is_some())
            .collect();
        assert_eq!(steps.len(), 2, "{arch}");
        for v in &steps {
            let terms = v["terms"].as_object().unwrap();
            let sia: Vec<f64> = terms
                .iter()
                .filter(|(k, _)| k.starts_with("mipic/"))
                .map(|(_, x)| x.as_f64().unwrap())
                .collect();
            assert!(sia.len() >= 2, "{arch}: {terms:?}");
            assert!(sia.iter().all(|x| x.is_finite()), "{arch}: {terms:?}");
            assert!(sia.iter().any(|x| *x > 0.0), "{arch}: {terms:?}");
        }
    }
}
