//! What a [`super::Collection`] holds beside its built index: the rows added since, at every
//! level (by the index's own code, [`MemoryLevel`]), and which rows are searched no more.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::NewRow;
use crate::memory::MemoryLevel;
use crate::Result;

/// The rows added since the build, in memory, and which rows are no longer searched.
#[derive(Debug)]
pub(super) struct Extra {
    /// Rows in the built index (rows `0..built` are built, the rest added).
    pub(super) built: usize,
    pub(super) ids: Vec<String>,
    pub(super) payloads: Vec<Option<Value>>,
    pub(super) levels: Vec<MemoryLevel>,
    /// Every searched id, and its row.
    pub(super) live: HashMap<String, usize>,
    /// Rows deleted, or replaced by a later row of their id.
    pub(super) dead: HashSet<usize>,
    /// The earlier rows of an id the built index holds more than once (an index holds its
    /// rows as they were given): retired with the id.
    pub(super) twins: HashMap<String, Vec<usize>>,
}

impl Extra {
    /// Rows searched: built and added, but the dead.
    pub(super) fn searched(&self) -> usize {
        self.built + self.ids.len() - self.dead.len()
    }

    /// Adds `r` as a new row; the row of its id before, if any, is searched no more.
    pub(super) fn push(&mut self, r: NewRow) -> Result<()> {
        for m in &mut self.levels {
            m.push(&r.vector)?;
        }
        self.retire(&r.id);
        self.live.insert(r.id.clone(), self.built + self.ids.len());
        self.ids.push(r.id);
        self.payloads.push(r.payload);
        Ok(())
    }

    /// The row of `id`, if any, searched no more.
    pub(super) fn retire(&mut self, id: &str) {
        if let Some(row) = self.live.remove(id) {
            self.dead.insert(row);
        }
        self.dead.extend(self.twins.remove(id).unwrap_or_default());
    }
}
