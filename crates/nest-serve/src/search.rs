//! Search behind the embeddings API (`nest serve --index DIR`): `POST /v1/search` embeds the
//! queries with the served model at the index's point and runs a funnel over the index
//! ([`nest_index::Collection`], the same search as `nest search`); `POST /v1/documents` embeds
//! documents the same way and adds (or replaces) them durably, and `POST /v1/documents/delete`
//! deletes documents by id, each acknowledged only once `fsync`ed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nest_index::collection::{Existing, NewRow};
use nest_index::{Collection, Funnel};
use serde_json::Value;

use crate::response::{Added, Deleted, Hit, QueryHits, SearchList};
use crate::{Error, Result};

/// An index the server searches, and the point its vectors were embedded at.
#[derive(Debug)]
pub struct Searcher {
    pub collection: Collection,
    pub dir: PathBuf,
    /// The exit layer the index was built at.
    pub layer: usize,
    /// Built with `--store-text`: added documents keep their texts in their payloads too.
    pub store_text: bool,
    /// The index's lock (`.<index>.lock`, as `nest index build` takes it), held while serving:
    /// the server appends to the index's journal, so a second server or a rebuild of the
    /// index is refused instead of losing what this one adds.
    lock: Option<nest_core::lock::FolderLock>,
}

impl Drop for Searcher {
    /// A server that stops leaves no lock file beside its index (deleted while still held).
    fn drop(&mut self) {
        if let Some(l) = self.lock.take() {
            l.remove();
        }
    }
}

/// Where the index came from, as `nest index build` records it.
fn recorded_model(source: &Value) -> Option<&str> {
    source.get("model").and_then(Value::as_str)
}

impl Searcher {
    /// Opens `dir` for a server of `config`'s model, taking the index's lock: refused when
    /// another process holds it (a server, a build), or the index was built from another model,
    /// from vectors without one, or at another max length than `--max-length` (without one,
    /// the server embeds at the index's).
    pub fn open(dir: &Path, config: &mut crate::engine::EngineConfig) -> Result<Self> {
        let lock = nest_core::lock::FolderLock::take_beside(dir).map_err(|e| {
            Error::Config(format!(
                "--index: {e}; a server adds documents to its index's journal, so one process \
                 at a time serves or rebuilds an index (stop the other, or serve a copy)"
            ))
        })?;
        let collection = Collection::open(dir)
            .map_err(|e| Error::Config(format!("--index {}: {e}", dir.display())))?;
        let model = config.model.as_path();
        let source = &collection.index().manifest().source;
        let Some(recorded) = recorded_model(source) else {
            return Err(Error::Config(format!(
                "--index {}: the index records no model (built from --embeddings?); the server \
                 embeds queries with its own model, so serve an index built with \
                 `nest index build --model`",
                dir.display()
            )));
        };
        if !nest_core::data::same_model(recorded, &model.to_string_lossy()) {
            return Err(Error::Config(format!(
                "--index {}: built with model {recorded}, but this server serves {}; its \
                 vectors would not match the queries",
                dir.display(),
                model.display()
            )));
        }
        if let Some(note) = nest_core::data::weights_note(source) {
            eprintln!("nest serve: warning: --index {}: {note}", dir.display());
        }
        let layer = source
            .get("layer")
            .and_then(Value::as_u64)
            .map(|l| l as usize)
            .ok_or_else(|| {
                Error::Config(format!("--index {}: no layer recorded", dir.display()))
            })?;
        let store_text = source.get(nest_core::data::STORE_TEXT) == Some(&Value::Bool(true));
        let built = source.get("max_length").and_then(Value::as_u64);
        match (built.map(|m| m as usize), config.max_length) {
            (Some(b), Some(m)) if b != m => {
                return Err(Error::Config(format!(
                    "--index {}: built at max length {b}, but --max-length is {m}: queries and \
                     added documents would be cut otherwise than the built ones (omit \
                     --max-length: the server then embeds at the index's)",
                    dir.display()
                )))
            }
            (Some(b), None) => config.max_length = Some(b),
            _ => {}
        }
        Ok(Searcher {
            collection,
            dir: dir.to_path_buf(),
            layer,
            store_text,
            lock: Some(lock),
        })
    }

