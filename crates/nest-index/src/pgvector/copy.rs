//! The rows of an export: one `COPY` (text format) of `(id, row number, full vector, payload)`
//! lines, the built rows of the index (but those a server deleted or replaced since), then the
//! documents a server added to it (its journal, [`Replayed`]).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;

use super::pg;
use crate::collection::journal::Replayed;
use crate::level::Level;
use crate::reader::Index;
use crate::{Error, Result};

/// COPYs rows `rows` of the index (id, row number, full vector, payload) into the table, but
/// those whose ids `journal` names (deleted or replaced through a server); returns how many.
pub(super) fn copy_rows(
    tx: &mut postgres::Transaction,
    index: &Index,
    full_level: Level,
    table: &str,
    (rows, journal): (std::ops::Range<usize>, &Replayed),
) -> Result<usize> {
    let rows: Vec<usize> = rows
        .filter(|&r| !journal.named.contains_key(index.id(r)))
        .collect();
    let n = rows.len();
    let rows = rows.into_iter().map(|r| {
        let v = index.vector(full_level, r).unwrap_or(&[]);
        (index.id(r), r, Cow::Borrowed(v), index.payload(r))
    });
    copy_lines(tx, table, rows)?;
    Ok(n)
}

/// The documents a server added to the index (its journal), after its built rows: their
/// vectors normalised as the built rows' full level is. Returns how many.
pub(super) fn copy_added(
    tx: &mut postgres::Transaction,
    index: &Index,
    table: &str,
    journal: &Replayed,
) -> Result<usize> {
    let added = &journal.rows;
    let rows = added.iter().enumerate().map(|(i, r)| {
        let v = crate::level::prefix_normalized(&r.vector, r.vector.len());
        (
            r.id.as_str(),
            index.len() + i,
            Cow::Owned(v),
            r.payload.clone(),
        )
    });
    copy_lines(tx, table, rows)?;
    Ok(added.len())
}

/// One `COPY` of `(id, row number, full vector, payload)` rows into `table`.
fn copy_lines<'a>(
    tx: &mut postgres::Transaction,
    table: &str,
    rows: impl Iterator<Item = (&'a str, usize, Cow<'a, [f32]>, Option<Value>)>,
) -> Result<()> {
    let mut w = tx
        .copy_in(&format!(
            "COPY {table} (id, row_no, embedding, payload) FROM STDIN"
        ))
        .map_err(pg)?;
    let mut line = String::new();
    for (id, r, v, payload) in rows {
        line.clear();
        copy_escape(id, &mut line);
        let _ = write!(line, "\t{r}\t[");
        for (j, x) in v.iter().enumerate() {
            if j > 0 {
                line.push(',');
            }
            let _ = write!(line, "{x}");
        }
        line.push_str("]\t");
        match payload {
            Some(p) if !p.is_null() => copy_escape(&p.to_string(), &mut line),
            _ => line.push_str("\\N"),
        }
        line.push('\n');
        w.write_all(line.as_bytes())
            .map_err(|e| Error::Postgres(e.to_string()))?;
    }
    w.finish().map_err(pg)?;
    Ok(())
}

fn copy_escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}
