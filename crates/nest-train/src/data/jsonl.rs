//! Training data as JSON lines, in the layouts sentence-transformers users have: one object
//! per line whose keys name the columns (`anchor`/`positive`/`negative`,
//! `sentence1`/`sentence2`/`score`, `text`, ...). The rows read are the ones the same data as
//! TSV gives, so a run trains the same, bit for bit.

use std::path::Path;

use serde_json::{Map, Value};

use crate::recipe::DataFormat;
use crate::Result;

/// The layouts each format accepts, as TSV header columns or JSONL keys, for errors.
pub(crate) fn layouts(format: DataFormat) -> &'static str {
    match format {
        DataFormat::Scored => "sentence1, sentence2, score",
        DataFormat::Triplets => {
            "anchor, positive, negative; or anchor, positive, negative_1 .. negative_n \
             (n-tuples, every row with the same n)"
        }
        DataFormat::Pairs => {
            "anchor, positive[, label]; sentence1, sentence2[, label] (rows with label 0 dropped); \
             premise, hypothesis, label (entailment rows kept: label `entailment`, or 0 as in \
             sentence-transformers/all-nli)"
        }
        DataFormat::Single => "text",
    }
}

/// Whether `path` is read as JSON lines (`.jsonl`).
pub(crate) fn is_jsonl(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
}

/// Reads a `.jsonl` file in `format`: each example's columns, and the scores of scored pairs.
pub(crate) fn read(path: &Path, format: DataFormat) -> Result<(Vec<Vec<String>>, Vec<f64>)> {
    let text = nest_core::fsutil::read_text(path)?;
    let (mut rows, mut scores) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let row_err = |message: String| nest_core::Error::Row {
            path: path.to_path_buf(),
            line: line_no,
            message,
        };
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() {
            continue;
        }
        let obj: Map<String, Value> =
            serde_json::from_str(line).map_err(|e| row_err(format!("not a JSON object: {e}")))?;
        // `None`: a pair labelled as no match
        if let Some((columns, score)) = row(&obj, format).map_err(row_err)? {
            if let Some(first) = rows
                .first()
                .filter(|f: &&Vec<String>| f.len() != columns.len())
            {
                return Err(row_err(format!(
                    "{} negatives, but the first row has {}: every row of a file needs the same \
                     number (a batch is one tensor per column)",
                    columns.len() - 2,
                    first.len() - 2
                ))
                .into());
            }
            rows.push(columns);
            scores.extend(score);
        }
    }
    Ok((rows, scores))
}

/// One object's example: its columns and score, `None` for a pair whose label drops it.
type Row = Option<(Vec<String>, Option<f64>)>;

fn row(obj: &Map<String, Value>, format: DataFormat) -> std::result::Result<Row, String> {
    let has = |k: &str| obj.contains_key(k);
    let texts = |keys: &[&str]| -> std::result::Result<Vec<String>, String> {
        keys.iter()
            .map(|k| match obj.get(*k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(format!("`{k}` is {other}, expected a string")),
                None => Err(format!("`{k}` is missing")),
            })
            .collect()
    };
    let r = match format {
        DataFormat::Scored if has("sentence1") => {
            let score = number(obj, "score")?;
            Some((texts(&["sentence1", "sentence2"])?, Some(score)))
        }
        DataFormat::Triplets if has("anchor") && has("negative_1") => {
            let n = (1..).take_while(|i| has(&format!("negative_{i}"))).count();
            let keys: Vec<String> = ["anchor", "positive"]
                .iter()
                .map(|k| k.to_string())
                .chain((1..=n).map(|i| format!("negative_{i}")))
                .collect();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            Some((texts(&keys)?, None))
        }
        DataFormat::Triplets if has("anchor") => {
            Some((texts(&["anchor", "positive", "negative"])?, None))
        }
        // (`nest mine --output-format labeled-pair` and sentence-transformers' write `anchor,
        // positive, label`: the label-0 rows hold negatives)
        DataFormat::Pairs if has("anchor") || has("sentence1") => {
            let keep = match obj.get("label") {
                None => true,
                Some(v) => binary(v).ok_or(format!("`label` is {v}, expected 0 or 1"))?,
            };
            let keys = match has("anchor") {
                true => ["anchor", "positive"],
                false => ["sentence1", "sentence2"],
            };
            keep.then(|| texts(&keys)).transpose()?.map(|t| (t, None))
        }
        DataFormat::Pairs if has("premise") => {
            let v = obj.get("label").ok_or("`label` is missing")?;
            let keep = entailment(v).ok_or(format!(
                "`label` is {v}, expected entailment, neutral or contradiction (or 0, 1, 2)"
            ))?;
            keep.then(|| texts(&["premise", "hypothesis"]))
                .transpose()?
                .map(|t| (t, None))
        }
        // blank texts dropped, as from a plain-text file
        DataFormat::Single if has("text") => {
            Some((texts(&["text"])?, None)).filter(|(t, _)| !t[0].trim().is_empty())
        }
        _ => {
            let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            keys.sort_unstable();
            return Err(format!(
                "keys {{{}}} fit no {format:?} layout; accepted: {}",
                keys.join(", "),
                layouts(format)
            ));
        }
    };
    Ok(r)
}

/// A finite number under `key` (a JSON number, or a string holding one).
fn number(obj: &Map<String, Value>, key: &str) -> std::result::Result<f64, String> {
    let v = obj.get(key).ok_or(format!("`{key}` is missing"))?;
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    x.filter(|x| x.is_finite())
        .ok_or(format!("`{key}` is {v}, expected a finite number"))
}

/// A pair label: 1 / true keeps the pair, 0 / false drops it.
fn binary(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64()? {
            1.0 => Some(true),
            0.0 => Some(false),
            _ => None,
        },
        Value::String(s) => binary(&Value::from(s.trim().parse::<i64>().ok()?)),
        _ => None,
    }
}

/// An NLI label: entailment keeps the pair (the name, or 0 as in sentence-transformers'
/// all-nli), neutral and contradiction (1, 2) drop it.
fn entailment(v: &Value) -> Option<bool> {
    match v {
        Value::String(s) => match s.trim() {
            "entailment" => Some(true),
            "neutral" | "contradiction" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_u64()? {
            0 => Some(true),
            1 | 2 => Some(false),
            _ => None,
        },
        _ => None,
    }
}
