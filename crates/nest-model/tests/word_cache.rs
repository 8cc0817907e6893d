//! The tokenizer's cache of words' ids ([`nest_model::tokenize::words::WordCache`]) gives the
//! tokenizers library's own ids: on every text of the shared datasets, on random texts built
//! from the characters where a cache could go wrong, truncated or not, cold or warm, from
//! several threads; and it stays off for the pipelines where words can span a space.

mod common;

use std::path::{Path, PathBuf};

use nest_model::tokenize::words::{MAX_WORDS, MAX_WORD_BYTES};
use nest_model::tokenize::TextTokenizer;
use proptest::prelude::*;

const MODELS: [&str; 2] = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"];

fn load(dir: &Path, max_length: usize) -> TextTokenizer {
    TextTokenizer::load(&dir.join("tokenizer.json"), max_length).unwrap()
}

/// Asserts the cached ids equal the library's, in batches of 2,000 (so that later batches meet
/// words kept by earlier ones), naming the first text that differs.
fn assert_same(tok: &TextTokenizer, texts: &[String], what: &str) {
    assert!(tok.word_cache().is_some(), "{what}: no word cache");
    for batch in texts.chunks(2000) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let cached = tok.encode(&refs).unwrap();
        let direct = tok.encode_direct(&refs).unwrap();
        for ((text, c), d) in refs.iter().zip(&cached).zip(&direct) {
            assert_eq!(c, d, "{what}: ids differ for {text:?}");
        }
    }
}

