use std::path::Path;

use super::TsvTable;
use crate::Result;

/// One scored sentence pair (STS-B 0-5, SICK-R 1-5).
#[derive(Debug, Clone, PartialEq)]
pub struct StsPair {
    pub sentence1: String,
    pub sentence2: String,
    pub score: f64,
}

/// Reads a file in the STS layout: `sentence1 \t sentence2 \t score`, one header row.
pub fn read_sts(path: &Path) -> Result<Vec<StsPair>> {
    let t = TsvTable::read(path, &["sentence1", "sentence2", "score"])?;
    t.rows
        .iter()
        .map(|(line, r)| {
            let score: f64 = r[2]
                .trim()
                .parse()
                .map_err(|_| t.row_error(*line, format!("score '{}' is not a number", r[2])))?;
            if !score.is_finite() {
                return Err(t.row_error(*line, format!("score '{}' is not finite", r[2])));
            }
            Ok(StsPair {
                sentence1: r[0].clone(),
                sentence2: r[1].clone(),
                score,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn write(content: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.tsv");
        std::fs::write(&p, content).unwrap();
        (d, p)
    }

    #[test]
    fn reads_pairs_with_literal_quotes() {
        let (_d, p) = write("sentence1\tsentence2\tscore\n\"A\" man\tA man\t4.4\nx\ty\t0\n");
        let v = read_sts(&p).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].sentence1, "\"A\" man");
        assert_eq!(v[0].score, 4.4);
    }

    #[test]
    fn wrong_column_count_names_the_line() {
        let (_d, p) = write("sentence1\tsentence2\tscore\na\tb\t1\na\tb\n");
        match read_sts(&p) {
            Err(Error::Row { line, message, .. }) => {
                assert_eq!(line, 3);
                assert!(message.contains("2 columns, expected 3"), "{message}");
            }
            other => panic!("expected a row error, got {other:?}"),
        }
    }

    #[test]
    fn bad_header_and_bad_score_and_empty() {
        let (_d, p) = write("a\tb\tc\nx\ty\t1\n");
        let e = read_sts(&p).unwrap_err().to_string();
        assert!(e.contains("expected the columns 'sentence1"), "{e}");
        let (_d, p) = write("sentence1\tsentence2\tscore\nx\ty\thigh\n");
        let e = read_sts(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("'high'"), "{e}");
        let (_d, p) = write("");
        assert!(read_sts(&p).unwrap_err().to_string().contains("empty"));
        let (_d, p) = write("sentence1\tsentence2\tscore\n");
        assert!(read_sts(&p)
            .unwrap_err()
            .to_string()
            .contains("no data rows"));
    }
}
