//! A model's embeddings of a BEIR folder (`nest compress --model --beir`): computed once,
//! chunk by chunk with each chunk kept until the whole is in the embedding cache
//! (`nest_core::kept`), so that a cut run goes on from its last chunk.

use std::path::{Path, PathBuf};

use nest_core::data::Beir;
use nest_model::prompt::Side;
use nest_model::{ElasticEncoder, EncodeOptions};
use serde_json::{json, Value};

use super::Event;
use crate::data::{EmbeddingCache, Embeddings};
use crate::Result;

/// A model's pooled last-layer embeddings of a BEIR folder's corpus and of the queries of every
/// split, from the cache when it holds them, and the model's probe record
/// (`nest_model::adaptor::PROBE_TEXT`'s vector).
pub(super) fn beir_embeddings(
    model: &str,
    dir: &Path,
    cache: &Path,
    width: &dyn Fn(usize) -> Result<()>,
    events: &mut dyn FnMut(Event),
) -> Result<(Embeddings, Embeddings, Value)> {
    let model_dir = nest_model::hub::resolve(model)?;
    let enc = ElasticEncoder::load(&model_dir, nest_model::default_device(), None)?;
    width(enc.output_dim())?; // dims wider than the model: refused before minutes of embedding
    let layer = enc.num_layers();
    let text = nest_model::adaptor::PROBE_TEXT;
    let v = enc.embed_layers(&[text], &[layer], EncodeOptions::batch(1), &mut |_| {})?;
    let v = v[0].to_kind(tch::Kind::Float).to_device(tch::Device::Cpu);
    let v = Vec::<f32>::try_from(&v.view([-1])).map_err(nest_model::Error::from)?;
    let probe = json!({"text": text, "layer": layer, "vector": v});
    // queries and documents as sentence-transformers' encode_query / encode_document embed them
    let side = |side| enc.prompts.for_side(Default::default(), "prompt", side);
    let query_prompt = side(Side::Query)?.filter(|p| !p.is_empty());
    let document_prompt = side(Side::Document)?.filter(|p| !p.is_empty());
    let prompts = [query_prompt, document_prompt];
    let key = EmbeddingCache::key(&model_dir, dir, layer, 0, prompts)?;
    let c = EmbeddingCache {
        dir: cache.to_path_buf(),
    };
    if let Some(hit) = c.get(&key) {
        events(Event::Message(format!(
            "embeddings: cache hit {}",
            cache.join(format!("{key}.safetensors")).display()
        )));
        return Ok((hit.0, hit.1, probe));
    }
    let mut queries: Vec<(String, String)> = Vec::new();
    let mut corpus = Vec::new();
    for split in ["train", "dev", "test"] {
        if !dir.join("qrels").join(format!("{split}.tsv")).exists() {
            continue;
        }
        let b = Beir::read(dir, split)?;
        for q in b.queries {
            if !queries.iter().any(|x| x.0 == q.0) {
                queries.push(q);
            }
        }
        corpus = b.corpus;
    }
    let mut kept = Vec::new();
    let mut embed =
        |items: &[(String, String)], what: &'static str, prompt| -> Result<Embeddings> {
            let texts: Vec<&str> = items.iter().map(|x| x.1.as_str()).collect();
            let at = (cache.join(&key), what, CHUNK);
            let (x, k) = embed_kept(&enc, (layer, prompt), &texts, at, events)?;
            kept.push(k);
            Ok(Embeddings {
                ids: items.iter().map(|x| x.0.clone()).collect(),
                x,
            })
        };
    let t = std::time::Instant::now();
    let ce = embed(&corpus, "corpus", document_prompt)?;
    let qe = embed(&queries, "queries", query_prompt)?;
    events(Event::Message(format!(
        "embeddings: {} documents and {} queries in {:.1} s; cached as {key}",
        ce.ids.len(),
        qe.ids.len(),
        t.elapsed().as_secs_f64()
    )));
    c.put(&key, &ce, &qe)?;
    kept.into_iter().for_each(nest_core::kept::Embedded::remove);
    Ok((ce, qe, probe))
}

