//! Learning-rate schedule: linear warm-up to the base rate, then linear, cosine or constant
//! decay to 0 at the last step (as `transformers`' `get_linear_schedule_with_warmup` /
//! `get_cosine_schedule_with_warmup`).

use crate::recipe::{Decay, Recipe};

/// Learning rate for optimizer step `step` (0-based) of `total`.
pub(crate) fn lr_at(base: f64, step: u64, total: u64, warmup: u64, decay: Decay) -> f64 {
    if step < warmup {
        return base * (step as f64) / (warmup.max(1) as f64);
    }
    let progress = (step - warmup) as f64 / ((total.saturating_sub(warmup)).max(1) as f64);
    match decay {
        Decay::Constant => base,
        Decay::Linear => base * (1.0 - progress).max(0.0),
        Decay::Cosine => base * 0.5 * (1.0 + (std::f64::consts::PI * progress.min(1.0)).cos()),
    }
}

/// The learning rates of step `step` of `total` for the optimizer's two parameter groups:
/// `[encoder, heads]` (heads: the objective's own parameters, at `head_lr` with
/// `head_warmup_ratio`'s warm-up when the recipe sets them).
pub(crate) fn group_lrs(r: &Recipe, step: u64, total: u64) -> [f64; 2] {
    let warmup = |ratio: f64| (ratio * total as f64).round() as u64;
    let encoder = lr_at(r.lr, step, total, warmup(r.warmup_ratio), r.decay);
    let head = lr_at(
        r.head_lr.unwrap_or(r.lr),
        step,
        total,
        warmup(r.head_warmup_ratio.unwrap_or(r.warmup_ratio)),
        r.decay,
    );
    [encoder, head]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_decay() {
        assert_eq!(lr_at(1.0, 0, 100, 10, Decay::Linear), 0.0);
        assert!((lr_at(1.0, 5, 100, 10, Decay::Linear) - 0.5).abs() < 1e-12);
        assert!((lr_at(1.0, 10, 100, 10, Decay::Linear) - 1.0).abs() < 1e-12);
        assert!((lr_at(1.0, 55, 100, 10, Decay::Linear) - 0.5).abs() < 1e-12);
        assert!((lr_at(1.0, 55, 100, 10, Decay::Cosine) - 0.5).abs() < 1e-12);
        assert!(lr_at(1.0, 100, 100, 10, Decay::Cosine).abs() < 1e-12);
        assert_eq!(lr_at(1.0, 70, 100, 10, Decay::Constant), 1.0);
    }
}
