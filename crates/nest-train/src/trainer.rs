//! The training loop.
//!
//! Exact resume: the data plan of an epoch is a function of `(seed, epoch)`; libtorch's RNG (for
//! dropout) is re-seeded with `seed + micro-batch index` before every forward pass; checkpoints
//! hold the weights, the AdamW moments and step, and the data position. A run resumed from any
//! checkpoint therefore replays the uninterrupted run bit for bit on CPU (same thread count).
//! libtorch's RNG is global to the process: two trainings in one process must not run at once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nest_core::{parse_dims, parse_layers};
use nest_eval::quantize::Precision;
use nest_eval::suite::{GridSpec, Progress};
use nest_eval::tasks::{Task, TaskSource};
use nest_model::{ElasticEncoder, EncodeOptions, NestMeta};
use serde_json::json;
use sha2::{Digest, Sha256};
use tch::{Device, Tensor};

use crate::checkpoint::{self, State};
use crate::data::{epoch_plan, load_sources, padding, Batch, Source};
use crate::objective::{BatchOutput, Column, Matryoshka, Objective, TaskLoss};
use crate::optim::AdamW;
use crate::recipe::{LossKind, Recipe, RESUMABLE_KEYS};
use crate::schedule::lr_at;
use crate::{Error, Result};

/// How to run.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub run_dir: PathBuf,
    pub resume: bool,
    pub overwrite: bool,
    pub device: Device,
    /// Stop (as if interrupted) after this many optimizer steps of this process, leaving the
    /// checkpoints as they are: no final checkpoint, no export. For time-boxed runs and tests.
    pub stop_after_steps: Option<u64>,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    pub steps: u64,
    pub final_dir: PathBuf,
    pub last_loss: f64,
    /// (real tokens, padded tokens) of epoch 0 with the recipe's batching, and without length
    /// batching, for the padding report.
    pub padding: ((usize, usize), (usize, usize)),
    pub seconds: f64,
    /// Seconds from after the model is loaded to the end of the last step (data reading and
    /// tokenisation, training, periodic eval and checkpoints; not the final save).
    pub train_seconds: f64,
    pub resumed_from: Option<u64>,
}

/// Events for a progress display.
#[derive(Debug, Clone)]
pub enum Event {
    Start {
        total_steps: u64,
        resumed_from: Option<u64>,
    },
    Step {
        step: u64,
        loss: f64,
        lr: f64,
    },
    Eval {
        step: u64,
        summary: String,
    },
    Checkpoint {
        step: u64,
        path: PathBuf,
    },
    Message(String),
}

/// sha256 of the recipe's identity: its TOML without the keys a resume may change.
fn identity_hash(r: &Recipe) -> String {
    let mut v = toml::Value::try_from(r).unwrap_or(toml::Value::Boolean(false));
    if let Some(t) = v.as_table_mut() {
        for k in RESUMABLE_KEYS {
            t.remove(k);
        }
    }
    format!("{:x}", Sha256::digest(v.to_string().as_bytes()))
}

