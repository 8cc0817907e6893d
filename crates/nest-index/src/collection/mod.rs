//! A built index plus the documents added to it since (`added.jsonl`, a journal in the index
//! folder), searched together, with payload filters: what `nest serve --index` and
//! `nest search` query.
//!
//! The journal is append-only: each add writes its whole lines, `fsync`s, and only then is
//! acknowledged, so a restart loses nothing acknowledged. A torn last line (a crash mid-write,
//! never acknowledged) is cut off when the journal is opened; a damaged line elsewhere is an
//! error naming it. Added rows are stored at every level of the index, by the index's own code
//! ([`MemoryLevel`]), and searched by the same funnel as the built rows. An id already in the
//! index or the journal is not added again (a client's retry after a lost answer is safe).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use rayon::prelude::*;
use serde_json::Value;

use crate::funnel::score;
use crate::level::Prepared;
use crate::memory::MemoryLevel;
use crate::reader::Index;
use crate::{Error, Funnel, Result};

/// The journal's file name inside the index folder.
pub const JOURNAL: &str = "added.jsonl";

mod filter;
pub use filter::Filter;

/// A document to add: its id, payload and full-length vector.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRow {
    pub id: String,
    pub payload: Option<Value>,
    pub vector: Vec<f32>,
}

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub id: String,
    pub score: f32,
    pub payload: Option<Value>,
}

/// What an add did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Added {
    /// Ids written to the journal.
    pub added: Vec<String>,
    /// Ids already present (in the index or the journal), left as they were.
    pub existing: Vec<String>,
}

/// The rows added since the build, in memory.
#[derive(Debug)]
struct Extra {
    ids: Vec<String>,
    payloads: Vec<Option<Value>>,
    levels: Vec<MemoryLevel>,
    known: HashSet<String>,
}

/// A built index and its journal.
#[derive(Debug)]
pub struct Collection {
    index: Index,
    extra: RwLock<Extra>,
    journal: Mutex<(PathBuf, Option<File>)>,
}

/// Cuts a torn last line (no newline: a crash mid-write) off `bytes`; returns the good length.
fn good_length(bytes: &[u8]) -> usize {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(p) => p + 1,
        None => 0,
    }
}

fn parse_line(path: &Path, no: usize, line: &[u8], dim: usize) -> Result<NewRow> {
    let bad = |m: String| Error::corrupt(path, format!("line {no}: {m}"));
    let v: Value = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    let id = v["id"]
        .as_str()
        .ok_or_else(|| bad("no string \"id\"".into()))?;
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
    Ok(NewRow {
        id: id.to_string(),
        payload: v.get("payload").filter(|p| !p.is_null()).cloned(),
        vector,
    })
}

/// The documents added to the index at `dir` (its journal, a torn last line left out), each
/// with its full-length vector as it was added; none when it has no journal.
pub fn read_journal(dir: &Path, dim: usize) -> Result<Vec<NewRow>> {
    let path = dir.join(JOURNAL);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let good = good_length(&bytes);
    bytes[..good]
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| parse_line(&path, i + 1, line, dim))
        .collect()
}

