use anyhow::{Context, Result};
use nest_core::output::{write_embeddings, OutputFormat};
use nest_model::{EncodeOptions, Keys, Policy};

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
    let offer = nest_model::Offer::new(&model, adaptor.as_ref())?;
    let spec = offer.resolve(a.layer, a.dim, Keys::FLAGS, Policy::AnyInRange)?;
    let prompt = a.prompt.resolve(&model)?;
    let texts = nest_core::data::read_sentences(&a.input)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pb = progress::bar(refs.len(), "encode");
    let opts = EncodeOptions {
        batch_size: a.model.batch_size,
    };
    let mut tick = |done: usize| pb.set_position(done as u64);
    let pooled = model.embed_prompted(&refs, &[spec.layer], opts, prompt, &mut tick)?;
    let e = nest_model::point::finish(&pooled[0], spec.dim, adaptor.as_ref())?;
    let m = nest_core::output::Matrix {
        rows: refs.len(),
        dim: spec.dim,
        data: nest_model::pooling::to_vec_f32(&e),
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
