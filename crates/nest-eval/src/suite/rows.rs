//! A task's examples as rows of the text cache ([`Rows`]), with their gold labels or scores.

use std::collections::HashMap;

use nest_model::prompt::TaskPrompts;
use tch::Tensor;

use super::texts::TextIndex;
use crate::items::Items;
use crate::tasks::{Task, TaskData};

/// A task's rows as indices into the text cache.
pub(super) enum Rows {
    Scored {
        a: Tensor,
        b: Tensor,
        gold: Vec<f64>,
    },
    Labelled {
        a: Tensor,
        b: Tensor,
        labels: Vec<bool>,
    },
    Classes {
        train: Tensor,
        test: Tensor,
        ytr: Vec<i64>,
        yte: Vec<i64>,
        classes: usize,
    },
    Search {
        docs: Tensor,
        doc_ids: Vec<String>,
        queries: Tensor,
        qrels: Vec<HashMap<String, i64>>,
    },
}

pub(super) fn rows_of(task: &Task, index: &mut TextIndex, prompts: &TaskPrompts) -> Rows {
    let text = &prompts.text;
    match &task.data {
        TaskData::Sts(p) => Rows::Scored {
            a: index.ids(text, p.iter().map(|x| x.sentence1.as_str())),
            b: index.ids(text, p.iter().map(|x| x.sentence2.as_str())),
            gold: p.iter().map(|x| x.score).collect(),
        },
        TaskData::Pair(p) => Rows::Labelled {
            a: index.ids(text, p.iter().map(|x| x.sentence1.as_str())),
            b: index.ids(text, p.iter().map(|x| x.sentence2.as_str())),
            labels: p.iter().map(|x| x.label).collect(),
        },
        TaskData::Cls { train, test } => {
            let mut names: Vec<&str> = train
                .iter()
                .chain(test.iter())
                .map(|t| t.label.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            let cls = |l: &str| names.binary_search(&l).map(|i| i as i64).unwrap_or(0);
            Rows::Classes {
                train: index.ids(text, train.iter().map(|t| t.text.as_str())),
                test: index.ids(text, test.iter().map(|t| t.text.as_str())),
                ytr: train.iter().map(|t| cls(&t.label)).collect(),
                yte: test.iter().map(|t| cls(&t.label)).collect(),
                classes: names.len(),
            }
        }
        TaskData::Retrieval(b) => Rows::Search {
            docs: index.ids(&prompts.document, b.corpus.iter().map(|d| d.1.as_str())),
            doc_ids: b.corpus.iter().map(|d| d.0.clone()).collect(),
            queries: index.ids(&prompts.query, b.queries.iter().map(|q| q.1.as_str())),
            qrels: b
                .queries
                .iter()
                .map(|q| b.qrels.get(&q.0).cloned().unwrap_or_default())
                .collect(),
        },
    }
}

/// The per-item gold a significance test needs beside the cells' items (see [`crate::items`]).
pub(super) fn gold_of(rows: &Rows) -> Option<Items> {
    match rows {
        Rows::Scored { gold, .. } => Some(Items::from_f64(gold)),
        Rows::Labelled { labels, .. } => Some(Items(
            labels.iter().map(|&l| if l { 1.0 } else { 0.0 }).collect(),
        )),
        Rows::Classes { yte, .. } => Some(Items(yte.iter().map(|&c| c as f32).collect())),
        Rows::Search { .. } => None,
    }
}

pub(super) fn n_examples(rows: &Rows) -> usize {
    match rows {
        Rows::Scored { gold, .. } => gold.len(),
        Rows::Labelled { labels, .. } => labels.len(),
        Rows::Classes { yte, .. } => yte.len(),
        Rows::Search { qrels, .. } => qrels.len(),
    }
}
