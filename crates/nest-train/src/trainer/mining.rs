//! A recipe's `[mine]` rounds (docs/MINING.md, "Mine and train in one recipe"): round `k`
//! mines hard negatives with the model being trained as it is before epoch `k x every_epochs`
//! (inference: no dropout, no gradients; at the table's point) into
//! `RUN/mined/round-<k>.jsonl`, and the round's epochs train on those triplets as one more
//! data source.
//!
//! Exact resume: a round's file is written through `nest_index::mine::ResumableOutput` (chunks
//! appended and synced, `OUT` renamed into place only complete), keyed by the recipe's identity
//! and the round. A resumed run reads every round it has trained on from disk (their plans give
//! the later epochs' micro-batch offsets); the round that starts exactly at the resumed
//! position may be mined then, since the checkpoint's weights are that round's model (a cut
//! round goes on from its state file). The schedule's length is fixed by round 0's data (the
//! learning rate must not change under a running schedule): a later round with fewer batches
//! per epoch ends the run early, one with more stops at the planned step count.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use nest_index::mine::{MineSet, OutputFormat};
use nest_index::Level;
use nest_model::prompt::{TaskPromptChoice, TaskPrompts};
use nest_model::{ElasticEncoder, EncodeOptions, Keys, Offer, Policy};

use super::plan::{Plan, Progress};
use super::run::Run;
use super::types::Event;
use crate::data::load_sources;
use crate::mine::{self, Encoding, Job, PairSource};
use crate::recipe::{DataFormat, DataSource, MineSpec, Recipe};
use crate::{Error, Result};

/// Queries per appended chunk of a round's file (what a cut round loses at most).
const CHUNK: usize = 1024;

/// The mining of a run: the pairs and corpus read once, the point, and the loaded round.
pub(crate) struct Mining {
    spec: MineSpec,
    set: MineSet,
    job: Job,
    layer: usize,
    prompts: TaskPrompts,
    /// The round whose triplets the last source holds.
    round: Option<usize>,
}

/// `RUN/mined/round-<k>.jsonl`.
pub fn round_file(run_dir: &Path, round: usize) -> PathBuf {
    run_dir.join("mined").join(format!("round-{round}.jsonl"))
}

fn recipe_err(message: String) -> Error {
    Error::Recipe {
        source_name: "mine".into(),
        message,
    }
}

impl Mining {
    /// The recipe's `[mine]` (none without one): its pairs and corpus read and grouped, its
    /// window and point checked against them and the model, errors naming the key.
    pub(super) fn prepare(
        r: &Recipe,
        enc: &ElasticEncoder,
        events: &mut dyn FnMut(Event),
    ) -> Result<Option<Mining>> {
        let Some(spec) = r.mine.clone() else {
            return Ok(None);
        };
        let say = &mut |m: String| events(Event::Message(format!("mine: {m}")));
        let set = mine::read_set(
            PairSource::Queries(&spec.queries),
            spec.corpus.as_deref(),
            say,
        )?;
        let o = spec.options();
        let window = mine::window(&o, &set, "mine.range_min")?;
        let keys = Keys {
            layer: "mine.layer",
            dim: "mine.dim",
        };
        let point = Offer::new(enc, None)?
            .resolve(spec.layer, spec.dim, keys, Policy::AnyInRange)
            .map_err(nest_model::Error::from)?;
        let choice = TaskPromptChoice {
            keys: ["mine", "mine", "mine"],
            ..Default::default()
        };
        let prompts = enc.prompts.for_tasks(choice)?;
        let job = Job {
            o,
            window,
            format: spec.format().unwrap_or(OutputFormat::Triplet),
            level: Level {
                precision: spec.precision(),
                dim: point.dim,
            },
            scores: false,
            chunk: CHUNK,
        };
        Ok(Some(Mining {
            spec,
            set,
            job,
            layer: point.layer,
            prompts,
            round: None,
        }))
    }
}

