//! The training loop.
//!
//! Exact resume: the data plan of an epoch is a function of `(seed, epoch)`; libtorch's RNG (for
//! dropout) is re-seeded with `seed + micro-batch index` before every forward pass; checkpoints
//! hold the weights, the AdamW moments and step, and the data position. A run resumed from any
//! checkpoint therefore replays the uninterrupted run bit for bit on CPU (same thread count).
//! libtorch's RNG is global to the process: two trainings in one process must not run at once.

mod board;
mod eval;
mod run_dir;
pub mod spread;
pub mod step;
mod sync;
mod types;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use nest_eval::tasks::{Task, TaskSource};
use nest_model::{ElasticEncoder, NestMeta};
use serde_json::json;
use tch::nn::VarStore;

use crate::checkpoint::{self, State};
use crate::data::{epoch_plan, load_sources, padding, Batch, Source};
use crate::objective::StepContext;
use crate::optim::AdamW;
use crate::recipe::{LossKind, Recipe};
use crate::schedule::lr_at;
use crate::{Error, Result};
use eval::evaluate;
use run_dir::{dist_timeout, identity_hash, run_err, start_run_dir, trim_log};
use spread::{spread_micro_step, Spread};
pub use step::{apply_update, batch_output, micro_step, MicroResult};
pub use types::{recipe_objective, Event, ObjectiveBuilder, Summary, TrainOptions};

/// Trains as the recipe says; see the module docs for the resume guarantees.
pub fn train(r: &Recipe, o: &TrainOptions, events: &mut dyn FnMut(Event)) -> Result<Summary> {
    train_with(r, o, &recipe_objective, events)
}

