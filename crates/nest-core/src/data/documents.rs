use std::path::Path;

use crate::{Error, Result};

/// A document to index: its id, the text to embed and, optionally, what to store beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub id: String,
    pub text: String,
    /// The record's other fields (everything but the id and the text), as a JSON object.
    pub payload: serde_json::Value,
}

/// Reads documents for `nest index build`.
///
/// - `.jsonl`: one object per line with a string `text`, an id in `id` or `_id` (string or
///   number; the 1-based record number when absent) and an optional string `title`, which is
///   prefixed to the text as in BEIR (`title + " " + text`). Blank lines are skipped.
/// - anything else: plain text, one document per line, the id being the line number.
///
/// Ids must be unique and hold no line break; an empty file is an error.
pub fn read_documents(path: &Path) -> Result<Vec<Document>> {
    let raw = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let row = |i: usize, message: String| Error::Row {
        path: path.to_path_buf(),
        line: i as u64 + 1,
        message,
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in raw.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let doc = if is_jsonl {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| row(i, format!("not valid JSON: {e}")))?;
            let serde_json::Value::Object(mut obj) = v else {
                return Err(row(i, "expected a JSON object".into()));
            };
            let text = match obj.remove("text") {
                Some(serde_json::Value::String(s)) => s,
                _ => return Err(row(i, "expected a string field \"text\"".into())),
            };
            let id = match obj.remove("id").or_else(|| obj.remove("_id")) {
                Some(serde_json::Value::String(s)) => s,
                Some(serde_json::Value::Number(n)) => n.to_string(),
                None => (out.len() + 1).to_string(),
                Some(_) => return Err(row(i, "\"id\" must be a string or a number".into())),
            };
            let text = match obj.get("title") {
                Some(serde_json::Value::String(t)) if !t.is_empty() => format!("{t} {text}"),
                _ => text,
            };
            Document {
                id,
                text,
                payload: serde_json::Value::Object(obj),
            }
        } else {
            Document {
                id: (i + 1).to_string(),
                text: line.to_string(),
                payload: serde_json::Value::Null,
            }
        };
        if doc.id.is_empty() || doc.id.contains(['\n', '\r']) {
            return Err(row(
                i,
                format!("id {:?} must be non-empty with no line break", doc.id),
            ));
        }
        if !seen.insert(doc.id.clone()) {
            return Err(row(i, format!("duplicate id '{}'", doc.id)));
        }
        out.push(doc);
    }
    if out.is_empty() {
        return Err(Error::content(path, "no documents"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_ids_titles_payloads_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.jsonl");
        std::fs::write(
            &p,
            "{\"_id\":\"a\",\"title\":\"T\",\"text\":\"x\",\"url\":\"u\"}\n\n{\"id\":7,\"text\":\"y\"}\n{\"text\":\"z\"}\n",
        )
        .unwrap();
        let d = read_documents(&p).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!((d[0].id.as_str(), d[0].text.as_str()), ("a", "T x"));
        assert_eq!(d[0].payload["url"], "u");
        assert_eq!(d[1].id, "7");
        assert_eq!(d[2].id, "3");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"y\"}\n",
        )
        .unwrap();
        let e = read_documents(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("duplicate"), "{e}");
        std::fs::write(&p, "{\"id\":\"a\",\"txt\":\"x\"}\n").unwrap();
        let e = read_documents(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("text"), "{e}");
    }
}