    /// Checks a request's `layers` / `dimensions` against the index's point (`None`: the index's).
    pub fn check_point(&self, layers: Option<usize>, dims: Option<usize>) -> Result<()> {
        if let Some(l) = layers.filter(|&l| l != self.layer) {
            return Err(Error::bad(
                Some("layers"),
                format!(
                    "the index holds vectors from layer {}; this request asks layer {l} (omit \
                     'layers', or build an index at that layer)",
                    self.layer
                ),
            ));
        }
        let full = self.collection.index().full_dim();
        if let Some(d) = dims.filter(|&d| d != full) {
            return Err(Error::bad(
                Some("dimensions"),
                format!(
                    "queries are embedded at the index's {full} dims and cut by the funnel's \
                     stages; got 'dimensions' {d} (choose dims in 'funnel', e.g. float32:{d})"
                ),
            ));
        }
        Ok(())
    }
}

mod request;
pub use request::{
    parse_delete, parse_documents, parse_search, DeleteRequest, DocumentsRequest, SearchRequest,
    DELETE_FIELDS, DOCUMENT_FIELDS, SEARCH_FIELDS,
};

/// Runs a parsed search over embedded queries (blocking: call off the async threads).
pub fn run_search(s: &Searcher, req: &SearchRequest, queries: &[Vec<f32>]) -> Result<SearchList> {
    let index = s.collection.index();
    let funnel = req
        .funnel
        .clone()
        .unwrap_or_else(|| Funnel::exact(index.full_dim()));
    let bad = |e: nest_index::Error| Error::bad(Some("funnel"), e.to_string());
    index.check_funnel(&funnel, req.k).map_err(bad)?;
    let hits = s
        .collection
        .search(queries, &funnel, req.k, req.filter.as_ref())
        .map_err(bad)?;
    let data = hits
        .into_iter()
        .enumerate()
        .map(|(i, h)| QueryHits {
            object: "search_result",
            index: i,
            query: req.queries[i].clone(),
            hits: h
                .into_iter()
                .map(|f| Hit {
                    id: f.id,
                    score: f64::from(f.score),
                    payload: f.payload,
                })
                .collect(),
        })
        .collect();
    Ok(SearchList {
        object: "list",
        funnel: funnel.to_string(),
        data,
    })
}

/// Adds embedded documents, an id already present kept or replaced as `existing` says
/// (blocking: call off the async threads).
pub fn run_add(
    s: &Arc<Searcher>,
    docs: Vec<(String, String, Option<Value>)>,
    vectors: Vec<Vec<f32>>,
    existing: Existing,
) -> Result<Added> {
    let rows = docs
        .into_iter()
        .zip(vectors)
        .map(|((id, text, payload), vector)| {
            let payload = if s.store_text {
                let doc = nest_core::data::Document {
                    id: id.clone(),
                    text,
                    payload: payload.unwrap_or_default(),
                };
                Some(doc.stored(true))
            } else {
                payload
            };
            NewRow {
                id,
                payload,
                vector,
            }
        })
        .collect();
    let r = s
        .collection
        .add(rows, existing)
        .map_err(|e| Error::Internal(format!("{}: {e}", s.dir.display())))?;
    Ok(Added {
        object: "documents",
        added: r.added,
        replaced: r.replaced,
        existing: r.existing,
        count: s.collection.len(),
    })
}

/// Deletes documents by id (blocking: call off the async threads).
pub fn run_delete(s: &Searcher, ids: &[String]) -> Result<Deleted> {
    let r = s
        .collection
        .delete(ids)
        .map_err(|e| Error::Internal(format!("{}: {e}", s.dir.display())))?;
    Ok(Deleted {
        object: "documents",
        deleted: r.deleted,
        missing: r.missing,
        count: s.collection.len(),
    })
}

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::Json;
use nest_model::prompt::Side;

use crate::request::Inputs;
use crate::routes::{answer, check_count, read_body, run_inputs, AppState};

