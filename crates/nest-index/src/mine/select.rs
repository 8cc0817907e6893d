//! The choice of each query's negatives among its scored candidates, as sentence-transformers
//! 6.2.0's `mine_hard_negatives` makes it (`util/hard_negatives.py`), step for step:
//!
//! 1. every query retrieves its `range_max + max_positives` best corpus rows (`max_positives`:
//!    the most positives any query has), best first, ties by the lower row;
//! 2. its positives are struck out (unless `include_positives`);
//! 3. then, in this order, candidates too close to the positive (`absolute_margin`: `score +
//!    margin > p`; `relative_margin`: `score > p - |p| * margin`, with `p` the query's *lowest*
//!    positive score), above `max_score` or below `min_score`;
//! 4. the survivors keep their order; the rank window is survivors `range_min..range_max`
//!    (ranks count survivors, not raw neighbours: a struck-out candidate frees its rank);
//! 5. `top` takes the window's first `num_negatives`; `random` draws `num_negatives` distinct
//!    window positions ([`sample`]) and keeps them in window (score) order. A window shorter than
//!    `num_negatives` gives all it holds, both ways.

use crate::{Error, Result};

/// How negatives are drawn from the rank window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    Top,
    Random,
}

impl Sampling {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "top" => Ok(Sampling::Top),
            "random" => Ok(Sampling::Random),
            o => Err(Error::invalid(
                "--sampling",
                format!("'{o}': expected top or random"),
            )),
        }
    }
}

/// The selection settings, named and defaulted as `mine_hard_negatives`' arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct MineOptions {
    pub num_negatives: usize,
    pub range_min: usize,
    /// `None`: derived as sentence-transformers derives it ([`MineOptions::window`]).
    pub range_max: Option<usize>,
    pub min_score: Option<f32>,
    pub max_score: Option<f32>,
    pub absolute_margin: Option<f32>,
    pub relative_margin: Option<f32>,
    pub sampling: Sampling,
    pub include_positives: bool,
    pub seed: u64,
}

impl Default for MineOptions {
    fn default() -> Self {
        MineOptions {
            num_negatives: 3,
            range_min: 0,
            range_max: None,
            min_score: None,
            max_score: None,
            absolute_margin: None,
            relative_margin: None,
            sampling: Sampling::Top,
            include_positives: false,
            seed: 0,
        }
    }
}

/// The rank window and how many candidates each query retrieves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub range_min: usize,
    pub range_max: usize,
    /// `range_max + max_positives`.
    pub retrieve: usize,
}

impl MineOptions {
    /// The window for a set whose queries have at most `max_positives` positives: without
    /// `range_max`, `range_min + num_negatives + max_positives`, or `range_min + 10 *
    /// num_negatives + max_positives` when a margin or `max_score` may strike candidates out.
    /// Errors name the flag, as sentence-transformers' `ValueError`s do.
    pub fn window(&self, max_positives: usize) -> Result<Window> {
        let n = self.num_negatives;
        if n < 1 {
            return Err(Error::invalid(
                "--num-negatives",
                "must be at least 1, got 0",
            ));
        }
        let filtering = self.absolute_margin.is_some()
            || self.relative_margin.is_some()
            || self.max_score.is_some();
        let range_max = self
            .range_max
            .unwrap_or_else(|| self.range_min + if filtering { 10 * n } else { n } + max_positives);
        if self.range_min >= range_max {
            return Err(Error::invalid(
                "--range-min",
                format!(
                    "must be smaller than --range-max, got {} and {range_max}",
                    self.range_min
                ),
            ));
        }
        if n > range_max - self.range_min {
            return Err(Error::invalid(
                "--num-negatives",
                format!(
                    "cannot mine {n} negatives per query: only {} candidates remain after \
                     skipping the first --range-min {} of --range-max {range_max}",
                    range_max - self.range_min,
                    self.range_min
                ),
            ));
        }
        for (key, v) in [
            ("--min-score", self.min_score),
            ("--max-score", self.max_score),
            ("--absolute-margin", self.absolute_margin),
            ("--relative-margin", self.relative_margin),
        ] {
            if v.is_some_and(|x| !x.is_finite()) {
                return Err(Error::invalid(key, "must be a finite number"));
            }
        }
        Ok(Window {
            range_min: self.range_min,
            range_max,
            retrieve: range_max + max_positives,
        })
    }
}

