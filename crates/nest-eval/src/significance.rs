//! Whether a difference between two reports is real: a paired bootstrap over the test items
//! (Efron & Tibshirani 1993, ch. 16; as used for NLP metrics by Koehn 2004 and
//! Berg-Kirkpatrick et al. 2012), Holm's correction for the number of cells compared
//! (Holm 1979), and the spread of one method over seeds.
//!
//! The paired bootstrap draws `n` of the `n` test items with replacement, recomputes each
//! side's main metric on that draw (Spearman and AP on the resample, not averaged per item),
//! and records the difference. A side may be several runs of one method (seeds): its
//! statistic is then the mean over its runs on the same draw, so the interval covers the test
//! items' sampling and the seed mean, not the seed-to-seed spread, which is reported beside it.
//!
//! - interval: the 2.5th and 97.5th percentiles of the resampled differences (linear
//!   interpolation, numpy's default; scipy's `bootstrap(method="percentile")`);
//! - p-value (two-sided): `2 Phi(-|delta| / se)`, with `se` the sd of the resampled
//!   differences (a Wald test with the bootstrap standard error, Efron & Tibshirani ch. 6). The
//!   share of resamples across zero, `min(1, 2 (min(#{d* <= 0}, #{d* >= 0}) + 1) / (B + 1))`
//!   (Davison & Hinkley 1997's +1 correction), is kept as `p_share`, but it cannot go below
//!   `2 / (B + 1)`: with Holm over `m` cells no difference could survive unless
//!   `B > 2m / alpha` (2,160 resamples for 54 cells at 0.05, for every cell), so the corrected
//!   decisions use `p`. For the sample sizes here (hundreds to thousands of items) the
//!   resampled differences are close to normal, and the two agree where `p_share` can resolve.
//!
//! Checked against scipy and numpy in `tests/significance.rs`
//! (`tests/reference/significance.py`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::items::statistic;
use crate::tasks::TaskKind;

/// One side of a comparison: the task's gold and the per-item scores of one or more runs of a
/// method at one cell.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub gold: &'a [f32],
    pub runs: &'a [&'a [f32]],
}

impl Side<'_> {
    fn stat(&self, kind: TaskKind, idx: &[usize]) -> f64 {
        let sum: f64 = self
            .runs
            .iter()
            .map(|r| statistic(kind, self.gold, r, idx))
            .sum();
        sum / self.runs.len().max(1) as f64
    }

    fn n(&self) -> usize {
        self.runs.first().map_or(0, |r| r.len())
    }
}

/// The outcome of a paired bootstrap: `b - a` on all items, its 95% interval and p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    pub delta: f64,
    pub lo: f64,
    pub hi: f64,
    pub p: f64,
    /// The share of resamples across zero (two-sided, floor `2 / (B + 1)`).
    pub p_share: f64,
    /// The sd of the resampled differences (the bootstrap standard error).
    pub se: f64,
    /// Resamples whose statistic was defined (e.g. Spearman needs two distinct values).
    pub resamples: usize,
}

/// Settings of the bootstrap.
#[derive(Debug, Clone, Copy)]
pub struct Bootstrap {
    pub resamples: usize,
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 1000,
            seed: 0,
        }
    }
}

impl Bootstrap {
    /// Paired bootstrap of `stat(b) - stat(a)`. Both sides must have the same items (checked
    /// by the caller: same task files); `None` if they are empty or of different lengths.
    pub fn paired(&self, kind: TaskKind, a: Side, b: Side) -> Option<Test> {
        let n = a.n();
        let all: Vec<usize> = (0..n).collect();
        let lengths_agree = a.runs.iter().chain(b.runs).all(|r| r.len() == n)
            && (!crate::items::needs_gold(kind) || (a.gold.len() == n && b.gold.len() == n));
        if n == 0 || !lengths_agree || b.runs.is_empty() {
            return None;
        }
        let delta = b.stat(kind, &all) - a.stat(kind, &all);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut idx = vec![0usize; n];
        let mut d = Vec::with_capacity(self.resamples);
        for _ in 0..self.resamples {
            for i in idx.iter_mut() {
                *i = rng.random_range(0..n);
            }
            let x = b.stat(kind, &idx) - a.stat(kind, &idx);
            if x.is_finite() {
                d.push(x);
            }
        }
        Some(summarise(delta, d))
    }
}

