//! What mining searches: the corpus's rows at one level, either encoded into memory
//! ([`MemoryLevel`]) or read memory-mapped from a Nest index's stored level ([`IndexCorpus`],
//! for corpora too large to encode again or to hold in memory), behind one trait
//! ([`Candidates`]) that [`super::mine_queries`] scores through.
//!
//! An index holds its documents as they were given, duplicates included, while a mining set
//! drops exact duplicate texts (first kept) and appends the positives its corpus lacks
//! ([`super::MineSet`]). [`IndexCorpus`] maps between the two: the set's first `kept` rows are
//! the index rows that are first occurrences (in order, so the lower-row tie-break is the
//! same), and the appended positives live in a small [`MemoryLevel`] after them. A query
//! retrieves `k + duplicates` index rows so that `k` distinct ones remain after dropping
//! duplicates.

use rayon::prelude::*;

use crate::funnel::{block_top, score, QUERY_BLOCK};
use crate::level::{Level, Prepared};
use crate::memory::MemoryLevel;
use crate::reader::{Index, Rows};
use crate::{Error, Result};

/// Rows that mining scores queries against: the set's corpus rows, in set order.
pub trait Candidates: Sync {
    /// The level rows are stored and scored at.
    fn level(&self) -> Level;
    /// Rows (the set's corpus size).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A query (at least `dim` coordinates, any norm) prepared for the level.
    fn prepare(&self, query: &[f32]) -> Prepared {
        Prepared::new(query, self.level())
    }
    /// The score of set row `row`.
    fn score(&self, query: &Prepared, row: usize) -> f32;
    /// The `k` best set rows of each query, best first, ties broken by the lower row.
    fn top(&self, queries: &[Prepared], k: usize) -> Vec<Vec<(f32, u32)>>;
}

impl Candidates for MemoryLevel {
    fn level(&self) -> Level {
        MemoryLevel::level(self)
    }
    fn len(&self) -> usize {
        MemoryLevel::len(self)
    }
    fn score(&self, query: &Prepared, row: usize) -> f32 {
        MemoryLevel::score(self, query, row)
    }
    fn top(&self, queries: &[Prepared], k: usize) -> Vec<Vec<(f32, u32)>> {
        MemoryLevel::top(self, queries, k)
    }
}

/// A mining set's corpus read from an index's level (module doc).
#[derive(Debug)]
pub struct IndexCorpus<'a> {
    rows: Rows<'a>,
    level: Level,
    /// Index rows.
    n: usize,
    /// Per index row: its set row, or `u32::MAX` for a dropped duplicate.
    set_row: Vec<u32>,
    /// Per kept set row: its index row.
    index_row: Vec<u32>,
    /// Index rows dropped as duplicates.
    dropped: usize,
    /// Set rows after the kept ones (positives the corpus lacked), encoded by the caller.
    extra: MemoryLevel,
}

impl<'a> IndexCorpus<'a> {
    /// The set corpus `set_corpus` over `index`'s `level`, whose rows are the documents
    /// `documents` (their texts, in index order: the file the index was built from). The
    /// set's corpus must be `documents` deduplicated, then the positives it lacked.
    pub fn new(
        index: &'a Index,
        level: Level,
        documents: &[String],
        set_corpus: &[String],
    ) -> Result<Self> {
        let rows = index.rows(level)?;
        let n = index.len();
        if documents.len() != n {
            return Err(Error::invalid(
                "--corpus-index",
                format!(
                    "{}: holds {n} vectors, the corpus file {} documents",
                    index.dir().display(),
                    documents.len()
                ),
            ));
        }
        let mut set_row = Vec::with_capacity(n);
        let mut index_row = Vec::new();
        for (i, t) in documents.iter().enumerate() {
            // the next distinct text of the set is the next first occurrence
            if set_corpus.get(index_row.len()) == Some(t) {
                set_row.push(index_row.len() as u32);
                index_row.push(i as u32);
            } else {
                set_row.push(u32::MAX);
            }
        }
        let dropped = n - index_row.len();
        Ok(IndexCorpus {
            rows,
            level,
            n,
            set_row,
            index_row,
            dropped,
            extra: MemoryLevel::new(level),
        })
    }

    /// Set rows that come from the index (the distinct documents).
    pub fn kept(&self) -> usize {
        self.index_row.len()
    }

    /// Index rows dropped as exact duplicates of an earlier document.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Adds the vector of the next set row past the index's (a positive the corpus lacked).
    pub fn push_extra(&mut self, v: &[f32]) -> Result<()> {
        self.extra.push(v)
    }

