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

use crate::Result;

mod encoding;
mod rank;

pub use encoding::Encoding;
pub use rank::{gather_summary, part_path, rank_queries, Destination};

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

/// How a run is split and what it searches ([`mine_with`]); [`Plan::single`] is one process
/// mining every query against the corpus it encodes into memory.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// Texts per encoder call. Blocks are cut from the start of each list (corpus, queries), so
    /// a text is always encoded in the same batch, whichever process encodes it and wherever a
    /// run resumed: its vector is the same, bit for bit.
    pub encode_chunk: usize,
    /// The process group of a run split by rank: the corpus's blocks are encoded round-robin
    /// and gathered (every rank holds the whole corpus), each rank mines its `queries`.
    pub group: Option<&'a nest_dist::Group>,
    /// The set's queries this process mines (its output holds exactly these).
    pub queries: std::ops::Range<usize>,
    /// The corpus read memory-mapped from an index's level instead of encoded: the index and
    /// its documents' texts in index order (the file it was built from).
    pub index: Option<(&'a nest_index::Index, &'a [String])>,
}

impl Plan<'_> {
    /// One process, every query, the corpus encoded into memory.
    pub fn single(set: &MineSet) -> Plan<'static> {
        Plan {
            encode_chunk: ENCODE_CHUNK,
            group: None,
            queries: 0..set.queries.len(),
            index: None,
        }
    }
}

/// The default encoder block ([`Plan::encode_chunk`]).
pub const DEFAULT_ENCODE_CHUNK: usize = ENCODE_CHUNK;

/// Encodes the corpus and the queries not yet done at the point, then mines and writes them a
/// chunk at a time; `say` hears what is mined. One process, the corpus in memory
/// ([`Plan::single`]).
pub fn mine_rest(
    job: &Job,
    enc: &Encoding<'_>,
    set: &MineSet,
    out: &mut mine::ResumableOutput,
    bars: Bars<'_>,
    say: &mut dyn FnMut(String),
) -> Result<mine::Summary> {
    mine_with(job, enc, set, &Plan::single(set), out, bars, say)
}

/// [`mine_rest`] as `plan` splits it: this process's queries (`plan.queries`, of which `out`
/// records how many are done) against the whole corpus, encoded (and gathered across the
/// group) or read from an index. Under a group every rank must call it (the corpus is gathered
/// collectively); a rank with nothing left still takes part unless no rank has anything left.
pub fn mine_with(
    job: &Job,
    enc: &Encoding<'_>,
    set: &MineSet,
    plan: &Plan<'_>,
    out: &mut mine::ResumableOutput,
    bars: Bars<'_>,
    say: &mut dyn FnMut(String),
) -> Result<mine::Summary> {
    let done = out.queries_done();
    let first = plan.queries.start + done;
    let rest = plan.queries.end.saturating_sub(first);
    if rank::left_anywhere(plan.group, rest)? == 0 {
        return Ok(mine::Summary::default());
    }
    let who = plan.group.map_or(String::new(), |g| {
        format!("rank {} of {}: ", g.rank(), g.world())
    });
    say(format!(
        "{who}mining {rest} queries against {} texts at layer {} of {}, {}{}",
        set.corpus.len(),
        enc.layer,
        enc.model.num_layers(),
        job.level,
        match plan.index {
            Some((i, _)) => format!(" (read from the index {})", i.dir().display()),
            None => String::new(),
        }
    ));
    let corpus = candidates(job.level, enc, set, plan, bars, &mut |m| {
        say(format!("{who}{m}"))
    })?;
    if rest == 0 {
        return Ok(mine::Summary::default());
    }
    let mut queries = Vec::with_capacity(rest);
    enc.blocks(
        &set.queries,
        first..plan.queries.end,
        plan.encode_chunk,
        None,
        enc.prompts.query.as_deref(),
        "queries",
        bars,
        &mut |v| {
            queries.push(corpus.prepare(v));
            Ok(())
        },
    )?;
    write_chunks(job, set, corpus.as_ref(), &queries, first, plan, out, bars)
}

/// The corpus to search: read from the plan's index (with the positives it lacks encoded
/// beside it), else encoded into memory (gathered across the plan's group).
fn candidates<'a>(
    level: Level,
    enc: &Encoding<'_>,
    set: &'a MineSet,
    plan: &Plan<'a>,
    bars: Bars<'_>,
    say: &mut dyn FnMut(String),
) -> Result<Box<dyn mine::Candidates + 'a>> {
    let doc = enc.prompts.document.as_deref();
    let e = plan.encode_chunk;
    Ok(match plan.index {
        Some((index, documents)) => {
            let mut c = mine::IndexCorpus::new(index, level, documents, &set.corpus)?;
            let extra = &set.corpus[c.kept()..];
            if !extra.is_empty() {
                say(format!(
                    "encoding {} positives the index lacks",
                    extra.len()
                ));
            }
            let all = 0..extra.len();
            enc.blocks(extra, all, e, None, doc, "corpus", bars, &mut |v| {
                Ok(c.push_extra(v)?)
            })?;
            Box::new(c)
        }
        None => {
            let mut c = MemoryLevel::new(level);
            let all = 0..set.corpus.len();
            enc.blocks(
                &set.corpus,
                all,
                e,
                plan.group,
                doc,
                "corpus",
                bars,
                &mut |v| Ok(c.push(v)?),
            )?;
            Box::new(c)
        }
    })
}

/// Mines the prepared `queries` (`first..` of the set) a chunk at a time and appends each
/// chunk's rows to `out`.
#[allow(clippy::too_many_arguments)]
fn write_chunks(
    job: &Job,
    set: &MineSet,
    corpus: &dyn mine::Candidates,
    queries: &[nest_index::level::Prepared],
    first: usize,
    plan: &Plan<'_>,
    out: &mut mine::ResumableOutput,
    bars: Bars<'_>,
) -> Result<mine::Summary> {
    let mut summary = mine::Summary::default();
    let pb = bars(queries.len(), "mine");
    let n = job.o.num_negatives;
    for (c, chunk) in queries.chunks(job.chunk).enumerate() {
        let start = first + c * job.chunk;
        let mined = mine::mine_queries(corpus, chunk, start, &set.positives, &job.o, job.window);
        let (text, lines) = rows(set, start, &mined, job.format, job.scores, n);
        for m in &mined {
            summary.add(m, n);
        }
        let now = start + chunk.len();
        out.append(&text, lines, now - plan.queries.start)?;
        pb.set_position((now - first) as u64);
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
