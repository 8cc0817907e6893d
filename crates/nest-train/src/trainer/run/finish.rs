//! What a [`Run`] writes: the recipe's periodic evaluation and checkpoints, the checkpoint a
//! requested stop leaves, and at the end the final checkpoint, evaluation and exported model.

use std::path::PathBuf;

use nest_dist::Group;
use nest_model::graph::peak_memory;
use nest_model::{ElasticEncoder, NestMeta};

use super::Run;
use crate::checkpoint::{self, State};
use crate::trainer::plan::Progress;
use crate::trainer::run_log::RunLog;
use crate::trainer::types::{Event, Summary};
use crate::Result;

impl Run<'_> {
    /// The recipe's periodic evaluation and checkpoint after a step before the last; `after`
    /// is the (epoch, micro-batch) the checkpoint resumes from.
    pub(super) fn periodic(
        &mut self,
        at: &Progress,
        after: (u64, usize),
        log: &mut RunLog,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let (r, step) = (self.r, at.step);
        if r.eval_every > 0 && step % r.eval_every == 0 {
            self.evaluate(step, log, events)?;
        }
        if self.main && r.save_every > 0 && step % r.save_every == 0 {
            self.checkpoint(at, after, events)?;
        }
        Ok(())
    }

    fn evaluate(&self, step: u64, log: &mut RunLog, events: &mut dyn FnMut(Event)) -> Result<()> {
        if let Some(grid) = &self.eval {
            let (cells, summary) = grid.run(&self.enc)?;
            log.eval(step, &cells)?;
            events(Event::Eval { step, summary });
        }
        Ok(())
    }

    /// A checkpoint of the step just done (resuming at `after`), unless the periodic one wrote
    /// it already; what a requested stop leaves ([`crate::trainer::stop`]).
    pub(super) fn checkpoint_now(
        &mut self,
        at: &Progress,
        after: (u64, usize),
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let r = self.r;
        if !self.main || (r.save_every > 0 && at.step.is_multiple_of(r.save_every)) {
            return Ok(());
        }
        self.checkpoint(at, after, events)
    }

    /// Writes the checkpoint of the step at `at`, which resumes at `after` (epoch, next batch),
    /// and says so.
    fn checkpoint(
        &mut self,
        at: &Progress,
        (epoch, next_batch): (u64, usize),
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let p = self.save(&Progress {
            epoch,
            next_batch,
            ..*at
        })?;
        self.last_ck = p.display().to_string();
        events(Event::Checkpoint {
            step: at.step,
            path: p,
        });
        Ok(())
    }

    /// Writes a checkpoint of the run at `at` (keeping the recipe's `keep_last`).
    fn save(&self, at: &Progress) -> Result<PathBuf> {
        let state = State {
            step: at.step,
            epoch: at.epoch,
            next_batch: at.next_batch,
            recipe_sha256: self.recipe_sha.clone(),
            model: self.r.model.clone(),
            last_loss: at.last_loss,
            world_size: self.group.map_or(1, Group::world),
            threads: Some(tch::get_num_threads().max(1) as usize),
            data_sha256: Some(self.data_sha.clone()),
        };
        checkpoint::save(
            &self.o.run_dir,
            &self.enc.vs,
            &self.obj_vs,
            &self.opt,
            &state,
            self.r.keep_last,
        )
    }

    /// The end of a run that trained to its last step: the final checkpoint, the final
    /// evaluation and the exported model (rank 0); the other ranks evaluate too and wait.
    pub(crate) fn finish(
        self,
        at: &Progress,
        log: &mut RunLog,
        resumed_from: Option<u64>,
        events: &mut dyn FnMut(Event),
    ) -> Result<Summary> {
        let train_seconds = self.train_start.elapsed().as_secs_f64();
        let final_dir = self.o.run_dir.join("final");
        if let (true, Some(line)) = (self.main, self.graphed.report()) {
            events(Event::Message(line));
        }
        // what a GPU run held at most, to size the next run's batch against the card
        if let (true, Some((held, reserved))) = (self.main, peak_memory(self.enc.device())) {
            events(Event::Message(format!(
                "peak GPU memory: {} MiB allocated, {} MiB reserved (libtorch's caching allocator)",
                held >> 20,
                reserved >> 20
            )));
        }
        if let (false, Some(g)) = (self.main, self.group) {
            // rank 0 writes the final checkpoint and the model; wait until they are on disk
            // (what comes next, e.g. `nest distill`'s second stage, reads them). The final
            // evaluation runs here too, so that this rank's wait is the save's, not the
            // evaluation's.
            if let Some(grid) = &self.eval {
                grid.run(&self.enc)?;
            }
            g.barrier()?;
            return Ok(self.summary(at, final_dir, train_seconds, resumed_from));
        }
        let p = self.save(at)?;
        events(Event::Checkpoint {
            step: at.step,
            path: p,
        });
        self.evaluate(at.step, log, events)?;
        let meta = final_meta(self.objective.as_ref(), &self.enc, self.r.seed);
        nest_model::export::save(&self.enc, &final_dir, &meta)?;
        if self.r.max_length > 0 {
            // the model keeps the truncation it was trained with, as sentence-transformers'
            // max_seq_length does: said, since every later encode, eval and index takes it
            events(Event::Message(format!(
                "{} truncates texts at {} tokens, the max_length it was trained with \
                 (sentence_bert_config.json's max_seq_length; --max-length at inference takes \
                 another, up to the position table's)",
                final_dir.display(),
                self.r.max_length
            )));
        }
        if let Some(g) = self.group {
            g.barrier()?;
        }
        Ok(self.summary(at, final_dir, train_seconds, resumed_from))
    }
}

/// What a model trained with `objective` records in its `nest.json`: the dims and layers it
/// was trained at, the objective and the training dtype.
pub(crate) fn final_meta(
    objective: &dyn crate::objective::Objective,
    enc: &ElasticEncoder,
    seed: u64,
) -> NestMeta {
    NestMeta {
        matryoshka_dims: objective.trained_dims(),
        trained_layers: objective.trained_layers(enc.num_layers()),
        objective: Some(objective.describe()),
        default_dim: None,
        training_dtype: Some(enc.dtype().name().into()),
        seed: Some(seed),
    }
}
