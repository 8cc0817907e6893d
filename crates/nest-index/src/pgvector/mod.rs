//! PostgreSQL + pgvector (>= 0.7): the same funnel as SQL, for corpora that outgrow one machine.
//!
//! `export` copies an index's full float32 vectors into a table as `halfvec(D)` (half the bytes
//! of `vector`), with HNSW expression indexes for first stages: `binary_quantize(...)::bit(d)`
//! (`bit_hamming_ops`) for each binary level and `subvector(embedding, 1, d)::halfvec(d)`
//! (`halfvec_cosine_ops`) for each smaller float32 level. `search` runs a funnel as nested
//! `ORDER BY ... LIMIT` subqueries: the first stage uses its HNSW index (approximate, with
//! `hnsw.ef_search` set to the shortlist, at most 1000), later stages rescore the shortlist
//! exactly. The stored vectors are the index's normalised ones, so `<=>` (cosine distance) and
//! `<#>` order alike; scores are reported as cosines. pgvector has no int8 type: int8 stages are
//! refused.
//!
//! The table's comment (`COMMENT ON TABLE`) holds the index's `source` as JSON (model, layer,
//! max length, document prompt): [`table_source`] reads it back, so that a search embeds its
//! queries as the documents were, and hits carry each row's payload.

use std::fmt::Write as _;

pub use postgres::Client;
use postgres::NoTls;

use crate::funnel::Funnel;
use crate::level::{Level, Precision};
use crate::reader::Index;
use crate::{Error, Result};

mod copy;
mod table;
mod table_name;
use copy::{copy_added, copy_rows};
pub use table::{table_dim, table_source};
pub use table_name::check_table;

fn pg(e: postgres::Error) -> Error {
    Error::Postgres(match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    })
}

pub fn connect(dsn: &str) -> Result<Client> {
    Client::connect(dsn, NoTls).map_err(pg)
}

/// The SQL expression a stage orders by, over the column or query expression `v`.
fn distance(level: Level, full: usize, v: &str, q: &str) -> Result<String> {
    let d = level.dim;
    let cut = |x: &str| {
        if d == full {
            x.to_string()
        } else {
            format!("subvector({x}, 1, {d})::halfvec({d})")
        }
    };
    Ok(match level.precision {
        Precision::Binary => format!(
            "(binary_quantize({})::bit({d}) <~> binary_quantize({})::bit({d}))",
            cut(v),
            cut(q)
        ),
        Precision::Float32 => format!("({} <=> {})", cut(v), cut(q)),
        Precision::Int8 => {
            return Err(Error::invalid(
                "funnel",
                format!("{level}: pgvector has no int8 vectors; use binary or float32 stages"),
            ))
        }
    })
}

/// The index expression (and operator class) serving a first stage at `level`.
fn index_expr(level: Level, full: usize) -> Option<String> {
    let d = level.dim;
    let cut = if d == full {
        "embedding".to_string()
    } else {
        format!("subvector(embedding, 1, {d})::halfvec({d})")
    };
    match level.precision {
        Precision::Binary => Some(format!(
            "((binary_quantize({cut})::bit({d})) bit_hamming_ops)"
        )),
        Precision::Float32 if d < full => Some(format!("(({cut}) halfvec_cosine_ops)")),
        _ => None,
    }
}

/// The funnel as one SQL query with the query vector as `$1` (text).
pub fn funnel_sql(table: &str, funnel: &Funnel, full: usize, k: usize) -> Result<String> {
    check_table(table)?;
    if funnel.stages.is_empty() || k == 0 {
        return Err(Error::invalid("funnel", "needs a stage and k >= 1"));
    }
    let q = format!("($1::text::halfvec({full}))");
    let keeps = funnel.keeps(k);
    let mut sql = String::new();
    for (i, (s, keep)) in funnel.stages.iter().zip(&keeps).enumerate() {
        if s.level.dim > full {
            return Err(Error::invalid(
                "funnel",
                format!("{} is wider than the {full}-dim vectors", s.level),
            ));
        }
        let dist = distance(s.level, full, "embedding", &q)?;
        let from = if i == 0 {
            table.to_string()
        } else {
            format!("({sql}) AS s{i}")
        };
        sql = format!(
            "SELECT id, embedding, payload, {dist} AS dist FROM {from} ORDER BY {dist} LIMIT {keep}"
        );
    }
    let last = funnel
        .stages
        .last()
        .map(|s| s.level)
        .ok_or_else(|| Error::invalid("funnel", "empty"))?;
    let score = match last.precision {
        Precision::Binary => format!("1 - 2 * dist / {}", last.dim),
        _ => "1 - dist".to_string(),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "SELECT id, ({score})::float4 AS score, payload::text FROM ({sql}) AS f ORDER BY dist, id"
    );
    Ok(out)
}

