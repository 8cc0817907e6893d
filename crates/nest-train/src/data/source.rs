//! The training sources: each read in its layout ([`read_source`]), with its prompts, and
//! tokenised once ([`load_sources`]).

use std::path::Path;

use nest_core::data::{read_pairs, read_sentences, read_sts, TsvTable};

use crate::recipe::{DataFormat, DataSource};
use crate::Result;

/// One source, read and tokenised: `texts[i]` holds example `i`'s columns (1 for single, 2 for
/// pairs and scored pairs, 3 for triplets); `ids` the same, tokenised.
#[derive(Debug)]
pub struct Source {
    pub spec: DataSource,
    pub texts: Vec<Vec<String>>,
    pub ids: Vec<Vec<Vec<i64>>>,
    /// Gold scores of scored pairs.
    pub scores: Vec<f64>,
    /// Per column, the prompt's tokens at the start of each text that pooling leaves out (0:
    /// none, or the model pools them: `include_prompt`).
    pub prompt_tokens: Vec<usize>,
}

impl Source {
    pub fn len(&self) -> usize {
        self.texts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
    pub(crate) fn columns(&self) -> usize {
        self.texts.first().map_or(0, Vec::len)
    }
    pub(super) fn length(&self, i: usize) -> usize {
        self.ids[i].iter().map(Vec::len).max().unwrap_or(0)
    }
}

/// Reads one source in its format, as TSV or (`.jsonl`) JSON lines (checked layouts; file and
/// line in every error).
pub fn read_source(spec: &DataSource) -> Result<(Vec<Vec<String>>, Vec<f64>)> {
    check_exists(spec)?;
    let p: &Path = &spec.path;
    if super::jsonl::is_jsonl(p) {
        return super::jsonl::read(p, spec.format);
    }
    read_tsv(p, spec.format).map_err(|e| match e {
        // a header that fits no layout: say which ones this format accepts
        nest_core::Error::Content { path, message } if message.starts_with("line 1: header") => {
            let accepted = super::jsonl::layouts(spec.format);
            let message = format!(
                "{message} (a {:?} file takes the columns {accepted}; as TSV (or .csv) with \
                 that header row, or as .jsonl with those keys)",
                spec.format
            );
            nest_core::Error::Content { path, message }.into()
        }
        other => other.into(),
    })
}

/// The error reading `spec` would end with when its file is missing (naming the script that
/// makes it, if the recipe says), before anything slower than a `stat` runs.
fn check_exists(spec: &DataSource) -> Result<()> {
    let p: &Path = &spec.path;
    if p.is_file() {
        return Ok(());
    }
    let message = match (&spec.made_by, p.exists()) {
        (Some(cmd), false) => format!("not found; this recipe's data is made by `{cmd}`"),
        (None, false) => {
            let what = "a [[data]] path; a recipe file's relative paths are looked for beside \
                        it, then in the current folder";
            return Err(missing(p, what).into());
        }
        (_, true) => "not a file (a [[data]] path)".into(),
    };
    Err(nest_core::Error::content(p, message).into())
}

/// The recipe's inputs that must exist before anything loads: every `[[data]]` file
/// ([`check_exists`]) and `eval_data` (when set).
pub(crate) fn check_inputs(data: &[DataSource], eval_data: &str) -> Result<()> {
    data.iter().try_for_each(check_exists)?;
    let eval = Path::new(eval_data);
    match eval_data.is_empty() || eval.is_file() {
        true => Ok(()),
        false => Err(missing(
            eval,
            "the recipe's eval_data; a recipe file's relative paths are looked for beside it, \
             then in the current folder",
        )
        .into()),
    }
}

/// The error of a file that does not exist (an I/O error of kind `NotFound`, which Python
/// raises as `FileNotFoundError`); `what` says which input it is.
fn missing(p: &Path, what: &str) -> nest_core::Error {
    let e = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("no such file ({what})"),
    );
    nest_core::Error::io(p, e)
}

