//! A built index plus what a server changed since (its journal, [`journal`]: documents added,
//! replaced and deleted), searched together, with payload filters: what `nest serve --index`
//! and `nest search` query.
//!
//! The journal is append-only: each change writes its whole lines, `fsync`s, and only then is
//! acknowledged, so a restart loses nothing acknowledged. Added rows are stored at every level
//! of the index, by the index's own code ([`MemoryLevel`]), and searched by the same funnel as
//! the built rows; a replaced or deleted row stays where it is, marked dead, and is searched no
//! more. An id already present is kept as it is unless the add asks to replace it (a client's
//! retry after a lost answer is safe either way).

use std::collections::{HashMap, HashSet};
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

mod extra;
mod filter;
pub mod journal;
use extra::Extra;
pub use filter::Filter;
pub use journal::{read_journal, Entry, JOURNAL};

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

/// What an add does with an id already present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Existing {
    /// Left as it is (reported as existing): a retried add changes nothing.
    #[default]
    Keep,
    /// Replaced by the new document (an upsert).
    Replace,
}

/// What an add did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Added {
    /// Ids that were not present, written to the journal.
    pub added: Vec<String>,
    /// Ids present before, replaced ([`Existing::Replace`]).
    pub replaced: Vec<String>,
    /// Ids present before, left as they were ([`Existing::Keep`]).
    pub existing: Vec<String>,
}

/// What a delete did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deleted {
    /// Ids deleted.
    pub deleted: Vec<String>,
    /// Ids that were not present (nothing written for them).
    pub missing: Vec<String>,
}

/// A built index and its journal.
#[derive(Debug)]
pub struct Collection {
    index: Index,
    extra: RwLock<Extra>,
    journal: Mutex<JournalFile>,
}

/// The journal this process appends to.
#[derive(Debug)]
struct JournalFile {
    path: PathBuf,
    /// Opened at the first change.
    file: Option<File>,
    /// Its length as this process read and wrote it: another length on disk means another
    /// process changed the index since it was opened.
    len: u64,
}

impl Collection {
    /// Opens the index at `dir` and replays its journal (cutting a torn last line).
    pub fn open(dir: &Path) -> Result<Self> {
        let index = Index::open(dir)?;
        let path = dir.join(JOURNAL);
        let built = index.len();
        let mut extra = Extra {
            built,
            ids: Vec::new(),
            payloads: Vec::new(),
            levels: index.levels().into_iter().map(MemoryLevel::new).collect(),
            live: HashMap::with_capacity(built),
            dead: HashSet::new(),
            twins: HashMap::new(),
        };
        for r in 0..built {
            let id = index.id(r);
            if let Some(before) = extra.live.insert(id.to_string(), r) {
                extra.twins.entry(id.to_string()).or_default().push(before);
            }
        }
        let (entries, good, len) = journal::read(&path, index.full_dim())?;
        let replayed = journal::replay(entries);
        for id in replayed.named.keys() {
            extra.retire(id);
        }
        for row in replayed.rows {
            extra.push(row)?;
        }
        if good < len {
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            f.set_len(good as u64).map_err(|e| Error::io(&path, e))?;
            f.sync_all().map_err(|e| Error::io(&path, e))?;
        }
        Ok(Collection {
            index,
            extra: RwLock::new(extra),
            journal: Mutex::new(JournalFile {
                path,
                file: None,
                len: good as u64,
            }),
        })
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Rows searched: the built index's and the added ones, but those deleted or replaced.
    pub fn len(&self) -> usize {
        self.extra.read().map_or(self.index.len(), |e| e.searched())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every searched row's payload, built rows first (`None` where a row has none).
    pub fn payloads(&self) -> impl Iterator<Item = Option<Value>> + '_ {
        let extra = self.extra.read();
        let payloads: Vec<Option<Value>> = match &extra {
            Ok(e) => (0..e.built + e.ids.len())
                .filter(|r| !e.dead.contains(r))
                .map(|r| self.payload(e, r))
                .collect(),
            Err(_) => Vec::new(),
        };
        payloads.into_iter()
    }

    /// Adds `rows` durably (written and `fsync`ed before this returns); an id already present
    /// is kept or replaced as `existing` says. An id twice in `rows` is taken once, the first.
    pub fn add(&self, rows: Vec<NewRow>, existing: Existing) -> Result<Added> {
        let dim = self.index.full_dim();
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.vector.len() != dim) {
            return Err(Error::invalid(
                format!("document {i} ({})", r.id),
                format!("has {} dims, the index holds {dim}", r.vector.len()),
            ));
        }
        let mut journal = self.journal.lock().map_err(|_| poisoned())?;
        let mut out = Added::default();
        let mut fresh = Vec::new();
        {
            let extra = self.extra.read().map_err(|_| poisoned())?;
            let mut seen = HashSet::new();
            for r in rows {
                let repeat = !seen.insert(r.id.clone());
                match (extra.live.contains_key(&r.id), existing) {
                    (_, Existing::Replace) if repeat => {}
                    (true, Existing::Keep) => out.existing.push(r.id),
                    (false, Existing::Keep) if repeat => out.existing.push(r.id),
                    (true, Existing::Replace) => {
                        out.replaced.push(r.id.clone());
                        fresh.push(r);
                    }
                    (false, _) => {
                        out.added.push(r.id.clone());
                        fresh.push(r);
                    }
                }
            }
        }
        let entries: Vec<Entry> = fresh.into_iter().map(Entry::Put).collect();
        self.write(&mut journal, &entries)?;
        Ok(out)
    }

