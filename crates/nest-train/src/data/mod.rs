//! Training data: readers for each layout, tokenised once; the epoch plan (seeded shuffle,
//! length-aware batching, no duplicate texts within a batch, a weighted mixture of sources).

use std::collections::HashSet;
use std::path::Path;

use nest_core::data::{read_pairs, read_sentences, read_sts, TsvTable};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::recipe::{DataFormat, DataSource};
use crate::Result;

/// One source, read and tokenised: `texts[i]` holds example `i`'s columns (1 for single, 2 for
/// pairs and scored pairs, 3 for triplets); `ids` the same, tokenised.
#[derive(Debug)]
pub struct Source {
    pub spec: DataSource,
    pub texts: Vec<Vec<String>>,
    pub ids: Vec<Vec<Vec<i64>>>,
    /// Gold scores of scored pairs.
    pub scores: Vec<f64>,
    /// Per column, the prompt's tokens at the start of each text that pooling leaves out (0:
    /// none, or the model pools them: `include_prompt`).
    pub prompt_tokens: Vec<usize>,
}

impl Source {
    pub fn len(&self) -> usize {
        self.texts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
    pub(crate) fn columns(&self) -> usize {
        self.texts.first().map_or(0, Vec::len)
    }
    fn length(&self, i: usize) -> usize {
        self.ids[i].iter().map(Vec::len).max().unwrap_or(0)
    }
}

/// Reads one source in its format (checked layouts; file and line in every error).
pub fn read_source(spec: &DataSource) -> Result<(Vec<Vec<String>>, Vec<f64>)> {
    let p: &Path = &spec.path;
    if let (Some(cmd), false) = (&spec.made_by, p.exists()) {
        let message = format!("not found; this recipe's data is made by `{cmd}`");
        return Err(nest_core::Error::content(p, message).into());
    }
    Ok(match spec.format {
        DataFormat::Scored => {
            let rows = read_sts(p)?;
            (
                rows.iter()
                    .map(|r| vec![r.sentence1.clone(), r.sentence2.clone()])
                    .collect(),
                rows.iter().map(|r| r.score).collect(),
            )
        }
        DataFormat::Triplets => {
            let t = TsvTable::read(p, &["anchor", "positive", "negative"])?;
            (
                t.rows.iter().map(|(_, r)| r[..3].to_vec()).collect(),
                vec![],
            )
        }
        DataFormat::Pairs => {
            let header = std::fs::read_to_string(p).map_err(|e| nest_core::Error::io(p, e))?;
            if header
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("anchor\tpositive"))
            {
                let t = TsvTable::read(p, &["anchor", "positive"])?;
                (
                    t.rows.iter().map(|(_, r)| r[..2].to_vec()).collect(),
                    vec![],
                )
            } else {
                let rows = read_pairs(p)?;
                (
                    rows.iter()
                        .filter(|r| r.label)
                        .map(|r| vec![r.sentence1.clone(), r.sentence2.clone()])
                        .collect(),
                    vec![],
                )
            }
        }
        DataFormat::Single => {
            let is_tsv = p.extension().is_some_and(|e| e == "tsv");
            let texts = if is_tsv {
                let t = TsvTable::read(p, &["text"])?;
                t.rows.into_iter().map(|(_, r)| r[0].clone()).collect()
            } else {
                read_sentences(p)?
                    .into_iter()
                    .filter(|s| !s.trim().is_empty())
                    .collect::<Vec<_>>()
            };
            (texts.into_iter().map(|s| vec![s]).collect(), vec![])
        }
    })
}

/// Token ids of each text (the model's tokenizer).
pub type Tokenize<'a> = &'a dyn Fn(&[&str]) -> Result<Vec<Vec<i64>>>;

/// Reads and tokenises every source.
pub fn load_sources(
    specs: &[DataSource],
    tokenize: Tokenize,
    include_prompt: bool,
) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (texts, scores) = read_source(spec)?;
        if texts.is_empty() {
            return Err(nest_core::Error::content(
                &spec.path,
                "no usable training examples (e.g. no positive pairs)",
            )
            .into());
        }
        let columns = texts[0].len();
        let prompts = column_prompts(spec, columns)
            .map_err(|m| nest_core::Error::value(format!("data[{i}].prompts"), m))?;
        let prompted: Vec<String> = texts
            .iter()
            .flat_map(|row| row.iter().zip(&prompts).map(|(t, p)| format!("{p}{t}")))
            .collect();
        let flat: Vec<&str> = prompted.iter().map(String::as_str).collect();
        let mut ids_flat = tokenize(&flat)?.into_iter();
        let ids = texts
            .iter()
            .map(|row| {
                row.iter()
                    .map(|_| ids_flat.next().unwrap_or_default())
                    .collect()
            })
            .collect();
        // the prompt's own tokens less its final special token (sentence-transformers'
        // `prompt_length`), left out of the pooling unless the model pools them
        let prompt_tokens = prompts
            .iter()
            .map(|p| match p.is_empty() || include_prompt {
                true => Ok(0),
                false => Ok(tokenize(&[p.as_str()])?[0].len().saturating_sub(1)),
            })
            .collect::<Result<Vec<usize>>>()?;
        out.push(Source {
            spec: spec.clone(),
            texts,
            ids,
            scores,
            prompt_tokens,
        });
    }
    Ok(out)
}

