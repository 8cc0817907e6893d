use anyhow::{Context, Result};

use crate::args::SlimArgs;

pub fn run(a: SlimArgs) -> Result<()> {
    let m = super::load_model_path(&a.model, None)?;
    anyhow::ensure!(
        a.layers >= 1 && a.layers <= m.num_layers(),
        "--layers {} is outside 1..={} (the model's layers)",
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
    nest_train::export::slim(&m, &a.out, a.layers, a.dim)
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
