//! The shallow layers' running sums of [`super::TwoDMse::terms_at`].

use tch::Tensor;

use crate::objective::Term;

/// The shallow layers' running sums: the task terms per dim (the full dim first, then the
/// prefix dims) and the two alignments.
pub(super) struct ShallowSums {
    pub(super) task: Vec<Option<Tensor>>,
    pub(super) kl_full: Option<Tensor>,
    pub(super) kl_prefix: Option<Tensor>,
}

impl ShallowSums {
    pub(super) fn new(prefix_dims: usize) -> Self {
        ShallowSums {
            task: (0..=prefix_dims).map(|_| None).collect(),
            kl_full: None,
            kl_prefix: None,
        }
    }

    /// Appends the sums that received a value: `shallow/{name}@{d}` per dim, then `kl@full` and
    /// `kl@prefix`.
    pub(super) fn push_terms(
        self,
        terms: &mut Vec<Term>,
        name: &str,
        hidden: usize,
        prefix: &[(usize, f64)],
    ) {
        let dims = std::iter::once(hidden).chain(prefix.iter().map(|p| p.0));
        for (d, t) in dims.zip(self.task) {
            if let Some(v) = t {
                terms.push(Term {
                    name: format!("shallow/{name}@{d}"),
                    value: v,
                });
            }
        }
        for (label, t) in [("kl@full", self.kl_full), ("kl@prefix", self.kl_prefix)] {
            if let Some(v) = t {
                terms.push(Term {
                    name: label.into(),
                    value: v,
                });
            }
        }
    }
}

/// Adds `v` to a running sum that may not have started.
pub(super) fn accumulate(acc: &mut Option<Tensor>, v: Tensor) {
    *acc = Some(match acc.take() {
        Some(a) => a + v,
        None => v,
    });
}