/// Candidates struck out by each filter (finite scores only), summed over queries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    pub absolute_margin: usize,
    pub relative_margin: usize,
    pub max_score: usize,
    pub min_score: usize,
}

impl Skipped {
    pub fn add(&mut self, o: Skipped) {
        self.absolute_margin += o.absolute_margin;
        self.relative_margin += o.relative_margin;
        self.max_score += o.max_score;
        self.min_score += o.min_score;
    }
}

/// One query's negatives: `(corpus row, score)`, best first; fewer than `num_negatives` when
/// the window held fewer.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub negatives: Vec<(u32, f32)>,
    pub skipped: Skipped,
}

/// Chooses query `query`'s negatives (module doc). `candidates`: `(score, row)` best first
/// (ties by the lower row), at most `window.retrieve`; `positives`: the query's corpus rows;
/// `positive_scores`: their scores (the margins use the lowest).
pub fn select(
    o: &MineOptions,
    window: Window,
    query: usize,
    candidates: &[(f32, u32)],
    positives: &[u32],
    positive_scores: &[f32],
) -> Picked {
    let p = positive_scores
        .iter()
        .copied()
        .fold(f32::INFINITY, f32::min);
    let mut skipped = Skipped::default();
    let mut survivors: Vec<(u32, f32)> = Vec::with_capacity(candidates.len());
    for &(s, row) in candidates.iter().take(window.retrieve) {
        if !s.is_finite() || (!o.include_positives && positives.contains(&row)) {
            continue;
        }
        if o.absolute_margin.is_some_and(|m| s + m > p) {
            skipped.absolute_margin += 1;
        } else if o.relative_margin.is_some_and(|m| s > p - p.abs() * m) {
            skipped.relative_margin += 1;
        } else if o.max_score.is_some_and(|m| s > m) {
            skipped.max_score += 1;
        } else if o.min_score.is_some_and(|m| s < m) {
            skipped.min_score += 1;
        } else {
            survivors.push((row, s));
        }
    }
    let hi = window.range_max.min(survivors.len());
    let lo = window.range_min.min(hi);
    let win = &survivors[lo..hi];
    let negatives = match o.sampling {
        Sampling::Top => win.iter().take(o.num_negatives).copied().collect(),
        Sampling::Random => sample(o.seed, query, win.len(), o.num_negatives)
            .into_iter()
            .map(|i| win[i])
            .collect(),
    };
    Picked { negatives, skipped }
}

