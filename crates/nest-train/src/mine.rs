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

/// The queries rank `rank` of `world` mines: a contiguous run of whole encoder blocks of
/// `chunk` texts, so that the parts in rank order are every query in order.
pub fn rank_queries(n: usize, chunk: usize, rank: usize, world: usize) -> std::ops::Range<usize> {
    let blocks = n.div_ceil(chunk);
    let at = |r: usize| (r * blocks / world * chunk).min(n);
    at(rank)..at(rank + 1)
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
    let level = job.level;
    let done = out.queries_done();
    let first = plan.queries.start + done;
    let rest = plan.queries.end.saturating_sub(first);
    let left_anywhere = match plan.group {
        Some(g) => {
            let all = g.all_gather(&tch::Tensor::from_slice(&[rest as i64]))?;
            all.iter().map(|t| t.int64_value(&[0])).sum::<i64>() as usize
        }
        None => rest,
    };
    if left_anywhere == 0 {
        return Ok(mine::Summary::default());
    }
    let who = plan.group.map_or(String::new(), |g| {
        format!("rank {} of {}: ", g.rank(), g.world())
    });
    say(format!(
        "{who}mining {rest} queries against {} texts at layer {} of {}, {level}{}",
        set.corpus.len(),
        enc.layer,
        enc.model.num_layers(),
        match plan.index {
            Some((i, _)) => format!(" (read from the index {})", i.dir().display()),
            None => String::new(),
        }
    ));
    let doc = enc.prompts.document.as_deref();
    let e = plan.encode_chunk;
    let corpus: Box<dyn mine::Candidates + '_> = match plan.index {
        Some((index, documents)) => {
            let mut c = mine::IndexCorpus::new(index, level, documents, &set.corpus)?;
            let extra = &set.corpus[c.kept()..];
            if !extra.is_empty() {
                say(format!(
                    "{who}encoding {} positives the index lacks",
                    extra.len()
                ));
            }
            enc.blocks(
                extra,
                0..extra.len(),
                e,
                None,
                doc,
                "corpus",
                bars,
                &mut |v| Ok(c.push_extra(v)?),
            )?;
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
    };
    if rest == 0 {
        return Ok(mine::Summary::default());
    }
    let mut queries = Vec::with_capacity(rest);
    let query = enc.prompts.query.as_deref();
    let range = first..plan.queries.end;
    enc.blocks(
        &set.queries,
        range,
        e,
        None,
        query,
        "queries",
        bars,
        &mut |v| {
            queries.push(corpus.prepare(v));
            Ok(())
        },
    )?;
    let mut summary = mine::Summary::default();
    let pb = bars(queries.len(), "mine");
    let n = job.o.num_negatives;
    for (c, chunk) in queries.chunks(job.chunk).enumerate() {
        let start = first + c * job.chunk;
        let mined = mine::mine_queries(
            corpus.as_ref(),
            chunk,
            start,
            &set.positives,
            &job.o,
            job.window,
        );
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

/// Every rank's summary added up (each rank's own under no group).
pub fn gather_summary(g: Option<&nest_dist::Group>, s: mine::Summary) -> Result<mine::Summary> {
    let Some(g) = g else { return Ok(s) };
    let k = s.skipped;
    let v = [
        s.queries as f64,
        s.short as f64,
        s.negatives as f64,
        s.positive_score_sum,
        s.positives as f64,
        s.negative_score_sum,
        k.absolute_margin as f64,
        k.relative_margin as f64,
        k.max_score as f64,
        k.min_score as f64,
    ];
    let mut sum = [0f64; 10];
    for t in g.all_gather(&tch::Tensor::from_slice(&v))? {
        let t: Vec<f64> = Vec::<f64>::try_from(&t)?;
        for (a, b) in sum.iter_mut().zip(t) {
            *a += b;
        }
    }
    let u = |x: f64| x as usize;
    Ok(mine::Summary {
        queries: u(sum[0]),
        short: u(sum[1]),
        negatives: u(sum[2]),
        positive_score_sum: sum[3],
        positives: u(sum[4]),
        negative_score_sum: sum[5],
        skipped: mine::Skipped {
            absolute_margin: u(sum[6]),
            relative_margin: u(sum[7]),
            max_score: u(sum[8]),
            min_score: u(sum[9]),
        },
    })
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
    /// Encodes `texts[range]` (with `prompt`) and hands each vector (`dim` coordinates, unit
    /// norm) to `f`, in order. Texts are encoded in blocks of `chunk` cut from `texts`' start
    /// (a range starting inside a block encodes the whole block and drops the vectors before
    /// it). Under `group`, block `b` is encoded by rank `b % world` and gathered: every rank
    /// hears every vector, in order (every rank must call it with the same arguments).
    #[allow(clippy::too_many_arguments)]
    fn blocks(
        &self,
        texts: &[String],
        range: std::ops::Range<usize>,
        chunk: usize,
        group: Option<&nest_dist::Group>,
        prompt: Option<&str>,
        what: &str,
        bars: Bars<'_>,
        f: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let pb = bars(range.len(), what);
        let (rank, world) = group.map_or((0, 1), |g| (g.rank(), g.world()));
        let (b0, b1) = (range.start / chunk, range.end.div_ceil(chunk));
        let block = |b: usize| b * chunk..((b + 1) * chunk).min(range.end);
        let mut give = |b: usize, flat: &[f32]| -> Result<()> {
            let skip = range.start.saturating_sub(b * chunk);
            for row in flat.chunks_exact(self.dim).skip(skip) {
                f(row)?;
            }
            pb.set_position((block(b).end - range.start) as u64);
            Ok(())
        };
        for round in (b0..b1).step_by(world) {
            let own = round + rank;
            let flat = match own < b1 {
                true => {
                    let base = block(own).start.saturating_sub(range.start);
                    self.encode(&texts[block(own)], prompt, &mut |done| {
                        pb.set_position((base + done) as u64)
                    })?
                }
                false => Vec::new(),
            };
            let Some(g) = group else {
                give(own, &flat)?;
                continue;
            };
            let mut padded = flat;
            padded.resize(chunk * self.dim, 0.0);
            let all = g.all_gather(&tch::Tensor::from_slice(&padded))?;
            for (r, t) in all.iter().enumerate() {
                let b = round + r;
                if b >= b1 {
                    break;
                }
                let v = nest_model::pooling::to_vec_f32(&t.narrow(
                    0,
                    0,
                    (block(b).len() * self.dim) as i64,
                ));
                give(b, &v)?;
            }
        }
        pb.finish_and_clear();
        Ok(())
    }

    /// One encoder call: `texts`' vectors, flat.
    fn encode(
        &self,
        texts: &[String],
        prompt: Option<&str>,
        tick: &mut dyn FnMut(usize),
    ) -> Result<Vec<f32>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let pooled = self
            .model
            .embed_prompted(&refs, &[self.layer], self.opts, prompt, tick)?;
        let e = nest_model::point::finish(&pooled[0], self.dim, None)?;
        Ok(nest_model::pooling::to_vec_f32(&e))
    }
}