/// What `export` wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportReport {
    pub rows: usize,
    pub indexes: Vec<String>,
    pub seconds: f64,
}

/// Copies `index` into `table` (see the module doc). Refuses an existing table unless
/// `overwrite`; the table is created and filled in one transaction.
///
/// `hnsw`: the levels to build HNSW indexes for (`None`: every binary level and every float32
/// level narrower than the vectors).
pub fn export(
    index: &Index,
    dsn: &str,
    table: &str,
    overwrite: bool,
    hnsw: Option<&[Level]>,
) -> Result<ExportReport> {
    let t0 = std::time::Instant::now();
    let full_level = export_level(index, table)?;
    let mut client = connect(dsn)?;
    let mut tx = client.transaction().map_err(pg)?;
    create_table(&mut tx, index, table, overwrite)?;
    let journal = crate::collection::read_journal(index.dir(), index.full_dim())?;
    let built = copy_rows(
        &mut tx,
        index,
        full_level,
        table,
        (0..index.len(), &journal),
    )?;
    let added = copy_added(&mut tx, index, table, &journal)?;
    let indexes = create_indexes(&mut tx, index, table, hnsw)?;
    tx.commit().map_err(pg)?;
    Ok(ExportReport {
        rows: built + added,
        indexes,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The three phases of [`export`] for several processes filling one table at once (each its
/// own range of rows, in its own transaction): [`Export::Create`] by one process, then
/// [`Export::Rows`] by every process, then [`Export::Finish`] by one. Unlike [`export`], a
/// failure midway leaves a partial table (rerun with `overwrite`).
#[derive(Debug, Clone)]
pub enum Export<'a> {
    /// Create the (empty) table, refusing an existing one unless `overwrite`.
    Create { overwrite: bool },
    /// Copy these rows of the index.
    Rows(std::ops::Range<usize>),
    /// Build the HNSW indexes and analyse the table.
    Finish { hnsw: Option<&'a [Level]> },
}

/// Runs one phase of a parallel export; returns the HNSW indexes made (Finish) or none.
pub fn export_phase(index: &Index, dsn: &str, table: &str, phase: Export) -> Result<Vec<String>> {
    let full_level = export_level(index, table)?;
    let journal = crate::collection::read_journal(index.dir(), index.full_dim())?;
    let mut client = connect(dsn)?;
    let mut tx = client.transaction().map_err(pg)?;
    let made = match phase {
        Export::Create { overwrite } => {
            create_table(&mut tx, index, table, overwrite)?;
            Vec::new()
        }
        Export::Rows(rows) => {
            copy_rows(&mut tx, index, full_level, table, (rows, &journal))?;
            Vec::new()
        }
        Export::Finish { hnsw } => {
            copy_added(&mut tx, index, table, &journal)?; // one process, after every built row
            create_indexes(&mut tx, index, table, hnsw)?
        }
    };
    tx.commit().map_err(pg)?;
    Ok(made)
}

/// Checks the table name and that the index has the full float32 level the export copies.
fn export_level(index: &Index, table: &str) -> Result<Level> {
    check_table(table)?;
    let full = index.full_dim();
    let full_level = Level {
        precision: Precision::Float32,
        dim: full,
    };
    index.rows(full_level).map_err(|_| {
        Error::invalid("index", format!("the export needs the full float32 level ({full_level}); rebuild with float32 at dim {full}"))
    })?;
    Ok(full_level)
}

/// Creates the table, its comment the index's `source` (see the module doc).
fn create_table(
    tx: &mut postgres::Transaction,
    index: &Index,
    table: &str,
    overwrite: bool,
) -> Result<()> {
    let full = index.full_dim();
    tx.batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
        .map_err(pg)?;
    let exists: bool = tx
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .map_err(pg)?
        .get(0);
    if exists && !overwrite {
        return Err(Error::invalid(
            "table",
            format!("'{table}' exists; pass --overwrite to replace it"),
        ));
    }
    // (a literal: COMMENT takes no parameters; PostgreSQL's standard strings keep backslashes)
    let source = index.manifest().source.to_string().replace('\'', "''");
    let columns = format!(
        "id text PRIMARY KEY, row_no integer NOT NULL, embedding halfvec({full}) NOT NULL, \
         payload jsonb"
    );
    tx.batch_execute(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} ({columns}); \
         COMMENT ON TABLE {table} IS '{source}'"
    ))
    .map_err(pg)
}

/// The HNSW indexes of the export (see [`export`]'s `hnsw`), then ANALYZE.
fn create_indexes(
    tx: &mut postgres::Transaction,
    index: &Index,
    table: &str,
    hnsw: Option<&[Level]>,
) -> Result<Vec<String>> {
    let full = index.full_dim();
    let mut indexes = Vec::new();
    let levels = match hnsw {
        Some(l) => l.to_vec(),
        None => index.levels(),
    };
    for level in levels {
        if let Some(expr) = index_expr(level, full) {
            let name = format!("{table}_{}_{}", level.precision.name(), level.dim);
            tx.batch_execute(&format!("CREATE INDEX {name} ON {table} USING hnsw {expr}"))
                .map_err(pg)?;
            indexes.push(name);
        }
    }
    tx.batch_execute(&format!("ANALYZE {table}")).map_err(pg)?;
    Ok(indexes)
}

/// A pgvector hit: the document id, the last stage's score and the row's payload.
#[derive(Debug, Clone, PartialEq)]
pub struct PgHit {
    pub id: String,
    pub score: f32,
    pub payload: Option<serde_json::Value>,
}

/// Runs `funnel` in SQL for each query (full-length vectors).
pub fn search(
    client: &mut Client,
    table: &str,
    queries: &[Vec<f32>],
    funnel: &Funnel,
    k: usize,
) -> Result<Vec<Vec<PgHit>>> {
    let full = queries.first().map_or(0, Vec::len);
    let sql = funnel_sql(table, funnel, full, k)?;
    let first = funnel.keeps(k)[0];
    client
        .batch_execute(&format!("SET hnsw.ef_search = {}", first.clamp(40, 1000)))
        .map_err(pg)?;
    let stmt = client.prepare(&sql).map_err(pg)?;
    queries
        .iter()
        .map(|q| {
            let mut unit = q.clone();
            nest_core::vector::l2_normalize(&mut unit);
            let mut lit = String::from("[");
            for (j, x) in unit.iter().enumerate() {
                if j > 0 {
                    lit.push(',');
                }
                let _ = write!(lit, "{x}");
            }
            lit.push(']');
            Ok(client
                .query(&stmt, &[&lit])
                .map_err(pg)?
                .iter()
                .map(|r| PgHit {
                    id: r.get(0),
                    score: r.get(1),
                    payload: r
                        .get::<_, Option<String>>(2)
                        .and_then(|p| serde_json::from_str(&p).ok()),
                })
                .collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_of_a_three_stage_funnel() {
        let f = Funnel::parse("binary:384@1000>float32:64@100>float32:384").unwrap();
        let s = funnel_sql("docs", &f, 384, 10).unwrap();
        assert!(s.contains("binary_quantize(embedding)::bit(384) <~> binary_quantize(($1::text::halfvec(384)))::bit(384)"), "{s}");
        assert!(
            s.contains("subvector(embedding, 1, 64)::halfvec(64) <=>"),
            "{s}"
        );
        assert!(
            s.contains("LIMIT 1000") && s.contains("LIMIT 100") && s.contains("LIMIT 10"),
            "{s}"
        );
        assert!(funnel_sql("docs; drop", &f, 384, 10).is_err());
        assert!(check_table("full").is_err() && check_table("Select").is_err());
        assert!(check_table("full_docs").is_ok() && check_table("docs").is_ok());
        assert!(funnel_sql("docs", &Funnel::parse("int8:64").unwrap(), 384, 10).is_err());
        assert_eq!(
            index_expr(Level::parse("binary:384").unwrap(), 384).unwrap(),
            "((binary_quantize(embedding)::bit(384)) bit_hamming_ops)"
        );
        assert!(index_expr(Level::parse("float32:384").unwrap(), 384).is_none());
    }
}
