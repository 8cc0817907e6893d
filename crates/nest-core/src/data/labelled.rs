use std::path::Path;

use super::TsvTable;
use crate::Result;

/// One text with its class name (`text \t label`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledText {
    pub text: String,
    pub label: String,
}

/// Reads a classification file: `text \t label`, the label being the class name.
pub fn read_classification(path: &Path) -> Result<Vec<LabelledText>> {
    let t = TsvTable::read(path, &["text", "label"])?;
    t.rows
        .iter()
        .map(|(line, r)| {
            if r[1].trim().is_empty() {
                return Err(t.row_error(*line, "empty label"));
            }
            Ok(LabelledText {
                text: r[0].clone(),
                label: r[1].clone(),
            })
        })
        .collect()
}

/// One sentence pair with a binary label (1 = paraphrase / same sense / entailment).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledPair {
    pub sentence1: String,
    pub sentence2: String,
    pub label: bool,
}

/// Reads a pair-classification file.
///
/// Two layouts: `sentence1 \t sentence2 \t label` with `label` 0 or 1 (MRPC, WiC; extra trailing
/// columns allowed), or the NLI layout `premise \t hypothesis \t label` with
/// `entailment|neutral|contradiction`, read as entailment (1) vs not (0) (SICK-E).
pub fn read_pairs(path: &Path) -> Result<Vec<LabelledPair>> {
    let nli = {
        let head = crate::fsutil::read_text(path)?;
        head.lines()
            .next()
            .is_some_and(|l| l.trim_start_matches('\u{feff}').starts_with("premise\t"))
    };
    let expected: &[&str] = if nli {
        &["premise", "hypothesis", "label"]
    } else {
        &["sentence1", "sentence2", "label"]
    };
    let t = TsvTable::read(path, expected)?;
    t.rows
        .iter()
        .map(|(line, r)| {
            let label = match (nli, r[2].trim()) {
                (false, "1") => true,
                (false, "0") => false,
                (true, "entailment") => true,
                (true, "neutral" | "contradiction") => false,
                (false, other) => {
                    return Err(t.row_error(*line, format!("label '{other}' is not 0 or 1")))
                }
                (true, other) => {
                    return Err(t.row_error(
                        *line,
                        format!("label '{other}' is not entailment, neutral or contradiction"),
                    ))
                }
            };
            Ok(LabelledPair {
                sentence1: r[0].clone(),
                sentence2: r[1].clone(),
                label,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_both_layouts() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.tsv");
        std::fs::write(
            &p,
            "sentence1\tsentence2\tlabel\tword\na\tb\t1\tx\nc\td\t0\ty\n",
        )
        .unwrap();
        let v = read_pairs(&p).unwrap();
        assert_eq!((v[0].label, v[1].label), (true, false));
        std::fs::write(
            &p,
            "premise\thypothesis\tlabel\na\tb\tentailment\nc\td\tneutral\n",
        )
        .unwrap();
        let v = read_pairs(&p).unwrap();
        assert_eq!((v[0].label, v[1].label), (true, false));
        std::fs::write(&p, "sentence1\tsentence2\tlabel\na\tb\tyes\n").unwrap();
        let e = read_pairs(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("'yes'"), "{e}");
        std::fs::write(&p, "text\tlabel\nx\n").unwrap();
        let e = read_pairs(&p).unwrap_err().to_string();
        assert!(e.contains("expected the columns 'sentence1"), "{e}");
    }

    #[test]
    fn classification_rows() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.tsv");
        std::fs::write(&p, "text\tlabel\nhello there\tgreeting\nbye\t\n").unwrap();
        let e = read_classification(&p).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("empty label"), "{e}");
    }
}