impl Run<'_> {
    /// With `[mine]`, after a resume (or at the start): every round up to `at`'s loaded or
    /// mined, and the plan built (round 0 fixes the schedule's length).
    pub(super) fn plan_mined(
        &mut self,
        at: &Progress,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let Some(m) = &self.mining else {
            return Ok(());
        };
        let last_epoch = (at.epoch as usize).min(self.r.epochs - 1);
        let now = m.spec.round_of(last_epoch);
        self.load_round(0, at, events)?;
        self.plan = Plan::new(self.r, &self.sources)?;
        self.plan_message(events);
        for k in 1..=now {
            self.load_round(k, at, events)?;
            self.replan(k, events);
        }
        Ok(())
    }

    /// Before the epoch at `at` (its first micro-batch): the next round's triplets when the
    /// epoch starts one.
    pub(super) fn round_before(
        &mut self,
        at: &Progress,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let Some(m) = &self.mining else {
            return Ok(());
        };
        let k = m.spec.round_of(at.epoch as usize);
        if m.round == Some(k) || at.next_batch > 0 {
            return Ok(());
        }
        self.load_round(k, at, events)?;
        self.replan(k, events);
        Ok(())
    }

    /// Re-plans round `k`'s epochs on its triplets (the offsets of the epochs after them
    /// follow); says so when the run now ends before its schedule's last step.
    fn replan(&mut self, k: usize, events: &mut dyn FnMut(Event)) {
        let Some(m) = &self.mining else {
            return;
        };
        let first = m.spec.first_epoch(k);
        let end = m.spec.first_epoch(k + 1).min(self.r.epochs);
        let before = self.plan.steps_held(self.r.grad_accum);
        self.plan.replan(self.r, &self.sources, first..end);
        let held = self.plan.steps_held(self.r.grad_accum);
        if held < before {
            events(Event::Message(format!(
                "mine: round {k}'s triplets make fewer batches an epoch than round 0's (queries \
                 without a negative past the filters are left out): the run ends at step \
                 {held} of the {} its learning-rate schedule was planned for (round 0's data \
                 fixes it), the rate not decayed to its end",
                self.plan.total
            )));
        }
    }

    /// Round `k`'s triplets as the last source: read from the run folder, or mined now when
    /// the weights are the round's (at its first epoch's start).
    fn load_round(&mut self, k: usize, at: &Progress, events: &mut dyn FnMut(Event)) -> Result<()> {
        let Some(m) = &self.mining else {
            return Ok(());
        };
        let path = round_file(&self.o.run_dir, k);
        if !path.is_file() {
            let here = at.epoch as usize == m.spec.first_epoch(k) && at.next_batch == 0;
            if !here {
                return Err(Error::Run {
                    path,
                    message: format!(
                        "missing: the run trained on round {k}'s mined triplets, and only \
                         that file replays it (the weights that mined it are gone)"
                    ),
                });
            }
            self.mine_round(k, &path, events)?;
        }
        let spec = DataSource {
            path: path.clone(),
            format: DataFormat::Triplets,
            weight: m.spec.weight,
            made_by: None,
            prompts: vec![],
        };
        let enc = &self.enc;
        let tokenize = |t: &[&str]| Ok(enc.tokenizer.encode(t)?);
        let mut loaded = load_sources(&[spec], &tokenize, enc.include_prompt)?;
        self.sources.truncate(self.r.data.len());
        let rows = loaded.first().map_or(0, |s| s.len());
        self.sources.append(&mut loaded);
        events(Event::Message(format!(
            "mine: round {k}: {rows} triplets ({})",
            path.display()
        )));
        if let Some(m) = &mut self.mining {
            m.round = Some(k);
        }
        Ok(())
    }

    /// Mines round `k` with the model as it is into `path` (resuming a cut round). Under data
    /// parallelism the round is split by rank as `nest mine` splits it (the corpus encoded in
    /// blocks round-robin and gathered, each rank's queries into its own resumable part, rank 0
    /// merging them into `path`: the one-process file byte for byte), and every rank waits for
    /// the merged file before it reads it.
    fn mine_round(&self, k: usize, path: &Path, events: &mut dyn FnMut(Event)) -> Result<()> {
        let Some(m) = &self.mining else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
        // the model of round k is a function of the recipe (exact resume): so is the file
        let key = format!("{}:round-{k}", self.recipe_sha);
        let dest = mine::Destination {
            path,
            key: &key,
            overwrite: false,
            encode_chunk: mine::DEFAULT_ENCODE_CHUNK,
            group: self.group,
            queries: m.set.queries.len(),
        };
        let (queries, mut out) = dest.open()?;
        if out.queries_done() > 0 {
            events(Event::Message(format!(
                "mine: resuming round {k}: {} of {} queries done",
                out.queries_done(),
                queries.len()
            )));
        }
        let enc = Encoding {
            model: &self.enc,
            layer: m.layer,
            dim: m.job.level.dim,
            opts: EncodeOptions::batch(m.spec.batch_size),
            prompts: m.prompts.clone(),
        };
        let plan = mine::Plan {
            encode_chunk: mine::DEFAULT_ENCODE_CHUNK,
            group: self.group,
            queries: queries.clone(),
            index: None,
        };
        let say = &mut |s: String| events(Event::Message(format!("mine: {s}")));
        let hidden = &|_: usize, _: &str| ProgressBar::hidden();
        let s = match self.group.is_some() || out.queries_done() < queries.len() {
            true => {
                let mined = mine::mine_with(&m.job, &enc, &m.set, &plan, &mut out, hidden, say);
                Some(mine::gather_summary(
                    self.group,
                    together(self.group, mined)?,
                )?)
            }
            false => None,
        };
        let closed = dest.close(out);
        // rank 0's merge is on disk before any rank reads the file
        together(self.group, closed)?;
        if let Some(s) = s.filter(|s| s.short > 0) {
            say(format!(
                "round {k}: {} of {} queries had fewer than {} negatives",
                s.short, s.queries, m.job.o.num_negatives
            ));
        }
        Ok(())
    }
}

/// `mine` on this rank, or an error when any rank's failed (every rank stops together; the
/// failed one says why); `mine` itself without a group.
fn together<T>(g: Option<&nest_dist::Group>, mine: Result<T>) -> Result<T> {
    let Some(g) = g else { return mine };
    let failed = g.failed_ranks(mine.is_ok());
    let mine = mine?;
    let failed = failed?;
    if !failed.is_empty() {
        return Err(recipe_err(format!(
            "rank {}: mining stopped: rank(s) {failed:?} failed (their messages say why)",
            g.rank()
        )));
    }
    Ok(mine)
}