// long: the training loop in the order it runs (resume, epochs, micro-steps, update, eval,
// checkpoint, finish); splitting it into named phases is part of issue 19's trainer API (open).
/// [`train`] with an objective of the caller's (e.g. one with parameters of its own).
pub fn train_with(
    r: &Recipe,
    o: &TrainOptions,
    build: &ObjectiveBuilder,
    events: &mut dyn FnMut(Event),
) -> Result<Summary> {
    let start = Instant::now();
    // a bad launch fails here, before any model is loaded
    let group = match nest_dist::Launch::from_env().map_err(nest_dist::DistError::from)? {
        Some(l) => Some(nest_dist::Group::join(&l, dist_timeout()?)?),
        None => None,
    };
    let main = group.as_ref().is_none_or(|g| g.rank() == 0);
    let events = &mut |e: Event| {
        if main {
            events(e)
        }
    };
    let resume_from = start_run_dir(r, o, group.as_ref())?;
    let model_dir = nest_model::hub::resolve(&r.model)?;
    let max_len = (r.max_length > 0).then_some(r.max_length);
    let mut enc = ElasticEncoder::load(&model_dir, o.device, max_len)?;
    let dtype = nest_model::dtype::resolve(r.dtype, o.device);
    enc.set_training_dtype(dtype.dtype)?;
    if let Some(p) = r.dropout {
        enc.set_dropout(p);
    }
    events(Event::Message(format!(
        "dtype {} ({})",
        dtype.dtype, dtype.reason
    )));
    if r.projection > 0 {
        match &enc.dense {
            // a resumed or continued run whose model already has its head
            Some(d) if d.config.out_features == r.projection => {}
            _ => enc.add_projection(r.projection)?,
        }
    }
    let mut obj_vs = VarStore::new(o.device);
    // the objective's parameters start from the recipe's seed (a resume then overwrites them)
    tch::manual_seed(r.seed as i64);
    let objective = build(r, &enc, &(obj_vs.root() / "objective"))?;
    let spread = Spread {
        group: group.as_ref(),
        chunk: (r.mini_batch_size > 0).then_some(r.mini_batch_size),
    };
    spread.check(r.batch_size, objective.as_ref())?;
    let world = group.as_ref().map_or(1, nest_dist::Group::world);
    if let Some(g) = &group {
        events(Event::Message(format!(
            "data parallel: {} processes (c10d Gloo), global batch {}, {} per process",
            g.world(),
            r.batch_size,
            r.batch_size / g.world()
        )));
    }
    let train_start = Instant::now();
    events(Event::Message(format!(
        "objective {}",
        objective.describe()
    )));
    let sources = load_sources(&r.data, &|t: &[&str]| Ok(enc.tokenizer.encode(t)?))?;
    let no_dup = matches!(
        r.loss,
        LossKind::Mnrl | LossKind::MnrlSymmetric | LossKind::Simcse | LossKind::None
    );
    // every epoch's plan is known in advance, so the schedule knows its length exactly
    let plans: Vec<Vec<Batch>> = (0..r.epochs as u64)
        .map(|e| epoch_plan(&sources, r.batch_size, r.seed, e, r.length_batching, no_dup))
        .collect();
    let steps_per_epoch: Vec<u64> = plans
        .iter()
        .map(|p| p.len().div_ceil(r.grad_accum) as u64)
        .collect();
    let mut total: u64 = steps_per_epoch.iter().sum();
    if r.max_steps > 0 {
        total = total.min(r.max_steps);
    }
    if total == 0 {
        return Err(Error::Recipe {
            source_name: "data".into(),
            message: "no batch can be formed (too few examples for batch_size)".into(),
        });
    }
    let warmup = (r.warmup_ratio * total as f64).round() as u64;
    let pad_used = padding(&sources, &plans[0]);
    let pad_plain = padding(
        &sources,
        &epoch_plan(&sources, r.batch_size, r.seed, 0, false, no_dup),
    );
    events(Event::Message(format!(
        "{} examples in {} source(s); {} optimizer steps; padding {:.1}% of tokens ({:.1}% without length batching)",
        sources.iter().map(Source::len).sum::<usize>(),
        sources.len(),
        total,
        100.0 * (1.0 - pad_used.0 as f64 / pad_used.1.max(1) as f64),
        100.0 * (1.0 - pad_plain.0 as f64 / pad_plain.1.max(1) as f64),
    )));

    let eval_task = if r.eval_data.is_empty() {
        None
    } else {
        Some(Task::load(&TaskSource::Sts(PathBuf::from(&r.eval_data)))?)
    };
    let (eval_layers, eval_dims) = eval::grid(r, &enc, objective.trained_dims())?;

    // the encoder's weights and the objective's own parameters, optimised together
    let mut named: Vec<(String, tch::Tensor)> = enc.vs.variables().into_iter().collect();
    named.extend(obj_vs.variables());
    let mut opt = AdamW::new(named, r.weight_decay);
    let recipe_sha = identity_hash(r);
    let (mut step, mut epoch, mut next_batch, mut last_loss) = (0u64, 0u64, 0usize, f64::NAN);
    // rank 0 writes the run's metrics; every other rank its own (throughput, communication)
    let log_path = match &group {
        Some(g) if !main => {
            let dir = o.run_dir.join("ranks");
            std::fs::create_dir_all(&dir).map_err(|e| nest_core::Error::io(&dir, e))?;
            dir.join(format!("rank{}.jsonl", g.rank()))
        }
        _ => o.run_dir.join("metrics.jsonl"),
    };
    let mut resumed_from = None;
    if let Some(ck) = &resume_from {
        let (state, opt_state) = checkpoint::load(ck)?;
        run_dir::check_checkpoint(ck, &state, &recipe_sha, &r.model, world, o, events)?;
        enc.load_weights(&ck.join("model.safetensors"))?;
        checkpoint::load_objective(ck, &mut obj_vs)?;
        opt.load_state(&opt_state, state.step as i64)
            .map_err(|m| run_err(ck, m))?;
        (step, epoch, next_batch, last_loss) =
            (state.step, state.epoch, state.next_batch, state.last_loss);
        trim_log(&log_path, step)?;
        resumed_from = Some(step);
        events(Event::Message(format!(
            "resumed from {} (step {step})",
            ck.display()
        )));
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| nest_core::Error::io(&log_path, e))?;
    let mut board = if main {
        Some(board::Board::open(&o.run_dir)?)
    } else {
        None
    };
    events(Event::Start {
        total_steps: total,
        resumed_from,
    });
    let mut last_ck = resume_from
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(none yet)".into());
    let state_at = |step: u64, epoch: u64, next_batch: usize, loss: f64| State {
        step,
        epoch,
        next_batch,
        recipe_sha256: recipe_sha.clone(),
        model: r.model.clone(),
        last_loss: loss,
        world_size: world,
        threads: Some(tch::get_num_threads().max(1) as usize),
    };
    // micro-batches before epoch e: for the per-micro-batch RNG seed
    let offsets: Vec<u64> = plans
        .iter()
        .scan(0u64, |acc, p| {
            let o = *acc;
            *acc += p.len() as u64;
            Some(o)
        })
        .collect();
    let mut accum_loss = 0.0;
    let mut accum_terms: Vec<(String, f64)> = Vec::new();
    let mut in_accum = 0usize;
    let first_step = step;
    'outer: while (epoch as usize) < plans.len() && step < total {
        let plan = &plans[epoch as usize];
        let mut bi = next_batch;
        while bi < plan.len() {
            let b = &plan[bi];
            let ctx = StepContext {
                step,
                micro_batch: offsets[epoch as usize] + bi as u64,
                seed: r.seed,
            };
            let res = spread_micro_step(
                &enc,
                objective.as_ref(),
                &sources[b.source],
                b,
                r.loss,
                &ctx,
                r.grad_accum,
                &spread,
                r.dropout != Some(0.0),
            )?;
            if !res.loss.is_finite() {
                return Err(Error::NonFinite {
                    what: "loss",
                    step: step + 1,
                    value: res.loss,
                    last_checkpoint: last_ck,
                });
            }
            accum_loss += res.loss / r.grad_accum as f64;
            for (name, v) in res.terms {
                let v = v / r.grad_accum as f64;
                match accum_terms.iter_mut().find(|x| x.0 == name) {
                    Some(x) => x.1 += v,
                    None => accum_terms.push((name, v)),
                }
            }
            in_accum += 1;
            bi += 1;
            if in_accum < r.grad_accum && bi < plan.len() {
                continue;
            }
            if let Some(g) = &group {
                sync::sync_gradients(g, &opt)?;
            }
            let lr = lr_at(r.lr, step, total, warmup, r.decay);
            let grad_norm =
                apply_update(&mut opt, r.max_grad_norm, lr).map_err(|value| Error::NonFinite {
                    what: "gradient norm",
                    step: step + 1,
                    value,
                    last_checkpoint: last_ck.clone(),
                })?;
            step += 1;
            last_loss = accum_loss * r.grad_accum as f64 / in_accum as f64;
            let terms_json: serde_json::Map<String, serde_json::Value> = accum_terms
                .iter()
                .map(|(k, v)| (k.clone(), json!(v * r.grad_accum as f64 / in_accum as f64)))
                .collect();
            let mut line = json!({"step": step, "epoch": epoch, "loss": last_loss, "lr": lr, "grad_norm": grad_norm, "terms": terms_json, "seconds": start.elapsed().as_secs_f64()});
            if let Some(g) = &group {
                let t = g.traffic();
                line["rank"] = json!(g.rank());
                line["comm_seconds"] = json!(t.seconds);
                line["comm_bytes"] = json!(t.bytes);
            }
            writeln!(log, "{line}")
                .and_then(|_| log.flush())
                .map_err(|e| nest_core::Error::io(&log_path, e))?;
            if let Some(b) = &mut board {
                let mut scalars = vec![
                    ("train/loss".to_string(), last_loss),
                    ("train/lr".to_string(), lr),
                    ("train/grad_norm".to_string(), grad_norm),
                ];
                for k in ["comm_seconds", "comm_bytes"] {
                    if let Some(v) = line[k].as_f64() {
                        scalars.push((format!("dist/{k}"), v));
                    }
                }
                b.write(step, &scalars)?;
                b.write_object(step, "terms", &line["terms"])?;
            }
            accum_loss = 0.0;
            accum_terms.clear();
            in_accum = 0;
            events(Event::Step {
                step,
                loss: last_loss,
                lr,
            });
            let (ne, nb) = if bi >= plan.len() {
                (epoch + 1, 0)
            } else {
                (epoch, bi)
            };
            if let Some(task) = &eval_task {
                if r.eval_every > 0 && step % r.eval_every == 0 && step < total {
                    let (cells, summary) = evaluate(&enc, task, &eval_layers, &eval_dims)?;
                    writeln!(log, "{}", json!({"step": step, "eval": cells}))
                        .map_err(|e| nest_core::Error::io(&log_path, e))?;
                    if let Some(b) = &mut board {
                        b.write_object(step, "eval", &cells["cells"])?;
                    }
                    events(Event::Eval { step, summary });
                }
            }
            if main && r.save_every > 0 && step % r.save_every == 0 && step < total {
                let p = checkpoint::save(
                    &o.run_dir,
                    &enc.vs,
                    &obj_vs,
                    &opt,
                    &state_at(step, ne, nb, last_loss),
                    r.keep_last,
                )?;
                last_ck = p.display().to_string();
                events(Event::Checkpoint { step, path: p });
            }
            if o.stop_after_steps.is_some_and(|n| step - first_step >= n) && step < total {
                return Ok(Summary {
                    steps: step,
                    final_dir: PathBuf::new(),
                    last_loss,
                    padding: (pad_used, pad_plain),
                    seconds: start.elapsed().as_secs_f64(),
                    train_seconds: train_start.elapsed().as_secs_f64(),
                    resumed_from,
                    main,
                });
            }
            if step >= total {
                epoch = ne;
                next_batch = nb;
                break 'outer;
            }
        }
        epoch += 1;
        next_batch = 0;
    }
    let train_seconds = train_start.elapsed().as_secs_f64();
    if let (false, Some(g)) = (main, &group) {
        // rank 0 writes the final checkpoint and the model; wait until they are on disk (what
        // comes next, e.g. `nest distill`'s second stage, reads them). The final evaluation
        // runs here too, so that this rank's wait is the save's, not the evaluation's.
        if let Some(task) = &eval_task {
            evaluate(&enc, task, &eval_layers, &eval_dims)?;
        }
        g.barrier()?;
        return Ok(Summary {
            steps: step,
            final_dir: o.run_dir.join("final"),
            last_loss,
            padding: (pad_used, pad_plain),
            seconds: start.elapsed().as_secs_f64(),
            train_seconds,
            resumed_from,
            main,
        });
    }
    let p = checkpoint::save(
        &o.run_dir,
        &enc.vs,
        &obj_vs,
        &opt,
        &state_at(step, epoch, next_batch, last_loss),
        r.keep_last,
    )?;
    events(Event::Checkpoint { step, path: p });
    if let Some(task) = &eval_task {
        let (cells, summary) = evaluate(&enc, task, &eval_layers, &eval_dims)?;
        writeln!(log, "{}", json!({"step": step, "eval": cells}))
            .map_err(|e| nest_core::Error::io(&log_path, e))?;
        if let Some(b) = &mut board {
            b.write_object(step, "eval", &cells["cells"])?;
        }
        events(Event::Eval { step, summary });
    }
    let final_dir = o.run_dir.join("final");
    let meta = NestMeta {
        matryoshka_dims: objective.trained_dims(),
        trained_layers: objective.trained_layers(enc.num_layers()),
        objective: Some(objective.describe()),
        default_dim: None,
        training_dtype: Some(enc.dtype().name().into()),
    };
    crate::export::save(&enc, &final_dir, &meta)?;
    if let Some(g) = &group {
        g.barrier()?;
    }
    Ok(Summary {
        steps: step,
        final_dir,
        last_loss,
        padding: (pad_used, pad_plain),
        seconds: start.elapsed().as_secs_f64(),
        train_seconds,
        resumed_from,
        main,
    })
}
