use anyhow::{Context, Result};

use crate::args::SlimArgs;

pub fn run(a: SlimArgs) -> Result<()> {
    let m = super::load_model_path(&a.model, None)?;
    anyhow::ensure!(
        a.layers >= 1 && a.layers <= m.num_layers(),
        "--keep-layers {} is outside 1..={} (the model's layers)",
        a.layers,
        m.num_layers()
    );
    if let Some(d) = a.dim {
        anyhow::ensure!(
            d >= 1 && d <= m.output_dim(),
            "--dim {d} is outside 1..={} (the model's hidden size)",
            m.output_dim()
        );
    }
    check_out(&a)?;
    if let Some(w) = untrained_point(&m.meta, m.num_layers(), m.output_dim(), a.layers, a.dim) {
        eprintln!("warning: {w}");
    }
    nest_model::export::slim(&m, &a.out, a.layers, a.dim)
        .with_context(|| format!("writing {}", a.out.display()))?;
    let before: i64 = m.vs.variables().values().map(|t| t.numel() as i64).sum();
    let slim = super::load_model_path(&a.out.display().to_string(), None)?;
    let after: i64 = slim.vs.variables().values().map(|t| t.numel() as i64).sum();
    eprintln!(
        "wrote {}: {} of {} layers, {:.1} M of {:.1} M parameters{}",
        a.out.display(),
        a.layers,
        m.num_layers(),
        after as f64 / 1e6,
        before as f64 / 1e6,
        a.dim
            .map(|d| format!(", default dim {d} (sentence-transformers: truncate_dim={d})"))
            .unwrap_or_default()
    );
    Ok(())
}

/// What of the slim point (`layers`, `dim`) the model was not trained for, per its `nest.json`
/// (the last layer and the full width count as trained; a model without `nest.json` was
/// trained for nothing else), as one line; `None` when all of it was.
fn untrained_point(
    meta: &nest_model::NestMeta,
    num_layers: usize,
    width: usize,
    layers: usize,
    dim: Option<usize>,
) -> Option<String> {
    let mut trained_layers = meta.trained_layers.clone();
    trained_layers.push(num_layers);
    trained_layers.sort_unstable();
    trained_layers.dedup();
    let mut trained_dims = meta.matryoshka_dims.clone();
    trained_dims.push(width);
    trained_dims.sort_unstable();
    trained_dims.dedup();
    let mut parts = Vec::new();
    if !trained_layers.contains(&layers) {
        parts.push(format!(
            "layer {layers} was never trained as an exit (trained layers: {trained_layers:?})"
        ));
    }
    if let Some(d) = dim.filter(|d| !trained_dims.contains(d)) {
        parts.push(format!(
            "dim {d} was never trained (trained dims: {trained_dims:?})"
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let source = match meta.trained_layers.is_empty() && meta.matryoshka_dims.is_empty() {
        true => " (the model has no nest.json: it records no elastic training)",
        false => "",
    };
    Some(format!(
        "{}{source}; its vectors may be much worse than a trained point's",
        parts.join(" and ")
    ))
}

/// `--out` must not be the model's own folder, and may hold files only with `--overwrite`
/// (slim replaces the folder: a finished model or run there would be lost).
fn check_out(a: &SlimArgs) -> Result<()> {
    nest_model::export::check_out(&a.out, std::path::Path::new(&a.model), a.overwrite)
        .map_err(anyhow::Error::msg)
}
