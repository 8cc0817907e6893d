//! Bounded top-k selection: the `k` highest scores, ties broken by the lower row number so
//! results are deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A scored row, ordered so that the *worst* hit is the heap's maximum.
#[derive(Debug, Clone, Copy)]
struct Worst {
    score: f32,
    row: u32,
}

impl PartialEq for Worst {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Worst {
    fn cmp(&self, o: &Self) -> Ordering {
        // lower score = worse = greater; equal scores: higher row = worse
        o.score
            .total_cmp(&self.score)
            .then_with(|| self.row.cmp(&o.row))
    }
}

/// Keeps the best `k` (score, row) pairs pushed into it.
#[derive(Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    #[inline]
    pub fn push(&mut self, score: f32, row: u32) {
        if self.k == 0 {
            return;
        }
        let item = Worst { score, row };
        if self.heap.len() < self.k {
            self.heap.push(item);
        } else if let Some(mut top) = self.heap.peek_mut() {
            if item < *top {
                *top = item;
            }
        }
    }

    /// Best first.
    pub fn into_sorted(self) -> Vec<(f32, u32)> {
        let mut v: Vec<Worst> = self.heap.into_vec();
        v.sort();
        v.into_iter().map(|w| (w.score, w.row)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_with_row_ties() {
        let mut t = TopK::new(3);
        for (s, r) in [(0.5, 0), (0.9, 1), (0.5, 2), (0.1, 3), (0.9, 4), (0.7, 5)] {
            t.push(s, r);
        }
        assert_eq!(t.into_sorted(), vec![(0.9, 1), (0.9, 4), (0.7, 5)]);
        let mut t = TopK::new(2);
        t.push(1.0, 7);
        t.push(1.0, 3);
        t.push(1.0, 5);
        assert_eq!(t.into_sorted(), vec![(1.0, 3), (1.0, 5)]);
    }
}
