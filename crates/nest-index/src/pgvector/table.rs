//! What a table of `nest export pgvector` tells a search before it embeds queries for it: the
//! index's source its export recorded (the table's comment), and the width of its vectors.

use super::{check_table, pg, Client};
use crate::{Error, Result};

/// The `source` an export recorded on `table` (model, layer, max length, document prompt);
/// null for a table of another origin (or exported before 2026-11-30). A table that does not
/// exist is an error naming it (it read as a table without a record: the error then asked for
/// `--index`).
pub fn table_source(client: &mut Client, table: &str) -> Result<serde_json::Value> {
    check_table(table)?;
    let row = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')",
            &[&table],
        )
        .map_err(pg)?;
    if !row.get::<_, bool>(0) {
        return Err(Error::invalid(
            "--table",
            format!(
                "no table '{table}' in this database: export an index into it first (`nest \
                 export pgvector --index DIR --dsn ... --table {table}`)"
            ),
        ));
    }
    let comment: Option<String> = row.get(1);
    Ok(comment
        .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or(serde_json::Value::Null))
}

/// The width of `table`'s `embedding` column (`halfvec(D)` or `vector(D)`: D); none when it has
/// no such column or no declared width.
pub fn table_dim(client: &mut Client, table: &str) -> Result<Option<usize>> {
    check_table(table)?;
    let row = client
        .query_opt(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass($1) \
             AND attname = 'embedding' AND NOT attisdropped",
            &[&table],
        )
        .map_err(pg)?;
    Ok(row
        .map(|r| r.get::<_, i32>(0))
        .filter(|&m| m > 0)
        .map(|m| m as usize))
}
