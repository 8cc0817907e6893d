//! `nest compress`: train an adaptor on frozen embeddings (files, or a model + BEIR folder).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nest_compress::data::{read_embeddings, read_qrels, EmbeddingCache, Embeddings, Qrels};
use nest_compress::method::Options;
use nest_compress::run::{compress, Inputs};
use nest_compress::Method;
use nest_core::data::Beir;
use nest_model::{Adaptor, EncodeOptions};
use serde_json::json;

use crate::args::CompressArgs;
use crate::progress;

/// `--dims` in increasing order, as every command takes them (the decreasing order of earlier
/// releases is accepted too), returned largest first: the order of the adaptor's nested chain.
fn parse_dims(s: &str) -> Result<Vec<usize>> {
    let mut dims = s
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .with_context(|| format!("--dims: '{x}' is not a number"))
        })
        .collect::<Result<Vec<usize>>>()?;
    if dims.windows(2).all(|w| w[0] < w[1]) {
        dims.reverse();
    }
    Ok(dims)
}

/// A model's pooled embeddings of a BEIR folder's corpus and of the queries of both splits,
/// from the cache when it holds them.
fn beir_embeddings(model: &str, dir: &Path, cache: &Path) -> Result<(Embeddings, Embeddings)> {
    let model_dir = nest_model::hub::resolve(model)?;
    let enc = super::load_model_path(model, None)?;
    let layer = enc.num_layers();
    let key = EmbeddingCache::key(&model_dir, dir, layer, 0)?;
    let c = EmbeddingCache {
        dir: cache.to_path_buf(),
    };
    if let Some(hit) = c.get(&key) {
        eprintln!(
            "embeddings: cache hit {}",
            cache.join(format!("{key}.safetensors")).display()
        );
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
    let embed = |items: &[(String, String)], what: &str| -> Result<Embeddings> {
        let texts: Vec<&str> = items.iter().map(|x| x.1.as_str()).collect();
        let pb = progress::bar(texts.len(), what);
        let x = enc.embed_layers(&texts, &[layer], EncodeOptions::batch(32), &mut |d| {
            pb.set_position(d as u64)
        })?;
        pb.finish_and_clear();
        Ok(Embeddings {
            ids: items.iter().map(|x| x.0.clone()).collect(),
            x: x[0].shallow_clone(),
        })
    };
    let t = std::time::Instant::now();
    let ce = embed(&corpus, "corpus")?;
    let qe = embed(&queries, "queries")?;
    eprintln!(
        "embeddings: {} documents and {} queries in {:.1} s; cached as {key}",
        ce.ids.len(),
        qe.ids.len(),
        t.elapsed().as_secs_f64()
    );
    c.put(&key, &ce, &qe)?;
    Ok((ce, qe))
}

fn qrels_of(dir: &Path, split: &str, q: &Embeddings, c: &Embeddings) -> Result<Option<Qrels>> {
    let p = dir.join("qrels").join(format!("{split}.tsv"));
    if !p.exists() {
        return Ok(None);
    }
    Ok(Some(read_qrels(&p, q, c)?))
}

/// Reads the inputs a source description names (the flags, or a resumed adaptor's record).
fn inputs(src: &serde_json::Value, val_fraction: f64) -> Result<Inputs> {
    let s = |k: &str| src.get(k).and_then(|v| v.as_str()).map(PathBuf::from);
    let (corpus, queries, train, test) =
        if let Some(model) = src.get("model").and_then(|v| v.as_str()) {
            let dir = s("beir").context("--beir is needed with --model")?;
            let split = src.get("split").and_then(|v| v.as_str()).unwrap_or("train");
            let (c, q) = beir_embeddings(model, &dir, &s("cache").unwrap_or_default())?;
            let train = qrels_of(&dir, split, &q, &c)?
                .with_context(|| format!("{}: no qrels/{split}.tsv", dir.display()))?;
            let test = if split == "test" {
                None
            } else {
                qrels_of(&dir, "test", &q, &c)?
            };
            (c, q, train, test)
        } else {
            let e = s("embeddings")
                .context("give --embeddings, --queries and --qrels, or --model and --beir")?;
            let qp = s("queries").context("--queries is needed with --embeddings")?;
            let c = read_embeddings(&e, s("corpus_ids").as_deref())?;
            let q = read_embeddings(&qp, s("query_ids").as_deref())?;
            let train = read_qrels(
                &s("qrels").context("--qrels is needed with --embeddings")?,
                &q,
                &c,
            )?;
            let test = match s("test_qrels") {
                Some(p) => Some(read_qrels(&p, &q, &c)?),
                None => None,
            };
            (c, q, train, test)
        };
    Ok(Inputs {
        corpus,
        queries,
        train,
        test,
        val_fraction,
        source: src.clone(),
    }
    .normalized()?)
}

/// What a run continues from or starts with: the method, its input description, the adaptor
/// it continues (`--resume`) and where the result goes.
struct Start {
    method: Method,
    source: serde_json::Value,
    init: Option<Adaptor>,
    out: PathBuf,
}

/// The training options from the flags, range-checked.
fn options(a: &CompressArgs) -> Result<Options> {
    anyhow::ensure!(
        a.val_fraction > 0.0 && a.val_fraction < 1.0,
        "--val-fraction must be in (0, 1), got {}",
        a.val_fraction
    );
    anyhow::ensure!(
        a.batch_size >= 2 && a.epochs >= 1,
        "--batch-size must be >= 2 and --epochs >= 1"
    );
    Ok(Options {
        alpha: a.alpha,
        scale: a.scale,
        lr: a.lr,
        batch_size: a.batch_size,
        epochs: a.epochs,
        patience: a.patience.max(1),
        hard_negatives: a.hard_negatives,
        neighbours: a.neighbours,
        memory_size: a.memory_size,
        tau: a.tau,
        ads_soft: a.ads_gradient == "soft",
        seed: a.seed,
    })
}

/// `--resume DIR`: the adaptor's own method and recorded inputs, its smallest dim put first in
/// `dims` (the next stage halves it).
fn resumed(a: &CompressArgs, dir: &Path, dims: &mut Vec<usize>) -> Result<Start> {
    let prev = Adaptor::load(dir)?;
    let method = Method::parse(&prev.meta.method)?;
    if !method.sequential() {
        bail!(
            "{}: a {} adaptor cannot be continued; only smec and mrl+smrl train stage by stage",
            dir.display(),
            method.name()
        );
    }
    let smallest = *prev.dims().first().context("adaptor without dims")?;
    dims.insert(0, smallest);
    let source = prev
        .meta
        .info
        .get("source")
        .cloned()
        .context("the adaptor records no inputs to resume from")?;
    Ok(Start {
        method,
        source,
        init: Some(prev),
        out: a.out.clone().unwrap_or_else(|| dir.to_path_buf()),
    })
}

/// A new run: the method and the inputs the flags name.
fn fresh(a: &CompressArgs) -> Result<Start> {
    let method = Method::parse(&a.method)?;
    let out = a
        .out
        .clone()
        .context("--out is needed (where the adaptor goes)")?;
    let p = |x: &Option<PathBuf>| x.as_ref().map(|p| p.display().to_string());
    let source = match (&a.model, &a.embeddings) {
        (Some(m), None) => {
            json!({"model": m, "beir": p(&a.beir), "split": a.split, "cache": a.cache.display().to_string()})
        }
        (None, Some(_)) => json!({
            "embeddings": p(&a.embeddings), "corpus_ids": p(&a.corpus_ids), "queries": p(&a.queries),
            "query_ids": p(&a.query_ids), "qrels": p(&a.qrels), "test_qrels": p(&a.test_qrels),
        }),
        _ => bail!("give either --embeddings/--queries/--qrels or --model/--beir"),
    };
    Ok(Start {
        method,
        source,
        init: None,
        out,
    })
}

/// The validation and test nDCG@10 per dim that training recorded, as a markdown table.
fn print_scores(adaptor: &Adaptor) {
    let info = &adaptor.meta.info;
    println!("| dim | val nDCG@10 | test nDCG@10 |\n|---:|---:|---:|");
    for d in adaptor.dims().iter().rev() {
        let g = |k: &str| {
            info[k]
                .get(d.to_string())
                .and_then(|v| v.as_f64())
                .map_or("-".into(), |v| format!("{v:.4}"))
        };
        println!(
            "| {d} | {} | {} |",
            g("val_ndcg_at_10"),
            g("test_ndcg_at_10")
        );
    }
}

/// Takes the output folder's lock, reads and checks every input before training (embeddings
/// or a BEIR folder, ids, qrels), then trains with one library call and writes the adaptor
/// and its test report; a failed start leaves no folder behind.
pub fn run(a: CompressArgs) -> Result<()> {
    let opts = options(&a)?;
    let mut dims = parse_dims(&a.dims)?;
    let start = match &a.resume {
        Some(dir) => resumed(&a, dir, &mut dims)?,
        None => fresh(&a)?,
    };
    if let Some(prev) = &start.init {
        anyhow::ensure!(prev.meta.input_dim >= dims[0], "adaptor input mismatch");
    }
    // the dims' rules (order, halvings) need no data: checked before anything is embedded
    // (the embeddings' width is checked once they are read)
    let widest = dims.iter().copied().max().unwrap_or(1);
    nest_compress::method::check_dims(&dims, widest, start.method)?;
    let continues_in_place = a.resume.as_deref() == Some(start.out.as_path());
    if !a.overwrite && !continues_in_place && holds_files(&start.out) {
        bail!(
            "{}: holds an adaptor or other files already: pass --overwrite to replace it, or \
             choose another --out",
            start.out.display()
        );
    }
    // one writer per adaptor folder: a second `nest compress` on it is refused at once
    let lock = nest_core::lock::FolderLock::take(&start.out)?;
    let result = train_and_write(&a, start, dims, &opts);
    if result.is_err() {
        lock.discard();
    }
    result
}

/// Whether `dir` holds anything but a lock file (a killed start's).
fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut it| it.any(|e| e.is_ok_and(|e| e.file_name() != ".lock")))
}

