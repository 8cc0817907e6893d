//! One level held in memory: the rows an index stores at a (precision, dim) level, built and
//! scored by the index's own code ([`Prepared::new`] is what `IndexBuilder::push` stores for a
//! row: the prefix re-normalised, then quantised; [`crate::funnel::block_top`] and
//! [`crate::funnel::score`] are the index's first stage and row score), without files. For
//! hard-negative mining, which scores every query against a corpus it encoded itself.

use rayon::prelude::*;

use crate::funnel::{block_top, score, QUERY_BLOCK};
use crate::level::{Level, Precision, Prepared};
use crate::reader::Rows;
use crate::{Error, Result};

/// The rows of one level, in memory.
#[derive(Debug, Clone)]
pub struct MemoryLevel {
    level: Level,
    f32s: Vec<f32>,
    i8s: Vec<i8>,
    scales: Vec<f32>,
    bits: Vec<u8>,
    len: usize,
}

impl MemoryLevel {
    pub fn new(level: Level) -> Self {
        MemoryLevel {
            level,
            f32s: Vec::new(),
            i8s: Vec::new(),
            scales: Vec::new(),
            bits: Vec::new(),
            len: 0,
        }
    }

    pub fn level(&self) -> Level {
        self.level
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a row: `v` (at least `dim` coordinates, any norm) stored as an index stores it.
    pub fn push(&mut self, v: &[f32]) -> Result<()> {
        if v.len() < self.level.dim {
            return Err(Error::invalid(
                format!("vector {}", self.len),
                format!(
                    "has {} dims, level {} needs {}",
                    v.len(),
                    self.level,
                    self.level.dim
                ),
            ));
        }
        match Prepared::new(v, self.level) {
            Prepared::Float32(p) => self.f32s.extend_from_slice(&p),
            Prepared::Int8(q, s) => {
                self.i8s.extend_from_slice(&q);
                self.scales.push(s);
            }
            Prepared::Binary(b) => self.bits.extend_from_slice(&b),
        }
        self.len += 1;
        Ok(())
    }

    fn rows(&self) -> Rows<'_> {
        match self.level.precision {
            Precision::Float32 => Rows::Float32(&self.f32s),
            Precision::Int8 => Rows::Int8(&self.i8s, &self.scales),
            Precision::Binary => Rows::Binary(&self.bits),
        }
    }

    /// A query (at least `dim` coordinates, any norm) prepared for this level.
    pub fn prepare(&self, query: &[f32]) -> Prepared {
        Prepared::new(query, self.level)
    }

    /// The score of row `row` for a prepared query, as the index scores it.
    pub fn score(&self, query: &Prepared, row: usize) -> f32 {
        score(self.rows(), query, self.level.dim, row)
    }

    /// The `k` best rows of each query, best first, ties broken by the lower row; blocks of
    /// queries run on rayon's threads.
    pub fn top(&self, queries: &[Prepared], k: usize) -> Vec<Vec<(f32, u32)>> {
        let rows = self.rows();
        queries
            .par_chunks(QUERY_BLOCK)
            .flat_map_iter(|block| block_top(rows, self.level.dim, self.len, block, k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(p: Precision, dim: usize) -> Level {
        Level { precision: p, dim }
    }

    #[test]
    fn top_matches_brute_force_at_each_precision() {
        let vecs: Vec<Vec<f32>> = (0..300)
            .map(|i| {
                (0..16)
                    .map(|j| ((i * 7 + j * 13) % 17) as f32 - 8.0)
                    .collect()
            })
            .collect();
        for p in Precision::ALL {
            let mut m = MemoryLevel::new(lv(p, 12));
            for v in &vecs {
                m.push(v).unwrap();
            }
            let qs: Vec<Prepared> = vecs[..20].iter().map(|v| m.prepare(v)).collect();
            let top = m.top(&qs, 5);
            for (q, t) in qs.iter().zip(&top) {
                let mut all: Vec<(f32, u32)> =
                    (0..m.len()).map(|r| (m.score(q, r), r as u32)).collect();
                all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                assert_eq!(&all[..5], &t[..], "{p:?}");
            }
        }
    }

    #[test]
    fn short_vector_is_refused() {
        let mut m = MemoryLevel::new(lv(Precision::Float32, 8));
        assert!(m
            .push(&[1.0; 4])
            .unwrap_err()
            .to_string()
            .contains("needs 8"));
    }
}
