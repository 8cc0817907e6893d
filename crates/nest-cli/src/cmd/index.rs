use anyhow::Result;
use nest_index::Precision;

use super::index_common::{finish, levels};
use crate::args_search::{IndexBuildArgs, IndexCommand};
use crate::progress;

pub fn run(c: IndexCommand) -> Result<()> {
    match c {
        IndexCommand::Build(a) => build(*a),
        IndexCommand::Info { index } => {
            let idx = nest_index::Index::open(&index)?;
            let mut info = serde_json::to_value(idx.manifest())?;
            // the built rows' count is `count`; what a server changed since (the journal):
            // documents added or replaced, deleted, and the documents searched now
            let j = nest_index::collection::read_journal(&index, idx.full_dim())?;
            let kept = (0..idx.len()).filter(|&r| !j.named.contains_key(idx.id(r)));
            info["documents"] = (kept.count() + j.rows.len()).into();
            info["added"] = j.rows.len().into();
            info["deleted"] = j.deleted().into();
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(())
        }
    }
}

fn build(a: IndexBuildArgs) -> Result<()> {
    crate::interrupt::explain_on_signals(crate::interrupt::kept_or(format!(
        "stopped; nothing written: the index {} is written whole at the end",
        a.out.display()
    )))?;
    let model = std::path::Path::new(&a.model.model);
    let inputs = [
        ("--input", Some(a.input.as_path())),
        ("--embeddings", a.embeddings.as_deref()),
    ];
    let mut inputs: Vec<_> = inputs
        .into_iter()
        .filter_map(|(k, p)| Some((k, p?)))
        .collect();
    inputs.push(("--model", model)); // a hub id is no path here, and passes
    nest_core::fsutil::check_output_spares_inputs("--out", &a.out, &inputs)?;
    if let Some(launch) = nest_dist::Launch::from_env()? {
        anyhow::ensure!(
            a.embeddings.is_none(),
            "--embeddings under a multi-process launch: the vectors exist already, build the \
             index in one process"
        );
        let g = nest_dist::Group::join(&launch, std::time::Duration::from_secs(300))?;
        return super::index_parts::build(a, &g);
    }
    // one build per output at a time: a second one is refused at once, naming the first;
    // documents a server added to the index --overwrite replaces: kept, dropped, or refused now
    let out = a.out.clone();
    nest_core::lock::building(&out, || {
        super::index_common::added_choice(&a).and_then(|_| build_one(a))
    })?
}

/// A single-process build: every input read and checked before the builder writes (into a
/// partial folder, renamed into place at the end).
fn build_one(a: IndexBuildArgs) -> Result<()> {
    let docs = nest_core::data::read_documents(&a.input)?;
    let precisions = Precision::parse_list(&a.precision)?;
    let pb = progress::bar(docs.len(), "index");
    if let Some(path) = &a.embeddings {
        return build_from_embeddings(&a, path, &docs, &precisions, &pb);
    }
    let model = super::load_model(&a.model)?;
    let layer = a.layer.unwrap_or(model.num_layers());
    nest_core::spec::check_layers("--layer", &[layer], model.num_layers())?;
    let d = model.output_dim();
    let levels = levels(a.dims.as_deref(), &precisions, d)?;
    let prompt = super::index_common::document_prompt(&a, &model)?;
    let max_length = model.tokenizer.max_length();
    let mut source = nest_core::data::point_record(&a.model.model, layer, max_length);
    source["documents_sha256"] = nest_core::data::content_sha256(&docs).into();
    source[nest_core::data::DOCUMENT_PROMPT] = prompt.into();
    // what a cut build kept: the vectors of these documents by this model, in this arithmetic
    let mut key = source.clone();
    key["dtype"] = model.dtype().name().into();
    key["weights"] = nest_core::kept::fingerprint(&a.model.model);
    key["chunk"] = a.encode_chunk.into();
    let embedded = super::open_kept(&a.out, key, d, (a.encode_chunk, "documents"), &pb)?;
    let mut b = super::index_common::builder(&a, d, &levels, source)?;
    let opts = a.model.encode_options()?;
    let embed = |chunk: &[nest_core::data::Document], base: usize| {
        let texts: Vec<&str> = chunk.iter().map(|d| d.text.as_str()).collect();
        let mut tick = |done: usize| pb.set_position((base + done) as u64);
        let pooled = model.embed_prompted(&texts, &[layer], opts, prompt, &mut tick)?;
        Ok(nest_model::pooling::to_vec_f32(&pooled[0]))
    };
    let mut pushed = 0;
    let each = |chunk: &[nest_core::data::Document], flat: Vec<f32>| {
        for (doc, v) in chunk.iter().zip(flat.chunks_exact(d)) {
            b.push(&doc.id, Some(&doc.stored(a.store_text)), v)?;
        }
        pushed += chunk.len();
        pb.set_position(pushed as u64);
        Ok(())
    };
    nest_core::kept::embed_chunks::<_, anyhow::Error>(
        &docs,
        a.encode_chunk,
        Some(&embedded),
        embed,
        each,
    )?;
    pb.finish_and_clear();
    finish(b, &a)?;
    embedded.remove();
    Ok(())
}

/// `--embeddings`: the vectors given, one row per document, no model.
fn build_from_embeddings(
    a: &IndexBuildArgs,
    path: &std::path::Path,
    docs: &[nest_core::data::Document],
    precisions: &[Precision],
    pb: &indicatif::ProgressBar,
) -> Result<()> {
    let m = nest_compress::data::read_matrix(path)?;
    let (n, d) = (m.size()[0] as usize, m.size()[1] as usize);
    anyhow::ensure!(
        n == docs.len(),
        "{}: {n} rows for the {} documents of {}",
        path.display(),
        docs.len(),
        a.input.display()
    );
    let levels = levels(a.dims.as_deref(), precisions, d)?;
    let source = serde_json::json!({"embeddings": path.display().to_string()});
    let mut b = super::index_common::builder(a, d, &levels, source)?;
    let flat = nest_model::pooling::to_vec_f32(&m);
    for (i, doc) in docs.iter().enumerate() {
        b.push(
            &doc.id,
            Some(&doc.stored(a.store_text)),
            &flat[i * d..(i + 1) * d],
        )?;
        pb.set_position(i as u64 + 1);
    }
    finish(b, a)
}