/// SplitMix64 (Steele, Lea and Flood 2014), the generator of [`sample`].
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(state: u64) -> Self {
        SplitMix64(state)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `k` distinct positions of `0..m` (all of them, in order, when `m <= k`), ascending: a
/// partial Fisher-Yates shuffle of `[0, 1, .., m-1]` (`for i in 0..k: j = i + next % (m - i);
/// swap(i, j)`) driven by `SplitMix64(seed ^ (query * 0xD1B54A32D192ED03))`, one generator per
/// query, so a query's draw depends only on the seed and its index (resuming or reordering the
/// work changes nothing).
pub fn sample(seed: u64, query: usize, m: usize, k: usize) -> Vec<usize> {
    if m <= k {
        return (0..m).collect();
    }
    let mut rng = SplitMix64::new(seed ^ (query as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut pos: Vec<usize> = (0..m).collect();
    for i in 0..k {
        let j = i + (rng.next_u64() % (m - i) as u64) as usize;
        pos.swap(i, j);
    }
    let mut out = pos[..k].to_vec();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(scores: &[f32]) -> Vec<(f32, u32)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, i as u32))
            .collect()
    }

    #[test]
    fn default_window_is_sentence_transformers() {
        let o = MineOptions::default();
        assert_eq!(o.window(1).unwrap().range_max, 4);
        assert_eq!(o.window(2).unwrap().retrieve, 7);
        let m = MineOptions {
            relative_margin: Some(0.05),
            range_min: 2,
            ..o.clone()
        };
        assert_eq!(m.window(1).unwrap().range_max, 33);
        let bad = MineOptions {
            range_min: 5,
            range_max: Some(6),
            ..o.clone()
        };
        assert!(bad
            .window(1)
            .unwrap_err()
            .to_string()
            .contains("--num-negatives"));
        let bad = MineOptions {
            range_min: 6,
            range_max: Some(6),
            ..o
        };
        assert!(bad
            .window(1)
            .unwrap_err()
            .to_string()
            .contains("--range-min"));
    }

    #[test]
    fn positives_struck_then_window_counts_survivors() {
        let o = MineOptions {
            num_negatives: 2,
            range_min: 1,
            range_max: Some(4),
            ..Default::default()
        };
        let w = o.window(1).unwrap();
        let c = cands(&[0.9, 0.8, 0.7, 0.6, 0.5]);
        let p = select(&o, w, 0, &c, &[1], &[0.8]);
        // survivors 0, 2, 3, 4; window survivors 1..4 = rows 2, 3, 4; top 2
        assert_eq!(p.negatives, vec![(2, 0.7), (3, 0.6)]);
    }

    #[test]
    fn margins_and_scores_filter_in_order() {
        let c = cands(&[0.95, 0.9, 0.84, 0.8, 0.5, 0.2]);
        let base = MineOptions {
            num_negatives: 10,
            range_max: Some(20),
            ..Default::default()
        };
        let w = base.window(1).unwrap();
        let abs = MineOptions {
            absolute_margin: Some(0.05),
            ..base.clone()
        };
        // p = 0.9 (row 1 is the positive): keep s + 0.05 <= 0.9
        let p = select(&abs, w, 0, &c, &[1], &[0.9]);
        assert_eq!(
            p.negatives.iter().map(|n| n.0).collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        assert_eq!(p.skipped.absolute_margin, 1);
        let rel = MineOptions {
            relative_margin: Some(0.1),
            min_score: Some(0.3),
            ..base
        };
        // p - |p| * 0.1 = 0.81: keep s <= 0.81, then s >= 0.3
        let p = select(&rel, w, 0, &c, &[1], &[0.9]);
        assert_eq!(p.negatives.iter().map(|n| n.0).collect::<Vec<_>>(), [3, 4]);
        assert_eq!((p.skipped.relative_margin, p.skipped.min_score), (2, 1));
    }

    #[test]
    fn random_is_seeded_per_query_and_sorted() {
        let o = MineOptions {
            num_negatives: 3,
            range_max: Some(10),
            sampling: Sampling::Random,
            seed: 7,
            ..Default::default()
        };
        let w = o.window(1).unwrap();
        let c = cands(&[1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05]);
        let a = select(&o, w, 3, &c, &[0], &[1.0]);
        assert_eq!(a, select(&o, w, 3, &c, &[0], &[1.0]));
        assert_eq!(a.negatives.len(), 3);
        assert!(a.negatives.windows(2).all(|x| x[0].1 >= x[1].1));
        let draws: std::collections::HashSet<Vec<usize>> =
            (0..20).map(|q| sample(7, q, 10, 3)).collect();
        assert!(draws.len() > 10, "queries draw differently");
        assert_eq!(sample(1, 0, 2, 3), vec![0, 1]);
    }

    /// The documented draw, written out in Python (`docs/MINING.md`: SplitMix64 seeded
    /// `seed ^ query * 0xD1B54A32D192ED03` mod 2^64, partial Fisher-Yates, sorted), so that a
    /// numpy user reproduces a run's random negatives.
    #[test]
    fn sample_is_the_documented_draw() {
        assert_eq!(sample(7, 3, 10, 3), vec![1, 4, 9]);
        assert_eq!(sample(0, 0, 50, 5), vec![30, 33, 35, 37, 38]);
        assert_eq!(sample(42, 1000, 7, 6), vec![0, 1, 3, 4, 5, 6]);
        assert_eq!(sample(123456789, 17, 1000, 4), vec![202, 337, 819, 895]);
    }

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // SplitMix64 seeded 0: the published first outputs
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}
