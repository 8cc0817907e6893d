//! `nest index build` under a multi-process launch (torchrun's RANK / WORLD_SIZE ...): every
//! process reads its byte share of the documents (never the whole file), embeds it and writes
//! its part (vectors as `.npy`, ids and payloads as `.jsonl`, each written atomically) into
//! `<out>.parts/`; rank 0 then merges the parts, in rank order, into one index at `<out>`
//! (identical to the one a single process builds) and removes them. Rank 0 holds the lock beside
//! `<out>` for the whole build, and the ranks agree after their start and after their parts:
//! a refusal or failure on one rank stops every rank at once, each saying why.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nest_core::data::DocumentShare;
use nest_core::output::{write_embeddings, Matrix};
use nest_index::{IndexBuilder, Precision};
use tch::Tensor;

use crate::args_search::IndexBuildArgs;

fn parts_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".parts");
    out.with_file_name(name)
}

fn part(dir: &Path, rank: usize, ext: &str) -> PathBuf {
    dir.join(format!("part-{rank:05}.{ext}"))
}

pub fn build(a: IndexBuildArgs, g: &nest_dist::Group) -> Result<()> {
    // rank 0 holds the lock beside the index for the whole build (a second build of the same
    // --out is refused there), and every rank learns at once when any rank's start failed
    let mut lock = None;
    let start = (|| -> Result<_> {
        if g.rank() == 0 {
            lock = Some(nest_core::lock::FolderLock::take_beside(&a.out)?);
        }
        // refuse before any work what rank 0 would refuse at the end
        anyhow::ensure!(
            a.overwrite || !a.out.exists(),
            "{}: exists; pass --overwrite to replace it",
            a.out.display()
        );
        super::index_common::added_choice(&a)?;
        let precisions = Precision::parse_list(&a.precision)?;
        let share = nest_core::data::read_documents_share(&a.input, g.rank(), g.world())?;
        Ok((precisions, share))
    })();
    let result = together(g, "starting", start).and_then(|(p, share)| build_parts(&a, g, p, share));
    if let Some(lock) = lock {
        match result.is_ok() {
            true => lock.remove(),
            false => lock.discard(),
        }
    }
    result
}

/// `step`'s result on this rank, or an error when it failed on another rank (so every rank
/// stops together, each saying why: the failed rank with its own message).
pub(super) fn together<T>(g: &nest_dist::Group, step: &str, mine: Result<T>) -> Result<T> {
    let failed = g.failed_ranks(mine.is_ok());
    let mine = mine?;
    let failed = failed?;
    anyhow::ensure!(
        failed.is_empty(),
        "rank {}: stopped while {step}: rank(s) {failed:?} failed (their messages say why)",
        g.rank()
    );
    Ok(mine)
}

/// Embeds this rank's share into its part; rank 0 then merges every part into the index.
fn build_parts(
    a: &IndexBuildArgs,
    g: &nest_dist::Group,
    precisions: Vec<Precision>,
    mut share: DocumentShare,
) -> Result<()> {
    // ids made from positions (line or record numbers) need the counts of the shares before
    let counts = g.all_gather(&Tensor::from_slice(&[
        share.lines as i64,
        share.records as i64,
    ]))?;
    let before = |k: i64| -> usize {
        counts[..g.rank()]
            .iter()
            .map(|c| c.int64_value(&[k]) as usize)
            .sum()
    };
    share.renumber(before(0), before(1));
    let written = write_part(a, g, &precisions, &share);
    let (mut source, d, levels) = together(g, "embedding", written)?; // every part is on disk
    if g.rank() != 0 {
        return Ok(());
    }
    // the whole file's documents, as the shares renumbered them
    let docs = nest_core::data::read_documents(&a.input)?;
    source["documents_sha256"] = nest_core::data::content_sha256(&docs).into();
    let dir = parts_dir(&a.out);
    let mut b = super::index_common::builder(a, d, &levels, source)?;
    merge(&dir, g.world(), d, &mut b)?;
    super::index_common::finish(b, a)?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    Ok(())
}