/// Reads every input, trains, and writes the adaptor and its test report into `start.out`.
fn train_and_write(a: &CompressArgs, start: Start, dims: Vec<usize>, opts: &Options) -> Result<()> {
    let Start {
        method,
        source,
        init,
        out,
    } = start;
    let inp = inputs(&source, a.val_fraction)?;
    nest_compress::method::check_dims(&dims, inp.corpus.dim(), method)?;
    eprintln!(
        "compress: {} over dims {dims:?}; {} documents, {} queries x {} dims; {} training queries ({}% held out for validation)",
        method.name(),
        inp.corpus.ids.len(),
        inp.queries.ids.len(),
        inp.corpus.dim(),
        inp.train.len(),
        (a.val_fraction * 100.0).round()
    );
    let adaptor = compress(&inp, method, &dims, opts, init.as_ref(), &mut |e| {
        eprintln!(
            "  stage {} {:?} epoch {:>2}: train {:.4}  val {:.4}  {:.2} s (S-XBM {:.2} s)",
            e.phase,
            e.dims,
            e.epoch + 1,
            e.train_loss,
            e.val_loss,
            e.seconds,
            e.memory_seconds
        );
    })?;
    adaptor
        .save(&out)
        .with_context(|| format!("writing {}", out.display()))?;
    print_scores(&adaptor);
    if let Some(r) = nest_compress::run::test_report(
        &adaptor,
        &inp,
        &std::env::args().collect::<Vec<_>>().join(" "),
    )? {
        r.write(&out)?;
    }
    eprintln!("wrote {}", out.display());
    Ok(())
}