/// The prompt of each of a source's `columns` (empty strings: none): its `prompts` key holds
/// none, one for every column, or one per column.
fn column_prompts(spec: &DataSource, columns: usize) -> std::result::Result<Vec<String>, String> {
    match spec.prompts.as_slice() {
        [] => Ok(vec![String::new(); columns]),
        [one] => Ok(vec![one.clone(); columns]),
        many if many.len() == columns => Ok(many.to_vec()),
        many => Err(format!(
            "{} prompts for the {columns} column(s) of a {:?} file: give one for every column \
             or one per column",
            many.len(),
            spec.format
        )),
    }
}

/// One batch: examples of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub source: usize,
    pub examples: Vec<usize>,
}

fn rng(seed: u64, epoch: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(stream);
    r
}

/// Batches of one source for one epoch.
fn source_batches(
    src: &Source,
    si: usize,
    bs: usize,
    seed: u64,
    epoch: u64,
    length_batching: bool,
    no_dup: bool,
) -> Vec<Batch> {
    let mut r = rng(seed, epoch, si as u64 + 1);
    let mut idx: Vec<usize> = (0..src.len()).collect();
    idx.shuffle(&mut r);
    if length_batching {
        // sort within mega-batches of 50 batches: similar lengths share a batch, order stays random
        for chunk in idx.chunks_mut(50 * bs) {
            chunk.sort_by_key(|&i| std::cmp::Reverse(src.length(i)));
        }
    }
    let mut batches = Vec::new();
    let mut pending: std::collections::VecDeque<usize> = idx.into_iter().collect();
    let mut deferred: Vec<usize> = Vec::new();
    while !pending.is_empty() || !deferred.is_empty() {
        let mut batch = Vec::with_capacity(bs);
        let mut seen: HashSet<&str> = HashSet::new();
        let mut retry: Vec<usize> = std::mem::take(&mut deferred);
        retry.extend(pending.drain(..pending.len().min(bs)));
        let mut queue: std::collections::VecDeque<usize> = retry.into();
        while let Some(i) = queue.pop_front() {
            if batch.len() == bs {
                deferred.push(i);
                continue;
            }
            let texts = &src.texts[i];
            if no_dup && texts.iter().any(|t| seen.contains(t.as_str())) {
                deferred.push(i);
                continue;
            }
            seen.extend(texts.iter().map(String::as_str));
            batch.push(i);
            if queue.is_empty() && batch.len() < bs {
                if let Some(next) = pending.pop_front() {
                    queue.push_back(next);
                }
            }
        }
        if batch.len() < 2 {
            break; // a lone example (or only duplicates left) cannot form in-batch negatives
        }
        batches.push(Batch {
            source: si,
            examples: batch,
        });
    }
    batches.shuffle(&mut r);
    batches
}

/// The batches of epoch `epoch` over all sources, in training order. Deterministic in
/// `(seed, epoch)`, so a resumed run rebuilds the same plan and skips to its position.
///
/// Mixture: each source gets a share of the epoch's batches proportional to its weight (its own
/// batches cycled if it needs more than it has), and the shares are shuffled together.
pub(crate) fn epoch_plan(
    sources: &[Source],
    bs: usize,
    seed: u64,
    epoch: u64,
    length_batching: bool,
    no_dup: bool,
) -> Vec<Batch> {
    let per: Vec<Vec<Batch>> = sources
        .iter()
        .enumerate()
        .map(|(si, s)| source_batches(s, si, bs, seed, epoch, length_batching, no_dup))
        .collect();
    if per.len() == 1 {
        return per.into_iter().next().unwrap_or_default();
    }
    let total: usize = per.iter().map(Vec::len).sum();
    let wsum: f64 = sources.iter().map(|s| s.spec.weight).sum();
    let mut plan = Vec::with_capacity(total);
    for (s, batches) in sources.iter().zip(&per) {
        let share = ((s.spec.weight / wsum) * total as f64).round() as usize;
        if batches.is_empty() {
            continue;
        }
        plan.extend((0..share).map(|k| batches[k % batches.len()].clone()));
    }
    plan.shuffle(&mut rng(seed, epoch, 0));
    plan
}