    /// The `k` best distinct index rows of each query, as set rows.
    fn top_index(&self, queries: &[Prepared], k: usize) -> Vec<Vec<(f32, u32)>> {
        let keep = (k + self.dropped).min(self.n);
        let dim = self.level.dim;
        queries
            .par_chunks(QUERY_BLOCK)
            .flat_map_iter(|block| block_top(self.rows, dim, self.n, block, keep))
            .map(|hits| {
                hits.into_iter()
                    .filter_map(|(s, r)| {
                        let row = self.set_row[r as usize];
                        (row != u32::MAX).then_some((s, row))
                    })
                    .take(k)
                    .collect()
            })
            .collect()
    }
}

impl Candidates for IndexCorpus<'_> {
    fn level(&self) -> Level {
        self.level
    }

    fn len(&self) -> usize {
        self.kept() + self.extra.len()
    }

    fn score(&self, query: &Prepared, row: usize) -> f32 {
        match self.index_row.get(row) {
            Some(&r) => score(self.rows, query, self.level.dim, r as usize),
            None => self.extra.score(query, row - self.kept()),
        }
    }

    fn top(&self, queries: &[Prepared], k: usize) -> Vec<Vec<(f32, u32)>> {
        let from_index = self.top_index(queries, k);
        if self.extra.is_empty() {
            return from_index;
        }
        let base = self.kept() as u32;
        let from_extra = self.extra.top(queries, k);
        from_index
            .into_iter()
            .zip(from_extra)
            .map(|(a, b)| {
                let b = b.into_iter().map(|(s, r)| (s, r + base));
                let mut all: Vec<(f32, u32)> = a.into_iter().chain(b).collect();
                all.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
                all.truncate(k);
                all
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::Precision;
    use crate::mine::MineSet;
    use crate::IndexBuilder;

    /// Mining through an index (duplicates in it, a positive missing from it) retrieves what
    /// the same set encoded into memory retrieves, at each precision.
    #[test]
    fn index_corpus_matches_the_memory_level() {
        let d = tempfile::tempdir().unwrap();
        let vec_of = |t: &str| -> Vec<f32> {
            let h = t
                .bytes()
                .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
            (0..16)
                .map(|j| ((h >> (j * 3)) % 13) as f32 - 6.0 + j as f32 * 0.01)
                .collect()
        };
        let mut docs: Vec<String> = (0..200).map(|i| format!("doc {}", i * 7 % 150)).collect();
        docs.push("doc 3".into()); // duplicates, also beyond the 150 distinct
        let pairs: Vec<(String, String)> = (0..30)
            .map(|i| {
                (
                    format!("q{i}"),
                    if i == 5 {
                        "new".into()
                    } else {
                        format!("doc {i}")
                    },
                )
            })
            .collect();
        let set = MineSet::new(&pairs, Some(&docs));
        assert!(set.duplicate_corpus > 0 && set.positives_added == 1);
        for p in Precision::ALL {
            let level = Level {
                precision: p,
                dim: 12,
            };
            let out = d.path().join(format!("idx-{}", p.name()));
            let mut b =
                IndexBuilder::create(&out, 16, &[level], false, serde_json::json!({}), false)
                    .unwrap();
            for (i, t) in docs.iter().enumerate() {
                b.push(&i.to_string(), None, &vec_of(t)).unwrap();
            }
            b.finish().unwrap();
            let index = Index::open(&out).unwrap();
            let mut ic = IndexCorpus::new(&index, level, &docs, &set.corpus).unwrap();
            let mut mem = MemoryLevel::new(level);
            for t in &set.corpus {
                mem.push(&vec_of(t)).unwrap();
            }
            for t in &set.corpus[ic.kept()..] {
                ic.push_extra(&vec_of(t)).unwrap();
            }
            assert_eq!(Candidates::len(&ic), mem.len());
            let qs: Vec<Prepared> = set
                .queries
                .iter()
                .map(|q| mem.prepare(&vec_of(q)))
                .collect();
            assert_eq!(Candidates::top(&ic, &qs, 9), mem.top(&qs, 9), "{p:?}");
            for r in 0..mem.len() {
                assert_eq!(Candidates::score(&ic, &qs[0], r), mem.score(&qs[0], r));
            }
        }
        let index = Index::open(&d.path().join("idx-float32")).unwrap();
        let lv = Level {
            precision: Precision::Float32,
            dim: 12,
        };
        let e = IndexCorpus::new(&index, lv, &docs[1..], &set.corpus).unwrap_err();
        assert!(e.to_string().contains("201 vectors"), "{e}");
        let e = IndexCorpus::new(&index, Level { dim: 8, ..lv }, &docs, &set.corpus).unwrap_err();
        assert!(e.to_string().contains("float32:12"), "{e}");
    }
}