/// Interval and p-value from the resampled differences.
pub fn summarise(delta: f64, mut d: Vec<f64>) -> Test {
    d.sort_by(f64::total_cmp);
    let b = d.len();
    if b == 0 {
        return Test {
            delta,
            lo: f64::NAN,
            hi: f64::NAN,
            p: f64::NAN,
            p_share: f64::NAN,
            se: f64::NAN,
            resamples: 0,
        };
    }
    let below = d.iter().filter(|&&x| x <= 0.0).count();
    let above = d.iter().filter(|&&x| x >= 0.0).count();
    let p_share = (2.0 * (below.min(above) + 1) as f64 / (b + 1) as f64).min(1.0);
    let mean = d.iter().sum::<f64>() / b as f64;
    let se = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / b as f64).sqrt();
    let p = if se > 0.0 {
        libm::erfc(delta.abs() / se / std::f64::consts::SQRT_2)
    } else if delta == 0.0 {
        1.0
    } else {
        0.0
    };
    Test {
        delta,
        lo: percentile(&d, 2.5),
        hi: percentile(&d, 97.5),
        p,
        p_share,
        se,
        resamples: b,
    }
}

/// `q`-th percentile of sorted values, linear interpolation (`numpy.percentile`'s default).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos - pos.floor());
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] + frac * (sorted[j] - sorted[i])
}

/// Holm's step-down adjusted p-values (Holm 1979): the `k`-th smallest of `m` p-values is
/// multiplied by `m - k + 1`, made monotone and capped at 1. A difference survives at level
/// `alpha` when its adjusted p-value is below `alpha`; the family-wise error rate is then at
/// most `alpha` whatever the dependence between cells. NaN p-values stay NaN and do not count
/// towards `m`.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_finite()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let m = order.len();
    let mut out = vec![f64::NAN; p.len()];
    let mut running: f64 = 0.0;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Mean, sample standard deviation and 95% t-interval of the mean of one cell over seeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    pub lo: f64,
    pub hi: f64,
}

/// `values` over seeds; `sd`, `lo` and `hi` are NaN for a single value.
pub fn spread(values: &[f64]) -> Spread {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return Spread {
            n,
            mean,
            sd: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let half = t975(n - 1) * sd / (n as f64).sqrt();
    Spread {
        n,
        mean,
        sd,
        lo: mean - half,
        hi: mean + half,
    }
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (`scipy.stats.t.ppf(0.975,
/// df)` to 4 decimals up to 30; beyond, the Cornish-Fisher expansion to `1/df^2`, within 1e-4
/// of scipy; checked in the tests).
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
        2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739,
        2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        _ => {
            let (z, n) = (1.959_963_984_540_054_f64, df as f64);
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_by_hand() {
        // m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
        let adj = holm(&[0.03, 0.01, 0.5, 0.02, f64::NAN]);
        let want = [0.06, 0.04, 0.5, 0.06];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
        assert!(adj[4].is_nan());
    }

    #[test]
    fn identical_sides_are_not_different() {
        let gold = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let s = [0.2f32, 0.1, 0.4, 0.3, 0.6, 0.5];
        let runs: [&[f32]; 1] = [&s];
        let side = Side {
            gold: &gold,
            runs: &runs,
        };
        let t = Bootstrap::default()
            .paired(TaskKind::Sts, side, side)
            .unwrap();
        assert_eq!((t.delta, t.lo, t.hi, t.p), (0.0, 0.0, 0.0, 1.0));
    }

    #[test]
    fn same_seed_same_answer() {
        let gold: Vec<f32> = (0..50).map(|i| (i % 7) as f32).collect();
        let a: Vec<f32> = (0..50).map(|i| ((i * 13) % 11) as f32).collect();
        let b: Vec<f32> = (0..50).map(|i| ((i * 5) % 7) as f32 + 0.5).collect();
        let (ra, rb): ([&[f32]; 1], [&[f32]; 1]) = ([&a], [&b]);
        let sa = Side {
            gold: &gold,
            runs: &ra,
        };
        let sb = Side {
            gold: &gold,
            runs: &rb,
        };
        let boot = Bootstrap {
            resamples: 200,
            seed: 7,
        };
        let t1 = boot.paired(TaskKind::Sts, sa, sb).unwrap();
        assert_eq!(t1, boot.paired(TaskKind::Sts, sa, sb).unwrap());
        assert!(t1.lo <= t1.delta && t1.delta <= t1.hi, "{t1:?}");
    }

    #[test]
    fn spread_of_three() {
        let s = spread(&[1.0, 2.0, 3.0]);
        assert_eq!((s.mean, s.sd), (2.0, 1.0));
        assert!((s.hi - (2.0 + 4.3027 / 3f64.sqrt())).abs() < 1e-12);
        assert!(spread(&[5.0]).sd.is_nan());
    }
}
