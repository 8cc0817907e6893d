//! `nest mine`: hard negatives for (query, positive) pairs at any (layer, dim, precision) point,
//! as sentence-transformers' `mine_hard_negatives` mines them (docs/MINING.md). Inputs are read
//! and the options checked before the model loads; the texts are encoded at the point
//! (nest-model), stored and scored as the index does (`nest_index::MemoryLevel`), and the
//! negatives chosen and written by `nest_index::mine`, a chunk of queries at a time, resumable.

use std::path::Path;

use anyhow::{Context, Result};
use nest_index::mine::{self, MineOptions, MineSet, Mined, OutputFormat, QueryRows, Sampling};
use nest_index::{Level, MemoryLevel, Precision};
use nest_model::prompt::TaskPrompts;
use nest_model::{ElasticEncoder, EncodeOptions, Keys, Policy};

use crate::args_mine::MineArgs;
use crate::progress;

/// (query, positive) texts.
type Pairs = Vec<(String, String)>;

/// Texts encoded per call of the encoder (bounds the pooled full-width tensors held at once).
const ENCODE_CHUNK: usize = 8192;

pub fn run(a: MineArgs) -> Result<()> {
    anyhow::ensure!(a.chunk_queries >= 1, "--chunk-queries must be at least 1");
    let o = options(&a)?;
    let format = output_format(&a)?;
    let precision =
        Precision::parse(&a.precision).map_err(|e| anyhow::anyhow!("--precision: {e}"))?;
    let set = read_set(&a)?;
    let window = o.window(set.max_positives())?;
    let left = set.corpus.len() - usize::from(!o.include_positives);
    anyhow::ensure!(
        o.range_min < left,
        "--range-min {} skips every candidate: the corpus holds {} distinct texts ({left} candidates per query at most)",
        o.range_min,
        set.corpus.len()
    );
    let key = run_key(&a, &o, format, precision)?;
    // the model and the point before the output: a bad --model or --layer leaves no state behind
    let model = super::load_model(&a.model)?;
    let offer = nest_model::Offer::new(&model, None)?;
    let point = offer.resolve(a.layer, a.dim, Keys::FLAGS, Policy::AnyInRange)?;
    let enc = Encoding {
        model: &model,
        layer: point.layer,
        dim: point.dim,
        opts: a.model.encode_options()?,
        prompts: a.prompts.resolve(&model)?,
    };
    let job = Job {
        o: o.clone(),
        window,
        format,
        level: Level {
            precision,
            dim: point.dim,
        },
        scores: a.output_scores,
        chunk: a.chunk_queries,
    };
    let mut out = mine::ResumableOutput::open(&a.output, &key, a.overwrite)?;
    if out.queries_done() > 0 {
        eprintln!(
            "resuming {}: {} of {} queries done ({} lines)",
            a.output.display(),
            out.queries_done(),
            set.queries.len(),
            out.lines()
        );
    }
    let summary = if out.queries_done() < set.queries.len() {
        Some(mine_rest(&job, &enc, &set, &mut out)?)
    } else {
        None
    };
    let lines = out.lines();
    let path = out.finish()?;
    eprintln!(
        "wrote {lines} rows ({}) to {}",
        format.name(),
        path.display()
    );
    if let Some(s) = summary {
        report(&s, &o);
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

/// `--output-format`; n-tuple with `--include-positives` (as sentence-transformers).
fn output_format(a: &MineArgs) -> Result<OutputFormat> {
    let format = OutputFormat::parse(&a.output_format)?;
    if a.include_positives && format != OutputFormat::NTuple {
        eprintln!(
            "warning: --include-positives writes n-tuples (as sentence-transformers), not {}",
            format.name()
        );
        return Ok(OutputFormat::NTuple);
    }
    Ok(format)
}

/// The selection settings from the flags.
fn options(a: &MineArgs) -> Result<MineOptions> {
    Ok(MineOptions {
        num_negatives: a.num_negatives,
        range_min: a.range_min,
        range_max: a.range_max,
        min_score: a.min_score,
        max_score: a.max_score,
        absolute_margin: a.absolute_margin,
        relative_margin: a.relative_margin,
        sampling: Sampling::parse(&a.sampling)?,
        include_positives: a.include_positives,
        seed: a.seed,
    })
}

/// The pairs (from --queries or --beir) and the corpus, grouped as sentence-transformers does;
/// what was merged is said on stderr.
fn read_set(a: &MineArgs) -> Result<MineSet> {
    let (pairs, beir_corpus) = match (&a.queries, &a.beir) {
        (Some(q), _) => (nest_core::data::read_positive_pairs(q)?, None),
        (None, Some(dir)) => beir_pairs(dir, &a.split)?,
        (None, None) => anyhow::bail!("give --queries FILE or --beir DIR"),
    };
    let corpus: Option<Vec<String>> = match &a.corpus {
        Some(p) => Some(
            nest_core::data::read_documents(p)?
                .into_iter()
                .map(|d| d.text)
                .collect(),
        ),
        None => beir_corpus,
    };
    let set = MineSet::new(&pairs, corpus.as_deref());
    if set.repeated_queries > 0 {
        eprintln!(
            "{} distinct queries in {} pairs (a repeated query's positives are all its positives)",
            set.queries.len(),
            pairs.len()
        );
    }
    if set.duplicate_corpus > 0 {
        eprintln!(
            "corpus: {} exact duplicate texts dropped (first kept)",
            set.duplicate_corpus
        );
    }
    if set.positives_added > 0 {
        eprintln!(
            "corpus: {} positives were not in it and were added (as sentence-transformers does)",
            set.positives_added
        );
    }
    Ok(set)
}

/// A BEIR split's (query, positive) pairs, positives in corpus order, and the corpus texts.
fn beir_pairs(dir: &Path, split: &str) -> Result<(Pairs, Option<Vec<String>>)> {
    let b = nest_core::data::Beir::read(dir, split)?;
    for w in &b.warnings {
        eprintln!("warning: {w}");
    }
    let mut pairs = Vec::new();
    for (qid, qtext) in &b.queries {
        let rel = &b.qrels[qid];
        for (did, dtext) in &b.corpus {
            if rel.get(did).is_some_and(|&r| r > 0) {
                pairs.push((qtext.clone(), dtext.clone()));
            }
        }
    }
    anyhow::ensure!(
        !pairs.is_empty(),
        "{}: no query of split {split} has a relevant document in corpus.jsonl",
        dir.display()
    );
    Ok((pairs, Some(b.corpus.into_iter().map(|(_, t)| t).collect())))
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

/// What one run mines and writes.
struct Job {
    o: MineOptions,
    window: mine::Window,
    format: OutputFormat,
    level: Level,
    scores: bool,
    chunk: usize,
}

/// Encodes the corpus and the queries not yet done at the point, then mines and writes them a
/// chunk at a time.
fn mine_rest(
    job: &Job,
    enc: &Encoding<'_>,
    set: &MineSet,
    out: &mut mine::ResumableOutput,
) -> Result<mine::Summary> {
    let level = job.level;
    eprintln!(
        "mining {} queries against {} texts at layer {} of {}, {level}",
        set.queries.len() - out.queries_done(),
        set.corpus.len(),
        enc.layer,
        enc.model.num_layers()
    );
    let prompts = &enc.prompts;
    let mut corpus = MemoryLevel::new(level);
    enc.each(
        &set.corpus,
        prompts.document.as_deref(),
        "corpus",
        &mut |v| Ok(corpus.push(v)?),
    )?;
    let first = out.queries_done();
    let mut queries = Vec::with_capacity(set.queries.len() - first);
    enc.each(
        &set.queries[first..],
        prompts.query.as_deref(),
        "queries",
        &mut |v| {
            queries.push(corpus.prepare(v));
            Ok(())
        },
    )?;
    let mut summary = mine::Summary::default();
    let pb = progress::bar(queries.len(), "mine");
    let n = job.o.num_negatives;
    for (c, chunk) in queries.chunks(job.chunk).enumerate() {
        let start = first + c * job.chunk;
        let mined = mine::mine_queries(&corpus, chunk, start, &set.positives, &job.o, job.window);
        let (text, lines) = rows(set, start, &mined, job.format, job.scores, n);
        for m in &mined {
            summary.add(m, n);
        }
        out.append(&text, lines, start + chunk.len())?;
        pb.set_position((start + chunk.len() - first) as u64);
    }
    pb.finish_and_clear();
    Ok(summary)
}

/// The output lines of queries `start..` (their `mined`), and how many.
fn rows(
    set: &MineSet,
    start: usize,
    mined: &[Mined],
    format: OutputFormat,
    scores: bool,
    num_negatives: usize,
) -> (String, u64) {
    let mut text = String::new();
    let mut lines = 0u64;
    for (i, m) in mined.iter().enumerate() {
        let q = start + i;
        let positives: Vec<(&str, f32)> = set.positives[q]
            .iter()
            .zip(&m.positive_scores)
            .map(|(&r, &s)| (set.corpus[r as usize].as_str(), s))
            .collect();
        let negatives: Vec<(&str, f32)> = m
            .picked
            .negatives
            .iter()
            .map(|&(r, s)| (set.corpus[r as usize].as_str(), s))
            .collect();
        let qr = QueryRows {
            anchor: &set.queries[q],
            positives: &positives,
            negatives: &negatives,
            num_negatives,
        };
        lines += mine::write_rows(format, scores, &qr, &mut text) as u64;
    }
    (text, lines)
}

/// The encoder at one point.
struct Encoding<'m> {
    model: &'m ElasticEncoder,
    layer: usize,
    dim: usize,
    opts: EncodeOptions,
    /// The query and document prompts (`--query-prompt(-name)`, `--document-prompt(-name)`).
    prompts: TaskPrompts,
}

impl Encoding<'_> {
    /// Encodes `texts` (with `prompt`) in chunks and hands each vector (`dim` coordinates, unit
    /// norm) to `f`, in order.
    fn each(
        &self,
        texts: &[String],
        prompt: Option<&str>,
        what: &str,
        f: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<()> {
        let pb = progress::bar(texts.len(), what);
        for (c, chunk) in texts.chunks(ENCODE_CHUNK).enumerate() {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let base = c * ENCODE_CHUNK;
            let pooled = self
                .model
                .embed_prompted(&refs, &[self.layer], self.opts, prompt, &mut |done| {
                    pb.set_position((base + done) as u64)
                })
                .with_context(|| format!("encoding the {what}"))?;
            let e = nest_model::point::finish(&pooled[0], self.dim, None)?;
            let flat = nest_model::pooling::to_vec_f32(&e);
            for row in flat.chunks_exact(self.dim) {
                f(row)?;
            }
        }
        pb.finish_and_clear();
        Ok(())
    }
}

/// sentence-transformers' closing statistics.
fn report(s: &mine::Summary, o: &MineOptions) {
    let mean = |sum: f64, n: usize| if n == 0 { f64::NAN } else { sum / n as f64 };
    eprintln!(
        "queries {}: positives {} (mean score {:.4}), negatives {} (mean score {:.4})",
        s.queries,
        s.positives,
        mean(s.positive_score_sum, s.positives),
        s.negatives,
        mean(s.negative_score_sum, s.negatives)
    );
    let k = &s.skipped;
    for (what, n) in [
        ("absolute margin", k.absolute_margin),
        ("relative margin", k.relative_margin),
        ("max score", k.max_score),
        ("min score", k.min_score),
    ] {
        if n > 0 {
            eprintln!("skipped {n} candidates for the {what}");
        }
    }
    if s.short > 0 {
        eprintln!(
            "could not find {} negatives for {} of {} queries ({:.2}%); consider --range-max, \
             --range-min, the margins or --max-score",
            o.num_negatives,
            s.short,
            s.queries,
            100.0 * s.short as f64 / s.queries.max(1) as f64
        );
    }
}
