//! Tokenisation with the model's own `tokenizer.json`.
//!
//! The shipped `tokenizer.json` files of both default models fix padding to 128 and truncation at
//! 128. Nest turns both off and truncates at the model's `max_seq_length` instead; padding is
//! done per batch (to the longest sequence of the batch) when the input tensor is built.
//!
//! Where the pipeline allows it, whole words' ids are tokenised once and reused
//! ([`words::WordCache`]; `NEST_WORD_CACHE=0` turns it off).

pub mod words;

use std::path::Path;
use std::sync::Arc;

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::{Error, Result};

/// A loaded tokenizer with its truncation length.
#[derive(Debug, Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    max_length: usize,
    /// Shared by clones (a server's handlers, a training run's loaders).
    words: Option<Arc<words::WordCache>>,
    /// The model's embedding rows, and the files they and this tokenizer came from: an id at
    /// or past them is refused ([`TextTokenizer::limit_ids`]).
    rows: Option<Arc<(usize, String)>>,
    /// The tokenizer without truncation, made the first time [`Self::full_length`] asks.
    untruncated: Arc<std::sync::OnceLock<Tokenizer>>,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`, with truncation at `max_length` tokens (special tokens included).
    pub fn load(path: &Path, max_length: usize) -> Result<Self> {
        // tokenizers 0.22 panics (an unwrap in its decoder deserialiser) on some malformed
        // files instead of returning an error; found by the model_folder fuzz target
        let read = nest_core::caught::catch(|| Tokenizer::from_file(path)).map_err(|c| {
            Error::Tokenizer(format!(
                "{}: not a valid tokenizer file ({})",
                path.display(),
                c.message
            ))
        })?;
        let mut inner = read.map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
        let words = match std::env::var("NEST_WORD_CACHE").as_deref() {
            Ok("0") => None,
            _ => words::WordCache::build(&inner, max_length).map(Arc::new),
        };
        Ok(TextTokenizer {
            inner,
            max_length,
            words,
            rows: None,
            untruncated: Arc::default(),
        })
    }

    /// How many tokens `text` makes in full, special tokens included: past
    /// [`Self::max_length`] when [`Self::encode`] cuts it (a server says so, or refuses it).
    pub fn full_length(&self, text: &str) -> Result<usize> {
        let whole = self.untruncated.get_or_init(|| {
            let mut t = self.inner.clone();
            let _ = t.with_truncation(None); // (None cannot fail)
            t
        });
        let e = whole
            .encode(text, true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(e.get_ids().len())
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// Refuses ids at or past `rows` (the model's embedding table) from now on: a tokenizer of
    /// another model's would otherwise fail inside the forward pass ("index out of range").
    /// `files` names the tokenizer and config for the error.
    pub fn limit_ids(&mut self, rows: usize, files: String) {
        self.rows = Some(Arc::new((rows, files)));
    }

    /// Token ids of each text, with the model's special tokens, truncated, not padded.
    pub fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<i64>>> {
        let ids = match &self.words {
            Some(words) => words.encode(texts)?,
            None => self.encode_direct(texts)?,
        };
        self.check_rows(texts, &ids)?;
        Ok(ids)
    }

    /// The first id past the model's embedding rows, as an error naming its text and token.
    fn check_rows(&self, texts: &[&str], ids: &[Vec<i64>]) -> Result<()> {
        let Some(limit) = self.rows.as_deref() else {
            return Ok(());
        };
        let (rows, files) = (limit.0 as i64, &limit.1);
        let past = ids
            .iter()
            .enumerate()
            .find_map(|(k, t)| t.iter().find(|&&id| id >= rows).map(|&id| (k, id)));
        let Some((k, id)) = past else {
            return Ok(());
        };
        let token = self.inner.id_to_token(id as u32).unwrap_or_default();
        let text: String = texts[k].chars().take(60).collect();
        Err(Error::Tokenizer(format!(
            "text {k} of the batch ({text:?}): its token {token:?} has id {id}, past the model's \
             {rows} embedding rows: {files}"
        )))
    }

    /// [`Self::encode`] through the tokenizers library alone, every text in full.
    pub fn encode_direct(&self, texts: &[&str]) -> Result<Vec<Vec<i64>>> {
        let enc = self
            .inner
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc
            .iter()
            .map(|e| e.get_ids().iter().map(|&i| i64::from(i)).collect())
            .collect())
    }

    /// The cache of words' ids, where this tokenizer's pipeline allows one.
    pub fn word_cache(&self) -> Option<&words::WordCache> {
        self.words.as_deref()
    }

    /// The underlying `tokenizers` object (for saving a trained model's tokenizer).
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }
}
