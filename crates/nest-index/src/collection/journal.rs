//! The journal of an index (`added.jsonl` in its folder): what a server changed since the
//! build, one JSON line per change, in order. The one owner of its format:
//!
//! - `{"id": ..., "payload": ..., "vector": [...]}` puts a document: added, or replacing the
//!   document of that id (built or added before);
//! - `{"delete": id}` deletes the document of that id.
//!
//! Replayed in order, the journal has the last word on every id it names: a built row whose id
//! it names is no longer searched (deleted, or replaced by the put). Journals written before
//! replacements and deletions existed hold only puts of new ids, and read the same.
//!
//! A torn last line (no newline: a crash mid-write, never acknowledged) is left out; a damaged
//! line elsewhere is an error naming it.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::NewRow;
use crate::{Error, Result};

/// The journal's file name inside the index folder.
pub const JOURNAL: &str = "added.jsonl";

/// One change.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A document added, or replacing the one of its id.
    Put(NewRow),
    /// The document of this id deleted.
    Delete(String),
}

impl Entry {
    pub fn id(&self) -> &str {
        match self {
            Entry::Put(r) => &r.id,
            Entry::Delete(id) => id,
        }
    }

    /// The entry as one journal line (with its newline).
    pub fn line(&self) -> String {
        let v = match self {
            Entry::Put(r) => {
                serde_json::json!({"id": r.id, "payload": r.payload, "vector": r.vector})
            }
            Entry::Delete(id) => serde_json::json!({ "delete": id }),
        };
        format!("{v}\n")
    }
}

/// The journal's effect: the documents it holds, and the ids whose built rows it retired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replayed {
    /// The documents put and not deleted since, each as last put, in the order of their last
    /// put (the order a running server holds them in).
    pub rows: Vec<NewRow>,
    /// Every id the journal names: a built row of one of these ids is not searched (deleted,
    /// or replaced by one of `rows`).
    pub named: HashMap<String, Change>,
}

/// The last word of the journal on an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Put,
    Deleted,
}

impl Replayed {
    /// Ids deleted (and not put since).
    pub fn deleted(&self) -> usize {
        self.named
            .values()
            .filter(|c| **c == Change::Deleted)
            .count()
    }
}

/// Cuts a torn last line (no newline: a crash mid-write) off `bytes`; returns the good length.
pub(crate) fn good_length(bytes: &[u8]) -> usize {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(p) => p + 1,
        None => 0,
    }
}

/// Parses line `no` (1-based) of the journal at `path`; `dim`: the index's full dim.
fn parse_line(path: &Path, no: usize, line: &[u8], dim: usize) -> Result<Entry> {
    let bad = |m: String| Error::corrupt(path, format!("line {no}: {m}"));
    let v: Value = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    if let Some(d) = v.get("delete") {
        let id = d
            .as_str()
            .ok_or_else(|| bad(format!("\"delete\" must name an id, got {d}")))?;
        return Ok(Entry::Delete(id.to_string()));
    }
    let id = v["id"]
        .as_str()
        .ok_or_else(|| bad("no string \"id\" (nor \"delete\")".into()))?;
    let vector: Vec<f32> = v["vector"]
        .as_array()
        .ok_or_else(|| bad("no \"vector\" array".into()))?
        .iter()
        .map(|x| x.as_f64().map(|x| x as f32))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("\"vector\" holds a non-number".into()))?;
    if vector.len() != dim {
        return Err(bad(format!("{} dims, the index holds {dim}", vector.len())));
    }
    Ok(Entry::Put(NewRow {
        id: id.to_string(),
        payload: v.get("payload").filter(|p| !p.is_null()).cloned(),
        vector,
    }))
}

/// The journal at `path` read: its entries (a torn last line left out), the length of its good
/// part and its whole length in bytes; none when there is no journal.
pub(crate) fn read(path: &Path, dim: usize) -> Result<(Vec<Entry>, usize, usize)> {
    if !path.exists() {
        return Ok((Vec::new(), 0, 0));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let good = good_length(&bytes);
    let entries = bytes[..good]
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| parse_line(path, i + 1, line, dim))
        .collect::<Result<_>>()?;
    Ok((entries, good, bytes.len()))
}

/// Replays `entries` in order.
pub fn replay(entries: Vec<Entry>) -> Replayed {
    // the last put of each id and its position
    let mut last: HashMap<String, (usize, Option<NewRow>)> = HashMap::new();
    for (i, e) in entries.into_iter().enumerate() {
        match e {
            Entry::Put(r) => last.insert(r.id.clone(), (i, Some(r))),
            Entry::Delete(id) => last.insert(id, (i, None)),
        };
    }
    let named = last
        .iter()
        .map(|(id, (_, r))| {
            let c = if r.is_some() {
                Change::Put
            } else {
                Change::Deleted
            };
            (id.clone(), c)
        })
        .collect();
    let mut rows: Vec<(usize, NewRow)> = last
        .into_values()
        .filter_map(|(i, r)| r.map(|r| (i, r)))
        .collect();
    rows.sort_by_key(|(i, _)| *i);
    Replayed {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        named,
    }
}

/// The journal of the index at `dir` replayed (a torn last line left out); empty when it has
/// none. `dim`: the index's full dim.
pub fn read_journal(dir: &Path, dim: usize) -> Result<Replayed> {
    Ok(replay(read(&dir.join(JOURNAL), dim)?.0))
}

/// How many ids the journal of the index at `dir` names (documents added, replaced or
/// deleted through a server): what a rebuild would drop. Reads only the ids (0 when there is
/// no journal, or it cannot be read: opening the index then says why).
pub fn named_ids(dir: &Path) -> usize {
    let Ok(bytes) = std::fs::read(dir.join(JOURNAL)) else {
        return 0;
    };
    let good = good_length(&bytes);
    let ids: std::collections::HashSet<String> = bytes[..good]
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter_map(|v| {
            v.get("delete")
                .or_else(|| v.get("id"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    ids.len()
}
