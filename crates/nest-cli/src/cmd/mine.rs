//! `nest mine`: hard negatives for (query, positive) pairs at any (layer, dim, precision) point,
//! as sentence-transformers' `mine_hard_negatives` mines them (docs/MINING.md). Inputs are read
//! and the options checked before the model loads; the texts are encoded at the point
//! (nest-model), stored and scored as the index does (`nest_index::MemoryLevel`), and the
//! negatives chosen and written by `nest_index::mine`, a chunk of queries at a time, resumable.
//! The pipeline is the library's (`nest_train::mine`, which the trainer's `[mine]` runs too);
//! this file reads the flags and prints.

use std::path::Path;

use anyhow::Result;
use nest_index::mine::{self, MineOptions, OutputFormat, Sampling};
use nest_index::{Level, Precision};
use nest_model::{Keys, Policy};
use nest_train::mine::{Encoding, Job, PairSource};

use crate::args_mine::MineArgs;
use crate::progress;

pub fn run(a: MineArgs) -> Result<()> {
    anyhow::ensure!(a.chunk_queries >= 1, "--chunk-queries must be at least 1");
    let o = options(&a)?;
    let format = output_format(&a)?;
    let precision =
        Precision::parse(&a.precision).map_err(|e| anyhow::anyhow!("--precision: {e}"))?;
    let set = read_set(&a)?;
    let window = nest_train::mine::window(&o, &set, "--range-min")?;
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
        let say = &mut |m: String| eprintln!("{m}");
        let bars = &|n: usize, what: &str| progress::bar(n, what);
        Some(nest_train::mine::mine_rest(
            &job, &enc, &set, &mut out, bars, say,
        )?)
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
fn read_set(a: &MineArgs) -> Result<mine::MineSet> {
    let pairs = match (&a.queries, &a.beir) {
        (Some(q), _) => PairSource::Queries(q),
        (None, Some(dir)) => PairSource::Beir {
            dir,
            split: &a.split,
        },
        (None, None) => anyhow::bail!("give --queries FILE or --beir DIR"),
    };
    let say = &mut |m: String| eprintln!("{m}");
    Ok(nest_train::mine::read_set(pairs, a.corpus.as_deref(), say)?)
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
