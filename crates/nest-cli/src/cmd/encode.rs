use std::path::Path;

use anyhow::{Context, Result};
use nest_core::fsutil::{is_std_stream, part_path};
use nest_core::output::{write_embeddings_from, Matrix, OutputFormat};
use nest_model::{Keys, Policy};

use crate::args::EncodeArgs;
use crate::progress;
use nest_core::kept::Embedded;

/// Under a multi-process launch (torchrun's RANK / WORLD_SIZE ...), each process encodes its
/// share of the input's bytes and writes its own part ([`part_path`]); the parts in rank order
/// are the single-process output, row for row (JSONL rows carry their global index).
pub fn run(a: EncodeArgs) -> Result<()> {
    let opts = a.model.encode_options()?;
    OutputFormat::from_path(&a.output)?; // fail before loading anything
    nest_core::fsutil::check_output_spares_inputs("--output", &a.output, &[("--input", &a.input)])?;
    let group = group_for(&a)?;
    crate::interrupt::explain_on_signals(crate::interrupt::kept_or(format!(
        "stopped; nothing written: {} is written whole at the end",
        a.output.display()
    )))?;
    let adaptor = match &a.adaptor {
        Some(p) => Some(nest_model::Adaptor::load(p)?),
        None => None,
    };
    let model = super::load_model(&a.model)?;
    let offer = nest_model::Offer::new(&model, adaptor.as_ref())?;
    let spec = offer.resolve(a.layer, a.dim, Keys::FLAGS, Policy::AnyInRange)?;
    let prompt = a.prompt.resolve(&model)?;
    let texts = match &group {
        Some(g) => nest_core::data::read_sentences_share(&a.input, g.rank(), g.world())?,
        None => nest_core::data::read_sentences(&a.input)?,
    };
    let foreign = adaptor
        .as_ref()
        .map(|x| x.foreign_note(&model))
        .transpose()?;
    let warnings = [
        looks_like_tsv(&a.input, &texts),
        offer.untrained(spec, Keys::FLAGS),
        foreign.flatten(),
        adaptor.as_ref().and_then(|x| x.layer_note(&[spec.layer])),
    ];
    if group.as_ref().is_none_or(|g| g.rank() == 0) {
        warnings
            .iter()
            .flatten()
            .for_each(|w| eprintln!("warning: {w}"));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pb = progress::bar(refs.len(), "encode");
    let job = Job {
        model: &model,
        spec,
        adaptor: adaptor.as_ref(),
        prompt,
        opts,
    };
    let (data, kept) = embed_kept(&a, &job, &refs, group.as_ref(), &pb)?;
    let m = Matrix {
        rows: refs.len(),
        dim: spec.dim,
        data,
    };
    pb.finish_and_clear();
    let to = write(&a.output, group.as_ref(), &m)?;
    if let Some(k) = kept {
        k.remove();
    }
    eprintln!(
        "wrote {} embeddings of dim {} (layer {} of {}) to {to}",
        m.rows,
        m.dim,
        spec.layer,
        model.num_layers(),
    );
    if let Some(g) = &group {
        g.barrier()?; // every part is on disk when any rank exits
    }
    Ok(())
}

/// What `nest encode` embeds with.
struct Job<'a> {
    model: &'a nest_model::ElasticEncoder,
    spec: nest_model::point::Point,
    adaptor: Option<&'a nest_model::Adaptor>,
    prompt: Option<&'a str>,
    opts: nest_model::EncodeOptions,
}