/// Reads a TSV source in `format` (the single format also reads plain text and JSONL
/// sentences: `nest_core::data::read_sentences`).
fn read_tsv(p: &Path, format: DataFormat) -> nest_core::Result<(Vec<Vec<String>>, Vec<f64>)> {
    Ok(match format {
        DataFormat::Scored => {
            let rows = read_sts(p)?;
            (
                rows.iter()
                    .map(|r| vec![r.sentence1.clone(), r.sentence2.clone()])
                    .collect(),
                rows.iter().map(|r| r.score).collect(),
            )
        }
        DataFormat::Triplets => {
            let t = TsvTable::read(p, &["anchor", "positive"])?;
            let width = 2 + tuple_negatives(p, &t.header)?;
            (
                t.rows.iter().map(|(_, r)| r[..width].to_vec()).collect(),
                vec![],
            )
        }
        DataFormat::Pairs => {
            let header = nest_core::fsutil::read_text(p)?;
            let sep = if nest_core::data::is_csv(p) {
                ','
            } else {
                '\t'
            };
            let first = header.lines().next().unwrap_or_default();
            let first = first.trim_start_matches('\u{feff}').replace('"', "");
            if first.starts_with(&format!("anchor{sep}positive")) {
                let t = TsvTable::read(p, &["anchor", "positive"])?;
                (anchor_pairs(&t)?, vec![])
            } else {
                let rows = read_pairs(p)?;
                (
                    rows.iter()
                        .filter(|r| r.label)
                        .map(|r| vec![r.sentence1.clone(), r.sentence2.clone()])
                        .collect(),
                    vec![],
                )
            }
        }
        DataFormat::Single => {
            let table = p.extension().is_some_and(|e| e == "tsv") || nest_core::data::is_csv(p);
            let texts = if table {
                let t = TsvTable::read(p, &["text"])?;
                t.rows.into_iter().map(|(_, r)| r[0].clone()).collect()
            } else {
                read_sentences(p)?
                    .into_iter()
                    .filter(|s| !s.trim().is_empty())
                    .collect::<Vec<_>>()
            };
            (texts.into_iter().map(|s| vec![s]).collect(), vec![])
        }
    })
}

/// The positive pairs of an `anchor positive [label]` table: with a `label` column (as `nest
/// mine --output-format labeled-pair` writes), the rows labelled 1 only (the others pair an
/// anchor with a negative).
fn anchor_pairs(t: &TsvTable) -> nest_core::Result<Vec<Vec<String>>> {
    let Some(l) = t.header.iter().position(|h| h == "label") else {
        return Ok(t.rows.iter().map(|(_, r)| r[..2].to_vec()).collect());
    };
    let mut pairs = Vec::new();
    for (line, r) in &t.rows {
        match r[l].trim() {
            "1" | "1.0" | "true" => pairs.push(r[..2].to_vec()),
            "0" | "0.0" | "false" => {}
            other => {
                let message = format!("label is '{other}', expected 0 or 1");
                return Err(t.row_error(*line, message));
            }
        }
    }
    Ok(pairs)
}

/// The negatives of a triplets header after `anchor, positive`: `negative` (a triplet; later
/// columns ignored) or `negative_1 .. negative_n` (an n-tuple, as `nest mine --output-format
/// n-tuple` and sentence-transformers write them; every negative is a candidate of the
/// MNRL loss).
fn tuple_negatives(p: &Path, header: &[String]) -> nest_core::Result<usize> {
    match header.get(2).map(String::as_str) {
        Some("negative") => Ok(1),
        Some("negative_1") => Ok(header[2..]
            .iter()
            .enumerate()
            .take_while(|(i, h)| **h == format!("negative_{}", i + 1))
            .count()),
        _ => Err(nest_core::Error::content(
            p,
            format!(
                "line 1: header is '{}', expected 'anchor\\tpositive\\tnegative' or \
                 'anchor\\tpositive\\tnegative_1\\t..\\tnegative_n'",
                header.join("\\t")
            ),
        )),
    }
}

