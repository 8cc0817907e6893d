//! Tensors that depend on nothing but a pass's length (and device and kind): rotary tables,
//! relative-position buckets. Made once for the longest pass so far, at least doubling, and cut
//! down to each pass's length by the caller (views: no operator runs). Computing them in every
//! pass cost about ten operators a table, each a kernel launch on a GPU, where a small batch's
//! pass costs about its kernel count ([`crate::ops`]).
//!
//! Nothing made is ever dropped: a recorded CUDA graph reads the tensors it was recorded with,
//! so a longer pass adds a larger set beside the old ones (with doubling, all kept take at
//! most 4/3 of the largest set's memory when it grows by squares, 2x by rows).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};

use tch::Tensor;

/// The sets made for one key: each with the length it was made for, the last the longest.
type Sets = Vec<(i64, Vec<Tensor>)>;

/// Grow-only sets of tensors per key, each made for a length.
#[derive(Debug)]
pub(crate) struct LengthCache<K> {
    kept: Mutex<HashMap<K, Sets>>,
}

impl<K> Default for LengthCache<K> {
    fn default() -> Self {
        LengthCache {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq> LengthCache<K> {
    /// The tensors for `key` made for a length of at least `n` (shallow clones: cut them to
    /// `n`), made by `make(len)` first when none is long enough, with `len` at least twice the
    /// longest made so far.
    pub(crate) fn at_least(
        &self,
        key: K,
        n: i64,
        make: impl FnOnce(i64) -> Vec<Tensor>,
    ) -> Vec<Tensor> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let sets = kept.entry(key).or_default();
        let have = sets.last().map_or(0, |(len, _)| *len);
        if have < n {
            let len = n.max(2 * have);
            sets.push((len, make(len)));
        }
        let (_, set) = sets.last().expect("just made");
        set.iter().map(Tensor::shallow_clone).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// A longer pass makes a new set, at least doubling; shorter ones reuse the last; the old
    /// sets stay alive (their storage is not freed).
    #[test]
    fn grows_by_doubling_and_keeps_every_set() {
        let cache = LengthCache::<Device>::default();
        let mut made = Vec::new();
        let mut get = |n| {
            cache.at_least(Device::Cpu, n, |len| {
                made.push(len);
                vec![Tensor::arange(len, (Kind::Int64, Device::Cpu))]
            })
        };
        assert_eq!(get(5)[0].size(), [5]);
        let first = get(3)[0].shallow_clone();
        assert_eq!(first.size(), [5], "reused");
        assert_eq!(get(6)[0].size(), [10], "doubled");
        assert_eq!(get(31)[0].size(), [31]);
        assert_eq!(made, [5, 10, 31]);
        assert_eq!(cache.kept.lock().unwrap()[&Device::Cpu].len(), 3);
    }
}
