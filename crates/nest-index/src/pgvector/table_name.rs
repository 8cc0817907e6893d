//! Table names Nest writes into SQL unquoted: checked here, once, before anything is sent.

use crate::{Error, Result};

/// PostgreSQL's reserved key words (its documentation, appendix C: "reserved" and "reserved
/// (can be function or type)"), which cannot name a table without quotes.
const RESERVED: [&str; 97] = [
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
];

/// Checks a table name: letters, digits and `_`, not starting with a digit, not a reserved
/// word (no quoting games).
pub fn check_table(t: &str) -> Result<()> {
    let ok = !t.is_empty()
        && t.len() <= 63
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !t.starts_with(|c: char| c.is_ascii_digit());
    if !ok {
        return Err(Error::invalid(
            "table",
            format!("'{t}': use letters, digits and _ (not starting with a digit), at most 63"),
        ));
    }
    if RESERVED.contains(&t.to_ascii_lowercase().as_str()) {
        return Err(Error::invalid(
            "table",
            format!("'{t}' is a reserved word in PostgreSQL's SQL; choose another name"),
        ));
    }
    Ok(())
}
