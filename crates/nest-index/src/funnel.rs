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

/// Queries scored together in one pass over the rows (batched search).
pub const QUERY_BLOCK: usize = 8;
/// Rows per cache block of a batched first stage.
pub const ROW_BLOCK: usize = 2048;

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
        if !s.contains('>') && s.contains([',', ';', ' ']) {
            let fixed: Vec<&str> = s.split([',', ';', ' ']).filter(|p| !p.is_empty()).collect();
            let why = format!(
                "'{s}': stages are separated by '>', coarse to fine: '{}'",
                fixed.join(">")
            );
            return Err(Error::invalid("funnel", why));
        }
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

    /// A stage coarser than the one before (no more bits or dims, fewer of one), as a warning's
    /// line: a stage only reorders its shortlist, so a coarse last stage loses the fine ranking.
    pub fn reversed_stage(&self) -> Option<String> {
        let bits = |p: crate::Precision| match p {
            crate::Precision::Float32 => 32,
            crate::Precision::Int8 => 8,
            crate::Precision::Binary => 1,
        };
        self.stages.windows(2).enumerate().find_map(|(i, w)| {
            let (a, b) = (w[0].level, w[1].level);
            let mut why = Vec::new();
            if bits(b.precision) < bits(a.precision) {
                why.push("fewer bits");
            }
            if b.dim < a.dim {
                why.push("fewer dims");
            }
            let fewer = bits(b.precision) <= bits(a.precision) && b.dim <= a.dim;
            (fewer && !why.is_empty()).then(|| {
                format!(
                    "funnel '{self}': stage {} ({b}) is coarser than stage {} ({a}: {}); a later \
                     stage only reorders the earlier stage's shortlist, so the final ranking is \
                     the coarser one's; put the coarse stage first, e.g. {b}>{a}",
                    i + 2,
                    i + 1,
                    why.join(", ")
                )
            })
        })
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
pub(crate) fn score(rows: Rows<'_>, q: &Prepared, dim: usize, row: usize) -> f32 {
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

/// The `keep` rows of a block with the smallest Hamming distances, best first, ties by lower
/// row (as [`TopK`] orders them), by a counting pass over the distances instead of a heap.
fn select_binary(dist: &[u16], base: usize, keep: usize, dim: usize) -> Vec<(f32, u32)> {
    let mut hist = vec![0usize; dim + 2];
    for &d in dist {
        hist[(d as usize).min(dim + 1)] += 1;
    }
    // the largest distance that is still taken, and how many rows at it
    let (mut cut, mut below) = (dim + 1, 0usize);
    for (d, &c) in hist.iter().enumerate() {
        if below + c >= keep {
            cut = d;
            break;
        }
        below += c;
    }
    let mut at_cut = keep.saturating_sub(below);
    let mut out: Vec<(u16, u32)> = Vec::with_capacity(keep.min(dist.len()));
    for (i, &d) in dist.iter().enumerate() {
        let d_us = d as usize;
        if d_us < cut {
            out.push((d, (base + i) as u32));
        } else if d_us == cut && at_cut > 0 {
            at_cut -= 1;
            out.push((d, (base + i) as u32));
        }
    }
    out.sort_unstable();
    out.into_iter()
        .map(|(d, r)| (1.0 - 2.0 * d as f32 / dim as f32, r))
        .collect()
}

/// First stage over rows `lo..hi`: the `keep` best, best first.
fn scan(
    rows: Rows<'_>,
    q: &Prepared,
    dim: usize,
    keep: usize,
    lo: usize,
    hi: usize,
) -> Vec<(f32, u32)> {
    if let (Rows::Binary(v), Prepared::Binary(qb)) = (rows, q) {
        let w = qb.len();
        let mut dist = vec![0u16; hi - lo];
        kernels::hamming_many(qb, &v[lo * w..hi * w], &mut dist);
        return select_binary(&dist, lo, keep, dim);
    }
    let mut t = TopK::new(keep);
    for r in lo..hi {
        t.push(score(rows, q, dim, r), r as u32);
    }
    t.into_sorted()
}

/// The `keep` best of `n` rows of a level for each query of a block, best first, ties by lower
/// row, in one pass over the rows: each block of `ROW_BLOCK` rows is scored against every query
/// of the block while it is in cache, so the rows cross the memory bus once per query block
/// instead of once per query. The index's first stage and hard-negative mining
/// ([`crate::memory::MemoryLevel::top`]) both score through it.
pub(crate) fn block_top(
    rows: Rows<'_>,
    dim: usize,
    n: usize,
    prepared: &[Prepared],
    keep: usize,
) -> Vec<Vec<(f32, u32)>> {
    if let Rows::Binary(v) = rows {
        let w = dim.div_ceil(8);
        let mut dist = vec![vec![0u16; n]; prepared.len()];
        for lo in (0..n).step_by(ROW_BLOCK) {
            let hi = (lo + ROW_BLOCK).min(n);
            for (p, d) in prepared.iter().zip(dist.iter_mut()) {
                if let Prepared::Binary(qb) = p {
                    kernels::hamming_many(qb, &v[lo * w..hi * w], &mut d[lo..hi]);
                }
            }
        }
        return dist
            .iter()
            .map(|d| select_binary(d, 0, keep, dim))
            .collect();
    }
    let mut tops: Vec<TopK> = prepared.iter().map(|_| TopK::new(keep)).collect();
    for lo in (0..n).step_by(ROW_BLOCK) {
        let hi = (lo + ROW_BLOCK).min(n);
        for (p, t) in prepared.iter().zip(tops.iter_mut()) {
            for r in lo..hi {
                t.push(score(rows, p, dim, r), r as u32);
            }
        }
    }
    tops.into_iter().map(TopK::into_sorted).collect()
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
        if queries.len() < rayon::current_num_threads() {
            return Ok(queries
                .par_iter()
                .map(|q| {
                    let first = self.first_stage_split(q, funnel, k);
                    self.rerank(q, funnel, k, first)
                })
                .collect());
        }
        Ok(queries
            .par_chunks(QUERY_BLOCK)
            .flat_map_iter(|block| {
                self.first_stage_block(block, funnel, k)
                    .into_iter()
                    .zip(block)
                    .map(|(first, q)| self.rerank(q, funnel, k, first))
            })
            .collect())
    }

    /// The first stage of one query, its scan split across threads.
    fn first_stage_split(&self, query: &[f32], funnel: &Funnel, k: usize) -> Vec<(f32, u32)> {
        let level = funnel.stages[0].level;
        let keep = funnel.keeps(k)[0];
        let q = Prepared::new(query, level);
        let Ok(rows) = self.rows(level) else {
            return Vec::new();
        };
        let n = self.len();
        let chunk = n.div_ceil(rayon::current_num_threads()).max(4096);
        let parts: Vec<Vec<(f32, u32)>> = (0..n.div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                scan(
                    rows,
                    &q,
                    level.dim,
                    keep,
                    c * chunk,
                    ((c + 1) * chunk).min(n),
                )
            })
            .collect();
        let mut t = TopK::new(keep);
        for (s, r) in parts.into_iter().flatten() {
            t.push(s, r);
        }
        t.into_sorted()
    }

    /// The first stage of a block of queries, in one pass over the rows ([`block_top`]).
    fn first_stage_block(
        &self,
        queries: &[Vec<f32>],
        funnel: &Funnel,
        k: usize,
    ) -> Vec<Vec<(f32, u32)>> {
        let level = funnel.stages[0].level;
        let keep = funnel.keeps(k)[0];
        let Ok(rows) = self.rows(level) else {
            return vec![Vec::new(); queries.len()];
        };
        let prepared: Vec<Prepared> = queries.iter().map(|q| Prepared::new(q, level)).collect();
        block_top(rows, level.dim, self.len(), &prepared, keep)
    }

    /// The later stages of one query: each rescores the previous shortlist with its level.
    fn rerank(
        &self,
        query: &[f32],
        funnel: &Funnel,
        k: usize,
        mut cands: Vec<(f32, u32)>,
    ) -> Vec<Hit> {
        let keeps = funnel.keeps(k);
        for (stage, &keep) in funnel.stages.iter().zip(&keeps).skip(1) {
            let level = stage.level;
            let q = Prepared::new(query, level);
            let Ok(rows) = self.rows(level) else {
                return Vec::new();
            };
            let mut t = TopK::new(keep);
            for &(_, r) in &cands {
                t.push(score(rows, &q, level.dim, r as usize), r);
            }
            cands = t.into_sorted();
        }
        cands
            .into_iter()
            .map(|(score, row)| Hit { row, score })
            .collect()
    }
}
