//! A training run's phases: prepare, resume, steps, finish (called in that order by
//! [`super::train_with`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use nest_dist::Group;
use nest_model::{ElasticEncoder, NestMeta};
use serde_json::json;
use tch::nn::VarStore;

use super::eval::EvalGrid;
use super::graphed::{GraphedStep, StepSpec};
use super::mining::Mining;
use super::model::load_model;
use super::plan::{Accum, Plan, Progress};
use super::run_dir::{self, identity_hash, run_err};
use super::run_log::RunLog;
use super::spread::{spread_micro_step, Spread};
use super::step::{apply_update, MicroResult};
use super::sync;
use super::types::{Event, ObjectiveBuilder, Summary, TrainOptions};
use crate::checkpoint::{self, State};
use crate::data::{load_sources, Source};
use crate::objective::{Objective, StepContext};
use crate::optim::AdamW;
use crate::recipe::Recipe;
use crate::schedule::group_lrs;
use crate::{Error, Result};

/// A run from setup to the end.
pub(crate) struct Run<'a> {
    pub(super) r: &'a Recipe,
    pub(super) o: &'a TrainOptions,
    group: Option<&'a Group>,
    main: bool,
    pub(super) enc: ElasticEncoder,
    obj_vs: VarStore,
    objective: Box<dyn Objective>,
    spread: Spread<'a>,
    /// The recipe's `[[data]]`, then (with `[mine]`) the loaded round's triplets.
    pub(super) sources: Vec<Source>,
    pub(super) plan: Plan,
    /// The recipe's `[mine]` rounds; the plan waits for round 0 ([`Run::plan_mined`]).
    pub(super) mining: Option<Mining>,
    eval: Option<EvalGrid>,
    opt: AdamW,
    pub(super) recipe_sha: String,
    /// The newest checkpoint, for the error when a loss or gradient turns non-finite.
    last_ck: String,
    start: Instant,
    pub(super) train_start: Instant,
    traffic_start: nest_dist::Traffic,
    /// Steps recorded as CUDA graphs (the recipe's `cuda_graph`).
    graphed: GraphedStep,
}

