//! Retrieval (BEIR layout): each query ranks the whole corpus by similarity, nDCG@10 x100
//! with trec_eval's conventions (SciFact's test qrels by default).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use nest_core::data::Beir;
use nest_model::prompt::TaskPrompts;
use tch::{Kind, Tensor};

use super::{wrong_source, At, Rows, TaskData, TaskFamily};
use crate::items::Items;
use crate::metrics::retrieval::{mean, query_scores, rank_docs, RetrievalScores};
use crate::quantize::{scoring_rows, Precision};
use crate::suite::space::rows_at;
use crate::suite::texts::TextIndex;
use crate::tasks::{Task, TaskKind, TaskSource};
use crate::Result;

/// The retrieval family.
pub(crate) struct Retrieval;

impl TaskFamily for Retrieval {
    fn kind(&self) -> TaskKind {
        TaskKind::Retrieval
    }

    fn name(&self) -> &'static str {
        "retrieval"
    }

    fn main_metric(&self) -> &'static str {
        "ndcg_at_10"
    }

    /// Retrieval tasks are reported one by one (no per-cell family average).
    fn averaged(&self) -> bool {
        false
    }

    fn default_sources(&self, root: &Path) -> Vec<TaskSource> {
        vec![TaskSource::Retrieval {
            dir: root.join("scifact"),
            split: "test".into(),
        }]
    }

    fn read(&self, src: &TaskSource) -> Result<Task> {
        let TaskSource::Retrieval { dir, split } = src else {
            return Err(wrong_source(self, src));
        };
        let b = Beir::read(dir, split)?;
        let name = format!(
            "{}/{split}",
            dir.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        Ok(Task {
            name,
            kind: TaskKind::Retrieval,
            files: vec![
                dir.join("corpus.jsonl"),
                dir.join("queries.jsonl"),
                dir.join("qrels").join(format!("{split}.tsv")),
            ],
            warnings: b.warnings.clone(),
            data: Box::new(BeirData(b)),
        })
    }

    /// The mean of the resampled queries' nDCG@10.
    fn statistic(&self, _gold: &[f32], items: &[f32], idx: &[usize]) -> f64 {
        100.0 * idx.iter().map(|&i| items[i] as f64).sum::<f64>() / idx.len().max(1) as f64
    }

    fn needs_gold(&self) -> bool {
        false
    }
}

/// A retrieval task's corpus, queries and qrels.
#[derive(Debug)]
struct BeirData(Beir);

impl TaskData for BeirData {
    fn timing_texts(&self) -> Vec<&str> {
        self.0.queries.iter().map(|q| q.1.as_str()).collect()
    }

    fn rows(&self, index: &mut TextIndex, prompts: &TaskPrompts) -> Box<dyn Rows> {
        let b = &self.0;
        Box::new(SearchRows {
            docs: index.ids(&prompts.document, b.corpus.iter().map(|d| d.1.as_str())),
            doc_ids: b.corpus.iter().map(|d| d.0.clone()).collect(),
            queries: index.ids(&prompts.query, b.queries.iter().map(|q| q.1.as_str())),
            qrels: b
                .queries
                .iter()
                .map(|q| b.qrels.get(&q.0).cloned().unwrap_or_default())
                .collect(),
        })
    }
}

/// The documents (read with the document prompt) and queries (with the query prompt) in the
/// text cache, and each query's relevant documents.
struct SearchRows {
    docs: Tensor,
    doc_ids: Vec<String>,
    queries: Tensor,
    qrels: Vec<HashMap<String, i64>>,
}

impl Rows for SearchRows {
    fn n_examples(&self) -> usize {
        self.qrels.len()
    }

    fn gold(&self) -> Option<Items> {
        None
    }

    /// nDCG@10, MRR@10, recall and MAP x100 (with binary rescoring also the unrescored
    /// nDCG@10); each query's nDCG@10.
    fn score(&self, at: &At) -> (BTreeMap<String, f64>, Items) {
        let (per_query, plain) = self.per_query(at);
        let s = mean(&per_query);
        let items = Items(per_query.iter().map(|q| q.ndcg_at_10 as f32).collect());
        let mut m = BTreeMap::new();
        m.insert("ndcg_at_10".into(), 100.0 * s.ndcg_at_10);
        m.insert("mrr_at_10".into(), 100.0 * s.mrr_at_10);
        m.insert("recall_at_100".into(), 100.0 * s.recall_at_100);
        m.insert("recall_at_1000".into(), 100.0 * s.recall_at_1000);
        m.insert("map_at_100".into(), 100.0 * s.map_at_100);
        if !plain.is_empty() {
            m.insert(
                "ndcg_at_10_no_rescore".into(),
                100.0 * mean(&plain).ndcg_at_10,
            );
        }
        (m, items)
    }
}

impl SearchRows {
    /// Each query's scores, and with binary rescoring each query's scores before it.
    fn per_query(&self, at: &At) -> (Vec<RetrievalScores>, Vec<RetrievalScores>) {
        let (p, g) = (at.precision, at.grid);
        let d = scoring_rows(&at.space(&self.docs, &self.docs), p);
        let q = scoring_rows(&at.space(&self.queries, &self.docs), p);
        let scores = q.matmul(&d.transpose(0, 1)).to_kind(Kind::Double); // [nq, nd]
        let rescore = (p == Precision::Binary && g.rescore > 0).then(|| {
            let qf = rows_at(at.pooled, &self.queries, at.dim, g);
            qf.matmul(&d.transpose(0, 1)).to_kind(Kind::Double) // float query x ±1 doc
        });
        let depth = 1000.min(self.doc_ids.len());
        let mut per_query = Vec::with_capacity(self.qrels.len());
        let mut plain = Vec::new();
        for (qi, rel) in self.qrels.iter().enumerate() {
            let s: Vec<f64> = Vec::try_from(&scores.get(qi as i64)).unwrap_or_default();
            let mut scored: Vec<(f64, &str)> = s
                .iter()
                .copied()
                .zip(self.doc_ids.iter().map(String::as_str))
                .collect();
            rank_docs(&mut scored);
            let ranked: Vec<&str> = scored.iter().take(depth).map(|x| x.1).collect();
            if let Some(rs) = &rescore {
                plain.push(query_scores(&ranked, rel));
                let fs: Vec<f64> = Vec::try_from(&rs.get(qi as i64)).unwrap_or_default();
                let reranked = self.rerank(&ranked, &fs, 10 * g.rescore);
                per_query.push(query_scores(&reranked, rel));
            } else {
                per_query.push(query_scores(&ranked, rel));
            }
        }
        (per_query, plain)
    }

    /// `ranked` with its first `head` documents re-ranked by the float query's scores `fs`
    /// (one per document, in corpus order).
    fn rerank<'a>(&'a self, ranked: &[&'a str], fs: &[f64], head: usize) -> Vec<&'a str> {
        let head = head.min(ranked.len());
        let pos: HashMap<&str, usize> = self
            .doc_ids
            .iter()
            .enumerate()
            .map(|(i, d)| (d.as_str(), i))
            .collect();
        let mut top: Vec<(f64, &str)> = ranked[..head].iter().map(|d| (fs[pos[d]], *d)).collect();
        rank_docs(&mut top);
        top.iter()
            .map(|x| x.1)
            .chain(ranked[head..].iter().copied())
            .collect()
    }
}
