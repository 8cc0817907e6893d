use std::path::Path;

use crate::{Error, Result};

/// Reads the texts to encode.
///
/// - `.jsonl`: one JSON object per line with a string field `text`.
/// - anything else: plain text, one sentence per line (a trailing `\r` is dropped). Blank lines
///   are kept as empty texts so that output row `i` always matches input line `i + 1`.
///
/// An input with no text at all is an error.
pub fn read_sentences(path: &Path) -> Result<Vec<String>> {
    let raw = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let mut out = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if is_jsonl {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::Row {
                path: path.to_path_buf(),
                line: i as u64 + 1,
                message: format!("not valid JSON: {e}"),
            })?;
            let text = v
                .get("text")
                .and_then(|t| t.as_str())
                .ok_or_else(|| Error::Row {
                    path: path.to_path_buf(),
                    line: i as u64 + 1,
                    message: "expected an object with a string field \"text\"".into(),
                })?;
            out.push(text.to_string());
        } else {
            out.push(line.to_string());
        }
    }
    if out.iter().all(|s| s.trim().is_empty()) {
        return Err(Error::content(path, "the input holds no text to encode"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_jsonl() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.txt");
        std::fs::write(&p, "one\r\n\ntwo\n").unwrap();
        assert_eq!(read_sentences(&p).unwrap(), vec!["one", "", "two"]);
        let p = d.path().join("a.jsonl");
        std::fs::write(&p, "{\"text\":\"hi\"}\n{\"txt\":1}\n").unwrap();
        let e = read_sentences(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("\"text\""), "{e}");
        let p = d.path().join("e.txt");
        std::fs::write(&p, "\n \n").unwrap();
        assert!(read_sentences(&p)
            .unwrap_err()
            .to_string()
            .contains("no text"));
    }
}