impl<'a> Run<'a> {
    /// Loads the model and builds the objective, reads and plans the data, checks the
    /// evaluation grid and creates the optimizer.
    pub(crate) fn prepare(
        r: &'a Recipe,
        o: &'a TrainOptions,
        build: &ObjectiveBuilder,
        group: Option<&'a Group>,
        start: Instant,
        events: &mut dyn FnMut(Event),
    ) -> Result<Run<'a>> {
        let (enc, obj_vs, objective) = load_model(r, o, build, events)?;
        let spread = Spread {
            group,
            chunk: (r.mini_batch_size > 0).then_some(r.mini_batch_size),
        };
        spread.check(r.batch_size, objective.as_ref())?;
        if let Some(g) = group {
            events(Event::Message(format!(
                "data parallel: {} processes (c10d Gloo), global batch {}, {} per process",
                g.world(),
                r.batch_size,
                r.batch_size / g.world()
            )));
        }
        for c in r.cautions() {
            events(Event::Message(c));
        }
        let train_start = Instant::now();
        events(Event::Message(format!(
            "objective {}",
            objective.describe()
        )));
        let tokenize = |t: &[&str]| Ok(enc.tokenizer.encode(t)?);
        let sources = load_sources(&r.data, &tokenize, enc.include_prompt)?;
        let mining = Mining::prepare(r, &enc, group.is_some(), events)?;
        let plan = match mining {
            None => Plan::new(r, &sources)?,
            Some(_) => Plan::default(),
        };
        let eval = EvalGrid::load(r, &enc, objective.trained_dims())?;
        // the encoder's weights and the objective's own parameters, optimised together
        let mut named: Vec<(String, tch::Tensor)> = enc.vs.variables().into_iter().collect();
        let heads: std::collections::HashSet<String> = obj_vs.variables().into_keys().collect();
        named.extend(obj_vs.variables());
        let mut opt = AdamW::new(named, r.weight_decay);
        // two parameter groups: the encoder (0) and the objective's own heads (1)
        opt.set_groups(|n| usize::from(heads.contains(n)));
        Ok(Run {
            opt,
            recipe_sha: identity_hash(r),
            main: group.is_none_or(|g| g.rank() == 0),
            last_ck: "(none yet)".into(),
            r,
            o,
            group,
            enc,
            obj_vs,
            objective,
            spread,
            sources,
            plan,
            mining,
            eval,
            start,
            train_start,
            traffic_start: group.map(Group::traffic).unwrap_or_default(),
            graphed: GraphedStep::new(r.cuda_graph),
        })
    }

    /// Says how much data and how many steps the plan holds.
    pub(super) fn plan_message(&self, events: &mut dyn FnMut(Event)) {
        let (sources, plan) = (&self.sources, &self.plan);
        events(Event::Message(format!(
            "{} examples in {} source(s); {} optimizer steps; padding {:.1}% of tokens ({:.1}% without length batching)",
            sources.iter().map(Source::len).sum::<usize>(),
            sources.len(),
            plan.total,
            plan.padding.percent(),
            plan.padding_unbatched.percent(),
        )));
    }

    /// Restores the weights, the objective's parameters, the optimizer and the data position
    /// of checkpoint `ck`, after checking that this run may resume it.
    pub(crate) fn resume(&mut self, ck: &Path, events: &mut dyn FnMut(Event)) -> Result<Progress> {
        let (state, opt_state) = checkpoint::load(ck)?;
        let world = self.group.map_or(1, Group::world);
        run_dir::check_checkpoint(
            ck,
            &state,
            &self.recipe_sha,
            &self.r.model,
            world,
            self.o,
            events,
        )?;
        self.enc.load_weights(&ck.join("model.safetensors"))?;
        checkpoint::load_objective(ck, &mut self.obj_vs)?;
        self.opt
            .load_state(&opt_state, state.step as i64)
            .map_err(|m| run_err(ck, m))?;
        self.last_ck = ck.display().to_string();
        events(Event::Message(format!(
            "resumed from {} (step {})",
            ck.display(),
            state.step
        )));
        Ok(Progress {
            step: state.step,
            epoch: state.epoch,
            next_batch: state.next_batch,
            last_loss: state.last_loss,
        })
    }

    /// Trains from `at` to the end of the plan; `false` when `stop_after_steps` ended it first.
    pub(crate) fn steps(
        &mut self,
        at: &mut Progress,
        log: &mut RunLog,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let first_step = at.step;
        let mut acc = Accum::default();
        while (at.epoch as usize) < self.plan.epochs.len() && at.step < self.plan.total {
            self.round_before(at, events)?;
            let n = self.plan.epochs[at.epoch as usize].len();
            while at.next_batch < n {
                let applied = self.graphed_step(at)?;
                let res = match &applied {
                    Some((res, _)) => res.clone(),
                    None => self.micro_step(at)?,
                };
                acc.add(res, self.r.grad_accum);
                at.next_batch += 1;
                if acc.n < self.r.grad_accum && at.next_batch < n {
                    continue;
                }
                self.update(at, &mut acc, applied.map(|a| a.1), log, events)?;
                // the position a checkpoint of this step resumes from
                let after = match at.next_batch >= n {
                    true => (at.epoch + 1, 0),
                    false => (at.epoch, at.next_batch),
                };
                if at.step < self.plan.total {
                    self.periodic(at, after, log, events)?;
                }
                let stop = self.o.stop_after_steps;
                if stop.is_some_and(|s| at.step - first_step >= s) && at.step < self.plan.total {
                    return Ok(false);
                }
                if super::stop::requested() && at.step < self.plan.total {
                    // an interrupt (Python's Ctrl-C): this step's checkpoint, then stop
                    self.checkpoint_now(at, after, events)?;
                    return Ok(false);
                }
                if at.step >= self.plan.total {
                    (at.epoch, at.next_batch) = after;
                    return Ok(true);
                }
            }
            at.epoch += 1;
            at.next_batch = 0;
        }
        Ok(true)
    }

    /// The whole step at `at` through a recorded CUDA graph when one applies (the recipe's
    /// `cuda_graph`, no accumulation, GradCache or data parallelism): its loss and terms, and
    /// the gradient norm of the update it applied; `None` for the eager path. A non-finite loss
    /// or norm stops the run with the weights untouched.
    fn graphed_step(&mut self, at: &Progress) -> Result<Option<(MicroResult, f64)>> {
        let r = self.r;
        if r.grad_accum != 1 || self.group.is_some() || self.spread.chunk.is_some() {
            return Ok(None);
        }
        let e = at.epoch as usize;
        let b = &self.plan.epochs[e][at.next_batch];
        let lrs = group_lrs(r, at.step, self.plan.total);
        let spec = StepSpec {
            objective: self.objective.as_ref(),
            loss: r.loss,
            ctx: StepContext {
                step: at.step,
                micro_batch: self.plan.offsets[e] + at.next_batch as u64,
                seed: r.seed,
            },
            max_grad_norm: r.max_grad_norm,
            lrs: &lrs,
            train: r.dropout != Some(0.0),
        };
        let src = &self.sources[b.source];
        let Some((res, norm)) = self.graphed.step(&self.enc, &mut self.opt, src, b, &spec)? else {
            return Ok(None);
        };
        for (what, value) in [("loss", res.loss), ("gradient norm", norm)] {
            if !value.is_finite() {
                return Err(Error::NonFinite {
                    what,
                    step: at.step + 1,
                    value,
                    last_checkpoint: self.last_ck.clone(),
                });
            }
        }
        Ok(Some((res, norm)))
    }

    /// The micro-batch at `at`, forward and backward; a non-finite loss stops the run.
    fn micro_step(&self, at: &Progress) -> Result<MicroResult> {
        let e = at.epoch as usize;
        let b = &self.plan.epochs[e][at.next_batch];
        let ctx = StepContext {
            step: at.step,
            micro_batch: self.plan.offsets[e] + at.next_batch as u64,
            seed: self.r.seed,
        };
        let res = spread_micro_step(
            &self.enc,
            self.objective.as_ref(),
            &self.sources[b.source],
            b,
            self.r.loss,
            &ctx,
            self.r.grad_accum,
            &self.spread,
            self.r.dropout != Some(0.0),
        )?;
        if !res.loss.is_finite() {
            return Err(Error::NonFinite {
                what: "loss",
                step: at.step + 1,
                value: res.loss,
                last_checkpoint: self.last_ck.clone(),
            });
        }
        Ok(res)
    }

    /// One optimizer step over the accumulated gradients (averaged over the processes first),
    /// logged; a non-finite gradient norm stops the run before the weights change. `applied`:
    /// a recorded step already updated, with this gradient norm.
    fn update(
        &mut self,
        at: &mut Progress,
        acc: &mut Accum,
        applied: Option<f64>,
        log: &mut RunLog,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let r = self.r;
        if let Some(g) = self.group {
            sync::sync_gradients(g, &self.opt)?;
        }
        let lrs = group_lrs(r, at.step, self.plan.total);
        let lr = lrs[0];
        let grad_norm = match applied {
            Some(norm) => norm,
            None => apply_update(&mut self.opt, r.max_grad_norm, &lrs, |value| {
                Error::NonFinite {
                    what: "gradient norm",
                    step: at.step + 1,
                    value,
                    last_checkpoint: self.last_ck.clone(),
                }
            })?,
        };
        at.step += 1;
        let (loss, terms) = acc.take(r.grad_accum);
        at.last_loss = loss;
        let mut line = json!({"step": at.step, "epoch": at.epoch, "loss": loss, "lr": lr, "grad_norm": grad_norm, "terms": terms, "seconds": self.start.elapsed().as_secs_f64()});
        if r.head_lr.is_some() || r.head_warmup_ratio.is_some() {
            line["head_lr"] = json!(lrs[1]);
        }
        if let Some(g) = self.group {
            // this run's collectives (the group may have served an earlier stage)
            let (t, t0) = (g.traffic(), self.traffic_start);
            line["rank"] = json!(g.rank());
            line["comm_seconds"] = json!(t.seconds - t0.seconds);
            line["comm_bytes"] = json!(t.bytes - t0.bytes);
        }
        log.step(&line)?;
        events(Event::Step {
            step: at.step,
            loss,
            lr,
        });
        Ok(())
    }

    /// The recipe's periodic evaluation and checkpoint after a step before the last; `after`
    /// is the (epoch, micro-batch) the checkpoint resumes from.
    fn periodic(
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
    /// it already; what a requested stop leaves ([`super::stop`]).
    fn checkpoint_now(
        &mut self,
        at: &Progress,
        after: (u64, usize),
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let r = self.r;
        if !self.main || (r.save_every > 0 && at.step % r.save_every == 0) {
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
        let meta = NestMeta {
            matryoshka_dims: self.objective.trained_dims(),
            trained_layers: self.objective.trained_layers(self.enc.num_layers()),
            objective: Some(self.objective.describe()),
            default_dim: None,
            training_dtype: Some(self.enc.dtype().name().into()),
        };
        nest_model::export::save(&self.enc, &final_dir, &meta)?;
        if let Some(g) = self.group {
            g.barrier()?;
        }
        Ok(self.summary(at, final_dir, train_seconds, resumed_from))
    }

    pub(crate) fn summary(
        &self,
        at: &Progress,
        final_dir: PathBuf,
        train_seconds: f64,
        resumed_from: Option<u64>,
    ) -> Summary {
        Summary {
            steps: at.step,
            final_dir,
            last_loss: at.last_loss,
            padding: self.plan.padding,
            padding_unbatched: self.plan.padding_unbatched,
            seconds: self.start.elapsed().as_secs_f64(),
            train_seconds,
            resumed_from,
            main: self.main,
        }
    }
}