/// Embeds this rank's share and writes its part (vectors, then ids and payloads); returns the
/// index's source record, width and levels.
fn write_part(
    a: &IndexBuildArgs,
    g: &nest_dist::Group,
    precisions: &[Precision],
    share: &DocumentShare,
) -> Result<(serde_json::Value, usize, Vec<nest_index::Level>)> {
    let model = super::load_model(&a.model)?;
    let layer = a.layer.unwrap_or(model.num_layers());
    nest_core::spec::check_layers("--layer", &[layer], model.num_layers())?;
    let d = model.output_dim();
    let levels = super::index_common::levels(a.dims.as_deref(), precisions, d)?;
    let texts: Vec<&str> = share.docs.iter().map(|d| d.text.as_str()).collect();
    let prompt = super::index_common::document_prompt(a, &model)?;
    let dir = parts_dir(&a.out);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let key = serde_json::json!({
        "model": a.model.model,
        "weights": nest_core::kept::fingerprint(&a.model.model),
        "layer": layer,
        "max_length": model.tokenizer.max_length(),
        "prompt": prompt,
        "documents_sha256": nest_core::data::content_sha256(&share.docs),
        "dtype": model.dtype().name(),
        "chunk": a.encode_chunk,
        "rank": g.rank(),
        "world": g.world(),
    });
    let job = (&model, layer, prompt);
    let data = embed_kept(a, job, &texts, &part(&dir, g.rank(), "npy"), key)?;
    let rows: String = share
        .docs
        .iter()
        .map(|doc| {
            let payload = doc.stored(a.store_text);
            serde_json::json!({"id": doc.id, "payload": payload}).to_string() + "\n"
        })
        .collect();
    nest_core::fsutil::write_atomic(&part(&dir, g.rank(), "jsonl"), rows.as_bytes())?;
    let m = Matrix {
        rows: texts.len(),
        dim: d,
        data,
    };
    write_embeddings(&part(&dir, g.rank(), "npy"), &m)?;
    eprintln!(
        "rank {}: embedded {} documents into {}",
        g.rank(),
        m.rows,
        dir.display()
    );
    let max_length = model.tokenizer.max_length();
    let mut source = nest_core::data::point_record(&a.model.model, layer, max_length);
    source["processes"] = g.world().into();
    source[nest_core::data::DOCUMENT_PROMPT] = prompt.into();
    Ok((source, d, levels))
}

/// This rank's texts embedded chunk by chunk, each chunk kept beside its part as it comes
/// (`nest_core::kept`, in the parts folder): a cut build run again embeds only the rest. The
/// kept chunks stay until rank 0 removes the parts folder with the index in place, so a build
/// cut while merging embeds nothing again.
fn embed_kept(
    a: &IndexBuildArgs,
    (model, layer, prompt): (&nest_model::ElasticEncoder, usize, Option<&str>),
    texts: &[&str],
    part: &Path,
    key: serde_json::Value,
) -> Result<Vec<f32>> {
    let d = model.output_dim();
    let pb = indicatif::ProgressBar::hidden();
    let kept = super::open_kept(part, key, d, (a.encode_chunk, "documents"), &pb)?;
    let opts = a.model.encode_options()?;
    let mut data = Vec::with_capacity(texts.len() * d);
    let embed = |chunk: &[&str], _| {
        let pooled = model.embed_prompted(chunk, &[layer], opts, prompt, &mut |_| {})?;
        Ok(nest_model::pooling::to_vec_f32(&pooled[0]))
    };
    let each = |_: &[&str], v: Vec<f32>| {
        data.extend(v);
        Ok(())
    };
    nest_core::kept::embed_chunks::<_, anyhow::Error>(
        texts,
        a.encode_chunk,
        Some(&kept),
        embed,
        each,
    )?;
    Ok(data)
}

/// Pushes every part's rows, in rank order, into the builder; ids must be unique across parts.
fn merge(dir: &Path, world: usize, d: usize, b: &mut IndexBuilder) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for r in 0..world {
        let ids_path = part(dir, r, "jsonl");
        let text = std::fs::read_to_string(&ids_path)
            .with_context(|| format!("reading {}", ids_path.display()))?;
        let vecs_path = part(dir, r, "npy");
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(serde_json::from_str)
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("reading {}", ids_path.display()))?;
        if rows.is_empty() {
            continue;
        }
        let m = nest_compress::data::read_matrix(&vecs_path)?;
        let flat = nest_model::pooling::to_vec_f32(&m);
        anyhow::ensure!(
            flat.len() == rows.len() * d,
            "{}: {} values for {} documents of dim {d}",
            vecs_path.display(),
            flat.len(),
            rows.len()
        );
        for (i, row) in rows.iter().enumerate() {
            let id = row["id"].as_str().unwrap_or_default();
            anyhow::ensure!(
                seen.insert(id.to_string()),
                "duplicate id '{id}' (found again by process {r})"
            );
            b.push(id, Some(&row["payload"]), &flat[i * d..(i + 1) * d])?;
        }
    }
    Ok(())
}
