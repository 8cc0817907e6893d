use anyhow::{Context, Result};
use nest_core::output::{write_embeddings, OutputFormat};
use nest_core::ElasticSpec;
use nest_model::EncodeOptions;

use crate::args::EncodeArgs;
use crate::progress;

pub fn run(a: EncodeArgs) -> Result<()> {
    anyhow::ensure!(a.model.batch_size >= 1, "--batch-size must be at least 1");
    OutputFormat::from_path(&a.output)?; // fail before loading anything
    let model = super::load_model(&a.model)?;
    let spec = ElasticSpec {
        layer: a.layer.unwrap_or(model.num_layers()),
        dim: a
            .dim
            .or(model.meta.default_dim)
            .unwrap_or(model.hidden_size()),
    };
    spec.validate(model.num_layers(), model.hidden_size())?;
    let texts = nest_core::data::read_sentences(&a.input)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pb = progress::bar(refs.len(), "encode");
    let opts = EncodeOptions {
        batch_size: a.model.batch_size,
    };
    let m = model.embed(&refs, spec, opts, &mut |done| pb.set_position(done as u64))?;
    pb.finish_and_clear();
    write_embeddings(&a.output, &m).with_context(|| "writing embeddings")?;
    eprintln!(
        "wrote {} embeddings of dim {} (layer {} of {}) to {}",
        m.rows,
        m.dim,
        spec.layer,
        model.num_layers(),
        a.output.display()
    );
    Ok(())
}
