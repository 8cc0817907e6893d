//! What [`MipicConfig`] leaves to the model, resolved when the objective is built (checkpoint
//! layers, SIA's layers, the top-k ratios), and the registration of the projectors `P_i` and
//! `phi_i` in the objective's parameter store.

use tch::{nn, Kind, Tensor};

use super::config::MipicConfig;
use super::terms::checkpoint_layers;

/// `l_i` per checkpoint: the configured layers or [`checkpoint_layers`]'s rule for `n` dims,
/// non-decreasing within `1..=num_layers`.
pub(super) fn resolve_checkpoints(
    config: &MipicConfig,
    n: usize,
    num_layers: usize,
) -> std::result::Result<Vec<usize>, String> {
    let checkpoints = if config.checkpoint_layers.is_empty() {
        checkpoint_layers(n, num_layers)
    } else {
        config.checkpoint_layers.clone()
    };
    if checkpoints.len() != n {
        return Err(format!(
            "{} checkpoint_layers for {} dims",
            checkpoints.len(),
            n
        ));
    }
    if checkpoints.windows(2).any(|w| w[0] > w[1])
        || checkpoints.iter().any(|&l| l == 0 || l > num_layers)
    {
        return Err(format!(
            "checkpoint_layers {checkpoints:?} must be non-decreasing within 1..={num_layers}"
        ));
    }
    Ok(checkpoints)
}

/// SIA's layers: the configured ones or the distinct checkpoint layers, within `1..=num_layers`.
pub(super) fn resolve_sia_layers(
    config: &MipicConfig,
    checkpoints: &[usize],
    num_layers: usize,
) -> std::result::Result<Vec<usize>, String> {
    let sia_layers = if config.sia_layers.is_empty() {
        let mut l = checkpoints.to_vec();
        l.dedup();
        l
    } else {
        config.sia_layers.clone()
    };
    if let Some(l) = sia_layers.iter().find(|&&l| l == 0 || l > num_layers) {
        return Err(format!("sia layer {l} is outside 1..={num_layers}"));
    }
    Ok(sia_layers)
}

/// `gamma_i` per SIA prefix dim: the configured ratios or 0.2, 0.3, ... capped at 1, each in
/// (0, 1].
pub(super) fn resolve_gammas(
    config: &MipicConfig,
    sia_dims: &[usize],
) -> std::result::Result<Vec<f64>, String> {
    let gammas: Vec<f64> = if config.top_k_ratios.is_empty() {
        (0..sia_dims.len())
            .map(|i| ((2 + i) as f64 / 10.0).min(1.0))
            .collect()
    } else {
        config.top_k_ratios.clone()
    };
    if gammas.len() != sia_dims.len() || gammas.iter().any(|g| !(*g > 0.0 && *g <= 1.0)) {
        return Err(format!(
            "top_k_ratios {gammas:?}: one ratio in (0, 1] per prefix dim {sia_dims:?}"
        ));
    }
    Ok(gammas)
}

/// Registers `P_i` (`sia_p{d}`, `[d_i, D]`, initialised to `[I | 0]`) per SIA dim.
pub(super) fn sia_projections(params: &nn::Path, sia_dims: &[usize], hidden: usize) -> Vec<Tensor> {
    let dev = params.device();
    sia_dims
        .iter()
        .map(|&d| {
            let init = Tensor::eye_m(d as i64, hidden as i64, (Kind::Float, dev));
            params.var_copy(&format!("sia_p{d}"), &init)
        })
        .collect()
}

/// Registers `phi_i` (`pic_phi{d_i}`: Linear `d_i -> d_{i+1}`, GELU, Linear) per link.
pub(super) fn pic_projectors(params: &nn::Path, dims: &[usize]) -> Vec<(nn::Linear, nn::Linear)> {
    dims.windows(2)
        .map(|w| {
            let (a, b) = (w[0] as i64, w[1] as i64);
            let p = params / format!("pic_phi{}", w[0]);
            (
                nn::linear(&p / "0", a, b, Default::default()),
                nn::linear(&p / "1", b, b, Default::default()),
            )
        })
        .collect()
}
