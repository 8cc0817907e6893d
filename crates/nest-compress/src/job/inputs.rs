//! A job's inputs: where the frozen embeddings come from ([`Source`], as an adaptor records it
//! for a resume), and reading them: embedding files with their ids and qrels, or a model's
//! embeddings of a BEIR folder through the cache.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::Event;
use crate::data::{read_embeddings, read_qrels, Embeddings, Qrels};
use crate::run::Inputs;
use crate::{Error, Result};

/// Where the frozen embeddings come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `.npy` / `.safetensors` matrices with their ids and qrels files.
    Files {
        embeddings: PathBuf,
        corpus_ids: Option<PathBuf>,
        queries: PathBuf,
        query_ids: Option<PathBuf>,
        qrels: PathBuf,
        test_qrels: Option<PathBuf>,
    },
    /// A model's embeddings of a BEIR folder (corpus and queries of every split), cached in
    /// `cache`; `split`'s qrels train, the test split's score.
    Beir {
        model: String,
        beir: PathBuf,
        split: String,
        cache: PathBuf,
    },
}

impl Source {
    /// The record an adaptor keeps (and a resume reads back). Paths are recorded absolute, so
    /// that a resume from another folder finds the same files and the same embedding cache
    /// (a relative cache missed there re-embedded the whole corpus: minutes).
    pub(super) fn to_json(&self) -> Value {
        let a = |x: &Path| {
            std::path::absolute(x)
                .unwrap_or_else(|_| x.into())
                .display()
                .to_string()
        };
        let p = |x: &Option<PathBuf>| x.as_deref().map(a);
        match self {
            Source::Files {
                embeddings,
                corpus_ids,
                queries,
                query_ids,
                qrels,
                test_qrels,
            } => json!({
                "embeddings": a(embeddings), "corpus_ids": p(corpus_ids),
                "queries": a(queries), "query_ids": p(query_ids),
                "qrels": a(qrels), "test_qrels": p(test_qrels),
            }),
            Source::Beir {
                model,
                beir,
                split,
                cache,
            } => {
                // a hub id (`org/name`) stays as written; a local folder is made absolute
                let local = Path::new(model).exists();
                let model = if local {
                    a(Path::new(model))
                } else {
                    model.clone()
                };
                json!({"model": model, "beir": a(beir), "split": split, "cache": a(cache)})
            }
        }
    }

    /// The files and folders read, each with its flag: what `--out` must neither be nor hold.
    pub(super) fn paths(&self) -> Vec<(&'static str, &Path)> {
        match self {
            Source::Files {
                embeddings,
                corpus_ids,
                queries,
                query_ids,
                qrels,
                test_qrels,
            } => {
                let some = [
                    ("--corpus-ids", corpus_ids),
                    ("--query-ids", query_ids),
                    ("--test-qrels", test_qrels),
                ];
                let some = some
                    .into_iter()
                    .filter_map(|(k, p)| Some((k, p.as_deref()?)));
                let given = [
                    ("--embeddings", embeddings),
                    ("--queries", queries),
                    ("--qrels", qrels),
                ];
                given
                    .into_iter()
                    .map(|(k, p)| (k, p.as_path()))
                    .chain(some)
                    .collect()
            }
            Source::Beir {
                model, beir, cache, ..
            } => vec![
                ("--model", Path::new(model)),
                ("--beir", beir),
                ("--cache", cache),
            ],
        }
    }

    /// Reads an adaptor's record back (`what` names it in errors).
    pub(super) fn from_json(v: &Value, what: &Path) -> Result<Source> {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(PathBuf::from);
        let need =
            |k: &str| s(k).ok_or_else(|| Error::input(what, format!("its inputs record no '{k}'")));
        if let Some(model) = v.get("model").and_then(|x| x.as_str()) {
            return Ok(Source::Beir {
                model: model.into(),
                beir: need("beir")?,
                split: v
                    .get("split")
                    .and_then(|x| x.as_str())
                    .unwrap_or("train")
                    .into(),
                cache: s("cache").unwrap_or_default(),
            });
        }
        Ok(Source::Files {
            embeddings: need("embeddings")?,
            corpus_ids: s("corpus_ids"),
            queries: need("queries")?,
            query_ids: s("query_ids"),
            qrels: need("qrels")?,
            test_qrels: s("test_qrels"),
        })
    }
}

