//! Which tokenizers a [`super::WordCache`] may serve, read from their own configuration: a
//! pipeline where a space always ends a word, and the special tokens around a text's words.

use serde_json::Value;
use tokenizers::{ModelWrapper, Tokenizer};

/// Whether, by its configuration, `tokenizer` never lets a token span an ASCII space, tab or
/// line break: each normaliser step maps characters one by one (those stay whitespace), the
/// pre-tokeniser splits on whitespace and drops it, the model is WordPiece (which has no cache
/// of its own), and no added token contains a space.
pub(super) fn splits_on_spaces(tokenizer: &Tokenizer) -> bool {
    const NORMALISERS: &[&str] = &[
        "BertNormalizer",
        "Lowercase",
        "NFC",
        "NFD",
        "NFKC",
        "NFKD",
        "StripAccents",
    ];
    const SPLITTERS: &[&str] = &["BertPreTokenizer", "Whitespace", "WhitespaceSplit"];
    const ALSO: &[&str] = &["Punctuation", "Digits"];
    let normaliser_ok = match tokenizer.get_normalizer() {
        None => true,
        Some(n) => serde_json::to_value(n).is_ok_and(|v| {
            steps(&v, "normalizers")
                .iter()
                .all(|t| NORMALISERS.contains(&t.as_str()))
        }),
    };
    let pre_ok = tokenizer.get_pre_tokenizer().is_some_and(|p| {
        serde_json::to_value(p).is_ok_and(|v| {
            let steps = steps(&v, "pretokenizers");
            steps.iter().any(|t| SPLITTERS.contains(&t.as_str()))
                && steps
                    .iter()
                    .all(|t| SPLITTERS.contains(&t.as_str()) || ALSO.contains(&t.as_str()))
        })
    });
    let model_ok = matches!(tokenizer.get_model(), ModelWrapper::WordPiece(_));
    let added_ok = tokenizer
        .get_added_tokens_decoder()
        .values()
        .all(|t| !t.content.contains(char::is_whitespace));
    normaliser_ok && pre_ok && model_ok && added_ok
}

/// The `type`s of a serialised normaliser or pre-tokeniser, a `Sequence` flattened.
fn steps(v: &Value, members: &str) -> Vec<String> {
    match v.get("type").and_then(Value::as_str) {
        Some("Sequence") => v
            .get(members)
            .and_then(Value::as_array)
            .map(|a| a.iter().flat_map(|m| steps(m, members)).collect())
            .unwrap_or_else(|| vec!["Sequence".into()]),
        Some(t) => vec![t.to_string()],
        None => vec![String::new()],
    }
}

/// The special tokens the post-processor puts before and after one text's tokens, found by
/// locating a probe's own tokens inside its tokens with specials; `None` where that is not
/// one consistent split.
pub(super) fn specials(words: &Tokenizer) -> Option<(Vec<i64>, Vec<i64>)> {
    let ids = |text: &str, special: bool| -> Option<Vec<i64>> {
        let e = words.encode_fast(text, special).ok()?;
        Some(e.get_ids().iter().map(|&i| i64::from(i)).collect())
    };
    let split = |probe: &str| -> Option<(Vec<i64>, Vec<i64>)> {
        let body = ids(probe, false)?;
        let full = ids(probe, true)?;
        let at = (0..=full.len().checked_sub(body.len())?)
            .find(|&i| full[i..i + body.len()] == body[..])?;
        Some((full[..at].to_vec(), full[at + body.len()..].to_vec()))
    };
    let first = split("hello world")?;
    let empty = ids("", true)?;
    let agree = split("the cat sat")? == first
        && empty.len() == first.0.len() + first.1.len()
        && empty[..first.0.len()] == first.0[..];
    agree.then_some(first)
}