/// Texts per chunk whose vectors are kept as they come (`nest_core::kept`), so that a cut
/// embedding (Ctrl-C, a lost machine) goes on from the last chunk when run again.
const CHUNK: usize = 2048;

/// `texts` embedded at `layer` with `prompt`, `chunk` at a time, each chunk kept beside `at`
/// (`what` names the side: corpus, queries) until the cache holds the whole; returns the
/// `[n, dim]` float32 vectors and the kept chunks, to drop then.
fn embed_kept(
    enc: &ElasticEncoder,
    (layer, prompt): (usize, Option<&str>),
    texts: &[&str],
    (at, what, chunk_len): (PathBuf, &'static str, usize),
    events: &mut dyn FnMut(Event),
) -> Result<(tch::Tensor, nest_core::kept::Embedded)> {
    let dim = enc.output_dim();
    let key = json!({"what": what, "chunk": chunk_len, "dtype": enc.dtype().name()});
    let (kept, found) = nest_core::kept::Embedded::open(&at.with_extension(what), key, dim)?;
    if found.chunks > 0 {
        events(Event::Message(format!(
            "{what}: resuming, {} chunks of {chunk_len} texts embedded by a cut run ({})",
            found.chunks,
            kept.dir().display()
        )));
    }
    let (total, opts) = (texts.len(), EncodeOptions::batch(32));
    let mut data = Vec::with_capacity(total * dim);
    let embed = |chunk: &[&str], base: usize| {
        let mut tick = |done| {
            let done = base + done;
            events(Event::Encoding { what, done, total })
        };
        let x = enc.embed_prompted(chunk, &[layer], opts, prompt, &mut tick)?;
        Ok(nest_model::pooling::to_vec_f32(&x[0]))
    };
    let each = |_: &[&str], v: Vec<f32>| {
        data.extend(v);
        Ok(())
    };
    nest_core::kept::embed_chunks::<_, crate::Error>(texts, chunk_len, Some(&kept), embed, each)?;
    events(Event::Encoding {
        what,
        done: total,
        total,
    });
    let x = tch::Tensor::from_slice(&data).view([total as i64, dim as i64]);
    Ok((x, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks kept by a cut embedding are read back instead of embedded again: the same
    /// vectors, bit for bit, and no text encoded the second time.
    #[test]
    fn kept_chunks_are_not_embedded_again() {
        let d = tempfile::tempdir().unwrap();
        let spec = nest_model::tiny::TinySpec::new(nest_model::Architecture::Bert);
        nest_model::tiny::write_tiny_model(&d.path().join("m"), &spec).unwrap();
        let enc = ElasticEncoder::load(&d.path().join("m"), tch::Device::Cpu, None).unwrap();
        let texts = [
            "the cat",
            "a dog sat",
            "on the mat",
            "music",
            "the man",
            "guitar",
        ];
        let at = || (d.path().join("cache").join("k"), "corpus", 4);
        fn said(e: Event) -> String {
            match e {
                Event::Message(m) => m,
                Event::Encoding { done, total, .. } => format!("{done}/{total}"),
                Event::Epoch(_) => "epoch".into(),
            }
        }
        let (x, kept) = embed_kept(&enc, (2, None), &texts, at(), &mut |_| {}).unwrap();
        drop(kept); // a cut run: the chunks stay
        let mut again = Vec::new();
        let mut events = |e: Event| again.push(said(e));
        let (y, kept) = embed_kept(&enc, (2, None), &texts, at(), &mut events).unwrap();
        assert_eq!(x.size(), [6, 32]);
        assert!(x.equal(&y));
        assert!(
            again[0].contains("resuming, 2 chunks of 4 texts"),
            "{again:?}"
        );
        assert_eq!(
            again.len(),
            2,
            "only the message and the closing count: {again:?}"
        );
        let dir = kept.dir().to_path_buf();
        kept.remove();
        assert!(!dir.exists());
    }
}
