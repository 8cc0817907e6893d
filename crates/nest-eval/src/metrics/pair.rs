//! Pair classification as MTEB scores it: similarity scores against binary labels, with the
//! accuracy and F1 of the best threshold found **on the evaluated split itself** (MTEB 2's
//! `_find_best_acc_and_threshold` / `_find_best_f1_and_threshold`), and average precision
//! (scikit-learn's `average_precision_score`, threshold-free).
//!
//! A threshold never falls between two equal scores (MTEB 2.x; MTEB 1 did split them): tied
//! pairs are all on one side of it, so that the metric does not depend on the pairs' order in
//! the file. This matters for binary vectors, whose Hamming scores take at most `d + 1` values.

/// Accuracy, F1 and AP of one pair-classification cell, all in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairScores {
    pub accuracy: f64,
    pub accuracy_threshold: f64,
    pub f1: f64,
    pub f1_threshold: f64,
    pub precision: f64,
    pub recall: f64,
    pub ap: f64,
}

/// Indices sorted by score, highest first; ties keep input order (Python's stable `sorted`).
fn order_desc(scores: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    idx
}

/// Best accuracy over thresholds between consecutive distinct sorted scores (MTEB 2).
pub fn best_accuracy(scores: &[f64], labels: &[bool]) -> (f64, f64) {
    let idx = order_desc(scores);
    let n = labels.len() as f64;
    let mut positives = 0usize;
    let mut negatives_left = labels.iter().filter(|l| !**l).count();
    let (mut best, mut threshold) = (0.0, -1.0);
    for w in idx.windows(2) {
        if labels[w[0]] {
            positives += 1;
        } else {
            negatives_left -= 1;
        }
        if scores[w[0]] == scores[w[1]] {
            continue;
        }
        let acc = (positives + negatives_left) as f64 / n;
        if acc > best {
            best = acc;
            threshold = (scores[w[0]] + scores[w[1]]) / 2.0;
        }
    }
    (best, threshold)
}

/// Best F1 (with its precision and recall) over thresholds between distinct scores (MTEB 2).
/// Returns `(f1, precision, recall, threshold)`.
pub fn best_f1(scores: &[f64], labels: &[bool]) -> (f64, f64, f64, f64) {
    let idx = order_desc(scores);
    let total = labels.iter().filter(|l| **l).count() as f64;
    let (mut extracted, mut correct) = (0usize, 0usize);
    let mut best = (0.0, 0.0, 0.0, 0.0);
    for w in idx.windows(2) {
        extracted += 1;
        if labels[w[0]] {
            correct += 1;
        }
        if correct > 0 && scores[w[0]] != scores[w[1]] {
            let p = correct as f64 / extracted as f64;
            let r = correct as f64 / total;
            let f1 = 2.0 * p * r / (p + r);
            if f1 > best.0 {
                best = (f1, p, r, (scores[w[0]] + scores[w[1]]) / 2.0);
            }
        }
    }
    best
}

/// Average precision: sum over distinct score thresholds of (R_k - R_{k-1}) * P_k, as
/// `sklearn.metrics.average_precision_score`. `NaN` if there is no positive.
pub fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
    let idx = order_desc(scores);
    let total = labels.iter().filter(|l| **l).count() as f64;
    if total == 0.0 {
        return f64::NAN;
    }
    let (mut tp, mut seen) = (0.0, 0.0);
    let (mut ap, mut prev_recall) = (0.0, 0.0);
    let mut i = 0;
    while i < idx.len() {
        // one threshold: every item with this exact score
        let s = scores[idx[i]];
        while i < idx.len() && scores[idx[i]] == s {
            seen += 1.0;
            if labels[idx[i]] {
                tp += 1.0;
            }
            i += 1;
        }
        let recall = tp / total;
        ap += (recall - prev_recall) * (tp / seen);
        prev_recall = recall;
    }
    ap
}

/// All pair metrics for one cell.
pub fn pair_scores(scores: &[f64], labels: &[bool]) -> PairScores {
    let (accuracy, accuracy_threshold) = best_accuracy(scores, labels);
    let (f1, precision, recall, f1_threshold) = best_f1(scores, labels);
    PairScores {
        accuracy,
        accuracy_threshold,
        f1,
        f1_threshold,
        precision,
        recall,
        ap: average_precision(scores, labels),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked() {
        // sorted: 0.9(T) 0.8(F) 0.7(T) 0.1(F)
        let s = [0.8, 0.1, 0.9, 0.7];
        let l = [false, false, true, true];
        let (acc, t) = best_accuracy(&s, &l);
        assert_eq!(acc, 0.75);
        assert!((t - 0.85).abs() < 1e-12);
        // AP: thresholds .9 (P=1, R=.5), .8 (P=.5), .7 (P=2/3, R=1) -> .5*1 + .5*2/3
        assert!((average_precision(&s, &l) - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        let (f1, p, r, _) = best_f1(&s, &l);
        assert!((f1 - 0.8).abs() < 1e-12 && (p - 2.0 / 3.0).abs() < 1e-12 && r == 1.0);
    }

    #[test]
    fn a_threshold_never_splits_tied_scores() {
        // 0.9 0.5 0.5 0.1 with the tied pair labelled T,F or F,T: MTEB 1 split the tie and gave
        // 1.0 in one order and 0.5 in the other; between distinct scores both orders give 0.75
        let s = [0.9, 0.5, 0.5, 0.1];
        for labels in [[true, true, false, false], [true, false, true, false]] {
            let (acc, t) = best_accuracy(&s, &labels);
            assert_eq!(acc, 0.75, "{labels:?}");
            assert!((t - 0.7).abs() < 1e-12, "{labels:?}: threshold {t}");
            // above 0.7: P 1, R 0.5 (F1 2/3); above 0.3: P 2/3, R 1 (F1 0.8)
            let (f1, p, r, t) = best_f1(&s, &labels);
            assert!((f1 - 0.8).abs() < 1e-12 && (p - 2.0 / 3.0).abs() < 1e-12 && r == 1.0);
            assert!((t - 0.3).abs() < 1e-12, "{labels:?}: threshold {t}");
        }
    }
}