/// Token ids of each text (the model's tokenizer).
/// sha256 of the examples of `sources` as read, in order: every text (the prompt not
/// included) and gold score. What a checkpoint records of its run's data: the plan is a function
/// of it, so a resume on other data would train on other batches.
pub fn fingerprint(sources: &[Source]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in sources {
        h.update((s.texts.len() as u64).to_le_bytes());
        for text in s.texts.iter().flatten() {
            h.update((text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        }
        for score in &s.scores {
            h.update(score.to_bits().to_le_bytes());
        }
    }
    format!("{:x}", h.finalize())
}

pub type Tokenize<'a> = &'a dyn Fn(&[&str]) -> Result<Vec<Vec<i64>>>;

/// Reads and tokenises every source.
pub fn load_sources(
    specs: &[DataSource],
    tokenize: Tokenize,
    include_prompt: bool,
) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (texts, scores) = read_source(spec)?;
        if texts.is_empty() {
            return Err(nest_core::Error::content(
                &spec.path,
                "no usable training examples (e.g. no positive pairs)",
            )
            .into());
        }
        let columns = texts[0].len();
        let prompts = column_prompts(spec, columns)
            .map_err(|m| nest_core::Error::value(format!("data[{i}].prompts"), m))?;
        let prompted: Vec<String> = texts
            .iter()
            .flat_map(|row| row.iter().zip(&prompts).map(|(t, p)| format!("{p}{t}")))
            .collect();
        let flat: Vec<&str> = prompted.iter().map(String::as_str).collect();
        let mut ids_flat = tokenize(&flat)?.into_iter();
        let ids = texts
            .iter()
            .map(|row| {
                row.iter()
                    .map(|_| ids_flat.next().unwrap_or_default())
                    .collect()
            })
            .collect();
        // the prompt's own tokens less its final special token (sentence-transformers'
        // `prompt_length`), left out of the pooling unless the model pools them
        let prompt_tokens = prompts
            .iter()
            .map(|p| match p.is_empty() || include_prompt {
                true => Ok(0),
                false => Ok(tokenize(&[p.as_str()])?[0].len().saturating_sub(1)),
            })
            .collect::<Result<Vec<usize>>>()?;
        out.push(Source {
            spec: spec.clone(),
            texts,
            ids,
            scores,
            prompt_tokens,
        });
    }
    Ok(out)
}

/// The prompt of each of a source's `columns` (empty strings: none): its `prompts` key holds
/// none, one for every column, or one per column.
fn column_prompts(spec: &DataSource, columns: usize) -> std::result::Result<Vec<String>, String> {
    match spec.prompts.as_slice() {
        [] => Ok(vec![String::new(); columns]),
        [one] => Ok(vec![one.clone(); columns]),
        many if many.len() == columns => Ok(many.to_vec()),
        many => Err(format!(
            "{} prompts for the {columns} column(s) of a {:?} file: give one for every column \
             or one per column",
            many.len(),
            spec.format
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::DataFormat;

    /// `nest mine --output-format labeled-pair` writes `anchor positive label`, the label-0 rows
    /// pairing an anchor with a negative: read as pairs, the label-1 rows alone (TSV, CSV and
    /// JSON lines alike); all of them were trained on as positives.
    #[test]
    fn labelled_anchor_pairs_keep_the_positives_only() {
        let d = tempfile::tempdir().unwrap();
        let files = [
            (
                "m.tsv",
                "anchor\tpositive\tlabel\nq\tgood\t1\nq\tbad\t0\nr\tfine\t1\n".to_string(),
            ),
            (
                "m.csv",
                "anchor,positive,label\nq,good,1\nq,bad,0\nr,fine,1\n".to_string(),
            ),
            (
                "m.jsonl",
                ["good:1", "bad:0", "fine:1"]
                    .iter()
                    .zip(["q", "q", "r"])
                    .map(|(p, a)| {
                        let (text, label) = p.split_once(':').unwrap();
                        let label: i64 = label.parse().unwrap();
                        let row =
                            serde_json::json!({"anchor": a, "positive": text, "label": label});
                        format!("{row}\n")
                    })
                    .collect(),
            ),
        ];
        for (name, text) in files {
            let path = d.path().join(name);
            std::fs::write(&path, text).unwrap();
            assert_eq!(crate::data::infer_format(&path), Some(DataFormat::Pairs));
            let spec = DataSource {
                path,
                format: DataFormat::Pairs,
                weight: 1.0,
                prompts: vec![],
                made_by: None,
            };
            let (rows, _) = read_source(&spec).unwrap();
            assert_eq!(rows, [["q", "good"], ["r", "fine"]], "{name}");
        }
        let bad = d.path().join("b.tsv");
        std::fs::write(&bad, "anchor\tpositive\tlabel\nq\tgood\tyes\n").unwrap();
        let spec = DataSource {
            path: bad,
            format: DataFormat::Pairs,
            weight: 1.0,
            prompts: vec![],
            made_by: None,
        };
        let e = read_source(&spec).unwrap_err().to_string();
        assert!(e.contains("line 2: label is 'yes', expected 0 or 1"), "{e}");
    }
}
