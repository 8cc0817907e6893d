//! Retrieval metrics with trec_eval's conventions (as pytrec_eval computes them for BEIR):
//! documents ranked by score, ties broken by document id in descending order; nDCG uses linear
//! gains `rel / log2(rank + 1)` with the ideal ranking built from every judged relevant document;
//! recall and MAP divide by all relevant documents, retrieved or not.

use std::collections::HashMap;

/// Cut-offs reported for every query and averaged.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RetrievalScores {
    pub ndcg_at_10: f64,
    pub mrr_at_10: f64,
    pub recall_at_100: f64,
    pub recall_at_1000: f64,
    pub map_at_100: f64,
}

/// Orders documents: score descending, then id descending (trec_eval).
pub fn rank_docs(scored: &mut [(f64, &str)]) {
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(a.1)));
}

/// Metrics of one query from its ranked document ids and its relevant documents
/// (`rel > 0`). `recall_at_1000` uses `min(1000, corpus size)` documents, i.e. the ranking given.
pub fn query_scores(ranked: &[&str], relevant: &HashMap<String, i64>) -> RetrievalScores {
    let n_rel = relevant.len() as f64;
    if n_rel == 0.0 {
        return RetrievalScores::default();
    }
    let rel = |d: &str| relevant.get(d).copied().unwrap_or(0);
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, d)| rel(d) as f64 / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<i64> = relevant.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, r)| *r as f64 / ((i + 2) as f64).log2())
        .sum();
    let mrr = ranked
        .iter()
        .take(10)
        .position(|d| rel(d) > 0)
        .map_or(0.0, |p| 1.0 / (p + 1) as f64);
    let hits = |k: usize| ranked.iter().take(k).filter(|d| rel(d) > 0).count() as f64;
    let mut ap = 0.0;
    let mut found = 0.0;
    for (i, d) in ranked.iter().take(100).enumerate() {
        if rel(d) > 0 {
            found += 1.0;
            ap += found / (i + 1) as f64;
        }
    }
    RetrievalScores {
        ndcg_at_10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        mrr_at_10: mrr,
        recall_at_100: hits(100) / n_rel,
        recall_at_1000: hits(1000) / n_rel,
        map_at_100: ap / n_rel,
    }
}

/// Mean of per-query scores.
pub fn mean(scores: &[RetrievalScores]) -> RetrievalScores {
    let n = scores.len().max(1) as f64;
    let mut m = RetrievalScores::default();
    for s in scores {
        m.ndcg_at_10 += s.ndcg_at_10 / n;
        m.mrr_at_10 += s.mrr_at_10 / n;
        m.recall_at_100 += s.recall_at_100 / n;
        m.recall_at_1000 += s.recall_at_1000 / n;
        m.map_at_100 += s.map_at_100 / n;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_query() {
        let rel: HashMap<String, i64> = [("b".to_string(), 1), ("z".to_string(), 1)].into();
        // b at rank 2; z never retrieved
        let s = query_scores(&["a", "b", "c"], &rel);
        assert!((s.mrr_at_10 - 0.5).abs() < 1e-12);
        assert!((s.recall_at_100 - 0.5).abs() < 1e-12);
        assert!((s.map_at_100 - 0.25).abs() < 1e-12);
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((s.ndcg_at_10 - (1.0 / 3f64.log2()) / idcg).abs() < 1e-12);
        let mut v = vec![(0.5, "a"), (0.9, "b"), (0.5, "c")];
        rank_docs(&mut v);
        assert_eq!(
            v.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec!["b", "c", "a"]
        );
    }
}
