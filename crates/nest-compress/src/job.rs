//! A whole compression run as one library call, as `nest compress` and Python's
//! `nest.compress` run it: the inputs (embedding files, or a model's embeddings of a BEIR folder
//! through the cache), a fresh start or a resumed sequential adaptor, the output folder's lock,
//! training, the adaptor and its test report on disk.
//!
//! Everything that can be checked without data (method, dims, options, the output folder) is
//! checked before anything is embedded or written; a failed start leaves no folder behind.

use std::path::{Path, PathBuf};

use nest_core::data::Beir;
use nest_model::{Adaptor, ElasticEncoder, EncodeOptions};
use serde_json::{json, Value};

use crate::data::{read_embeddings, read_qrels, EmbeddingCache, Embeddings, Qrels};
use crate::method::{check_dims, Options};
use crate::run::{compress, test_report, Inputs};
use crate::{EpochLog, Error, Method, Result};

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
    /// The record an adaptor keeps (and a resume reads back).
    fn to_json(&self) -> Value {
        let p = |x: &Option<PathBuf>| x.as_ref().map(|p| p.display().to_string());
        match self {
            Source::Files {
                embeddings,
                corpus_ids,
                queries,
                query_ids,
                qrels,
                test_qrels,
            } => json!({
                "embeddings": embeddings.display().to_string(), "corpus_ids": p(corpus_ids),
                "queries": queries.display().to_string(), "query_ids": p(query_ids),
                "qrels": qrels.display().to_string(), "test_qrels": p(test_qrels),
            }),
            Source::Beir {
                model,
                beir,
                split,
                cache,
            } => json!({"model": model, "beir": beir.display().to_string(), "split": split,
                        "cache": cache.display().to_string()}),
        }
    }

    /// Reads an adaptor's record back (`what` names it in errors).
    fn from_json(v: &Value, what: &Path) -> Result<Source> {
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

/// One compression run.
#[derive(Debug, Clone)]
pub struct Job {
    /// `smec`, `mrl+smrl`, `search-adaptor`, ... ([`Method::parse`]); a resume takes the
    /// adaptor's own.
    pub method: String,
    /// Target dims, in either order.
    pub dims: Vec<usize>,
    pub options: Options,
    /// Share of the training queries held out for stopping and choices, in (0, 1).
    pub val_fraction: f64,
    /// The inputs (None with `resume`: the adaptor's recorded ones).
    pub source: Option<Source>,
    /// Where the adaptor goes (None with `resume`: the resumed folder).
    pub out: Option<PathBuf>,
    /// A sequential adaptor (smec, mrl+smrl) to continue: its smallest dim heads the new chain.
    pub resume: Option<PathBuf>,
    /// Replace a folder that holds files already.
    pub overwrite: bool,
    /// The command line recorded in the test report.
    pub command: String,
}

/// What a run reports as it goes.
pub enum Event<'a> {
    Message(String),
    /// Texts embedded so far of `total` (`what`: "corpus" or "queries").
    Encoding {
        what: &'static str,
        done: usize,
        total: usize,
    },
    Epoch(&'a EpochLog),
}

/// The trained adaptor and where it was written.
pub struct Outcome {
    pub adaptor: Adaptor,
    pub out: PathBuf,
}

/// The dims largest first (the order of the adaptor's nested chain): increasing dims (as every
/// command takes them) are reversed; any other order is kept for [`check_dims`] to judge.
fn largest_first(dims: &[usize]) -> Vec<usize> {
    let mut d = dims.to_vec();
    if d.windows(2).all(|w| w[0] < w[1]) {
        d.reverse();
    }
    d
}

/// Checks the options' ranges.
fn check_options(job: &Job) -> Result<()> {
    if !(job.val_fraction > 0.0 && job.val_fraction < 1.0) {
        return Err(Error::option(
            "--val-fraction",
            format!("must be in (0, 1), got {}", job.val_fraction),
        ));
    }
    if job.options.batch_size < 2 || job.options.epochs < 1 {
        return Err(Error::option(
            "--batch-size / --epochs",
            "--batch-size must be >= 2 and --epochs >= 1",
        ));
    }
    Ok(())
}

/// What a run starts from: the method, the inputs, the adaptor it continues, the output.
struct Start {
    method: Method,
    source: Source,
    init: Option<Adaptor>,
    out: PathBuf,
}

fn start(job: &Job, dims: &mut Vec<usize>) -> Result<Start> {
    let Some(dir) = &job.resume else {
        let out = job
            .out
            .clone()
            .ok_or_else(|| Error::option("--out", "is needed (where the adaptor goes)"))?;
        let source = job.source.clone().ok_or_else(|| {
            Error::option(
                "inputs",
                "give --embeddings/--queries/--qrels or --model/--beir",
            )
        })?;
        return Ok(Start {
            method: Method::parse(&job.method)?,
            source,
            init: None,
            out,
        });
    };
    let prev = Adaptor::load(dir)?;
    let method = Method::parse(&prev.meta.method)?;
    if !method.sequential() {
        return Err(Error::input(
            dir,
            format!(
                "a {} adaptor cannot be continued; only smec and mrl+smrl train stage by stage",
                method.name()
            ),
        ));
    }
    let smallest = *prev
        .dims()
        .first()
        .ok_or_else(|| Error::input(dir, "an adaptor without dims"))?;
    dims.insert(0, smallest);
    let recorded = prev
        .meta
        .info
        .get("source")
        .ok_or_else(|| Error::input(dir, "the adaptor records no inputs to resume from"))?;
    let source = Source::from_json(recorded, dir)?;
    Ok(Start {
        method,
        source,
        init: Some(prev),
        out: job.out.clone().unwrap_or_else(|| dir.clone()),
    })
}

/// Whether `dir` holds anything but a lock file (a killed start's).
fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut it| it.any(|e| e.is_ok_and(|e| e.file_name() != ".lock")))
}

