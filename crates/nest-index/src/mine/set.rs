//! The texts a mining run encodes, grouped as sentence-transformers groups them: the corpus is
//! the given corpus (or none) followed by every positive, exact duplicates removed (first
//! kept), so a positive missing from the corpus joins it at the end; queries are deduplicated
//! (first kept), a repeated query gathering all its positives in the order they came.

use std::collections::HashMap;

/// Queries, corpus and each query's positives, with what was merged counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MineSet {
    /// Distinct queries, in first-seen order.
    pub queries: Vec<String>,
    /// Distinct corpus texts: the given corpus's, then positives it lacked.
    pub corpus: Vec<String>,
    /// Per query: its positives' corpus rows, distinct, in input order.
    pub positives: Vec<Vec<u32>>,
    /// Corpus texts dropped as exact duplicates of an earlier one (given corpus only).
    pub duplicate_corpus: usize,
    /// Distinct positives that the given corpus lacked (appended to it); 0 without a corpus.
    pub positives_added: usize,
    /// Input pairs whose query repeats an earlier pair's.
    pub repeated_queries: usize,
    /// The most input pairs of one query, repeated pairs included (what sentence-transformers
    /// counts as `max_positives`: a grouped count of the dataset's rows).
    pub max_pairs: usize,
}

impl MineSet {
    /// Builds the set from `(query, positive)` pairs and an optional separate corpus.
    pub fn new(pairs: &[(String, String)], corpus: Option<&[String]>) -> Self {
        let mut s = MineSet::default();
        let mut row_of: HashMap<&str, u32> = HashMap::new();
        let separate = corpus.is_some();
        for t in corpus.unwrap_or(&[]) {
            if row_of.contains_key(t.as_str()) {
                s.duplicate_corpus += 1;
            } else {
                row_of.insert(t, s.corpus.len() as u32);
                s.corpus.push(t.clone());
            }
        }
        for (_, p) in pairs {
            if !row_of.contains_key(p.as_str()) {
                row_of.insert(p, s.corpus.len() as u32);
                s.corpus.push(p.clone());
                s.positives_added += usize::from(separate);
            }
        }
        let mut query_of: HashMap<&str, usize> = HashMap::new();
        let mut pairs_of: Vec<usize> = Vec::new();
        for (q, p) in pairs {
            let qi = *query_of.entry(q).or_insert_with(|| {
                s.queries.push(q.clone());
                s.positives.push(Vec::new());
                pairs_of.push(0);
                s.queries.len() - 1
            });
            pairs_of[qi] += 1;
            let row = row_of[p.as_str()];
            if !s.positives[qi].contains(&row) {
                s.positives[qi].push(row);
            }
        }
        s.repeated_queries = pairs.len() - s.queries.len();
        s.max_pairs = pairs_of.into_iter().max().unwrap_or(0);
        s
    }

    /// sentence-transformers' `max_positives`, which sizes the window: the most input pairs of
    /// one query (a repeated identical pair counts twice, as its grouped count does).
    pub fn max_positives(&self) -> usize {
        self.max_pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn corpus_deduplicated_positives_appended_queries_grouped() {
        let pairs: Vec<(String, String)> = [("q1", "a"), ("q2", "z"), ("q1", "b"), ("q1", "a")]
            .iter()
            .map(|(q, p)| (q.to_string(), p.to_string()))
            .collect();
        let corpus = s(&["a", "b", "c", "a"]);
        let m = MineSet::new(&pairs, Some(&corpus));
        assert_eq!(m.corpus, s(&["a", "b", "c", "z"]));
        assert_eq!(m.queries, s(&["q1", "q2"]));
        assert_eq!(m.positives, vec![vec![0, 1], vec![3]]);
        assert_eq!((m.duplicate_corpus, m.positives_added), (1, 1));
        assert_eq!((m.repeated_queries, m.max_positives()), (2, 3));
        // without a corpus, the positives are the corpus
        let m = MineSet::new(&pairs, None);
        assert_eq!(m.corpus, s(&["a", "z", "b"]));
        assert_eq!(m.positives_added, 0);
    }
}