/// The index, or 404 when the server was started without one.
fn searcher(s: &AppState) -> Result<Arc<Searcher>> {
    s.search.clone().ok_or_else(|| {
        Error::Internal("this server has no index; start it with `nest serve --index DIR`".into())
    })
}

/// The index belongs to the first served model: a request naming another is refused.
fn check_index_model(s: &AppState, name: Option<&str>) -> Result<()> {
    let e = s.engine(name)?;
    let first = &s.engines[0];
    if !Arc::ptr_eq(e, first) {
        return Err(Error::bad(
            Some("model"),
            format!(
                "the index holds vectors of '{}'; a request for '{}' can neither search it \
                 nor add to it (name '{0}', or none)",
                first.config.served_name, e.config.served_name
            ),
        ));
    }
    Ok(())
}

/// Embeds `texts` at the index's point (its layer, all dims).
async fn embed_at_index(
    s: &AppState,
    idx: &Searcher,
    texts: Vec<String>,
    prompt_name: Option<&str>,
    prompt: Option<&str>,
    side: nest_model::prompt::Side,
) -> Result<Vec<Vec<f32>>> {
    let engine = s.engine(None)?;
    let info = engine.info()?;
    let full = idx.collection.index().full_dim();
    if info.offer.width() != full {
        return Err(Error::Unavailable(format!(
            "--index {} holds {full}-dim vectors, the served model gives {}",
            idx.dir.display(),
            info.offer.width()
        )));
    }
    let (p, skip) = info.prompt_for(prompt_name, prompt, side)?;
    let point = (idx.layer, full);
    let v = run_inputs(s, engine, Inputs::Texts(texts), point, p, (skip, true))
        .await?
        .vectors;
    Ok(v)
}

pub(crate) async fn search(s: AppState, req: Request) -> Response {
    answer(read_body(&s, req).await, |b| async move {
        let idx = searcher(&s)?;
        let req = parse_search(&b, s.limits.unknown_fields)?;
        check_index_model(&s, req.model.as_deref())?;
        check_count(&s, req.queries.len(), "query")?;
        idx.check_point(req.layers, req.dimensions)?;
        let q = embed_at_index(
            &s,
            &idx,
            req.queries.clone(),
            req.prompt_name.as_deref(),
            req.prompt.as_deref(),
            Side::Query,
        )
        .await?;
        let r = tokio::task::spawn_blocking(move || run_search(&idx, &req, &q))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        Ok(Json(r).into_response())
    })
    .await
}

pub(crate) async fn documents(s: AppState, req: Request) -> Response {
    answer(read_body(&s, req).await, |b| async move {
        let idx = searcher(&s)?;
        let req = parse_documents(&b, s.limits.unknown_fields)?;
        check_index_model(&s, req.model.as_deref())?;
        check_count(&s, req.documents.len(), "documents")?;
        let texts = req.documents.iter().map(|d| d.1.clone()).collect();
        // without a prompt asked for, the one the index's documents were embedded with; an
        // index from before prompts were recorded was built with the default prompt (as
        // `nest mine --corpus-index` also assumes)
        let source = &idx.collection.index().manifest().source;
        let (built, side) = match req.prompt_name {
            None => match nest_core::data::recorded_document_prompt(source) {
                Some(p) => (Some(p.unwrap_or_default()), Side::Document),
                None => (None, Side::Text),
            },
            Some(_) => (None, Side::Document),
        };
        let (name, text) = (req.prompt_name.as_deref(), built.as_deref());
        let v = embed_at_index(&s, &idx, texts, name, text, side).await?;
        let existing = req.existing;
        let r = tokio::task::spawn_blocking(move || run_add(&idx, req.documents, v, existing))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        Ok(Json(r).into_response())
    })
    .await
}

pub(crate) async fn delete(s: AppState, req: Request) -> Response {
    answer(read_body(&s, req).await, |b| async move {
        let idx = searcher(&s)?;
        let req = parse_delete(&b, s.limits.unknown_fields)?;
        check_index_model(&s, req.model.as_deref())?;
        check_count(&s, req.ids.len(), "ids")?;
        let r = tokio::task::spawn_blocking(move || run_delete(&idx, &req.ids))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        Ok(Json(r).into_response())
    })
    .await
}
