//! From a request's inputs to vectors: tokenising (texts, with the prompt; token ids checked
//! against the vocabulary), the token limit, the queue to the model's workers and the replies.
//! Shared by `/v1/embeddings`, `/v1/search` and `/v1/documents`.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::batcher::Item;
use crate::engine::{Engine, ServedModel};
use crate::request::Inputs;
use crate::routes::AppState;
use crate::{Error, Result};

/// Requests with at most this many bytes of text are tokenised on the async thread; larger
/// ones on the blocking pool.
const INLINE_TOKENIZE_BYTES: usize = 8192;

/// What [`run_inputs`] gives back.
pub(crate) struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    /// Tokens embedded (after cutting).
    pub tokens: usize,
    /// Inputs cut at the model's max length.
    pub cut: usize,
}

/// Tokenises `inputs` (with the prompt), checks the token limit, queues them at
/// (`layer`, `dim`) and awaits their vectors. An input longer than the model's max length is
/// cut there when `truncate` (sentence-transformers' way), else refused (413, TEI's).
pub(crate) async fn run_inputs(
    s: &AppState,
    engine: &Engine,
    inputs: Inputs,
    (layer, dim): (usize, usize),
    prompt: Option<&str>,
    (skip, truncate): (usize, bool),
) -> Result<Embedded> {
    let n = inputs.len();
    let info = engine.info()?;
    let (ids, cut) = token_ids(info, inputs, prompt).await?;
    if let (false, Some(&(i, full))) = (truncate, cut.first()) {
        return Err(Error::too_large(
            Some("input"),
            format!(
                "input[{i}] has {full} tokens, past the model's max length {}; send \
                 \"truncate\": true (or leave it out) to cut it there, as sentence-transformers \
                 does",
                info.tokenizer.max_length()
            ),
        ));
    }
    let tokens: usize = ids.iter().map(Vec::len).sum();
    if tokens > s.limits.max_tokens {
        return Err(Error::too_large(
            Some("input"),
            format!(
                "{tokens} tokens in one request; the limit is {} (--max-batch-tokens)",
                s.limits.max_tokens
            ),
        ));
    }
    let mut rxs = Vec::with_capacity(n);
    let items: Vec<Item> = ids
        .into_iter()
        .map(|ids| {
            let (tx, rx) = oneshot::channel();
            rxs.push(rx);
            Item {
                ids,
                layer,
                dim,
                skip,
                reply: tx,
            }
        })
        .collect();
    engine.queue.push_all(items)?;
    let mut vectors = Vec::with_capacity(n);
    for rx in rxs {
        vectors.push(
            rx.await
                .map_err(|_| Error::Internal("the worker stopped".into()))?
                .map_err(Error::Internal)?,
        );
    }
    Ok(Embedded {
        vectors,
        tokens,
        cut: cut.len(),
    })
}

/// The texts among `texts` (as tokenised to `ids`) that were cut: (position, full length).
fn cut_texts(
    tok: &nest_model::tokenize::TextTokenizer,
    texts: &[String],
    ids: &[Vec<i64>],
) -> Result<Vec<(usize, usize)>> {
    let max = tok.max_length();
    let mut cut = Vec::new();
    for (i, (t, s)) in texts.iter().zip(ids).enumerate() {
        // only a text that reached the limit may have been cut
        if s.len() >= max {
            let full = tok
                .full_length(t)
                .map_err(|e| Error::bad(Some("input"), format!("input[{i}]: {e}")))?;
            if full > max {
                cut.push((i, full));
            }
        }
    }
    Ok(cut)
}

/// Tokenises `texts`; a text the tokenizer fails on is the client's: 400 naming it.
fn tokenize(tok: &nest_model::tokenize::TextTokenizer, texts: &[String]) -> Result<Vec<Vec<i64>>> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    tok.encode(&refs).map_err(|e| {
        let i = refs
            .iter()
            .position(|t| tok.encode(&[t]).is_err())
            .unwrap_or(0);
        Error::bad(
            Some("input"),
            format!("input[{i}] could not be tokenised: {e}"),
        )
    })
}

/// The request's token ids: texts tokenised (inline when short, else off the async threads),
/// id lists checked against the vocabulary; both truncated to the model's max length, with the
/// inputs that were cut (position, full length).
/// A prompt, when given, is prepended to every text (token-id inputs are taken as they are).
async fn token_ids(
    info: &ServedModel,
    inputs: Inputs,
    prompt: Option<&str>,
) -> Result<(Vec<Vec<i64>>, Vec<(usize, usize)>)> {
    let max_len = info.tokenizer.max_length();
    Ok(match inputs {
        Inputs::Texts(texts) => {
            if let Some(i) = texts.iter().position(|t| t.is_empty()) {
                return Err(Error::bad(
                    Some("input"),
                    format!("input[{i}] is an empty string"),
                ));
            }
            let texts: Vec<String> = match prompt {
                Some(p) => texts.iter().map(|t| format!("{p}{t}")).collect(),
                None => texts,
            };
            let bytes: usize = texts.iter().map(String::len).sum();
            let work = |tok: &nest_model::tokenize::TextTokenizer, texts: &[String]| {
                let ids = tokenize(tok, texts)?;
                let cut = cut_texts(tok, texts, &ids)?;
                Ok::<_, Error>((ids, cut))
            };
            if bytes <= INLINE_TOKENIZE_BYTES {
                // short inputs: tokenising takes microseconds, less than a thread hand-off
                work(&info.tokenizer, &texts)?
            } else {
                let tok = Arc::clone(&info.tokenizer);
                tokio::task::spawn_blocking(move || work(&tok, &texts))
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))??
            }
        }
        Inputs::Tokens(mut seqs) => {
            let mut cut = Vec::new();
            for (i, sq) in seqs.iter_mut().enumerate() {
                if let Some(j) = sq.iter().position(|&t| t as usize >= info.vocab_size) {
                    return Err(Error::bad(
                        Some("input"),
                        format!(
                            "input[{i}][{j}] = {} is outside the vocabulary (0..{})",
                            sq[j], info.vocab_size
                        ),
                    ));
                }
                if sq.len() > max_len {
                    cut.push((i, sq.len()));
                }
                sq.truncate(max_len);
            }
            (seqs, cut)
        }
    })
}
