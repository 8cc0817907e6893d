//! nDCG@10 of compressed embeddings on qrels, with the evaluation suite's metrics (trec_eval
//! conventions, `nest_eval::metrics::retrieval`).

use nest_eval::metrics::retrieval::{mean, query_scores, rank_docs, RetrievalScores};
use nest_model::Adaptor;
use tch::{Kind, Tensor};

use crate::data::{Embeddings, Qrels};
use crate::Result;

/// Retrieval scores of the queries in `qrels` against the whole corpus at `dim`, through
/// `adaptor` (or plain truncation of the normalised embeddings when `None`).
pub fn retrieval(
    adaptor: Option<&Adaptor>,
    corpus: &Embeddings,
    queries: &Embeddings,
    qrels: &Qrels,
    dim: usize,
) -> Result<RetrievalScores> {
    Ok(mean(&per_query(adaptor, corpus, queries, qrels, dim)?))
}

/// [`retrieval`]'s scores of each query, in the qrels' (sorted) order.
pub fn per_query(
    adaptor: Option<&Adaptor>,
    corpus: &Embeddings,
    queries: &Embeddings,
    qrels: &Qrels,
    dim: usize,
) -> Result<Vec<RetrievalScores>> {
    let qi = queries.index();
    let rows: Vec<i64> = qrels.keys().map(|q| qi[q.as_str()]).collect();
    let q = queries.x.index_select(0, &Tensor::from_slice(&rows));
    let (qc, dc) = match adaptor {
        Some(a) => (a.apply(&q, dim)?, a.apply(&corpus.x, dim)?),
        None => (
            nest_model::pooling::truncate_normalize(&nest_model::pooling::l2_normalize(&q), dim),
            nest_model::pooling::truncate_normalize(
                &nest_model::pooling::l2_normalize(&corpus.x),
                dim,
            ),
        ),
    };
    let scores = qc.matmul(&dc.tr()).to_kind(Kind::Double);
    let depth = 100.min(corpus.ids.len() as i64);
    let (top, idx) = scores.topk(depth, 1, true, true);
    let mut per = Vec::with_capacity(rows.len());
    for (i, rel) in qrels.values().enumerate() {
        let s: Vec<f64> = Vec::try_from(top.get(i as i64)).unwrap_or_default();
        let ix: Vec<i64> = Vec::try_from(idx.get(i as i64)).unwrap_or_default();
        let mut scored: Vec<(f64, &str)> = s
            .into_iter()
            .zip(ix.iter().map(|&j| corpus.ids[j as usize].as_str()))
            .collect();
        rank_docs(&mut scored);
        let ranked: Vec<&str> = scored.iter().map(|x| x.1).collect();
        per.push(query_scores(&ranked, rel));
    }
    Ok(per)
}
