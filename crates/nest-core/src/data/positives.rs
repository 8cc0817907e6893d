//! (query, positive) pairs, the input of hard-negative mining (`nest mine --queries`).

use std::path::Path;

use super::TsvTable;
use crate::{Error, Result};

/// The names a query column may have, and a positive column, in order of preference.
pub const QUERY_KEYS: [&str; 2] = ["anchor", "query"];
pub const POSITIVE_KEYS: [&str; 2] = ["positive", "answer"];

/// Reads `(query, positive)` pairs:
///
/// - `.jsonl`: one object per line with a string query (`anchor` or `query`) and a string
///   positive (`positive` or `answer`); other keys are ignored, blank lines skipped;
/// - anything else: a TSV with a header naming those columns (`anchor\tpositive`, any other
///   columns allowed, e.g. SNLI's triplets), no quoting.
///
/// An empty text (query or positive) is an error naming its line; so is a file with no pair.
pub fn read_positive_pairs(path: &Path) -> Result<Vec<(String, String)>> {
    let pairs = if path.extension().is_some_and(|e| e == "jsonl") {
        read_jsonl(path)?
    } else {
        read_tsv(path)?
    };
    if pairs.is_empty() {
        return Err(Error::content(path, "no (query, positive) pair"));
    }
    Ok(pairs)
}

fn row_error(path: &Path, line: u64, message: String) -> Error {
    Error::Row {
        path: path.to_path_buf(),
        line,
        message,
    }
}

fn read_jsonl(path: &Path) -> Result<Vec<(String, String)>> {
    let raw = crate::fsutil::read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() {
            continue;
        }
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .map_err(|e| row_error(path, line_no, format!("not a JSON object: {e}")))?;
        let get = |keys: &[&str]| -> Result<String> {
            let k = keys
                .iter()
                .find(|k| obj.contains_key(**k))
                .ok_or_else(|| row_error(path, line_no, format!("no key {}", keys.join(" or "))))?;
            match &obj[*k] {
                serde_json::Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
                v => Err(row_error(
                    path,
                    line_no,
                    format!("`{k}` is {v}, expected a non-empty string"),
                )),
            }
        };
        out.push((get(&QUERY_KEYS)?, get(&POSITIVE_KEYS)?));
    }
    Ok(out)
}

fn read_tsv(path: &Path) -> Result<Vec<(String, String)>> {
    let t = TsvTable::read(path, &[])?;
    let col = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| t.header.iter().position(|h| h == k))
            .ok_or_else(|| {
                Error::content(
                    path,
                    format!(
                        "line 1: header is '{}', expected a column named {} (or give .jsonl)",
                        t.header.join("\\t"),
                        keys.join(" or ")
                    ),
                )
            })
    };
    let (q, p) = (col(&QUERY_KEYS)?, col(&POSITIVE_KEYS)?);
    t.rows
        .iter()
        .map(|(line, r)| {
            if r[q].trim().is_empty() || r[p].trim().is_empty() {
                return Err(t.row_error(*line, "an empty query or positive"));
            }
            Ok((r[q].clone(), r[p].clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_and_tsv_layouts() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join("q.jsonl");
        std::fs::write(
            &j,
            "{\"query\": \"a\", \"positive\": \"b\"}\n\n{\"anchor\": \"c\", \"answer\": \"d\"}\n",
        )
        .unwrap();
        assert_eq!(read_positive_pairs(&j).unwrap().len(), 2);
        std::fs::write(&j, "{\"query\": \"a\"}\n").unwrap();
        let e = read_positive_pairs(&j).unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("positive or answer"),
            "{e}"
        );
        let t = d.path().join("q.tsv");
        std::fs::write(&t, "anchor\tpositive\tnegative\nx\ty\tz\n").unwrap();
        assert_eq!(
            read_positive_pairs(&t).unwrap(),
            vec![("x".into(), "y".into())]
        );
        std::fs::write(&t, "sentence1\tsentence2\nx\ty\n").unwrap();
        let e = read_positive_pairs(&t).unwrap_err().to_string();
        assert!(e.contains("anchor or query"), "{e}");
    }
}
