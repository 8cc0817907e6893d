//! Which model and point an index's vectors come from, as `nest index build --model` records
//! them in the manifest's `source` (`model`, `layer`, `max_length`), and the check that mining
//! through the index ([`super::IndexCorpus`]) embeds its queries the same way: the same model
//! folder, exit layer and token limit, at a level the index stores. An index built from
//! `--embeddings` records no model and is refused (nothing says how to embed queries for it).

use std::path::Path;

use crate::level::Level;
use crate::reader::Index;
use crate::{Error, Result};

/// What an index records of how its vectors were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSource {
    /// The model as given to `nest index build --model` (a folder or a hub name).
    pub model: String,
    pub layer: usize,
    /// The tokenizer's token limit at build time, when recorded.
    pub max_length: Option<usize>,
}

/// The same model? Both resolved when both exist as paths; a hub name is compared as written.
pub fn same_model(recorded: &str, ours: &str) -> bool {
    let canon = |p: &str| std::fs::canonicalize(p).ok();
    match (canon(recorded), canon(ours)) {
        (Some(a), Some(b)) => a == b,
        _ => Path::new(recorded) == Path::new(ours),
    }
}

impl IndexSource {
    /// The source `index` records; `flag` names the option that gave the index, for errors.
    pub fn of(index: &Index, flag: &str) -> Result<Self> {
        let dir = index.dir().display();
        let source = &index.manifest().source;
        let model = source
            .get("model")
            .and_then(|v| v.as_str())
            .ok_or_else(|| {
                Error::invalid(
                    flag,
                    format!(
                    "{dir}: the index records no model (built from --embeddings?); mining embeds \
                     the queries itself, so give an index built with `nest index build --model`"
                ),
                )
            })?;
        let layer = source
            .get("layer")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| Error::invalid(flag, format!("{dir}: the index records no layer")))?;
        Ok(IndexSource {
            model: model.to_string(),
            layer: layer as usize,
            max_length: source
                .get("max_length")
                .and_then(|v| v.as_u64())
                .map(|m| m as usize),
        })
    }

    /// Refuses an index whose vectors were not made at (`model`, `layer`, `max_length`) or
    /// that does not store `level`: its scores would not be the queries' scores.
    pub fn check(
        &self,
        index: &Index,
        flag: &str,
        model: &str,
        layer: usize,
        max_length: usize,
        level: Level,
    ) -> Result<()> {
        let dir = index.dir().display();
        if !same_model(&self.model, model) {
            return Err(Error::invalid(
                flag,
                format!(
                    "{dir}: built with model {}, but this run mines with {model}; its vectors \
                     would not match the queries",
                    self.model
                ),
            ));
        }
        if self.layer != layer {
            return Err(Error::invalid(
                flag,
                format!(
                    "{dir}: holds vectors from layer {}, this run mines at layer {layer} (pass \
                     --layer {}, or build an index at layer {layer})",
                    self.layer, self.layer
                ),
            ));
        }
        if let Some(m) = self.max_length.filter(|&m| m != max_length) {
            return Err(Error::invalid(
                flag,
                format!(
                    "{dir}: built with texts cut to {m} tokens, this run cuts at {max_length} \
                     (pass --max-length {m})"
                ),
            ));
        }
        if index.rows(level).is_err() {
            let have: Vec<String> = index.levels().iter().map(|l| l.to_string()).collect();
            return Err(Error::invalid(
                flag,
                format!(
                    "{dir}: stores levels {}, not {level} (the mining point's precision and dim); \
                     pass --dim / --precision of a stored level, or build the index with \
                     --dims {} --precision {}",
                    have.join(", "),
                    level.dim,
                    level.precision.name()
                ),
            ));
        }
        Ok(())
    }
}
