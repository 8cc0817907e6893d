use std::time::Instant;

use anyhow::{Context, Result};
use nest_core::{parse_dims, parse_layers};
use nest_eval::report::{grid_text, ModelInfo};
use nest_eval::sts::StsTask;
use nest_eval::Report;
use nest_model::EncodeOptions;

use crate::args::EvalStsArgs;
use crate::progress;

/// The default dims: powers of two from 16 up to the hidden size, and the hidden size itself.
pub fn default_dims(hidden: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (4..)
        .map(|p| 1usize << p)
        .take_while(|&d| d < hidden)
        .collect();
    v.push(hidden);
    v
}

pub fn run_sts(a: EvalStsArgs) -> Result<()> {
    anyhow::ensure!(a.model.batch_size >= 1, "--batch-size must be at least 1");
    let start = Instant::now();
    // Read (and check) every data file before the model, so a bad file fails fast.
    let tasks = a
        .data
        .iter()
        .map(|p| StsTask::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let model = super::load_model(&a.model)?;
    let layers = match &a.layers {
        Some(s) => parse_layers(s)?,
        None => (1..=model.num_layers()).collect(),
    };
    let dims = match &a.dims {
        Some(s) => parse_dims(s)?,
        None => default_dims(model.hidden_size()),
    };
    model.check(&layers, &dims)?;
    let total: usize = tasks.iter().map(|t| t.pairs.len() * 2).sum();
    let pb = progress::bar(total, "eval sts");
    let mut offset = 0usize;
    let mut last_task = String::new();
    let mut last_n = 0usize;
    let grids = nest_eval::sts::evaluate(
        &model,
        &tasks,
        &layers,
        &dims,
        EncodeOptions {
            batch_size: a.model.batch_size,
        },
        &mut |task, done, n| {
            if task != last_task {
                offset += last_n;
                last_task = task.to_string();
            }
            last_n = n;
            pb.set_position((offset + done) as u64);
        },
    )?;
    pb.finish_and_clear();
    let report = Report {
        nest_version: env!("CARGO_PKG_VERSION").into(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        model: ModelInfo {
            path: a.model.model.clone(),
            architecture: model.config.model_type.clone(),
            num_layers: model.num_layers(),
            hidden_size: model.hidden_size(),
            pooling: format!("{:?}", model.pooling).to_lowercase(),
            max_seq_length: model.tokenizer.max_length(),
        },
        tasks: grids,
        seconds: start.elapsed().as_secs_f64(),
    };
    for t in &report.tasks {
        println!("{}", grid_text(t));
    }
    let written = report
        .write(&a.out)
        .with_context(|| format!("writing the report to {}", a.out.display()))?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_dims_follow_hidden() {
        assert_eq!(super::default_dims(384), vec![16, 32, 64, 128, 256, 384]);
        assert_eq!(super::default_dims(32), vec![16, 32]);
        assert_eq!(super::default_dims(8), vec![8]);
    }
}
