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

/// The key of an index's source record that says its payloads hold the documents' texts
/// (`nest index build --store-text`): documents added later store theirs too.
pub const STORE_TEXT: &str = "store_text";

/// The key of an index's source record that holds the prompt its documents were embedded with
/// (a string, or null for none), so that documents added later get the same one.
pub const DOCUMENT_PROMPT: &str = "document_prompt";

/// The document prompt an index's `source` records: `Some(None)` for none, `None` when the
/// index predates the record.
pub fn recorded_document_prompt(source: &serde_json::Value) -> Option<Option<String>> {
    source
        .get(DOCUMENT_PROMPT)
        .map(|v| v.as_str().filter(|p| !p.is_empty()).map(str::to_string))
}

/// What is wrong with a document id, wherever an index takes one (a documents file,
/// `Index.build`, vectors' ids, a server's `/v1/documents`): empty, a line break (an index keeps
/// one id a line) or a NUL (PostgreSQL's text refuses it: `nest export pgvector`). `None`: fine.
pub fn id_problem(id: &str) -> Option<String> {
    let problem = match () {
        _ if id.is_empty() => "must be non-empty",
        _ if id.contains(['\n', '\r']) => "must hold no line break",
        _ if id.contains('\0') => "must hold no NUL character",
        _ => return None,
    };
    Some(format!("id {id:?} {problem}"))
}

/// What is wrong with a document's text: empty (nothing to embed; its vector, a prompt's or the
/// special tokens' alone, came near the top of unrelated searches). `None`: fine.
pub fn text_problem(text: &str) -> Option<&'static str> {
    text.trim()
        .is_empty()
        .then_some("text is empty (or only whitespace): a document needs words to be found by them")
}

impl Document {
    /// What an index stores beside the vector: the payload, with the embedded text under
    /// `text` when `with_text` (`nest index build --store-text`), so that a search's hits show
    /// it.
    pub fn stored(&self, with_text: bool) -> serde_json::Value {
        let mut p = self.payload.clone();
        if with_text {
            if !p.is_object() {
                p = serde_json::json!({}); // plain text: no fields of its own
            }
            p["text"] = self.text.clone().into();
        }
        p
    }
}

/// Hex sha256 of the documents' ids and texts, in order (payloads aside), each field
/// length-prefixed: what an index built from them records as `documents_sha256`, so that a
/// reader who pairs its rows with texts (`nest mine --corpus-index`) can tell these documents
/// from others with the same ids.
pub fn content_sha256(docs: &[Document]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for d in docs {
        for field in [&d.id, &d.text] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
    }
    format!("{:x}", h.finalize())
}

/// Hex sha256 of `texts`, in order, each length-prefixed (what `nest encode`'s kept chunks
/// record their texts by), hashed as they come: no copy of the texts.
pub fn texts_sha256(texts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for t in texts {
        h.update((t.len() as u64).to_le_bytes());
        h.update(t.as_bytes());
    }
    format!("{:x}", h.finalize())
}

/// Reads documents for `nest index build`.
///
/// - `.jsonl`: one object per line with a string `text`, an id in `id` or `_id` (string or
///   number; the 1-based record number when absent) and an optional string `title`, which is
///   prefixed to the text as in BEIR (`title + " " + text`). Blank lines are skipped.
/// - anything else: plain text, one document per line, the id being the line number (blank
///   lines are no documents: their numbers go unused).
///
/// Ids must be unique and hold no line break; an empty file is an error.
pub fn read_documents(path: &Path) -> Result<Vec<Document>> {
    let raw = crate::fsutil::read_text(path)?;
    let share = parse(path, &raw, None)?;
    let mut seen = std::collections::HashMap::new();
    for (i, doc) in share.docs.iter().enumerate() {
        if let Some(&first) = seen.get(doc.id.as_str()) {
            // a record without an id takes its number: said, or the line named has no id
            // (helper trial D, U6)
            let how = |k: usize| match share.derived[k] {
                Some(_) => " (a record without an id: its number stands in)",
                None => "",
            };
            return Err(Error::Row {
                path: path.to_path_buf(),
                line: share.lines_of[i] as u64 + 1,
                message: format!(
                    "duplicate id '{}'{}, first at line {}{}",
                    doc.id,
                    how(i),
                    share.lines_of[first] + 1,
                    how(first)
                ),
            });
        }
        seen.insert(doc.id.as_str(), i);
    }
    if share.docs.is_empty() {
        return Err(Error::content(path, "no documents"));
    }
    Ok(share.docs)
}

/// Share `share` of `shares` of a documents file, reading only its bytes (cut as
/// [`super::read_sentences_share`] cuts). Ids that come from a position (plain text's line
/// number, JSONL's record number when a record has no id) count from the share's start until
/// [`DocumentShare::renumber`] is told how many lines and records come before it. Duplicate ids
/// are only checked within the share; the caller checks across shares.
pub fn read_documents_share(path: &Path, share: usize, shares: usize) -> Result<DocumentShare> {
    let (raw, start) = super::sentences::read_share(path, share, shares)?;
    parse(path, &raw, Some(start))
}

