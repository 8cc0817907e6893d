use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A TSV file read whole, header checked against the expected columns; a `.csv` file is read as
/// CSV (commas, `"` quoting as RFC 4180: what pandas' `to_csv` and HF datasets' `to_csv` write).
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
        let comma = is_csv(path);
        let sep = if comma { "," } else { "\\t" };
        let mut rdr = csv::ReaderBuilder::new()
            .delimiter(if comma { b',' } else { b'\t' })
            .quoting(comma)
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
                    header.join(sep),
                    expected.join(sep)
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

/// Whether `path` is read as CSV (its extension `.csv`, any case) rather than TSV.
pub fn is_csv(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line()).unwrap_or(0);
    Error::Row {
        path: path.to_path_buf(),
        line,
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.csv` is read as CSV (as Python's `csv` module writes it: commas and line breaks
    /// inside quoted fields, `""` for a quote), a `.tsv` with the quote as literal text.
    #[test]
    fn csv_by_extension_tsv_without_quoting() {
        let d = tempfile::tempdir().unwrap();
        let csv = d.path().join("pairs.CSV");
        let text = "\u{feff}anchor,positive\n\"a, b\",\"say \"\"hi\"\"\nthere\"\nplain,x\n";
        std::fs::write(&csv, text).unwrap();
        let t = TsvTable::read(&csv, &["anchor", "positive"]).unwrap();
        let rows: Vec<_> = t.rows.iter().map(|(_, r)| r.clone()).collect();
        assert_eq!(
            rows,
            [vec!["a, b", "say \"hi\"\nthere"], vec!["plain", "x"]]
        );
        assert_eq!(t.rows[1].0, 4, "line numbers count the quoted line break");
        let tsv = d.path().join("pairs.tsv");
        std::fs::write(&tsv, "anchor\tpositive\n\"a\tb\"\n").unwrap();
        let t = TsvTable::read(&tsv, &["anchor", "positive"]).unwrap();
        assert_eq!(t.rows[0].1, ["\"a", "b\""]);
        // a CSV of other columns: its header as read, with commas
        std::fs::write(&csv, "query,answer\nq,a\n").unwrap();
        let e = TsvTable::read(&csv, &["anchor", "positive"])
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("line 1: header is 'query,answer', expected the columns 'anchor,positive'"),
            "{e}"
        );
        // a row with a column missing names its line
        std::fs::write(&csv, "anchor,positive\na,b\nc\n").unwrap();
        let e = TsvTable::read(&csv, &["anchor", "positive"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3: 1 columns, expected 2"), "{e}");
    }
}
