//! `nest mine`: hard negatives for (query, positive) pairs at any (layer, dim, precision) point,
//! as sentence-transformers' `mine_hard_negatives` mines them (docs/MINING.md). Inputs are read
//! and the options checked before the model loads; the texts are encoded at the point
//! (nest-model), stored and scored as the index does (`nest_index::MemoryLevel`), and the
//! negatives chosen and written by `nest_index::mine`, a chunk of queries at a time, resumable.
//! The pipeline is the library's (`nest_train::mine`, which the trainer's `[mine]` runs too);
//! this file reads the flags (the selection and output ones through `mine_flags.rs`) and prints.

use std::path::Path;

use super::index_parts::together;
use anyhow::Result;
use nest_index::mine::source::IndexSource;
use nest_index::mine::{self, MineOptions, OutputFormat};
use nest_index::{Level, Precision};
use nest_model::{Keys, Policy};
use nest_train::mine::{Destination, Encoding, Job, PairSource, Plan};

use crate::args_mine::MineArgs;
use crate::progress;

pub fn run(a: MineArgs) -> Result<()> {
    crate::interrupt::explain_on_signals(|| {
        "stopped; the mined queries are appended a chunk at a time (--chunk-queries): the same \
         command continues after the last whole chunk. The corpus's vectors are held in memory \
         and made again; for a corpus too long for that, `nest index build` it once and mine \
         with --corpus-index"
            .to_string()
    })?;
    let group = match nest_dist::Launch::from_env()? {
        Some(l) => Some(nest_dist::Group::join(
            &l,
            std::time::Duration::from_secs(300),
        )?),
        None => None,
    };
    let g = group.as_ref();
    // rank 0 holds the lock beside the output for the whole run split by rank (a one-process
    // run of the same output is refused meanwhile); each rank locks its own part
    let (lock, start) = match g {
        Some(g) if g.rank() == 0 => match nest_core::lock::FolderLock::take_beside(&a.output) {
            Ok(l) => (Some(l), setup(&a, Some(g))),
            Err(e) => (None, Err(e.into())),
        },
        _ => (None, setup(&a, g)),
    };
    let s = match g {
        Some(g) => together(g, "starting", start)?,
        None => start?,
    };
    let result = mine(&a, g, &s);
    if let Some(lock) = lock {
        match result.is_ok() {
            true => lock.remove(),
            false => lock.discard(),
        }
    }
    result
}

/// What every rank reads and checks before mining: options, inputs, model, point, index.
struct Setup {
    o: MineOptions,
    format: OutputFormat,
    set: mine::MineSet,
    window: mine::Window,
    key: String,
    model: nest_model::ElasticEncoder,
    layer: usize,
    level: Level,
    index: Option<(nest_index::Index, Vec<String>)>,
}

fn setup(a: &MineArgs, g: Option<&nest_dist::Group>) -> Result<Setup> {
    anyhow::ensure!(a.chunk_queries >= 1, "--chunk-queries must be at least 1");
    anyhow::ensure!(a.encode_chunk >= 1, "--encode-chunk must be at least 1");
    let (o, format) = super::mine_flags::settings(a)?;
    let beir = a.beir.as_ref().map(|b| {
        let qrels = b.join("qrels").join(format!("{}.tsv", a.split));
        [b.join("queries.jsonl"), b.join("corpus.jsonl"), qrels]
    });
    let mut inputs = vec![
        ("--queries", a.queries.as_deref()),
        ("--corpus", a.corpus.as_deref()),
    ];
    inputs.extend(beir.iter().flatten().map(|f| ("--beir", Some(f.as_path()))));
    let inputs: Vec<_> = inputs
        .into_iter()
        .filter_map(|(k, p)| Some((k, p?)))
        .collect();
    nest_core::fsutil::check_output_spares_inputs("--output", &a.output, &inputs)?;
    let precision =
        Precision::parse(&a.precision).map_err(|e| anyhow::anyhow!("--precision: {e}"))?;
    if g.is_some() && a.output.exists() && !a.overwrite {
        anyhow::bail!(
            "--output: {} exists (a finished run); pass --overwrite to mine again",
            a.output.display()
        );
    }
    let corpus_file = corpus_file(a)?;
    let set = read_set(a, corpus_file.as_deref())?;
    let window = nest_train::mine::window(&o, &set, "--range-min")?;
    // the model and the point before the output: a bad --model or --layer leaves no state behind
    let model = super::load_model(&a.model)?;
    let offer = nest_model::Offer::new(&model, None)?;
    let point = offer.resolve(a.layer, a.dim, Keys::FLAGS, Policy::AnyInRange)?;
    if let Some(w) = offer
        .untrained(point, Keys::FLAGS)
        .filter(|_| g.is_none_or(|g| g.rank() == 0))
    {
        eprintln!("warning: {w}");
    }
    let level = Level {
        precision,
        dim: point.dim,
    };
    let index = match (&a.corpus_index, corpus_file) {
        (Some(dir), Some(file)) => Some(open_index(a, dir, &file, &model, point.layer, level)?),
        _ => None,
    };
    let mut key = run_key(a, &o, format, precision)?;
    if let Some((idx, _)) = &index {
        // the index's level is part of what decides the output
        let m = idx.manifest();
        let lf = m.levels.iter().find(|l| l.level() == level);
        let crc = lf.map_or(0, |l| l.data.crc32);
        key =
            nest_core::fsutil::sha256_hex(format!("{key}:index {} {crc:08x}", m.count).as_bytes());
    }
    if a.encode_chunk != nest_train::mine::DEFAULT_ENCODE_CHUNK {
        key = nest_core::fsutil::sha256_hex(format!("{key}:encode {}", a.encode_chunk).as_bytes());
    }
    Ok(Setup {
        o,
        format,
        set,
        window,
        key,
        model,
        layer: point.layer,
        level,
        index,
    })
}

