//! `nest bench train`: the flags as [`nest_bench::train::TrainBench`], the benchmark run by
//! nest-bench (step times per objective, one epoch, peak RSS, GFLOP/s, the Python peers), its
//! Markdown table printed and, with `--markdown`, appended.

use anyhow::Result;
use nest_bench::train::TrainBench;

use crate::args_bench::BenchTrainArgs;

pub fn run(a: BenchTrainArgs) -> Result<()> {
    let bench = TrainBench {
        model: a.model,
        data: a.data,
        batch_size: a.batch_size,
        max_length: a.max_length,
        dims: a.dims,
        steps: a.steps,
        teacher: a.teacher,
        objectives: a.objectives,
        dtype: a.dtype,
        epoch_pairs: a.epoch_pairs,
        python: a.python,
        peer_args: super::bench::peer_device_args(),
        cuda_graph: a.cuda_graph,
        mini_batch_size: a.mini_batch_size,
    };
    let md = nest_bench::train::run(&bench, &mut |line| eprintln!("{line}"))?;
    println!("{md}");
    if let Some(p) = &a.markdown {
        super::bench::append_markdown(p, &md)?;
    }
    Ok(())
}
