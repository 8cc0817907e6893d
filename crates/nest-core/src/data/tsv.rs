use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A TSV file read whole, header checked against the expected columns.
#[derive(Debug)]
pub struct TsvTable {
    pub path: PathBuf,
    pub header: Vec<String>,
    /// Each row with the 1-based line number it came from.
    pub rows: Vec<(u64, Vec<String>)>,
}

impl TsvTable {
    /// Reads `path`; the header must start with `expected` columns (extra trailing columns are
    /// allowed, e.g. WiC's `word pos index1 index2`). Every row must have as many fields as the
    /// header.
    pub fn read(path: &Path, expected: &[&str]) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut rdr = csv::ReaderBuilder::new()
            .delimiter(b'\t')
            .quoting(false)
            .has_headers(false)
            .flexible(true)
            .from_reader(std::io::BufReader::new(file));
        let mut records = rdr.records();
        let header: Vec<String> = match records.next() {
            None => {
                return Err(Error::content(
                    path,
                    "the file is empty (expected a header row)",
                ))
            }
            Some(r) => r
                .map_err(|e| csv_error(path, e))?
                .iter()
                .map(|s| s.trim_start_matches('\u{feff}').to_string())
                .collect(),
        };
        let ok = header.len() >= expected.len() && header.iter().zip(expected).all(|(h, e)| h == e);
        if !ok {
            return Err(Error::content(
                path,
                format!(
                    "line 1: header is '{}', expected the columns '{}'",
                    header.join("\\t"),
                    expected.join("\\t")
                ),
            ));
        }
        let mut rows = Vec::new();
        for rec in records {
            let rec = rec.map_err(|e| csv_error(path, e))?;
            let line = rec.position().map(|p| p.line()).unwrap_or(0);
            if rec.len() == 1 && rec.get(0).is_some_and(str::is_empty) {
                continue; // blank line
            }
            if rec.len() != header.len() {
                return Err(Error::Row {
                    path: path.to_path_buf(),
                    line,
                    message: format!(
                        "{} columns, expected {} ({})",
                        rec.len(),
                        header.len(),
                        header.join(", ")
                    ),
                });
            }
            rows.push((line, rec.iter().map(str::to_string).collect()));
        }
        if rows.is_empty() {
            return Err(Error::content(
                path,
                "the file has a header but no data rows",
            ));
        }
        Ok(TsvTable {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    /// An error for row `line` of this table.
    pub fn row_error(&self, line: u64, message: impl Into<String>) -> Error {
        Error::Row {
            path: self.path.clone(),
            line,
            message: message.into(),
        }
    }
}

fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line()).unwrap_or(0);
    Error::Row {
        path: path.to_path_buf(),
        line,
        message: e.to_string(),
    }
}