/// `refs` embedded chunk by chunk, each chunk's vectors kept beside the output (this rank's
/// part of it) as they come, so that a cut run embeds only the rest when run again
/// (`nest_core::kept`); no keeping for standard output. Returns the vectors and the kept
/// chunks, to drop once the output is written.
fn embed_kept(
    a: &EncodeArgs,
    job: &Job,
    refs: &[&str],
    group: Option<&nest_dist::Group>,
    pb: &indicatif::ProgressBar,
) -> Result<(Vec<f32>, Option<Embedded>)> {
    let (model, spec) = (job.model, job.spec);
    let out = match group {
        Some(g) => part_path(&a.output, g.rank(), g.world()),
        None => a.output.clone(),
    };
    let kept = match is_std_stream(&out) || refs.is_empty() {
        true => None,
        false => {
            let adaptor = a.adaptor.as_ref().map(|p| p.display().to_string());
            let key = serde_json::json!({
                "model": a.model.model,
                "weights": nest_core::kept::fingerprint(&a.model.model),
                "adaptor": adaptor.as_deref().map(|p| (p, nest_core::kept::fingerprint(p))),
                "layer": spec.layer,
                "dim": spec.dim,
                "max_length": model.tokenizer.max_length(),
                "prompt": job.prompt,
                "texts_sha256": nest_core::data::texts_sha256(refs),
                "dtype": model.dtype().name(),
                "chunk": a.encode_chunk,
            });
            let chunk = (a.encode_chunk, "texts");
            Some(super::open_kept(&out, key, spec.dim, chunk, pb)?)
        }
    };
    let mut data = Vec::with_capacity(refs.len() * spec.dim);
    let embed = |chunk: &[&str], base: usize| {
        let mut tick = |done: usize| pb.set_position((base + done) as u64);
        let pooled = model.embed_prompted(chunk, &[spec.layer], job.opts, job.prompt, &mut tick)?;
        let e = nest_model::point::finish(&pooled[0], spec.dim, job.adaptor)?;
        Ok(nest_model::pooling::to_vec_f32(&e))
    };
    let each = |_: &[&str], v: Vec<f32>| {
        data.extend(v);
        Ok(())
    };
    nest_core::kept::embed_chunks::<_, anyhow::Error>(
        refs,
        a.encode_chunk,
        kept.as_ref(),
        embed,
        each,
    )?;
    Ok((data, kept))
}

/// The process group under a multi-process launch (none otherwise), where `-` (standard input
/// or output) is refused: processes cannot share one.
fn group_for(a: &EncodeArgs) -> Result<Option<nest_dist::Group>> {
    let Some(launch) = nest_dist::Launch::from_env()? else {
        return Ok(None);
    };
    anyhow::ensure!(
        ![&a.input, &a.output].iter().any(|p| is_std_stream(p)),
        "--input - / --output - under a multi-process launch: standard input and output cannot \
         be shared between processes; name files"
    );
    let timeout = std::time::Duration::from_secs(300);
    Ok(Some(nest_dist::Group::join(&launch, timeout)?))
}

/// Writes `m` to `output` (this rank's part of it under a launch); returns where it went.
fn write(output: &Path, group: Option<&nest_dist::Group>, m: &Matrix) -> Result<String> {
    let (out, first) = match group {
        Some(g) => {
            // every rank's row count, for JSONL's global row index
            let counts = g.all_gather(&tch::Tensor::from_slice(&[m.rows as i64]))?;
            let first: i64 = counts[..g.rank()].iter().map(|c| c.int64_value(&[0])).sum();
            (part_path(output, g.rank(), g.world()), first as usize)
        }
        None => (output.to_path_buf(), 0),
    };
    write_embeddings_from(&out, m, first).with_context(|| "writing embeddings")?;
    Ok(match is_std_stream(&out) {
        true => "standard output (JSON lines)".to_string(),
        false => out.display().to_string(),
    })
}

/// A warning when the input looks like a TSV (an STS or pairs file, new-user trial #10): its
/// `.tsv` name, or a first line with tabs; or like JSON lines not named `.jsonl` (#11). `encode` embeds whole lines, a header line and the
/// tabs included.
fn looks_like_tsv(input: &Path, texts: &[String]) -> Option<String> {
    let first = texts.first()?;
    let jsonl = input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let t = first.trim();
    if !jsonl && t.starts_with('{') && t.ends_with('}') && t.contains("\"text\"") {
        return Some(format!(
            "{} looks like JSON lines (line 1: '{}'): encode embeds each whole line; name the \
             file .jsonl to embed its \"text\" fields",
            input.display(),
            t.chars().take(60).collect::<String>()
        ));
    }
    let tsv = input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("tsv"));
    if !tsv && !first.contains('\t') {
        return None;
    }
    let shown: String = first.replace('\t', "\\t").chars().take(60).collect();
    Some(format!(
        "{} looks like a TSV (line 1: '{shown}'): encode embeds each whole line as one text, \
         a header and the tabs included; give one text per line (or .jsonl with \"text\")",
        input.display()
    ))
}
