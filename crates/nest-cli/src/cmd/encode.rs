use anyhow::{Context, Result};
use nest_core::output::{write_embeddings, OutputFormat};
use nest_core::ElasticSpec;
use nest_model::EncodeOptions;

use crate::args::EncodeArgs;
use crate::progress;

pub fn run(a: EncodeArgs) -> Result<()> {
    anyhow::ensure!(a.model.batch_size >= 1, "--batch-size must be at least 1");
    OutputFormat::from_path(&a.output)?; // fail before loading anything
    let adaptor = match &a.adaptor {
        Some(p) => Some(nest_model::Adaptor::load(p)?),
        None => None,
    };
    let model = super::load_model(&a.model)?;
    let spec = ElasticSpec {
        layer: a.layer.unwrap_or(model.num_layers()),
        dim: a
            .dim
            .or(adaptor.as_ref().and_then(|ad| ad.dims().last().copied()))
            .or(model.meta.default_dim)
            .unwrap_or(model.output_dim()),
    };
    match &adaptor {
        Some(ad) => {
            nest_core::spec::check_layers("--layer", &[spec.layer], model.num_layers())?;
            anyhow::ensure!(
                ad.meta.input_dim == model.output_dim(),
                "the adaptor takes {} dims, the model gives {}",
                ad.meta.input_dim,
                model.output_dim()
            );
            ad.head_for(spec.dim)?;
        }
        None => spec.validate(model.num_layers(), model.output_dim())?,
    }
    let texts = nest_core::data::read_sentences(&a.input)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pb = progress::bar(refs.len(), "encode");
    let opts = EncodeOptions {
        batch_size: a.model.batch_size,
    };
    let mut tick = |done: usize| pb.set_position(done as u64);
    let m = match &adaptor {
        Some(ad) => {
            let pooled = model.embed_layers(&refs, &[spec.layer], opts, &mut tick)?;
            let e = ad.apply(&pooled[0], spec.dim)?;
            nest_core::output::Matrix {
                rows: refs.len(),
                dim: spec.dim,
                data: nest_model::pooling::to_vec_f32(&e),
            }
        }
        None => model.embed(&refs, spec, opts, &mut tick)?,
    };
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
