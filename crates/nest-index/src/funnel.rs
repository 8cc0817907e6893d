//! Funnel (adaptive) retrieval: Kusupati et al. 2022 (MRL, section 4.3 "adaptive retrieval"):
//! a cheap first stage scans every row and shortlists, each later stage rescores only the
//! shortlist with a richer level, the last stage returns the top `k`.
//!
//! Written `binary:384>float32:64>float32:384`; a stage may fix its shortlist with `@n`
//! (`binary:384@2000>float32:384`). Without `@`, a non-final stage keeps
//! `k * DEFAULT_WIDEN^(stages after it)` rows (k = 10, three stages: 1000, 100, 10).
//! Exact search is the one-stage funnel `float32:<full dim>`.

use rayon::prelude::*;

use crate::level::{Level, Prepared};
use crate::reader::{Index, Rows};
use crate::topk::TopK;
use crate::{kernels, Error, Result};

/// Shortlist growth per remaining stage when a stage gives no `@n`.
pub const DEFAULT_WIDEN: usize = 10;

/// One stage: the level it scores with and how many rows it passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    pub level: Level,
    pub keep: Option<usize>,
}

/// A cascade of stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funnel {
    pub stages: Vec<Stage>,
}

/// A search result: the row number and the last stage's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub row: u32,
    pub score: f32,
}

impl std::fmt::Display for Funnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, s) in self.stages.iter().enumerate() {
            if i > 0 {
                write!(f, ">")?;
            }
            write!(f, "{}", s.level)?;
            if let Some(k) = s.keep {
                write!(f, "@{k}")?;
            }
        }
        Ok(())
    }
}

impl Funnel {
    /// Parses `level[@keep]>level[@keep]>...`.
    pub fn parse(s: &str) -> Result<Self> {
        let stages = s
            .split('>')
            .map(|part| {
                let (lv, keep) = match part.split_once('@') {
                    Some((l, k)) => {
                        let k = k.trim().parse::<usize>().ok().filter(|&k| k > 0).ok_or_else(|| {
                            Error::invalid(
                                "funnel",
                                format!("'{part}': the shortlist after @ must be a positive integer"),
                            )
                        })?;
                        (l, Some(k))
                    }
                    None => (part, None),
                };
                Ok(Stage {
                    level: Level::parse(lv)
                        .map_err(|e| Error::invalid("funnel", format!("in '{s}': {e}")))?,
                    keep,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Funnel { stages })
    }

    /// Exact search: one float32 stage at `dim`.
    pub fn exact(dim: usize) -> Self {
        Funnel {
            stages: vec![Stage {
                level: Level {
                    precision: crate::Precision::Float32,
                    dim,
                },
                keep: None,
            }],
        }
    }

    /// The number of rows each stage keeps for a final `k` (the last stage keeps `k`).
    pub fn keeps(&self, k: usize) -> Vec<usize> {
        let n = self.stages.len();
        self.stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if i + 1 == n {
                    k
                } else {
                    s.keep
                        .unwrap_or_else(|| k.saturating_mul(DEFAULT_WIDEN.pow((n - 1 - i) as u32)))
                        .max(k)
                }
            })
            .collect()
    }
}

/// Scores one row of a level against a prepared query.
#[inline]
fn score(rows: Rows<'_>, q: &Prepared, dim: usize, row: usize) -> f32 {
    match (rows, q) {
        (Rows::Float32(v), Prepared::Float32(q)) => {
            kernels::dot_f32(q, &v[row * dim..(row + 1) * dim])
        }
        (Rows::Int8(v, s), Prepared::Int8(q, qs)) => {
            kernels::dot_i8(q, &v[row * dim..(row + 1) * dim]) as f32 * qs * s[row]
        }
        (Rows::Binary(v), Prepared::Binary(q)) => {
            let w = q.len();
            1.0 - 2.0 * kernels::hamming(q, &v[row * w..(row + 1) * w]) as f32 / dim as f32
        }
        _ => f32::NEG_INFINITY,
    }
}

impl Index {
    /// Checks a funnel against this index: every stage's level stored, `k` positive.
    pub fn check_funnel(&self, funnel: &Funnel, k: usize) -> Result<()> {
        if k == 0 {
            return Err(Error::invalid("k", "must be at least 1"));
        }
        if funnel.stages.is_empty() {
            return Err(Error::invalid("funnel", "has no stage"));
        }
        for s in &funnel.stages {
            self.rows(s.level)?;
        }
        Ok(())
    }

    /// Runs `funnel` for every query (full-length vectors, any norm) and returns up to `k` hits
    /// per query, best first. Queries run in parallel; a single query splits its first-stage
    /// scan across threads instead.
    pub fn search(&self, queries: &[Vec<f32>], funnel: &Funnel, k: usize) -> Result<Vec<Vec<Hit>>> {
        self.check_funnel(funnel, k)?;
        if let Some((i, q)) = queries
            .iter()
            .enumerate()
            .find(|(_, q)| q.len() != self.full_dim())
        {
            return Err(Error::invalid(
                format!("query {i}"),
                format!(
                    "has {} dims, the index holds {}-dim vectors",
                    q.len(),
                    self.full_dim()
                ),
            ));
        }
        let split = queries.len() < rayon::current_num_threads();
        Ok(queries
            .par_iter()
            .map(|q| self.search_one(q, funnel, k, split))
            .collect())
    }

    fn search_one(&self, query: &[f32], funnel: &Funnel, k: usize, split: bool) -> Vec<Hit> {
        let keeps = funnel.keeps(k);
        let n = self.len();
        let mut cands: Vec<(f32, u32)> = Vec::new();
        for (i, (stage, &keep)) in funnel.stages.iter().zip(&keeps).enumerate() {
            let level = stage.level;
            let q = Prepared::new(query, level);
            let Ok(rows) = self.rows(level) else {
                return Vec::new();
            };
            let dim = level.dim;
            cands = if i == 0 {
                if split {
                    let chunk = n.div_ceil(rayon::current_num_threads()).max(4096);
                    let parts: Vec<Vec<(f32, u32)>> = (0..n.div_ceil(chunk))
                        .into_par_iter()
                        .map(|c| {
                            let mut t = TopK::new(keep);
                            for r in c * chunk..((c + 1) * chunk).min(n) {
                                t.push(score(rows, &q, dim, r), r as u32);
                            }
                            t.into_sorted()
                        })
                        .collect();
                    let mut t = TopK::new(keep);
                    for (s, r) in parts.into_iter().flatten() {
                        t.push(s, r);
                    }
                    t.into_sorted()
                } else {
                    let mut t = TopK::new(keep);
                    for r in 0..n {
                        t.push(score(rows, &q, dim, r), r as u32);
                    }
                    t.into_sorted()
                }
            } else {
                let mut t = TopK::new(keep);
                for &(_, r) in &cands {
                    t.push(score(rows, &q, dim, r as usize), r);
                }
                t.into_sorted()
            };
        }
        cands
            .into_iter()
            .map(|(score, row)| Hit { row, score })
            .collect()
    }
}
