//! A mining run split by rank: which queries a rank mines, and the ranks' summaries added up.

use nest_index::mine;

use crate::Result;

/// The queries rank `rank` of `world` mines: a contiguous run of whole encoder blocks of
/// `chunk` texts, so that the parts in rank order are every query in order.
pub fn rank_queries(n: usize, chunk: usize, rank: usize, world: usize) -> std::ops::Range<usize> {
    let blocks = n.div_ceil(chunk);
    let at = |r: usize| (r * blocks / world * chunk).min(n);
    at(rank)..at(rank + 1)
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