/// The corpus file: --corpus, or with --corpus-index a BEIR folder's corpus.jsonl (the texts
/// must be the documents the index was built from, read the same way).
fn corpus_file(a: &MineArgs) -> Result<Option<std::path::PathBuf>> {
    match (&a.corpus, &a.corpus_index, &a.beir) {
        (Some(c), _, _) => Ok(Some(c.clone())),
        (None, Some(_), Some(b)) => Ok(Some(b.join("corpus.jsonl"))),
        (None, Some(dir), None) => anyhow::bail!(
            "--corpus-index {}: give --corpus FILE too, the documents the index was built from \
             (an index stores vectors and ids, not the texts that mining writes)",
            dir.display()
        ),
        (None, None, _) => Ok(None),
    }
}

/// Opens `--corpus-index`, refusing an index of another model, layer, token limit or without
/// the mining level, or one not built from `file` (count, ids, and the texts' hash the index
/// records); returns it with the documents' texts in index order.
fn open_index(
    a: &MineArgs,
    dir: &Path,
    file: &Path,
    model: &nest_model::ElasticEncoder,
    layer: usize,
    level: Level,
) -> Result<(nest_index::Index, Vec<String>)> {
    let flag = "--corpus-index";
    let idx = nest_index::Index::open(dir)
        .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", dir.display()))?;
    let source = IndexSource::of(&idx, flag)?;
    let max_length = model.tokenizer.max_length();
    source.check(&idx, flag, &a.model.model, layer, max_length, level)?;
    let prompts = a.prompts.resolve(model)?;
    let ours = prompts.document.as_deref().filter(|p| !p.is_empty());
    // an index from before the record was embedded with the model's default prompt
    let built = nest_core::data::recorded_document_prompt(&idx.manifest().source)
        .unwrap_or_else(|| model.prompts.default_prompt().map(str::to_string));
    if ours != built.as_deref() {
        let say = |p: Option<&str>| p.map_or("none".to_string(), |p| format!("'{p}'"));
        anyhow::bail!(
            "{flag} {}: its documents were embedded with the prompt {}, but this run's document \
             prompt is {}; pass --document-prompt {} to mine against the index as built",
            dir.display(),
            say(built.as_deref()),
            say(ours),
            built
                .as_deref()
                .map_or("''".to_string(), |p| format!("'{p}'")),
        );
    }
    let docs = nest_core::data::read_documents(file)?;
    anyhow::ensure!(
        docs.len() == idx.len(),
        "{flag} {}: holds {} vectors, but {} has {} documents: the index was not built from it",
        dir.display(),
        idx.len(),
        file.display(),
        docs.len()
    );
    if let Some((i, d)) = docs.iter().enumerate().find(|(i, d)| idx.id(*i) != d.id) {
        anyhow::bail!(
            "{flag} {}: row {i} has id '{}', but document {i} of {} has id '{}': the index was \
             not built from it",
            dir.display(),
            idx.id(i),
            file.display(),
            d.id
        );
    }
    // the same ids, other texts: indexes since the content hash was recorded tell (older ones
    // record none, and only their ids are checked)
    let recorded = idx
        .manifest()
        .source
        .get("documents_sha256")
        .and_then(|v| v.as_str());
    if let Some(want) = recorded.filter(|w| *w != nest_core::data::content_sha256(&docs)) {
        anyhow::bail!(
            "{flag} {}: was built from documents with the same ids as {} but other texts (its \
             record of their ids and texts, sha256 {}.., differs): rebuild the index from this \
             file, or pass the file it was built from",
            dir.display(),
            file.display(),
            &want[..want.len().min(12)]
        );
    }
    Ok((idx, docs.into_iter().map(|d| d.text).collect()))
}