/// Reads the inputs `source` names.
/// `width` judges the dims against a model's width before its texts are embedded.
pub(super) fn inputs(
    source: &Source,
    val_fraction: f64,
    width: &dyn Fn(usize) -> Result<()>,
    events: &mut dyn FnMut(Event),
) -> Result<Inputs> {
    let mut probe = None;
    let (corpus, queries, train, test) = match source {
        Source::Beir {
            model,
            beir,
            split,
            cache,
        } => {
            let (c, q, p) = super::beir::beir_embeddings(model, beir, cache, width, events)?;
            probe = Some(p);
            let train = qrels_of(beir, split, &q, &c)?
                .ok_or_else(|| Error::input(beir, format!("no qrels/{split}.tsv")))?;
            let test = if split == "test" {
                None
            } else {
                qrels_of(beir, "test", &q, &c)?
            };
            (c, q, train, test)
        }
        Source::Files {
            embeddings,
            corpus_ids,
            queries,
            query_ids,
            qrels,
            test_qrels,
        } => {
            let c = read_embeddings(embeddings, corpus_ids.as_deref())?;
            let q = read_embeddings(queries, query_ids.as_deref())?;
            let train = read_qrels(qrels, &q, &c)?;
            let test = match test_qrels {
                Some(p) => Some(read_qrels(p, &q, &c)?),
                None => None,
            };
            (c, q, train, test)
        }
    };
    let mut source = source.to_json();
    if let Some(p) = probe {
        source["probe"] = p; // checked where the adaptor is loaded (`Adaptor::foreign_note`)
    }
    Inputs {
        corpus,
        queries,
        train,
        test,
        val_fraction,
        source,
    }
    .normalized()
}

fn qrels_of(dir: &Path, split: &str, q: &Embeddings, c: &Embeddings) -> Result<Option<Qrels>> {
    let p = dir.join("qrels").join(format!("{split}.tsv"));
    if !p.exists() {
        return Ok(None);
    }
    Ok(Some(read_qrels(&p, q, c)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_source_reads_back_as_itself() {
        let files = Source::Files {
            embeddings: "c.npy".into(),
            corpus_ids: None,
            queries: "q.npy".into(),
            query_ids: Some("q.ids".into()),
            qrels: "qrels.tsv".into(),
            test_qrels: Some("test.tsv".into()),
        };
        let beir = Source::Beir {
            model: "models/m".into(),
            beir: "data/scifact".into(),
            split: "dev".into(),
            cache: ".cache".into(),
        };
        for s in [files, beir.clone()] {
            let back = Source::from_json(&s.to_json(), Path::new("a")).unwrap();
            assert_eq!(back.to_json(), s.to_json());
        }
        // paths are absolute, for a resume from another folder; a hub id stays as written
        let cwd = std::env::current_dir().unwrap();
        let r = beir.to_json();
        assert_eq!(r["cache"], json!(cwd.join(".cache").display().to_string()));
        assert_eq!(
            r["beir"],
            json!(cwd.join("data/scifact").display().to_string())
        );
        assert_eq!(r["model"], json!("models/m"), "no such folder: a hub id");
        let local = Source::Beir {
            model: "src".into(),
            beir: "data/scifact".into(),
            split: "dev".into(),
            cache: ".cache".into(),
        };
        assert_eq!(
            local.to_json()["model"],
            json!(cwd.join("src").display().to_string())
        );
        // a record without its embeddings names what is missing
        let e = Source::from_json(&json!({"queries": "q.npy"}), Path::new("adaptors/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("adaptors/x") && e.contains("embeddings"), "{e}");
    }
}