/// Runs `job`: checks, takes the output folder's lock (one writer per adaptor folder), reads
/// every input, trains, writes the adaptor and its test report.
pub fn run(job: &Job, events: &mut dyn FnMut(Event)) -> Result<Outcome> {
    check_options(job)?;
    let mut dims = largest_first(&job.dims);
    let st = start(job, &mut dims)?;
    if let Some(prev) = &st.init {
        if prev.meta.input_dim < dims[0] {
            return Err(Error::input(
                job.resume.clone().unwrap_or_default(),
                "adaptor input narrower than its dims",
            ));
        }
    }
    // the dims' rules (order, halvings) need no data: checked before anything is embedded
    let widest = dims.iter().copied().max().unwrap_or(1);
    check_dims(&dims, widest, st.method)?;
    let in_place = job.resume.as_deref() == Some(st.out.as_path());
    if !job.overwrite && !in_place && holds_files(&st.out) {
        return Err(Error::input(
            &st.out,
            "holds an adaptor or other files already: pass --overwrite (Python: overwrite=True) to \
             replace it, or choose another --out",
        ));
    }
    let lock = nest_core::lock::FolderLock::take(&st.out)?;
    let result = train_and_write(job, st, dims, events);
    if result.is_err() {
        lock.discard();
    }
    result
}

fn train_and_write(
    job: &Job,
    st: Start,
    dims: Vec<usize>,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    let inp = inputs(&st.source, job.val_fraction, events)?;
    check_dims(&dims, inp.corpus.dim(), st.method)?;
    events(Event::Message(format!(
        "compress: {} over dims {dims:?}; {} documents, {} queries x {} dims; {} training queries ({}% held out for validation)",
        st.method.name(),
        inp.corpus.ids.len(),
        inp.queries.ids.len(),
        inp.corpus.dim(),
        inp.train.len(),
        (job.val_fraction * 100.0).round()
    )));
    let adaptor = compress(
        &inp,
        st.method,
        &dims,
        &job.options,
        st.init.as_ref(),
        &mut |e| events(Event::Epoch(e)),
    )?;
    adaptor.save(&st.out)?;
    if let Some(r) = test_report(&adaptor, &inp, &job.command)? {
        r.write(&st.out)?;
    }
    Ok(Outcome {
        adaptor,
        out: st.out,
    })
}

/// Reads the inputs `source` names.
fn inputs(source: &Source, val_fraction: f64, events: &mut dyn FnMut(Event)) -> Result<Inputs> {
    let (corpus, queries, train, test) = match source {
        Source::Beir {
            model,
            beir,
            split,
            cache,
        } => {
            let (c, q) = beir_embeddings(model, beir, cache, events)?;
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
    Inputs {
        corpus,
        queries,
        train,
        test,
        val_fraction,
        source: source.to_json(),
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

/// A model's pooled last-layer embeddings of a BEIR folder's corpus and of the queries of every
/// split, from the cache when it holds them.
fn beir_embeddings(
    model: &str,
    dir: &Path,
    cache: &Path,
    events: &mut dyn FnMut(Event),
) -> Result<(Embeddings, Embeddings)> {
    let model_dir = nest_model::hub::resolve(model)?;
    let enc = ElasticEncoder::load(&model_dir, nest_model::default_device(), None)?;
    let layer = enc.num_layers();
    let key = EmbeddingCache::key(&model_dir, dir, layer, 0)?;
    let c = EmbeddingCache {
        dir: cache.to_path_buf(),
    };
    if let Some(hit) = c.get(&key) {
        events(Event::Message(format!(
            "embeddings: cache hit {}",
            cache.join(format!("{key}.safetensors")).display()
        )));
        return Ok(hit);
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
    let mut embed = |items: &[(String, String)], what: &'static str| -> Result<Embeddings> {
        let texts: Vec<&str> = items.iter().map(|x| x.1.as_str()).collect();
        let total = texts.len();
        let x = enc.embed_layers(&texts, &[layer], EncodeOptions::batch(32), &mut |done| {
            events(Event::Encoding { what, done, total })
        })?;
        Ok(Embeddings {
            ids: items.iter().map(|x| x.0.clone()).collect(),
            x: x[0].shallow_clone(),
        })
    };
    let t = std::time::Instant::now();
    let ce = embed(&corpus, "corpus")?;
    let qe = embed(&queries, "queries")?;
    events(Event::Message(format!(
        "embeddings: {} documents and {} queries in {:.1} s; cached as {key}",
        ce.ids.len(),
        qe.ids.len(),
        t.elapsed().as_secs_f64()
    )));
    c.put(&key, &ce, &qe)?;
    Ok((ce, qe))
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
        for s in [files, beir] {
            let back = Source::from_json(&s.to_json(), Path::new("a")).unwrap();
            assert_eq!(back.to_json(), s.to_json());
        }
        // a record without its embeddings names what is missing
        let e = Source::from_json(&json!({"queries": "q.npy"}), Path::new("adaptors/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("adaptors/x") && e.contains("embeddings"), "{e}");
    }

    #[test]
    fn increasing_dims_are_reversed_and_others_kept() {
        assert_eq!(largest_first(&[8, 16, 32]), vec![32, 16, 8]);
        assert_eq!(largest_first(&[32, 16, 8]), vec![32, 16, 8]);
        assert_eq!(largest_first(&[16, 32, 8]), vec![16, 32, 8]);
    }
}