/// Every text cell of every TSV and the SciFact corpus and queries under the shared datasets
/// (about 110,000 distinct texts: news, captions, tweets with emoji and hashtags, abstracts of
/// up to ~1,000 tokens), or `None` (printed) where the datasets are absent outside CI.
fn dataset_texts() -> Option<Vec<String>> {
    let data = std::env::var_os("NEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::root().join("../shared/datasets"));
    if !data.is_dir() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "{} missing under CI", data.display());
        eprintln!("SKIP: {} not found", data.display());
        return None;
    }
    let mut texts = Vec::new();
    for set in std::fs::read_dir(&data).unwrap().flatten() {
        for file in std::fs::read_dir(set.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = file.path();
            let body = std::fs::read_to_string(&p).unwrap_or_default();
            match p.extension().and_then(|e| e.to_str()) {
                Some("tsv") => texts.extend(
                    body.lines()
                        .flat_map(|l| l.split('\t'))
                        .filter(|c| c.parse::<f64>().is_err())
                        .map(String::from),
                ),
                Some("jsonl") => {
                    for line in body.lines() {
                        let v: serde_json::Value = serde_json::from_str(line).unwrap();
                        for key in ["title", "text"] {
                            if let Some(s) = v.get(key).and_then(|s| s.as_str()) {
                                texts.push(s.to_string());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    texts.sort_unstable();
    texts.dedup();
    assert!(
        texts.len() > 80_000,
        "only {} distinct texts read",
        texts.len()
    );
    eprintln!("{} distinct texts", texts.len());
    Some(texts)
}

#[test]
fn cached_ids_are_the_librarys_on_every_dataset_text() {
    let Some(texts) = dataset_texts() else { return };
    for name in MODELS {
        let Some(dir) = common::model_dir(name) else {
            continue;
        };
        // long enough to keep whole abstracts; short enough to cut most texts (one model: the
        // cut is the same code for both)
        let lengths: &[usize] = if name == MODELS[0] {
            &[512, 12]
        } else {
            &[512]
        };
        for &max_length in lengths {
            let tok = load(&dir, max_length);
            assert_same(&tok, &texts, &format!("{name} at {max_length}"));
            let kept = tok.word_cache().unwrap().len();
            assert!(
                kept > 10_000 && kept <= MAX_WORDS,
                "{name}: {kept} words kept"
            );
        }
    }
}

/// As on a GPU machine's host (16 threads; in a child process, whose thread pool is its own):
/// the new words of each call go to the library in small groups, one for each thread, and
/// the texts are scanned for them in shares (`WordCache::tokenize_new`), in blocks of 256
/// texts as an encode tokenises ahead and in 2,000.
#[test]
fn cached_ids_are_the_librarys_on_sixteen_threads() {
    let Some(dir) = common::model_dir(MODELS[0]) else {
        return;
    };
    let dir = dir.into_os_string();
    in_child(
        "sixteen_threads_child",
        &[
            ("RAYON_NUM_THREADS", "16".as_ref()),
            ("NEST_SIXTEEN_CHILD", &dir),
        ],
    );
}

/// Runs this binary's test `name` alone in a child process with `env` set (a process-wide
/// setting that no other test may see), and asserts that it passed.
fn in_child(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sixteen_threads_child() {
    let Some(dir) = std::env::var_os("NEST_SIXTEEN_CHILD") else {
        return;
    };
    let Some(texts) = dataset_texts() else { return };
    let tok = load(Path::new(&dir), 512);
    for block in texts[..20_000].chunks(256) {
        let refs: Vec<&str> = block.iter().map(String::as_str).collect();
        assert_eq!(
            tok.encode(&refs).unwrap(),
            tok.encode_direct(&refs).unwrap()
        );
    }
    tok.word_cache().unwrap().clear();
    assert_same(&tok, &texts[20_000..60_000], "16 threads, batches of 2,000");
}

/// Characters where a cache of space-separated words could go wrong: spaces and other
/// whitespace (some of which the normaliser deletes as control characters), combining marks
/// after a space, punctuation, CJK (which the normaliser surrounds by spaces), accents, the
/// special tokens written in the text, emoji, zero-width and replacement characters.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z]{1,12}",
        3 => Just(" ".to_string()),
        1 => prop::sample::select(vec![
            "\t", "\n", "\r", "\u{85}", "\u{a0}", "\u{2003}", "\u{3000}", "\u{200b}", "\u{0}",
            "\u{fffd}", "\u{301}", " \u{301}", "\u{308}", "\u{1f600}", "é", "Å", "ß", "ﬁ",
            "東京", "中", "。", ".", ",", "'", "-", "##", "[CLS]", "[SEP]", "[MASK]", "<s>",
            "</s>", "<mask>", "<unk>", "[UNK]", "İ", "Σ", "１２３", "3.14", "@user", "#tag",
        ])
        .prop_map(String::from),
    ]
}

/// Each model's tokenizer at each truncation length of the random-text test, loaded once (their
/// caches carry words from case to case, as a server's do).
fn loaded() -> &'static [(String, usize, TextTokenizer)] {
    static LOADED: std::sync::OnceLock<Vec<(String, usize, TextTokenizer)>> =
        std::sync::OnceLock::new();
    LOADED.get_or_init(|| {
        let mut all = Vec::new();
        for name in MODELS {
            let Some(dir) = common::model_dir(name) else {
                continue;
            };
            for length in [4, 9, 64, 512] {
                all.push((name.to_string(), length, load(&dir, length)));
            }
        }
        all
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn cached_ids_are_the_librarys_on_random_texts(
        texts in prop::collection::vec(
            prop::collection::vec(piece(), 0..40).prop_map(|p| p.concat()), 1..8),
        max_length in prop::sample::select(vec![4usize, 9, 64, 512]),
    ) {
        for (name, length, tok) in loaded() {
            if *length != max_length {
                continue;
            }
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            // twice: the first call tokenises every word, the second reads them back
            for _ in 0..2 {
                prop_assert_eq!(
                    tok.encode(&refs).unwrap(), tok.encode_direct(&refs).unwrap(), "{}", name);
            }
        }
    }
}

#[test]
fn long_words_are_not_kept_and_clearing_changes_nothing() {
    let Some(dir) = common::model_dir(MODELS[0]) else {
        return;
    };
    let tok = load(&dir, 128);
    let words = tok.word_cache().unwrap();
    let long = "x".repeat(MAX_WORD_BYTES + 1);
    let text = format!("short {long} words");
    let first = tok.encode(&[&text]).unwrap();
    assert_eq!(words.len(), 2, "the {}-byte word was kept", long.len());
    words.clear();
    assert!(words.is_empty());
    assert_eq!(tok.encode(&[&text]).unwrap(), first);
    assert_eq!(first, tok.encode_direct(&[&text]).unwrap());
}

#[test]
fn tabs_and_line_breaks_end_words_as_spaces_do() {
    let Some(dir) = common::model_dir(MODELS[1]) else {
        return;
    };
    let tok = load(&dir, 128);
    let text = "first line\nsecond\tcol\r\nthird\n\n";
    assert_eq!(
        tok.encode(&[text]).unwrap(),
        tok.encode_direct(&[text]).unwrap()
    );
    // first, line, second, col, third: one entry each, none joined across a break
    assert_eq!(tok.word_cache().unwrap().len(), 5);
}

#[test]
fn threads_sharing_one_cache_get_the_librarys_ids() {
    let Some(dir) = common::model_dir(MODELS[1]) else {
        return;
    };
    let tok = load(&dir, 128);
    let texts: Vec<String> = common::sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let want = tok.encode_direct(&refs).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (tok, refs, want) = (tok.clone(), &refs, &want);
            s.spawn(move || {
                for i in 0..50 {
                    if t == 0 && i % 5 == 0 {
                        tok.word_cache().unwrap().clear(); // under the others' feet
                    }
                    let k = (i * 7 + t) % refs.len();
                    assert_eq!(tok.encode(&refs[k..]).unwrap(), want[k..]);
                }
            });
        }
    });
}

/// A tokenizer file rewritten from `models/<model>/tokenizer.json` by `edit`.
fn edited(model: &Path, edit: impl Fn(&mut serde_json::Value)) -> (tempfile::TempDir, PathBuf) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("tokenizer.json")).unwrap())
            .unwrap();
    edit(&mut v);
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("tokenizer.json");
    std::fs::write(&p, v.to_string()).unwrap();
    (d, p)
}