fn run_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Run {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Checks the run directory against `--resume` / `--overwrite`; returns the checkpoint to resume.
fn prepare_run_dir(r: &Recipe, o: &TrainOptions) -> Result<Option<PathBuf>> {
    let dir = &o.run_dir;
    let saved = dir.join("recipe.toml");
    if saved.is_file() {
        if o.overwrite {
            std::fs::remove_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
        } else if o.resume {
            let old = Recipe::load(Some(&saved), &[])?;
            let diff = old.differences(r);
            if !diff.is_empty() {
                return Err(run_err(
                    dir,
                    format!(
                        "cannot resume: the recipe differs from the run's ({})",
                        diff.join("; ")
                    ),
                ));
            }
            let Some((_, ck)) = checkpoint::list(dir).pop() else {
                return Ok(None); // nothing saved yet: start over in the same folder
            };
            return Ok(Some(ck));
        } else {
            return Err(run_err(
                dir,
                "holds a run already: pass --resume to continue it or --overwrite to replace it",
            ));
        }
    } else if o.resume {
        return Err(run_err(dir, "no run to resume here (no recipe.toml)"));
    } else if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
        && !o.overwrite
    {
        return Err(run_err(
            dir,
            "exists and is not empty: choose another --run-dir or pass --overwrite",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
    nest_core::fsutil::write_atomic(&saved, r.to_toml().as_bytes())?;
    Ok(None)
}

/// Encodes one column of a batch (training mode: dropout on).
fn encode_column(enc: &ElasticEncoder, src: &Source, b: &Batch, col: usize, train: bool) -> Column {
    let seqs: Vec<&[i64]> = b
        .examples
        .iter()
        .map(|&i| src.ids[i][col].as_slice())
        .collect();
    let input = enc.make_input(&seqs);
    let out = enc.forward(&input, enc.num_layers(), train);
    Column {
        hidden: out.hidden_states,
        mask: input.mask,
        pooling: enc.pooling,
    }
}

/// Forward pass of one batch into what the objective sees.
pub fn batch_output(
    enc: &ElasticEncoder,
    src: &Source,
    b: &Batch,
    loss: LossKind,
    train: bool,
) -> BatchOutput {
    let columns = if loss == LossKind::Simcse {
        vec![
            encode_column(enc, src, b, 0, train),
            encode_column(enc, src, b, 0, train),
        ]
    } else {
        (0..src.columns())
            .map(|c| encode_column(enc, src, b, c, train))
            .collect()
    };
    let scores = (!src.scores.is_empty()).then(|| {
        let s: Vec<f32> = b.examples.iter().map(|&i| src.scores[i] as f32).collect();
        Tensor::from_slice(&s).to_device(enc.device())
    });
    BatchOutput {
        columns,
        scores,
        layers: enc.num_layers(),
    }
}

/// Builds the objective a recipe asks for (MRL over its dims; the full dim when none).
pub fn objective_for(r: &Recipe, hidden: usize) -> Result<Matryoshka> {
    let dims = if r.matryoshka_dims.is_empty() {
        vec![hidden]
    } else {
        r.matryoshka_dims.clone()
    };
    if let Some(&d) = dims.iter().find(|&&d| d > hidden) {
        return Err(Error::Recipe {
            source_name: "matryoshka_dims".into(),
            message: format!("dim {d} is above the model's hidden size {hidden}"),
        });
    }
    let weights = if r.matryoshka_weights.is_empty() {
        vec![1.0; dims.len()]
    } else {
        r.matryoshka_weights.clone()
    };
    Ok(Matryoshka {
        task: TaskLoss {
            kind: r.loss,
            scale: r.scale,
            angle_weight: r.angle_weight,
        },
        dims,
        weights,
    })
}

/// Keeps the metrics log consistent with a resumed checkpoint: drops lines after `step` and any
/// half-written last line.
fn trim_log(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s <= step)
        })
        .collect();
    let mut out = kept.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    nest_core::fsutil::write_atomic(path, out.as_bytes())?;
    Ok(())
}

/// Runs the (layer x dim) STS grid on `task` and returns (log line JSON, summary text).
fn evaluate(
    enc: &ElasticEncoder,
    task: &Task,
    layers: &[usize],
    dims: &[usize],
) -> Result<(serde_json::Value, String)> {
    let g = GridSpec {
        layers: layers.to_vec(),
        dims: dims.to_vec(),
        precisions: vec![Precision::Float32],
        rescore: 0,
        logreg: Default::default(),
    };
    let res = nest_eval::suite::run(
        enc,
        std::slice::from_ref(task),
        &g,
        EncodeOptions { batch_size: 64 },
        &mut |_: Progress| {},
    )?;
    let t = &res[0];
    let mut cells = serde_json::Map::new();
    for c in &t.cells {
        cells.insert(
            format!("L{}/d{}", c.layer, c.dim),
            json!(c.metrics[&t.main_metric]),
        );
    }
    let last = *layers.last().unwrap_or(&1);
    let row: Vec<String> = dims
        .iter()
        .map(|&d| {
            format!(
                "d{d} {:.2}",
                t.main(last, d, Precision::Float32).unwrap_or(f64::NAN)
            )
        })
        .collect();
    Ok((
        json!({ "task": t.task, "metric": t.main_metric, "cells": cells }),
        format!("{} L{last}: {}", t.task, row.join(", ")),
    ))
}

/// Trains as the recipe says; see the module docs for the resume guarantees.
pub fn train(r: &Recipe, o: &TrainOptions, events: &mut dyn FnMut(Event)) -> Result<Summary> {
    let start = Instant::now();
    let resume_from = prepare_run_dir(r, o)?;
    let model_dir = nest_model::hub::resolve(&r.model)?;
    let max_len = (r.max_length > 0).then_some(r.max_length);
    let mut enc = ElasticEncoder::load(&model_dir, o.device, max_len)?;
    let objective = objective_for(r, enc.hidden_size())?;
    let train_start = Instant::now();
    events(Event::Message(format!(
        "objective {}",
        objective.describe()
    )));
    let sources = load_sources(&r.data, &|t: &[&str]| Ok(enc.tokenizer.encode(t)?))?;
    let no_dup = matches!(
        r.loss,
        LossKind::Mnrl | LossKind::MnrlSymmetric | LossKind::Simcse
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
    let eval_layers = if r.eval_layers.is_empty() {
        vec![enc.num_layers()]
    } else {
        parse_layers(&r.eval_layers)?
    };
    let eval_dims = if r.eval_dims.is_empty() {
        objective.trained_dims()
    } else {
        parse_dims(&r.eval_dims)?
    };
    enc.check(&eval_layers, &eval_dims)?;

    let named: Vec<(String, Tensor)> = enc.vs.variables().into_iter().collect();
    let mut opt = AdamW::new(named, r.weight_decay);
    let recipe_sha = identity_hash(r);
    let (mut step, mut epoch, mut next_batch, mut last_loss) = (0u64, 0u64, 0usize, f64::NAN);
    let log_path = o.run_dir.join("metrics.jsonl");
    let mut resumed_from = None;
    if let Some(ck) = &resume_from {
        let (state, opt_state) = checkpoint::load(ck)?;
        if state.recipe_sha256 != recipe_sha {
            return Err(run_err(
                ck,
                "checkpoint was written by another recipe (its identity hash differs)",
            ));
        }
        if state.model != r.model {
            return Err(run_err(
                ck,
                format!(
                    "checkpoint is of model '{}', the recipe names '{}'",
                    state.model, r.model
                ),
            ));
        }
        enc.load_weights(&ck.join("model.safetensors"))?;
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
            tch::manual_seed((r.seed + offsets[epoch as usize] + bi as u64) as i64);
            let out = batch_output(&enc, &sources[b.source], b, r.loss, true);
            let terms = objective.terms(&out);
            let loss = terms
                .iter()
                .map(|t| t.value.shallow_clone())
                .reduce(|a, b| a + b)
                .expect("an objective returns terms");
            let value = loss.double_value(&[]);
            if !value.is_finite() {
                return Err(Error::NonFinite {
                    step: step + 1,
                    value,
                    last_checkpoint: last_ck,
                });
            }
            (loss / r.grad_accum as f64).backward();
            accum_loss += value / r.grad_accum as f64;
            for t in &terms {
                let v = t.value.double_value(&[]) / r.grad_accum as f64;
                match accum_terms.iter_mut().find(|x| x.0 == t.name) {
                    Some(x) => x.1 += v,
                    None => accum_terms.push((t.name.clone(), v)),
                }
            }
            in_accum += 1;
            bi += 1;
            if in_accum < r.grad_accum && bi < plan.len() {
                continue;
            }
            let grad_norm = opt.clip_grad_norm(r.max_grad_norm);
            let lr = lr_at(r.lr, step, total, warmup, r.decay);
            opt.step(lr);
            opt.zero_grad();
            step += 1;
            last_loss = accum_loss * r.grad_accum as f64 / in_accum as f64;
            let terms_json: serde_json::Map<String, serde_json::Value> = accum_terms
                .iter()
                .map(|(k, v)| (k.clone(), json!(v * r.grad_accum as f64 / in_accum as f64)))
                .collect();
            let line = json!({"step": step, "epoch": epoch, "loss": last_loss, "lr": lr, "grad_norm": grad_norm, "terms": terms_json, "seconds": start.elapsed().as_secs_f64()});
            writeln!(log, "{line}")
                .and_then(|_| log.flush())
                .map_err(|e| nest_core::Error::io(&log_path, e))?;
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
                    events(Event::Eval { step, summary });
                }
            }
            if r.save_every > 0 && step % r.save_every == 0 && step < total {
                let p = checkpoint::save(
                    &o.run_dir,
                    &enc.vs,
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
    let p = checkpoint::save(
        &o.run_dir,
        &enc.vs,
        &opt,
        &state_at(step, epoch, next_batch, last_loss),
        r.keep_last,
    )?;
    events(Event::Checkpoint { step, path: p });
    if let Some(task) = &eval_task {
        let (cells, summary) = evaluate(&enc, task, &eval_layers, &eval_dims)?;
        writeln!(log, "{}", json!({"step": step, "eval": cells}))
            .map_err(|e| nest_core::Error::io(&log_path, e))?;
        events(Event::Eval { step, summary });
    }
    let final_dir = o.run_dir.join("final");
    let meta = NestMeta {
        matryoshka_dims: objective.trained_dims(),
        trained_layers: objective.trained_layers(enc.num_layers()),
        objective: Some(objective.describe()),
    };
    crate::export::save(&enc, &final_dir, &meta)?;
    Ok(Summary {
        steps: step,
        final_dir,
        last_loss,
        padding: (pad_used, pad_plain),
        seconds: start.elapsed().as_secs_f64(),
        train_seconds,
        resumed_from,
    })
}
