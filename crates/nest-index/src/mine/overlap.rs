//! How far two mined files agree: the (anchor, positive, negative) triples of each (a triplet
//! row gives one, an n-tuple row one per `negative_i`), and how many of the first file's the
//! second also holds. Rows without a `negative` key (the labeled formats) give none.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::{Error, Result};

type Triple = (String, String, String);

/// The triples of a mined JSONL file.
pub fn triples(path: &Path) -> Result<HashSet<Triple>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut out = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |m: String| Error::corrupt(path, format!("line {}: {m}", i + 1));
        let v: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(a), Some(p)) = (s("anchor"), s("positive")) else {
            return Err(bad("no string `anchor` and `positive`".into()));
        };
        let negs = s("negative")
            .into_iter()
            .chain((1..).map_while(|j| s(&format!("negative_{j}"))));
        for n in negs {
            out.insert((a.clone(), p.clone(), n));
        }
    }
    Ok(out)
}

/// `ours`' triples that `theirs` holds too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    pub shared: usize,
    pub ours: usize,
    pub theirs: usize,
}

impl Overlap {
    pub fn of(ours: &Path, theirs: &Path) -> Result<Self> {
        let (a, b) = (triples(ours)?, triples(theirs)?);
        Ok(Overlap {
            shared: a.intersection(&b).count(),
            ours: a.len(),
            theirs: b.len(),
        })
    }

    /// `shared / ours` in percent (100 when `ours` is empty).
    pub fn percent(&self) -> f64 {
        if self.ours == 0 {
            return 100.0;
        }
        100.0 * self.shared as f64 / self.ours as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triplets_against_n_tuples() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.jsonl"), d.path().join("b.jsonl"));
        std::fs::write(&a, "{\"anchor\":\"q\",\"positive\":\"p\",\"negative\":\"x\"}\n{\"anchor\":\"q\",\"positive\":\"p\",\"negative\":\"y\"}\n").unwrap();
        std::fs::write(
            &b,
            "{\"anchor\":\"q\",\"positive\":\"p\",\"negative_1\":\"y\",\"negative_2\":\"z\"}\n",
        )
        .unwrap();
        let o = Overlap::of(&a, &b).unwrap();
        assert_eq!((o.shared, o.ours, o.theirs), (1, 2, 2));
        assert_eq!(o.percent(), 50.0);
    }
}
