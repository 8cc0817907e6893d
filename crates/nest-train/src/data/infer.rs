//! The format of a data file named without one (a flag's `--data FILE`), from its columns as
//! sentence-transformers decides a dataset's by its column names: `anchor positive negative`
//! (or `negative_1 ..`) is triplets, `sentence1 sentence2 score` scored, a lone `text` column
//! or a plain text file single, anything else pairs (`anchor positive [label]`, `sentence1
//! sentence2 [label]`, `premise hypothesis label`).

use std::io::BufRead;
use std::path::Path;

use crate::recipe::DataFormat;

/// The format `path`'s first line (a TSV or CSV header, or the first JSON object's keys) says;
/// `None` when the file cannot be read (the reader's own error names it later).
pub fn infer_format(path: &Path) -> Option<DataFormat> {
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(file).read_line(&mut first).ok()?;
    let first = first.trim_start_matches('\u{feff}').trim();
    let columns: Vec<String> = if super::jsonl::is_jsonl(path) {
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(first).ok()?;
        obj.keys().cloned().collect()
    } else if path.extension().is_some_and(|e| e == "tsv") || nest_core::data::is_csv(path) {
        let sep = if nest_core::data::is_csv(path) {
            ','
        } else {
            '\t'
        };
        first
            .split(sep)
            .map(|c| c.trim_matches('"').to_string())
            .collect()
    } else {
        return Some(DataFormat::Single); // a plain text file: one sentence a line
    };
    let has = |k: &str| columns.iter().any(|c| c == k);
    Some(if has("anchor") && (has("negative") || has("negative_1")) {
        DataFormat::Triplets
    } else if has("score") {
        DataFormat::Scored
    } else if columns == ["text"] {
        DataFormat::Single
    } else {
        DataFormat::Pairs
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layout_names_its_format() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                "t.tsv",
                "anchor\tpositive\tnegative\na\tb\tc\n",
                DataFormat::Triplets,
            ),
            (
                "n.jsonl",
                "{\"anchor\": \"a\", \"positive\": \"b\", \"negative_1\": \"c\"}\n",
                DataFormat::Triplets,
            ),
            (
                "s.csv",
                "\u{feff}sentence1,sentence2,score\na,b,1\n",
                DataFormat::Scored,
            ),
            (
                "p.tsv",
                "anchor\tpositive\tlabel\na\tb\t1\n",
                DataFormat::Pairs,
            ),
            (
                "l.jsonl",
                "{\"sentence1\": \"a\", \"sentence2\": \"b\"}\n",
                DataFormat::Pairs,
            ),
            ("x.tsv", "text\nhello\n", DataFormat::Single),
            ("y.txt", "hello\nworld\n", DataFormat::Single),
        ];
        for (name, text, want) in cases {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            assert_eq!(infer_format(&p), Some(want), "{name}");
        }
        assert_eq!(infer_format(&d.path().join("missing.tsv")), None);
    }

    /// Through the recipe: a flag's `--data mined.jsonl` (the triplets `nest mine` writes)
    /// trains as triplets (read as pairs, their negatives were dropped without a word); a
    /// format named wins.
    #[test]
    fn a_data_flag_without_its_format_takes_its_columns() {
        let d = tempfile::tempdir().unwrap();
        let mined = d.path().join("mined.jsonl");
        let row = serde_json::json!({"anchor": "a", "positive": "b", "negative": "c"});
        std::fs::write(&mined, format!("{row}\n")).unwrap();
        let format = |data: String| {
            let mut ov = crate::recipe::Overrides::new();
            ov.push("model", "m".into(), "--model");
            ov.push("loss", "mnrl".into(), "--loss");
            ov.push("data", data.into(), "--data");
            crate::Recipe::load(None, &ov).unwrap().data[0].format
        };
        let m = mined.display().to_string();
        assert_eq!(format(m.clone()), DataFormat::Triplets);
        assert_eq!(format(format!("{m}:pairs")), DataFormat::Pairs);
    }
}