/// Padding of a plan, every column padded to its batch's longest.
pub(crate) fn padding(sources: &[Source], plan: &[Batch]) -> Padding {
    let mut p = Padding::default();
    for b in plan {
        let s = &sources[b.source];
        for c in 0..s.columns() {
            let lens: Vec<usize> = b.examples.iter().map(|&i| s.ids[i][c].len()).collect();
            p.real_tokens += lens.iter().sum::<usize>();
            p.padded_tokens += lens.iter().max().unwrap_or(&0) * lens.len();
        }
    }
    p
}

/// Tokens of a batch plan: those of the texts and those the padded batches hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Padding {
    real_tokens: usize,
    pub padded_tokens: usize,
}

impl Padding {
    /// The share of the padded tokens that are padding, in percent.
    pub(crate) fn percent(&self) -> f64 {
        100.0 * (1.0 - self.real_tokens as f64 / self.padded_tokens.max(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::DataFormat;

    fn source(texts: Vec<Vec<&str>>, weight: f64) -> Source {
        let ids = texts
            .iter()
            .map(|r| r.iter().map(|t| vec![0i64; t.len()]).collect())
            .collect();
        Source {
            spec: DataSource {
                path: "x".into(),
                format: DataFormat::Pairs,
                made_by: None,
                prompts: vec![],
                weight,
            },
            texts: texts
                .iter()
                .map(|r| r.iter().map(|t| t.to_string()).collect())
                .collect(),
            ids,
            scores: vec![],
            prompt_tokens: vec![],
        }
    }

    #[test]
    fn plans_are_seeded_complete_and_duplicate_free() {
        let rows: Vec<Vec<String>> = (0..100)
            .map(|i| vec![format!("a{}", i % 40), format!("b{i}")])
            .collect();
        let s = source(
            rows.iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            1.0,
        );
        let p1 = epoch_plan(std::slice::from_ref(&s), 8, 1, 0, true, true);
        assert_eq!(
            p1,
            epoch_plan(std::slice::from_ref(&s), 8, 1, 0, true, true)
        );
        assert_ne!(
            p1,
            epoch_plan(std::slice::from_ref(&s), 8, 1, 1, true, true)
        );
        let mut all: Vec<usize> = p1.iter().flat_map(|b| b.examples.clone()).collect();
        all.sort_unstable();
        all.dedup();
        assert!(
            all.len() >= 96,
            "almost every example is used: {}",
            all.len()
        );
        for b in &p1 {
            let mut t: Vec<&str> = b
                .examples
                .iter()
                .flat_map(|&i| s.texts[i].iter().map(String::as_str))
                .collect();
            let n = t.len();
            t.sort_unstable();
            t.dedup();
            assert_eq!(t.len(), n, "duplicate text in a batch");
        }
    }

    #[test]
    fn length_batching_cuts_padding_and_mixture_follows_weights() {
        let texts: Vec<Vec<String>> = (0..400)
            .map(|i| vec!["x".repeat(1 + (i * 37) % 60), format!("y{i}")])
            .collect();
        let s = source(
            texts
                .iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            3.0,
        );
        let sorted = epoch_plan(std::slice::from_ref(&s), 16, 7, 0, true, false);
        let random = epoch_plan(std::slice::from_ref(&s), 16, 7, 0, false, false);
        let (a, b) = (
            padding(std::slice::from_ref(&s), &sorted),
            padding(std::slice::from_ref(&s), &random),
        );
        let (p1, p2) = (a.padded_tokens, b.padded_tokens);
        assert_eq!(a.real_tokens, b.real_tokens);
        assert!(p1 < p2, "length batching pads less: {p1} vs {p2}");
        let t: Vec<Vec<String>> = (0..400)
            .map(|i| vec![format!("t{i}"), format!("u{i}")])
            .collect();
        let s2 = source(
            t.iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            1.0,
        );
        let mix = epoch_plan(&[s, s2], 16, 7, 0, true, true);
        let from0 = mix.iter().filter(|b| b.source == 0).count() as f64 / mix.len() as f64;
        assert!((from0 - 0.75).abs() < 0.03, "weights 3:1 give {from0}");
    }
}
