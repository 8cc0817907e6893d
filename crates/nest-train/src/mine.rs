//! Hard-negative mining with a model in memory (docs/MINING.md): the pairs and corpus read and
//! grouped as sentence-transformers groups them ([`read_set`]), the texts encoded at one
//! (layer, dim) point ([`Encoding`]), stored and scored as the index does
//! (`nest_index::MemoryLevel`), and the negatives chosen and written by `nest_index::mine` a
//! chunk of queries at a time into a resumable output ([`mine_rest`]). `nest mine` and the
//! trainer's `[mine]` rounds (`trainer/mining.rs`) both run this.

use std::path::Path;

use indicatif::ProgressBar;
use nest_index::mine::{self, MineOptions, MineSet, Mined, OutputFormat, QueryRows};
use nest_index::{Level, MemoryLevel};
use nest_model::prompt::TaskPrompts;
use nest_model::{ElasticEncoder, EncodeOptions};

use crate::Result;

/// (query, positive) texts.
pub type Pairs = Vec<(String, String)>;

/// A progress bar for `total` items named `what` (hidden where nobody watches).
pub type Bars<'a> = &'a dyn Fn(usize, &str) -> ProgressBar;

/// Texts encoded per call of the encoder (bounds the pooled full-width tensors held at once).
const ENCODE_CHUNK: usize = 8192;

/// Where the (query, positive) pairs come from.
#[derive(Debug, Clone, Copy)]
pub enum PairSource<'a> {
    /// `.jsonl` (`anchor`/`query`, `positive`/`answer`) or a TSV with such columns.
    Queries(&'a Path),
    /// A BEIR folder's split: each query with each document of relevance > 0.
    Beir { dir: &'a Path, split: &'a str },
}

/// The pairs and the corpus (`corpus`, else a BEIR folder's, else the positives), grouped as
/// sentence-transformers does; what was merged is told to `say`.
pub fn read_set(
    pairs: PairSource<'_>,
    corpus: Option<&Path>,
    say: &mut dyn FnMut(String),
) -> Result<MineSet> {
    let (pairs, beir_corpus) = match pairs {
        PairSource::Queries(q) => (nest_core::data::read_positive_pairs(q)?, None),
        PairSource::Beir { dir, split } => beir_pairs(dir, split, say)?,
    };
    let corpus: Option<Vec<String>> = match corpus {
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
        say(format!(
            "{} distinct queries in {} pairs (a repeated query's positives are all its positives)",
            set.queries.len(),
            pairs.len()
        ));
    }
    if set.duplicate_corpus > 0 {
        say(format!(
            "corpus: {} exact duplicate texts dropped (first kept)",
            set.duplicate_corpus
        ));
    }
    if set.positives_added > 0 {
        say(format!(
            "corpus: {} positives were not in it and were added (as sentence-transformers does)",
            set.positives_added
        ));
    }
    Ok(set)
}

/// A BEIR split's (query, positive) pairs, positives in corpus order, and the corpus texts.
fn beir_pairs(
    dir: &Path,
    split: &str,
    say: &mut dyn FnMut(String),
) -> Result<(Pairs, Option<Vec<String>>)> {
    let b = nest_core::data::Beir::read(dir, split)?;
    for w in &b.warnings {
        say(format!("warning: {w}"));
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
    if pairs.is_empty() {
        let m = format!("no query of split {split} has a relevant document in corpus.jsonl");
        return Err(nest_core::Error::content(dir, m).into());
    }
    Ok((pairs, Some(b.corpus.into_iter().map(|(_, t)| t).collect())))
}

/// The window of `o` on `set`, refusing a `range_min` that skips every candidate; `range_min`
/// is how the caller names that setting (`--range-min`, `mine.range_min`).
pub fn window(o: &MineOptions, set: &MineSet, range_min: &str) -> Result<mine::Window> {
    let window = o.window(set.max_positives())?;
    let left = set.corpus.len() - usize::from(!o.include_positives);
    if o.range_min >= left {
        let m = format!(
            "{} skips every candidate: the corpus holds {} distinct texts ({left} candidates per query at most)",
            o.range_min,
            set.corpus.len()
        );
        return Err(nest_core::Error::value(range_min, m).into());
    }
    Ok(window)
}

/// What one run mines and writes.
#[derive(Debug, Clone)]
pub struct Job {
    pub o: MineOptions,
    pub window: mine::Window,
    pub format: OutputFormat,
    /// How the corpus's vectors are stored and scored (precision, dim).
    pub level: Level,
    /// Write the scores beside the texts.
    pub scores: bool,
    /// Queries per appended (and resumable) chunk.
    pub chunk: usize,
}

/// Encodes the corpus and the queries not yet done at the point, then mines and writes them a
/// chunk at a time; `say` hears what is mined.
pub fn mine_rest(
    job: &Job,
    enc: &Encoding<'_>,
    set: &MineSet,
    out: &mut mine::ResumableOutput,
    bars: Bars<'_>,
    say: &mut dyn FnMut(String),
) -> Result<mine::Summary> {
    let level = job.level;
    say(format!(
        "mining {} queries against {} texts at layer {} of {}, {level}",
        set.queries.len() - out.queries_done(),
        set.corpus.len(),
        enc.layer,
        enc.model.num_layers()
    ));
    let prompts = &enc.prompts;
    let mut corpus = MemoryLevel::new(level);
    let doc = prompts.document.as_deref();
    enc.each(&set.corpus, doc, "corpus", bars, &mut |v| {
        Ok(corpus.push(v)?)
    })?;
    let first = out.queries_done();
    let mut queries = Vec::with_capacity(set.queries.len() - first);
    let query = prompts.query.as_deref();
    enc.each(&set.queries[first..], query, "queries", bars, &mut |v| {
        queries.push(corpus.prepare(v));
        Ok(())
    })?;
    let mut summary = mine::Summary::default();
    let pb = bars(queries.len(), "mine");
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

/// The encoder at one point (inference: no dropout, no gradients).
pub struct Encoding<'m> {
    pub model: &'m ElasticEncoder,
    pub layer: usize,
    pub dim: usize,
    pub opts: EncodeOptions,
    /// The query and document prompts.
    pub prompts: TaskPrompts,
}

impl Encoding<'_> {
    /// Encodes `texts` (with `prompt`) in chunks and hands each vector (`dim` coordinates, unit
    /// norm) to `f`, in order.
    fn each(
        &self,
        texts: &[String],
        prompt: Option<&str>,
        what: &str,
        bars: Bars<'_>,
        f: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<()> {
        let pb = bars(texts.len(), what);
        for (c, chunk) in texts.chunks(ENCODE_CHUNK).enumerate() {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let base = c * ENCODE_CHUNK;
            let pooled = self.model.embed_prompted(
                &refs,
                &[self.layer],
                self.opts,
                prompt,
                &mut |done| pb.set_position((base + done) as u64),
            )?;
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