#[test]
fn no_cache_where_words_can_span_a_space() {
    // byte-level BPE (Qwen3, Gemma, ModernBERT) and SentencePiece's Unigram with `▁` (XLM-R)
    for arch in ["qwen3", "gemma3", "embeddinggemma", "modernbert", "xlmr"] {
        let p = common::root().join(format!("tests/fixtures/{arch}-tiny/model/tokenizer.json"));
        let tok = TextTokenizer::load(&p, 64).unwrap();
        assert!(tok.word_cache().is_none(), "{arch}: a word cache");
    }
    let Some(dir) = common::model_dir(MODELS[0]) else {
        return;
    };
    // a WordPiece pipeline whose normaliser rewrites spaces, or whose pre-tokeniser keeps them
    let replace = |v: &mut serde_json::Value| {
        v["normalizer"] = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": " "}, "content": "_"},
            {"type": "Lowercase"}]});
    };
    let metaspace = |v: &mut serde_json::Value| {
        v["pre_tokenizer"] = serde_json::json!({"type": "Metaspace", "replacement": "▁",
            "prepend_scheme": "always", "split": true});
    };
    let spaced_token = |v: &mut serde_json::Value| {
        v["added_tokens"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"id": 30522,
            "content": "new york", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": false}));
    };
    for (what, edit) in [
        ("Replace", &replace as &dyn Fn(&mut serde_json::Value)),
        ("Metaspace", &metaspace),
        ("an added token with a space", &spaced_token),
    ] {
        let (_d, p) = edited(&dir, edit);
        let tok = TextTokenizer::load(&p, 64).unwrap();
        assert!(tok.word_cache().is_none(), "{what}: a word cache");
    }
    // the same file unedited, and a Sequence of per-character normalisers, keep theirs
    let (_d, p) = edited(&dir, |v| {
        v["normalizer"] = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]});
    });
    assert!(TextTokenizer::load(&p, 64).unwrap().word_cache().is_some());
    assert!(load(&dir, 64).word_cache().is_some());
}

#[test]
fn nest_word_cache_0_turns_it_off() {
    let Some(dir) = common::model_dir(MODELS[0]) else {
        return;
    };
    // in a child process (this test binary, one test), so that no other test's load sees it
    let dir = dir.into_os_string();
    in_child(
        "word_cache_off_child",
        &[
            ("NEST_WORD_CACHE", "0".as_ref()),
            ("NEST_WORD_CACHE_CHILD", &dir),
        ],
    );
}

#[test]
fn word_cache_off_child() {
    let Some(dir) = std::env::var_os("NEST_WORD_CACHE_CHILD") else {
        return;
    };
    assert!(load(Path::new(&dir), 64).word_cache().is_none());
}