/// Mines this process's queries into the output (one process) or into its part, which rank 0
/// then merges into the output.
fn mine(a: &MineArgs, g: Option<&nest_dist::Group>, s: &Setup) -> Result<()> {
    let n = s.set.queries.len();
    let enc = Encoding {
        model: &s.model,
        layer: s.layer,
        dim: s.level.dim,
        opts: a.model.encode_options()?,
        prompts: a.prompts.resolve(&s.model)?,
    };
    let job = Job {
        o: s.o.clone(),
        window: s.window,
        format: s.format,
        level: s.level,
        scores: a.output_scores,
        chunk: a.chunk_queries,
    };
    let dest = Destination {
        path: &a.output,
        key: &s.key,
        overwrite: a.overwrite,
        encode_chunk: a.encode_chunk,
        group: g,
        queries: n,
    };
    let (queries, mut out) = dest.open()?;
    let who = g.map_or(String::new(), |g| format!("rank {}: ", g.rank()));
    if out.queries_done() > 0 {
        eprintln!(
            "{who}resuming {}: {} of {} queries done ({} lines)",
            a.output.display(),
            out.queries_done(),
            queries.len(),
            out.lines()
        );
    }
    let plan = Plan {
        encode_chunk: a.encode_chunk,
        group: g,
        queries: queries.clone(),
        index: s.index.as_ref().map(|(i, d)| (i, d.as_slice())),
    };
    let summary = if g.is_some() || out.queries_done() < queries.len() {
        let say = &mut |m: String| eprintln!("{m}");
        let bars = &|n: usize, what: &str| progress::bar(n, what);
        let mined = nest_train::mine::mine_with(&job, &enc, &s.set, &plan, &mut out, bars, say);
        let mined = match g {
            Some(g) => together(g, "mining", mined.map_err(Into::into))?,
            None => mined?,
        };
        Some(nest_train::mine::gather_summary(g, mined)?).filter(|s| s.queries > 0)
    } else {
        None
    };
    let Some((lines, path)) = dest.close(out)? else {
        return Ok(()); // a rank other than 0: its part is on disk, rank 0 merges
    };
    eprintln!(
        "wrote {lines} rows ({}) to {}",
        s.format.name(),
        path.display()
    );
    if let Some(sm) = summary {
        let drops_short = s.format.name().starts_with("n-tuple");
        for line in sm.report(s.o.num_negatives, drops_short) {
            eprintln!("{line}");
        }
    }
    if let Some(other) = &a.overlap_with {
        overlap(&path, other)?;
    }
    Ok(())
}

/// How many of `ours`' (anchor, positive, negative) `other` holds, on stderr.
fn overlap(ours: &Path, other: &Path) -> Result<()> {
    let ov = mine::Overlap::of(ours, other)?;
    eprintln!(
        "overlap: {} of this run's {} (anchor, positive, negative) are in {} ({:.2}%; it holds {})",
        ov.shared,
        ov.ours,
        other.display(),
        ov.percent(),
        ov.theirs
    );
    Ok(())
}

/// The pairs (from --queries or --beir) and the corpus, grouped as sentence-transformers does;
/// what was merged is said on stderr.
fn read_set(a: &MineArgs, corpus: Option<&Path>) -> Result<mine::MineSet> {
    let pairs = match (&a.queries, &a.beir) {
        (Some(q), _) => PairSource::Queries(q),
        (None, Some(dir)) => PairSource::Beir {
            dir,
            split: &a.split,
        },
        (None, None) => anyhow::bail!("give --queries FILE or --beir DIR"),
    };
    let say = &mut |m: String| eprintln!("{m}");
    Ok(nest_train::mine::read_set(pairs, corpus, say)?)
}

/// The key of everything that decides the output: the inputs' bytes, the model, the point and
/// every option (a state file written under another key is not resumed).
fn run_key(a: &MineArgs, o: &MineOptions, f: OutputFormat, p: Precision) -> Result<String> {
    let hash = |p: &Option<std::path::PathBuf>| -> Result<Option<String>> {
        Ok(match p {
            Some(p) if p.is_file() => Some(nest_core::fsutil::sha256_file(p)?),
            Some(p) => Some(p.display().to_string()),
            None => None,
        })
    };
    let beir = match &a.beir {
        Some(d) => Some(format!(
            "{}:{}:{}:{}",
            nest_core::fsutil::sha256_file(&d.join("corpus.jsonl"))?,
            nest_core::fsutil::sha256_file(&d.join("queries.jsonl"))?,
            nest_core::fsutil::sha256_file(&d.join("qrels").join(format!("{}.tsv", a.split)))?,
            a.split
        )),
        None => None,
    };
    let v = serde_json::json!({
        "queries": hash(&a.queries)?, "beir": beir, "corpus": hash(&a.corpus)?,
        "model": a.model.model, "max_length": a.model.max_length,
        "dtype": format!("{:?}", a.model.dtype), "layer": a.layer, "dim": a.dim,
        "precision": p.name(), "options": format!("{o:?}"), "format": f.name(),
        "scores": a.output_scores, "prompts": format!("{:?}", a.prompts),
    });
    Ok(nest_core::fsutil::sha256_hex(v.to_string().as_bytes()))
}
