//! A rebuild over an index that a server has added documents to (its journal,
//! [`crate::collection::JOURNAL`]): those documents are in no input file, so `--overwrite`
//! would drop them without a word. The caller chooses: carry them into the new index (their
//! vectors as they were embedded, so only when the new index embeds at the same point) or drop
//! them; without a choice the rebuild is refused ([`crate::IndexBuilder::keep_added`]).

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::collection::JOURNAL;
use crate::{Error, Result};

/// How many documents were added to the index at `dir` through a server (lines of its journal;
/// 0 when it has none).
pub fn added_rows(dir: &Path) -> usize {
    std::fs::read(dir.join(JOURNAL)).map_or(0, |b| {
        b.split(|&c| c == b'\n').filter(|l| !l.is_empty()).count()
    })
}

/// The refusal when a rebuild would drop `n` added documents and no choice was made.
pub fn refusal(dir: &Path, n: usize) -> Error {
    Error::invalid(
        "--out",
        format!(
            "{} holds {n} documents added through `nest serve` since it was built ({}): they \
             are in no input, and --overwrite replaces the index; pass --keep-added \
             (Python: keep_added=True) to carry them into the new index (a document of the same \
             id in the input replaces its added one), or --drop-added (keep_added=False) to \
             rebuild without them",
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

/// Copies the journal of the index at `dir` into the new index's folder `tmp`, but for the
/// documents whose ids the new index holds (the input is newer); returns how many it kept.
pub(crate) fn carry(dir: &Path, tmp: &Path) -> Result<usize> {
    let new_ids: HashSet<String> = {
        let new = crate::Index::open(tmp)?;
        (0..new.len()).map(|r| new.id(r).to_string()).collect()
    };
    let path = dir.join(JOURNAL);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    // a torn last line (no newline: never acknowledged) is left out, as the journal's reader does
    let good = bytes.iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    let mut kept = Vec::with_capacity(good);
    let mut n = 0;
    for (i, line) in bytes[..good].split(|&c| c == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| Error::corrupt(&path, format!("line {}: {e}", i + 1)))?;
        if v["id"].as_str().is_some_and(|id| !new_ids.contains(id)) {
            kept.extend_from_slice(line);
            kept.push(b'\n');
            n += 1;
        }
    }
    nest_core::fsutil::write_atomic(&tmp.join(JOURNAL), &kept)?;
    Ok(n)
}
