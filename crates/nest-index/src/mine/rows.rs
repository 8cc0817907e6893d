//! Output rows, one JSON object per line, in `mine_hard_negatives`' formats and row order
//! (queries in first-seen order, each query's positives in input order). Keys are always
//! `anchor`, `positive`, `negative` / `negative_1..n` (what `nest train`'s triplet reader and
//! sentence-transformers' losses read), whatever the input's names.
//!
//! - `triplet`: one row per (positive, found negative): `anchor, positive, negative`
//!   (`scores: [positive, negative]`);
//! - `n-tuple`: one row per positive, only when all `num_negatives` were found: `anchor,
//!   positive, negative_1..n` (`scores: [positive, negative_1..n]`);
//! - `labeled-pair`: per query, each positive then each found negative: `anchor, positive,
//!   label` (1 / 0), or `score` instead of `label`;
//! - `labeled-list`: one row per positive with at least one negative: `anchor, positive: [the
//!   positive, the negatives..]`, `labels: [1, 0..]` or `scores`.

use serde_json::{json, Value};

use crate::{Error, Result};

/// The output layout (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Triplet,
    NTuple,
    LabeledPair,
    LabeledList,
}

impl OutputFormat {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "triplet" => Ok(OutputFormat::Triplet),
            "n-tuple" => Ok(OutputFormat::NTuple),
            "labeled-pair" => Ok(OutputFormat::LabeledPair),
            "labeled-list" => Ok(OutputFormat::LabeledList),
            o => Err(Error::invalid(
                "--output-format",
                format!("'{o}': expected triplet, n-tuple, labeled-pair or labeled-list"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Triplet => "triplet",
            OutputFormat::NTuple => "n-tuple",
            OutputFormat::LabeledPair => "labeled-pair",
            OutputFormat::LabeledList => "labeled-list",
        }
    }
}

/// One query's mined texts.
#[derive(Debug, Clone, Copy)]
pub struct QueryRows<'a> {
    pub anchor: &'a str,
    /// `(text, score)` per positive.
    pub positives: &'a [(&'a str, f32)],
    /// `(text, score)` per negative found, best first.
    pub negatives: &'a [(&'a str, f32)],
    pub num_negatives: usize,
}

fn num(x: f32) -> Value {
    json!(x as f64)
}

/// A JSON object with its keys in the order given (serde_json's map would sort them).
fn obj(pairs: Vec<(String, Value)>) -> String {
    let fields: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Appends `q`'s lines (each ending in `\n`) to `out`; returns how many.
pub fn write_rows(
    format: OutputFormat,
    scores: bool,
    q: &QueryRows<'_>,
    out: &mut String,
) -> usize {
    let a = || ("anchor".to_string(), json!(q.anchor));
    let mut lines: Vec<String> = Vec::new();
    match format {
        OutputFormat::Triplet => {
            for &(p, ps) in q.positives {
                for &(n, ns) in q.negatives {
                    let mut o = vec![
                        a(),
                        ("positive".into(), json!(p)),
                        ("negative".into(), json!(n)),
                    ];
                    if scores {
                        o.push(("scores".into(), json!([num(ps), num(ns)])));
                    }
                    lines.push(obj(o));
                }
            }
        }
        OutputFormat::NTuple if q.negatives.len() >= q.num_negatives => {
            for &(p, ps) in q.positives {
                let mut o = vec![a(), ("positive".into(), json!(p))];
                for (i, &(n, _)) in q.negatives.iter().enumerate() {
                    o.push((format!("negative_{}", i + 1), json!(n)));
                }
                if scores {
                    let s: Vec<Value> = std::iter::once(ps)
                        .chain(q.negatives.iter().map(|n| n.1))
                        .map(num)
                        .collect();
                    o.push(("scores".into(), Value::Array(s)));
                }
                lines.push(obj(o));
            }
        }
        OutputFormat::NTuple => {}
        OutputFormat::LabeledPair => {
            let label = |s: f32, l: u8| match scores {
                true => ("score".to_string(), num(s)),
                false => ("label".to_string(), json!(l)),
            };
            for &(p, ps) in q.positives {
                lines.push(obj(vec![a(), ("positive".into(), json!(p)), label(ps, 1)]));
            }
            for &(n, ns) in q.negatives {
                lines.push(obj(vec![a(), ("positive".into(), json!(n)), label(ns, 0)]));
            }
        }
        OutputFormat::LabeledList if !q.negatives.is_empty() => {
            for &(p, ps) in q.positives {
                let docs: Vec<&str> = std::iter::once(p)
                    .chain(q.negatives.iter().map(|n| n.0))
                    .collect();
                let last = if scores {
                    let s = std::iter::once(ps).chain(q.negatives.iter().map(|n| n.1));
                    ("scores".to_string(), Value::Array(s.map(num).collect()))
                } else {
                    let l = std::iter::once(1).chain(q.negatives.iter().map(|_| 0));
                    ("labels".to_string(), json!(l.collect::<Vec<u8>>()))
                };
                lines.push(obj(vec![a(), ("positive".into(), json!(docs)), last]));
            }
        }
        OutputFormat::LabeledList => {}
    }
    for l in &lines {
        out.push_str(l);
        out.push('\n');
    }
    lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_in_sentence_transformers_order() {
        let pos = [("p1", 0.9f32), ("p2", 0.8)];
        let neg = [("n1", 0.5f32)];
        let q = QueryRows {
            anchor: "q",
            positives: &pos,
            negatives: &neg,
            num_negatives: 2,
        };
        let mut s = String::new();
        assert_eq!(write_rows(OutputFormat::Triplet, true, &q, &mut s), 2);
        assert_eq!(
            s.lines().next().unwrap(),
            r#"{"anchor":"q","positive":"p1","negative":"n1","scores":[0.8999999761581421,0.5]}"#
        );
        let mut s = String::new();
        assert_eq!(
            write_rows(OutputFormat::NTuple, false, &q, &mut s),
            0,
            "1 of 2 found"
        );
        assert_eq!(write_rows(OutputFormat::LabeledPair, false, &q, &mut s), 3);
        assert!(s.ends_with("{\"anchor\":\"q\",\"positive\":\"n1\",\"label\":0}\n"));
        let mut s = String::new();
        assert_eq!(write_rows(OutputFormat::LabeledList, false, &q, &mut s), 2);
        assert!(s.starts_with(r#"{"anchor":"q","positive":["p1","n1"],"labels":[1,0]}"#));
    }
}
