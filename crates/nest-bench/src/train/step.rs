//! The step benchmark: every objective's optimizer step, interleaved on the same batches
//! through the trainer's own step function ([`nest_train::trainer::StepTimer`]), with MRL's
//! FLOP rate and the memory peaks.

use std::time::Instant;

use nest_model::ElasticEncoder;
use nest_train::trainer::StepTimer;
use nest_train::Recipe;

use super::machine::{column_flops, peak_rss_mb};
use super::objectives::{bench_teacher, objective_toml};
use super::{Setup, TrainBench};
use crate::Result;

/// What the step benchmark measured: each objective's median step, MRL's FLOP rate and the
/// peak RSS after it.
pub(super) struct StepFigures {
    pub(super) medians: Vec<f64>,
    pub(super) mrl_steps: usize,
    pub(super) gflops: f64,
    pub(super) rss: f64,
    /// The CUDA allocator's (allocated, reserved) peak bytes over the step benchmark.
    pub(super) gpu_peak: Option<(u64, u64)>,
}

/// Interleaved timed steps of every objective on the same batches (3 warm-up steps first).
// long: setup, the interleaved timing loop and its figures read as one measurement
pub(super) fn step_benchmark(
    a: &TrainBench,
    s: &Setup,
    kinds: &[String],
    say: &mut dyn FnMut(String),
) -> Result<StepFigures> {
    let model_dir = nest_model::hub::resolve(&a.model)?;
    let mut enc =
        ElasticEncoder::load(&model_dir, nest_model::default_device(), Some(a.max_length))?;
    enc.check(&[], &s.dims)?;
    enc.set_training_dtype(a.dtype)?;
    // a cached teacher for the objectives that need one (the anchors' vectors)
    let teacher = match kinds.iter().any(|k| k == "ibkd" || k == "distill") {
        true => Some(std::rc::Rc::new(bench_teacher(a, &s.pairs, say)?)),
        false => None,
    };
    let recipes = kinds
        .iter()
        .map(|k| {
            let toml = objective_toml(k);
            let ov = s.overrides(a, &a.data, &[("objective", &toml)]);
            Ok(Recipe::load(None, &ov)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut timer = StepTimer::new(enc, recipes, teacher, 2e-5)?;
    timer.set_graph_mode(a.cuda_graph);
    nest_model::graph::reset_peak_memory(timer.encoder().device());
    say(format!(
        "bench train: {} in {} (max {} tokens), batch {} pairs{}, {} dims, {} libtorch threads; objectives {}",
        a.model,
        a.dtype,
        a.max_length,
        a.batch_size,
        match a.mini_batch_size {
            0 => String::new(),
            m => format!(" in GradCache chunks of {m}"),
        },
        s.dims.len(),
        tch::get_num_threads(),
        a.objectives
    ));
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut flops = 0.0;
    for i in 0..a.steps + 3 {
        let chunk = &s.pairs[i * a.batch_size..(i + 1) * a.batch_size];
        for (o, t) in times.iter_mut().enumerate() {
            let start = Instant::now();
            let lengths = timer.step(o, chunk, i as u64)?;
            if i < 3 {
                continue;
            }
            t.push(start.elapsed().as_secs_f64());
            if o == 0 {
                flops += lengths
                    .iter()
                    .map(|col| column_flops(timer.encoder(), col))
                    .sum::<f64>();
            }
        }
    }
    let (graphs, failed) = timer.graph_report();
    if a.cuda_graph != nest_train::trainer::GraphMode::Off {
        say(format!(
            "  cuda graphs: {graphs} recorded (one per step shape; GradCache: two per chunk shape){}",
            failed.map_or(String::new(), |f| format!("; recording stopped: {f}"))
        ));
    }
    let gpu_peak = nest_model::graph::peak_memory(timer.encoder().device());
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    Ok(StepFigures {
        medians: times.iter().map(|t| median(t)).collect(),
        mrl_steps: times[0].len(),
        gflops: flops / times[0].iter().sum::<f64>() / 1e9,
        rss: peak_rss_mb(),
        gpu_peak,
    })
}
