//! A training run's phases: prepare, resume, steps, finish (called in that order by
//! [`super::train_with`]). The step loop's pieces are in `run/update.rs`; what a run writes
//! (periodic evaluation and checkpoints, the final model) is in `run/finish.rs`.

mod failure;
mod finish;
pub(crate) use finish::final_meta;
mod update;

use std::path::{Path, PathBuf};
use std::time::Instant;

use nest_dist::Group;
use nest_model::ElasticEncoder;
use tch::nn::VarStore;

use super::eval::EvalGrid;
use super::graphed::GraphedStep;
use super::mining::Mining;
use super::model::load_model;
use super::plan::{Accum, Plan, Progress};
use super::run_dir::{self, identity_hash, run_err};
use super::run_log::RunLog;
use super::spread::Spread;
use super::types::{Event, ObjectiveBuilder, Summary, TrainOptions};
use crate::checkpoint;
use crate::data::{load_sources, Source};
use crate::objective::Objective;
use crate::optim::AdamW;
use crate::recipe::Recipe;
use crate::Result;

/// A run from setup to the end.
pub(crate) struct Run<'a> {
    pub(super) r: &'a Recipe,
    pub(super) o: &'a TrainOptions,
    pub(super) group: Option<&'a Group>,
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
    /// The fingerprint of the recipe's `[[data]]` examples, which checkpoints record.
    pub(super) data_sha: String,
    /// The newest checkpoint, for the error when a loss or gradient turns non-finite.
    last_ck: String,
    start: Instant,
    pub(super) train_start: Instant,
    traffic_start: nest_dist::Traffic,
    /// Steps recorded as CUDA graphs (the recipe's `cuda_graph`).
    pub(super) graphed: GraphedStep,
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
                "data parallel: {} processes ({}), global batch {}, {} per process",
                g.world(),
                g.backend().describe(),
                r.batch_size,
                r.batch_size / g.world()
            )));
        }
        for c in r.cautions() {
            events(Event::Message(c));
        }
        let train_start = Instant::now();
        let said = format!("objective {}", objective.describe());
        events(Event::Message(said));
        let graphed = GraphedStep::new(r.cuda_graph);
        let ctx = crate::objective::StepContext {
            step: 0,
            micro_batch: 0,
            seed: r.seed,
        };
        let (parallel, cached) = (group.is_some(), spread.chunk.is_some());
        if let Some(line) = graphed.eager_notice(&enc, objective.as_ref(), &ctx, parallel, cached) {
            events(Event::Message(line));
        }
        let tokenize = |t: &[&str]| Ok(enc.tokenizer.encode(t)?);
        let sources = load_sources(&r.data, &tokenize, enc.include_prompt)?;
        let mining = Mining::prepare(r, &enc, events)?;
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
        // two parameter groups: the transformer (0), and the heads (1): the objective's own
        // parameters and the model's Dense modules after pooling (a projection head)
        opt.set_groups(|n| {
            usize::from(heads.contains(n) || nest_model::dense::module_of(n).is_some())
        });
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
            data_sha: crate::data::fingerprint(&sources),
            sources,
            plan,
            mining,
            eval,
            start,
            train_start,
            traffic_start: group.map(Group::traffic).unwrap_or_default(),
            graphed,
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
        // a max_steps the data's epochs cannot reach (Hugging Face's Trainer would loop the
        // data until max_steps; here the epochs bound the run)
        if self.r.max_steps > plan.total {
            events(Event::Message(format!(
                "max_steps {} is past the {} steps of {} epoch(s) over this data: the run stops \
                 at step {}; raise epochs (--epochs) to train longer",
                self.r.max_steps, plan.total, self.r.epochs, plan.total
            )));
        }
    }

    /// Restores the weights, the objective's parameters, the optimizer and the data position
    /// of checkpoint `ck`, after checking that this run may resume it.
    pub(crate) fn resume(&mut self, ck: &Path, events: &mut dyn FnMut(Event)) -> Result<Progress> {
        let (state, opt_state) = checkpoint::load(ck)?;
        let world = self.group.map_or(1, Group::world);
        let legacy = run_dir::legacy_identity_hash(self.r);
        run_dir::check_checkpoint(
            ck,
            &state,
            (&self.recipe_sha, &legacy),
            &self.r.model,
            world,
            self.o,
            events,
        )?;
        if let Some(note) = state.check_data(ck, &self.data_sha, self.o.allow_data_change)? {
            events(Event::Message(note));
        }
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

    /// Trains from `at` to the end of the plan; `false` when `stop_after_steps` or a stop request
    /// ([`super::stop`]) ended it first.
    pub(crate) fn steps(
        &mut self,
        at: &mut Progress,
        log: &mut RunLog,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let first_step = at.step;
        let _stepping = super::stop::Stepping::start();
        let mut acc = Accum::default();
        while (at.epoch as usize) < self.plan.epochs.len() && at.step < self.plan.total {
            self.round_before(at, events)?;
            let n = self.plan.epochs[at.epoch as usize].len();
            while at.next_batch < n {
                let here = (at.epoch, at.next_batch, at.step);
                let applied = self.guarded(here, |run| run.graphed_step(at))?;
                let res = match &applied {
                    Some((res, _)) => res.clone(),
                    None => self.guarded(here, |run| run.micro_step(at))?,
                };
                acc.add(res, self.r.grad_accum);
                at.next_batch += 1;
                if acc.n < self.r.grad_accum && at.next_batch < n {
                    continue;
                }
                let applied = applied.map(|a| a.1);
                self.guarded(here, |run| run.update(at, &mut acc, applied, log, events))?;
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
                if at.step < self.plan.total && super::stop::agreed(self.group)? {
                    // an interrupt (Ctrl-C, SIGTERM): this step's checkpoint, then stop
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