impl Collection {
    /// Opens the index at `dir` and replays its journal (cutting a torn last line).
    pub fn open(dir: &Path) -> Result<Self> {
        let index = Index::open(dir)?;
        let path = dir.join(JOURNAL);
        let mut extra = Extra {
            ids: Vec::new(),
            payloads: Vec::new(),
            levels: index.levels().into_iter().map(MemoryLevel::new).collect(),
            known: (0..index.len()).map(|r| index.id(r).to_string()).collect(),
        };
        if path.exists() {
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let good = good_length(&bytes);
            for (i, line) in bytes[..good].split(|&b| b == b'\n').enumerate() {
                if !line.is_empty() {
                    let row = parse_line(&path, i + 1, line, index.full_dim())?;
                    extra.push(row)?;
                }
            }
            if good < bytes.len() {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| Error::io(&path, e))?;
                f.set_len(good as u64).map_err(|e| Error::io(&path, e))?;
                f.sync_all().map_err(|e| Error::io(&path, e))?;
            }
        }
        Ok(Collection {
            index,
            extra: RwLock::new(extra),
            journal: Mutex::new((path, None)),
        })
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Rows in the built index and the journal.
    pub fn len(&self) -> usize {
        self.index.len() + self.extra.read().map_or(0, |e| e.ids.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row's payload, built rows first (`None` where a row has none).
    pub fn payloads(&self) -> impl Iterator<Item = Option<Value>> + '_ {
        let extra: Vec<Option<Value>> = self
            .extra
            .read()
            .map(|e| e.payloads.clone())
            .unwrap_or_default();
        (0..self.index.len())
            .map(|r| self.index.payload(r))
            .chain(extra)
    }

    /// Appends `rows` durably (written and `fsync`ed before this returns), skipping ids already
    /// present.
    pub fn add(&self, rows: Vec<NewRow>) -> Result<Added> {
        let dim = self.index.full_dim();
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.vector.len() != dim) {
            return Err(Error::invalid(
                format!("document {i} ({})", r.id),
                format!("has {} dims, the index holds {dim}", r.vector.len()),
            ));
        }
        let mut journal = self.journal.lock().map_err(|_| poisoned())?;
        let mut out = Added::default();
        let fresh: Vec<NewRow> = {
            let extra = self.extra.read().map_err(|_| poisoned())?;
            let mut seen = HashSet::new();
            rows.into_iter()
                .filter(|r| {
                    let new = !extra.known.contains(&r.id) && seen.insert(r.id.clone());
                    if !new {
                        out.existing.push(r.id.clone());
                    }
                    new
                })
                .collect()
        };
        if fresh.is_empty() {
            return Ok(out);
        }
        let mut text = String::new();
        for r in &fresh {
            let line = serde_json::json!({"id": r.id, "payload": r.payload, "vector": r.vector});
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let (path, file) = &mut *journal;
        if file.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&*path)
                .map_err(|e| Error::io(&*path, e))?;
            *file = Some(f);
        }
        let f = file.as_mut().expect("opened above");
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| Error::io(&*path, e))?;
        let mut extra = self.extra.write().map_err(|_| poisoned())?;
        for r in fresh {
            out.added.push(r.id.clone());
            extra.push(r)?;
        }
        Ok(out)
    }

    /// The `k` best rows for each query (full-length vectors) through `funnel`, among the rows
    /// whose payload passes `filter`: the built index's own search when nothing was added and
    /// nothing is filtered, else the same stages over the passing rows of both.
    pub fn search(
        &self,
        queries: &[Vec<f32>],
        funnel: &Funnel,
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<Vec<Found>>> {
        let extra = self.extra.read().map_err(|_| poisoned())?;
        let filter = filter.filter(|f| !f.is_empty());
        // no stage keeps more rows than there are (a client's k or @keep cannot make the
        // shortlists allocate beyond the collection)
        let rows = (self.index.len() + extra.ids.len()).max(1);
        let k = k.min(rows);
        let keeps = funnel.keeps(k);
        let funnel = &Funnel {
            stages: funnel
                .stages
                .iter()
                .zip(keeps)
                .map(|(s, keep)| crate::Stage {
                    level: s.level,
                    keep: Some(keep.min(rows)),
                })
                .collect(),
        };
        if extra.ids.is_empty() && filter.is_none() {
            let hits = self.index.search(queries, funnel, k)?;
            return Ok(hits
                .into_iter()
                .map(|h| {
                    h.iter()
                        .map(|h| self.found(&extra, h.row as usize, h.score))
                        .collect()
                })
                .collect());
        }
        self.index.check_funnel(funnel, k)?;
        let n = self.index.len();
        let rows: Vec<usize> = (0..n + extra.ids.len())
            .filter(|&r| filter.is_none_or(|f| f.matches(self.payload(&extra, r).as_ref())))
            .collect();
        Ok(queries
            .par_iter()
            .map(|q| {
                let mut cands: Vec<(f32, usize)> = rows.iter().map(|&r| (0.0, r)).collect();
                for (stage, keep) in funnel.stages.iter().zip(funnel.keeps(k)) {
                    let (level, p) = (stage.level, Prepared::new(q, stage.level));
                    let built = self.index.rows(level).ok();
                    let mem = extra.levels.iter().find(|m| m.level() == level);
                    for c in cands.iter_mut() {
                        c.0 = match (c.1 < n, built) {
                            (true, Some(rows)) => score(rows, &p, level.dim, c.1),
                            (false, _) => mem.map_or(f32::MIN, |m| m.score(&p, c.1 - n)),
                            (true, None) => f32::MIN,
                        };
                    }
                    // best first; ties by lower row, as the index's own top-k
                    cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    cands.truncate(keep);
                }
                cands
                    .iter()
                    .map(|&(s, r)| self.found(&extra, r, s))
                    .collect()
            })
            .collect())
    }

    fn payload(&self, extra: &Extra, row: usize) -> Option<Value> {
        match row < self.index.len() {
            true => self.index.payload(row).filter(|p| !p.is_null()),
            false => extra.payloads[row - self.index.len()].clone(),
        }
    }

    fn found(&self, extra: &Extra, row: usize, score: f32) -> Found {
        let n = self.index.len();
        Found {
            id: match row < n {
                true => self.index.id(row).to_string(),
                false => extra.ids[row - n].clone(),
            },
            score,
            payload: self.payload(extra, row),
        }
    }
}

impl Extra {
    fn push(&mut self, r: NewRow) -> Result<()> {
        for m in &mut self.levels {
            m.push(&r.vector)?;
        }
        self.known.insert(r.id.clone());
        self.ids.push(r.id);
        self.payloads.push(r.payload);
        Ok(())
    }
}

fn poisoned() -> Error {
    Error::invalid("collection", "a writer panicked; restart the server")
}

#[cfg(test)]
mod tests;
