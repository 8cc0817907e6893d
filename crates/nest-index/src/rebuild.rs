//! A rebuild over an index that a server has changed (its journal,
//! [`crate::collection::JOURNAL`]: documents added, replaced and deleted): those changes are in
//! no input file, so `--overwrite` would drop them without a word. The caller chooses: carry
//! the documents into the new index (their vectors as they were embedded, so only when the new
//! index embeds at the same point) or drop them; without a choice the rebuild is refused
//! ([`crate::IndexBuilder::keep_added`]). The input has the last word on every id it holds.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::collection::journal::{self, Entry};
use crate::collection::JOURNAL;
use crate::{Error, Result};

/// How many documents were added, replaced or deleted through a server in the index at `dir`
/// (the ids its journal names; 0 when it has none).
pub fn added_rows(dir: &Path) -> usize {
    journal::named_ids(dir)
}

/// The refusal when a rebuild would drop `n` added documents and no choice was made.
pub fn refusal(dir: &Path, n: usize) -> Error {
    Error::invalid(
        "--out",
        format!(
            "{} holds {n} documents added, replaced or deleted through `nest serve` since it \
             was built ({}): they are in no input, and --overwrite replaces the index; pass \
             --keep-added (Python: keep_added=True) to carry the added and replaced ones into \
             the new index (the input has the last word on the ids it holds), or --drop-added \
             (keep_added=False) to rebuild without them",
            dir.display(),
            dir.join(JOURNAL).display()
        ),
    )
}

/// Whether the added documents of the index at `dir` can be kept in a new index of
/// `full_dim`-dim vectors embedded as `source` says: the same model, layer, max length and
/// document prompt (their vectors are kept as they are).
pub(crate) fn check_keep(dir: &Path, source: &Value, full_dim: usize) -> Result<()> {
    let old = crate::Index::open(dir)?;
    let before = &old.manifest().source;
    let differ: Vec<String> = nest_core::data::point_differences(before, source)
        .into_iter()
        .chain(
            (old.full_dim() != full_dim).then(|| format!("dim {} -> {full_dim}", old.full_dim())),
        )
        .collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        "--keep-added",
        format!(
            "the documents added to {} were embedded otherwise than this build embeds ({}): \
             their vectors would not match the others'; pass --drop-added, or rebuild as before",
            dir.display(),
            differ.join(", ")
        ),
    ))
}

/// Writes the documents of the journal of the index at `dir` into the new index's folder
/// `tmp`, as one put each (the journal compacted), but for the ids the new index holds (the
/// input is newer); returns how many it kept.
pub(crate) fn carry(dir: &Path, tmp: &Path) -> Result<usize> {
    let new = crate::Index::open(tmp)?;
    let new_ids: HashSet<&str> = (0..new.len()).map(|r| new.id(r)).collect();
    let replayed = journal::read_journal(dir, new.full_dim())?;
    let kept: Vec<Entry> = replayed
        .rows
        .into_iter()
        .filter(|r| !new_ids.contains(r.id.as_str()))
        .map(Entry::Put)
        .collect();
    let text: String = kept.iter().map(Entry::line).collect();
    nest_core::fsutil::write_atomic(&tmp.join(JOURNAL), text.as_bytes())?;
    Ok(kept.len())
}
