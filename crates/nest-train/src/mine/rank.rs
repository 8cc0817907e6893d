//! A mining run split by rank: which queries a rank mines, where it writes them (its own
//! resumable part, which rank 0 merges into the output) and the ranks' summaries added up.

use std::ops::Range;
use std::path::{Path, PathBuf};

pub use nest_core::fsutil::part_path;
use nest_index::mine::{self, output::Part, ResumableOutput};

use crate::{Error, Result};

/// The queries rank `rank` of `world` mines: a contiguous run of whole encoder blocks of
/// `chunk` texts, so that the parts in rank order are every query in order.
pub fn rank_queries(n: usize, chunk: usize, rank: usize, world: usize) -> std::ops::Range<usize> {
    let blocks = n.div_ceil(chunk);
    let at = |r: usize| (r * blocks / world * chunk).min(n);
    at(rank)..at(rank + 1)
}

/// Where a mining run writes its lines. One process writes `path` itself, resumable under
/// `key`. Under a group each rank writes its part ([`part_path`]) of whole encoder blocks
/// ([`rank_queries`]), resumable under `key` plus its rank and queries, and keeps it; rank 0
/// then merges the parts, in rank order, into `path` (the one-process file byte for byte).
#[derive(Clone, Copy)]
pub struct Destination<'a> {
    /// The output file.
    pub path: &'a Path,
    /// The key of every setting that decides the output (a state written under another key is
    /// not resumed).
    pub key: &'a str,
    /// Start again instead of resuming (under a group rank 0 also removes a finished output).
    pub overwrite: bool,
    /// Texts per encoder block: a rank mines whole blocks.
    pub encode_chunk: usize,
    /// The process group the run is split over (none: one process).
    pub group: Option<&'a nest_dist::Group>,
    /// How many queries the whole run mines.
    pub queries: usize,
}

impl Destination<'_> {
    /// Under a group, every rank's part: its file, its resume key and its number of queries
    /// (none without a group).
    pub fn parts(&self) -> Vec<Part> {
        let Some(g) = self.group else {
            return Vec::new();
        };
        let w = g.world();
        (0..w)
            .map(|r| {
                let q = rank_queries(self.queries, self.encode_chunk, r, w);
                Part {
                    out: part_path(self.path, r, w),
                    key: format!(
                        "{}:rank {r} of {w}:queries {}..{}",
                        self.key, q.start, q.end
                    ),
                    queries: q.len(),
                }
            })
            .collect()
    }

    /// The queries this process mines and the resumable output it writes them to: `path`, or
    /// under a group its part, where every rank stops if one cannot open its own.
    pub fn open(&self) -> Result<(Range<usize>, ResumableOutput)> {
        let Some(g) = self.group else {
            let out = ResumableOutput::open(self.path, self.key, self.overwrite)?;
            return Ok((0..self.queries, out));
        };
        if g.rank() == 0 && self.overwrite && self.path.exists() {
            std::fs::remove_file(self.path).map_err(|e| nest_core::Error::io(self.path, e))?;
        }
        let q = rank_queries(self.queries, self.encode_chunk, g.rank(), g.world());
        let part = &self.parts()[g.rank()];
        let opened = ResumableOutput::open(&part.out, &part.key, self.overwrite);
        let failed = g.failed_ranks(opened.is_ok());
        let opened = opened?;
        let failed = failed?;
        if !failed.is_empty() {
            return Err(self.failed(format!(
                "rank {}: stopped while opening the parts: rank(s) {failed:?} failed (their \
                 messages say why)",
                g.rank()
            )));
        }
        Ok((q, opened))
    }

    /// Finishes `out`: renamed into place (one process), or under a group kept as this rank's
    /// part and, on rank 0, merged with the others once every rank's is on disk. The lines
    /// written and the output's path where this process wrote the output (none on the other
    /// ranks).
    pub fn close(&self, out: ResumableOutput) -> Result<Option<(u64, PathBuf)>> {
        let Some(g) = self.group else {
            let lines = out.lines();
            return Ok(Some((lines, out.finish()?)));
        };
        out.keep()?;
        let kept = g.failed_ranks(true)?; // every part is on disk
        if !kept.is_empty() {
            let rank = g.rank();
            return Err(self.failed(format!("rank {rank}: rank(s) {kept:?} failed")));
        }
        if g.rank() != 0 {
            return Ok(None);
        }
        let lines = mine::output::merge_parts(self.path, &self.parts())?;
        Ok(Some((lines, self.path.to_path_buf())))
    }

    /// An error of this run's output: `message` under its path.
    fn failed(&self, message: String) -> Error {
        Error::Run {
            path: self.path.to_path_buf(),
            message,
        }
    }
}

