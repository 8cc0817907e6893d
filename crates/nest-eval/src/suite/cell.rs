//! The metrics of one (layer, dim, precision) cell of one task, per task family, and each
//! item's score (for significance tests).

use std::collections::{BTreeMap, HashMap};

use tch::{Kind, Tensor};

use super::rows::Rows;
use super::space::{row_sim, rows_at, space};
use super::spec::GridSpec;
use crate::items::Items;
use crate::metrics::classify::{accuracy_macro_f1, LogReg};
use crate::metrics::pair::pair_scores;
use crate::metrics::retrieval::{mean, query_scores, rank_docs};
use crate::metrics::spearman;
use crate::quantize::{scoring_rows, Precision};

/// The metrics of one cell and its per-item scores (see [`crate::items`]).
pub(super) fn cell_metrics(
    rows: &Rows,
    pooled: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> (BTreeMap<String, f64>, Items) {
    let mut m = BTreeMap::new();
    let items;
    match rows {
        Rows::Scored { a, b, gold } => {
            let all = Tensor::cat(&[a, b], 0);
            let cos = row_sim(
                &space(pooled, a, &all, dim, p, g),
                &space(pooled, b, &all, dim, p, g),
                p,
            );
            m.insert("spearman".into(), 100.0 * spearman(&cos, gold));
            m.insert(
                "pearson".into(),
                100.0 * crate::metrics::pearson(&cos, gold),
            );
            items = Items::from_f64(&cos);
        }
        Rows::Labelled { a, b, labels } => {
            let all = Tensor::cat(&[a, b], 0);
            let cos = row_sim(
                &space(pooled, a, &all, dim, p, g),
                &space(pooled, b, &all, dim, p, g),
                p,
            );
            let s = pair_scores(&cos, labels);
            m.insert("accuracy".into(), 100.0 * s.accuracy);
            m.insert("f1".into(), 100.0 * s.f1);
            m.insert("ap".into(), 100.0 * s.ap);
            m.insert("accuracy_threshold".into(), s.accuracy_threshold);
            m.insert("f1_threshold".into(), s.f1_threshold);
            items = Items::from_f64(&cos);
        }
        Rows::Classes {
            train,
            test,
            ytr,
            yte,
            classes,
        } => {
            let xtr = space(pooled, train, train, dim, p, g);
            let xte = space(pooled, test, train, dim, p, g);
            let model = LogReg::fit(&xtr, ytr, *classes, g.logreg);
            let pred = model.predict(&xte);
            let (acc, f1) = accuracy_macro_f1(yte, &pred, *classes);
            items = Items(pred.iter().map(|&c| c as f32).collect());
            m.insert("accuracy".into(), 100.0 * acc);
            m.insert("macro_f1".into(), 100.0 * f1);
            m.insert("logreg_iterations".into(), model.iterations as f64);
        }
        Rows::Search {
            docs,
            doc_ids,
            queries,
            qrels,
        } => {
            let corpus = Corpus {
                docs,
                doc_ids,
                queries,
                qrels,
            };
            (m, items) = search_metrics(&corpus, pooled, dim, p, g);
        }
    }
    (m, items)
}

/// A retrieval task's rows, borrowed from [`Rows::Search`].
struct Corpus<'a> {
    docs: &'a Tensor,
    doc_ids: &'a [String],
    queries: &'a Tensor,
    qrels: &'a [HashMap<String, i64>],
}

/// The retrieval metrics of one cell (nDCG@10, MRR@10, recall, MAP; with binary rescoring also
/// the unrescored nDCG@10) and each query's nDCG@10.
fn search_metrics(
    c: &Corpus,
    pooled: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> (BTreeMap<String, f64>, Items) {
    let (docs, doc_ids, queries, qrels) = (c.docs, c.doc_ids, c.queries, c.qrels);
    let mut m = BTreeMap::new();
    let d = scoring_rows(&space(pooled, docs, docs, dim, p, g), p);
    let q = scoring_rows(&space(pooled, queries, docs, dim, p, g), p);
    let scores = q.matmul(&d.transpose(0, 1)).to_kind(Kind::Double); // [nq, nd]
    let rescore = (p == Precision::Binary && g.rescore > 0).then(|| {
        let qf = rows_at(pooled, queries, dim, g);
        qf.matmul(&d.transpose(0, 1)).to_kind(Kind::Double) // float query x ±1 doc
    });
    let depth = 1000.min(doc_ids.len());
    let nq = qrels.len();
    let mut per_query = Vec::with_capacity(nq);
    let mut plain = Vec::new();
    for (qi, rel) in qrels.iter().enumerate() {
        let s: Vec<f64> = Vec::try_from(&scores.get(qi as i64)).unwrap_or_default();
        let mut scored: Vec<(f64, &str)> = s
            .iter()
            .copied()
            .zip(doc_ids.iter().map(String::as_str))
            .collect();
        rank_docs(&mut scored);
        let ranked: Vec<&str> = scored.iter().take(depth).map(|x| x.1).collect();
        if let Some(rs) = &rescore {
            plain.push(query_scores(&ranked, rel));
            let head = (10 * g.rescore).min(ranked.len());
            let pos: HashMap<&str, usize> = doc_ids
                .iter()
                .enumerate()
                .map(|(i, d)| (d.as_str(), i))
                .collect();
            let fs: Vec<f64> = Vec::try_from(&rs.get(qi as i64)).unwrap_or_default();
            let mut top: Vec<(f64, &str)> =
                ranked[..head].iter().map(|d| (fs[pos[d]], *d)).collect();
            rank_docs(&mut top);
            let reranked: Vec<&str> = top
                .iter()
                .map(|x| x.1)
                .chain(ranked[head..].iter().copied())
                .collect();
            per_query.push(query_scores(&reranked, rel));
        } else {
            per_query.push(query_scores(&ranked, rel));
        }
    }
    let s = mean(&per_query);
    let items = Items(per_query.iter().map(|q| q.ndcg_at_10 as f32).collect());
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