/// The documents of one share of a file ([`read_documents_share`]).
#[derive(Debug, Clone)]
pub struct DocumentShare {
    pub docs: Vec<Document>,
    /// Lines in the share (blank ones included) and records (non-blank JSONL lines).
    pub lines: usize,
    pub records: usize,
    /// Per document: the 0-based line in the share it came from.
    lines_of: Vec<usize>,
    /// Per document: the position its id was made from, when the file gave none.
    derived: Vec<Option<Derived>>,
}

#[derive(Debug, Clone, Copy)]
enum Derived {
    Line(usize),
    Record(usize),
}

impl DocumentShare {
    /// Makes position-derived ids global, given the lines and records of the shares before.
    pub fn renumber(&mut self, lines_before: usize, records_before: usize) {
        for (doc, d) in self.docs.iter_mut().zip(&self.derived) {
            match d {
                Some(Derived::Line(i)) => doc.id = (lines_before + i + 1).to_string(),
                Some(Derived::Record(k)) => doc.id = (records_before + k + 1).to_string(),
                None => {}
            }
        }
    }
}

/// The documents of `raw` (a whole file, or a share starting at byte `offset`), ids counted
/// from the start of `raw`. Every bad line is found in one pass: the error names the first and
/// the numbers of the others (a user fixes them all before the next run).
fn parse(path: &Path, raw: &str, offset: Option<u64>) -> Result<DocumentShare> {
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let mut out = DocumentShare {
        docs: Vec::new(),
        lines: 0,
        records: 0,
        lines_of: Vec::new(),
        derived: Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    let mut bad: Vec<(usize, String)> = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        out.lines += 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        // a blank line is no document (a blank line of a text file, its vector the special
        // tokens' alone, came near the top of every search); the others keep their line's id
        if line.trim().is_empty() {
            continue;
        }
        let read = match is_jsonl {
            true => {
                out.records += 1;
                jsonl_document(line, out.records)
            }
            false => Ok(plain_document(line, i)),
        };
        let checked = read.and_then(|(doc, derived)| {
            if let Some(problem) = id_problem(&doc.id) {
                return Err(problem);
            }
            if let Some(problem) = text_problem(&doc.text) {
                return Err(format!("id {:?}: {problem}", doc.id));
            }
            if offset.is_some() && !seen.insert(doc.id.clone()) {
                return Err(format!("duplicate id '{}'", doc.id));
            }
            Ok((doc, derived))
        });
        match checked {
            Ok((doc, derived)) => {
                out.docs.push(doc);
                out.lines_of.push(i);
                out.derived.push(derived);
            }
            Err(m) => bad.push((i, m)),
        }
    }
    match bad.first() {
        None => Ok(out),
        Some((i, message)) => Err(Error::Row {
            path: path.to_path_buf(),
            line: *i as u64 + 1,
            message: row_message(message, offset, &bad[1..]),
        }),
    }
}

/// The first bad line's message, where its number counts from, and the other bad lines.
fn row_message(first: &str, offset: Option<u64>, others: &[(usize, String)]) -> String {
    let mut m = match offset {
        Some(o) => format!("(line counted from byte {o}) {first}"),
        None => first.to_string(),
    };
    if !others.is_empty() {
        let lines: Vec<String> = others
            .iter()
            .take(10)
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        let more = match others.len() > 10 {
            true => format!(" and {} more", others.len() - 10),
            false => String::new(),
        };
        m.push_str(&format!(
            "; {} more bad line(s): {}{more}",
            others.len(),
            lines.join(", ")
        ));
    }
    m
}

/// A plain-text line `i` (0-based) as a document: its id the line number.
fn plain_document(line: &str, i: usize) -> (Document, Option<Derived>) {
    let doc = Document {
        id: (i + 1).to_string(),
        text: line.to_string(),
        payload: serde_json::Value::Null,
    };
    (doc, Some(Derived::Line(i)))
}

/// A JSONL record (the `record`-th, 1-based) as a document, or what is wrong with it.
fn jsonl_document(
    line: &str,
    record: usize,
) -> std::result::Result<(Document, Option<Derived>), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let serde_json::Value::Object(mut obj) = v else {
        return Err("expected a JSON object".into());
    };
    let text = match obj.remove("text") {
        Some(serde_json::Value::String(s)) => s,
        _ => return Err("expected a string field \"text\"".into()),
    };
    let (id, derived) = match obj.remove("id").or_else(|| obj.remove("_id")) {
        Some(serde_json::Value::String(s)) => (s, None),
        Some(serde_json::Value::Number(n)) => (n.to_string(), None),
        None => (record.to_string(), Some(Derived::Record(record - 1))),
        Some(_) => return Err("\"id\" must be a string or a number".into()),
    };
    let text = match obj.get("title") {
        Some(serde_json::Value::String(t)) if !t.is_empty() => format!("{t} {text}"),
        _ => text,
    };
    let doc = Document {
        id,
        text,
        payload: serde_json::Value::Object(obj),
    };
    Ok((doc, derived))
}

#[cfg(test)]
mod tests;