    /// Deletes the documents of `ids` durably (a line per id written and `fsync`ed before this
    /// returns); ids not present are reported as missing and write nothing.
    pub fn delete(&self, ids: &[String]) -> Result<Deleted> {
        let mut journal = self.journal.lock().map_err(|_| poisoned())?;
        let mut out = Deleted::default();
        let entries: Vec<Entry> = {
            let extra = self.extra.read().map_err(|_| poisoned())?;
            let mut seen = HashSet::new();
            ids.iter()
                .filter(|id| seen.insert(id.as_str()))
                .filter_map(|id| match extra.live.contains_key(id) {
                    true => {
                        out.deleted.push(id.clone());
                        Some(Entry::Delete(id.clone()))
                    }
                    false => {
                        out.missing.push(id.clone());
                        None
                    }
                })
                .collect()
        };
        self.write(&mut journal, &entries)?;
        Ok(out)
    }

    /// Writes `entries` to the journal, `fsync`s, then applies them in memory. Refused when
    /// another process changed the journal since this one read it (what this one holds in
    /// memory would no longer be what the journal says).
    fn write(&self, journal: &mut JournalFile, entries: &[Entry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = &journal.path;
        let on_disk = std::fs::metadata(path).map_or(0, |m| m.len());
        if on_disk != journal.len {
            return Err(Error::invalid(
                JOURNAL,
                format!(
                    "{} changed since this process opened the index ({} bytes, now {on_disk}): \
                     another process added to it; open the index again",
                    path.display(),
                    journal.len
                ),
            ));
        }
        let text: String = entries.iter().map(Entry::line).collect();
        if journal.file.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            journal.file = Some(f);
        }
        let f = journal.file.as_mut().expect("opened above");
        if let Err(e) = f.write_all(text.as_bytes()).and_then(|_| f.sync_data()) {
            // a part written (a full disk) would tear the next change's first line
            let _ = f.set_len(journal.len);
            return Err(Error::io(path, e));
        }
        journal.len += text.len() as u64;
        let mut extra = self.extra.write().map_err(|_| poisoned())?;
        for e in entries {
            match e {
                Entry::Put(r) => extra.push(r.clone())?,
                Entry::Delete(id) => extra.retire(id),
            }
        }
        Ok(())
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
        let rows = extra.searched().max(1);
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
        if extra.ids.is_empty() && extra.dead.is_empty() && filter.is_none() {
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
            .filter(|r| !extra.dead.contains(r))
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

fn poisoned() -> Error {
    Error::invalid("collection", "a writer panicked; restart the server")
}

#[cfg(test)]
mod tests;