/// How many queries are left on every rank together (`rest` on this one; `rest` itself with no
/// group).
pub(super) fn left_anywhere(g: Option<&nest_dist::Group>, rest: usize) -> Result<usize> {
    let Some(g) = g else { return Ok(rest) };
    let all = g.all_gather(&tch::Tensor::from_slice(&[rest as i64]))?;
    Ok(all.iter().map(|t| t.int64_value(&[0])).sum::<i64>() as usize)
}

/// Every rank's summary added up (each rank's own under no group).
pub fn gather_summary(g: Option<&nest_dist::Group>, s: mine::Summary) -> Result<mine::Summary> {
    let Some(g) = g else { return Ok(s) };
    let k = s.skipped;
    let v = [
        s.queries as f64,
        s.short as f64,
        s.negatives as f64,
        s.positive_score_sum,
        s.positives as f64,
        s.negative_score_sum,
        k.absolute_margin as f64,
        k.relative_margin as f64,
        k.max_score as f64,
        k.min_score as f64,
    ];
    let mut sum = [0f64; 10];
    for t in g.all_gather(&tch::Tensor::from_slice(&v))? {
        let t: Vec<f64> = Vec::<f64>::try_from(&t)?;
        for (a, b) in sum.iter_mut().zip(t) {
            *a += b;
        }
    }
    let u = |x: f64| x as usize;
    Ok(mine::Summary {
        queries: u(sum[0]),
        short: u(sum[1]),
        negatives: u(sum[2]),
        positive_score_sum: sum[3],
        positives: u(sum[4]),
        negative_score_sum: sum[5],
        skipped: mine::Skipped {
            absolute_margin: u(sum[6]),
            relative_margin: u(sum[7]),
            max_score: u(sum[8]),
            min_score: u(sum[9]),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_beside_the_output_by_rank_and_world() {
        let p = part_path(Path::new("/d/neg.jsonl"), 1, 2);
        assert_eq!(p, Path::new("/d/neg.part-00001-of-00002.jsonl"));
        assert_eq!(
            part_path(Path::new("neg"), 0, 3),
            Path::new("neg.part-00000-of-00003")
        );
    }

    #[test]
    fn the_ranks_queries_are_whole_blocks_covering_every_query_in_order() {
        let all: Vec<_> = (0..3).map(|r| rank_queries(37, 8, r, 3)).collect();
        assert_eq!(all, [0..8, 8..24, 24..37]);
    }

    #[test]
    fn one_process_writes_and_renames_the_output_itself() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("neg.jsonl");
        let dest = Destination {
            path: &path,
            key: "k",
            overwrite: false,
            encode_chunk: 8,
            group: None,
            queries: 2,
        };
        assert!(dest.parts().is_empty());
        let (queries, mut out) = dest.open().unwrap();
        assert_eq!(queries, 0..2);
        out.append("a\nb\n", 2, 2).unwrap();
        let (lines, written) = dest.close(out).unwrap().unwrap();
        assert_eq!((lines, written.as_path()), (2, path.as_path()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\n");
    }
}
