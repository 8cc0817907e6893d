//! The training benchmark of `nest bench train`: (a) seconds per MRL(MNRL) training step next
//! to plain PyTorch, and the step time of each other objective (2DMSE, ESE) relative to MRL's,
//! interleaved on the same batches, all through the trainer's own step function
//! (`train/step.rs`); (b) one epoch end to end next to sentence-transformers' MatryoshkaLoss
//! (`train/epoch.rs`); (c) peak RSS; (d) achieved GFLOP/s next to this CPU's peak
//! (`train/machine.rs`). The peers run in `train/peer.rs`, the figures' table is
//! `train/table.rs`, the `--objectives` names and the cached teacher are `train/objectives.rs`.

mod epoch;
mod machine;
mod objectives;
mod peer;
mod step;
mod table;

use std::path::{Path, PathBuf};

use nest_core::data::TsvTable;
use nest_core::parse_dims;
use nest_train::recipe::Overrides;
use nest_train::trainer::GraphMode;

use crate::{Error, Result};

/// What `nest bench train` measures (its flags, parsed by the CLI).
#[derive(Debug, Clone)]
pub struct TrainBench {
    /// Model directory or hub id.
    pub model: String,
    /// A TSV whose first two columns are anchor / positive.
    pub data: PathBuf,
    pub batch_size: usize,
    pub max_length: usize,
    /// The Matryoshka dims, comma-separated (`16,32,64`).
    pub dims: String,
    /// Timed steps (after 3 warm-up steps); the median is reported.
    pub steps: usize,
    /// The teacher of the `ibkd` and `distill` objectives.
    pub teacher: String,
    /// Objectives compared with MRL's step, comma-separated; the first must be `mrl`.
    pub objectives: String,
    /// The training arithmetic: float32 or bf16.
    pub dtype: nest_model::Dtype,
    /// Pairs in the one-epoch end-to-end comparison.
    pub epoch_pairs: usize,
    /// A Python that runs scripts/bench/bench_train.py in the same run.
    pub python: Option<PathBuf>,
    /// Extra arguments of that script (the CLI's `--device` of the peers).
    pub peer_args: Vec<String>,
    /// Record each objective's step as a CUDA graph per input shape and replay it, where the
    /// objective can be (under GradCache: the chunk passes).
    pub cuda_graph: GraphMode,
    /// GradCache chunk size (0: off) on both sides.
    pub mini_batch_size: usize,
}

/// The benchmark's pairs and the flags every recipe in it shares.
struct Setup {
    dims: Vec<usize>,
    pairs: Vec<(String, String)>,
    dims_toml: String,
}

impl Setup {
    fn read(a: &TrainBench) -> Result<Setup> {
        let dims = parse_dims(&a.dims)?;
        if !matches!(
            a.dtype,
            nest_model::Dtype::Float32 | nest_model::Dtype::Bf16
        ) {
            return Err(Error::Config(format!(
                "--dtype {}: training runs in float32 or bf16",
                a.dtype
            )));
        }
        let t = TsvTable::read(&a.data, &["anchor", "positive"])?;
        let need = (a.batch_size * (a.steps + 3)).max(a.epoch_pairs);
        if t.rows.len() < need {
            return Err(Error::Config(format!(
                "{}: {} rows, the benchmark needs {need}",
                a.data.display(),
                t.rows.len()
            )));
        }
        let pairs = t
            .rows
            .iter()
            .map(|(_, r)| (r[0].clone(), r[1].clone()))
            .collect();
        Ok(Setup {
            dims,
            pairs,
            dims_toml: format!("[{}]", a.dims),
        })
    }

    /// The recipe keys of the step benchmark and of the epoch run (MNRL on pairs, the
    /// benchmark's dims and batch (GradCache chunks), lr 2e-5, weight decay 0.01, gradient
    /// clipping at 1, seed 42), as the
    /// flags `--key value` would set them.
    fn overrides(&self, a: &TrainBench, data: &Path, extra: &[(&str, &str)]) -> Overrides {
        let data = format!("{}:pairs", data.display());
        let (batch, mini) = (a.batch_size.to_string(), a.mini_batch_size.to_string());
        let mut f: Vec<(&str, &str)> = vec![
            ("model", &a.model),
            ("data", &data),
            ("loss", "mnrl"),
            ("matryoshka-dims", &self.dims_toml),
            ("lr", "2e-5"),
            ("weight-decay", "0.01"),
            ("max-grad-norm", "1.0"),
            ("seed", "42"),
            ("batch-size", &batch),
            ("mini-batch-size", &mini),
        ];
        f.extend_from_slice(extra);
        Overrides::from_text(f)
    }
}

/// (a) the step benchmark, (b) one epoch, (c) the peers with `python` (PyTorch's MRL step and
/// sentence-transformers' epoch; PyTorch's 2DMSE step too when `2dmse` is compared); returns
/// the Markdown table of the figures. `say` gets the progress lines (the CLI prints them on
/// stderr).
pub fn run(a: &TrainBench, say: &mut dyn FnMut(String)) -> Result<String> {
    let s = Setup::read(a)?;
    // each objective as a recipe builds it, all on the same model and batches
    let kinds: Vec<String> = a
        .objectives
        .split(',')
        .map(|k| k.trim().to_string())
        .collect();
    if kinds.first().map(String::as_str) != Some("mrl") {
        return Err(Error::Config(format!(
            "--objectives must start with mrl (the reference), got '{}'",
            a.objectives
        )));
    }
    let here = nest_model::machine::Machine::here();
    say(format!("machine: {here}"));
    let steps = step::step_benchmark(a, &s, &kinds, say)?;
    say(format!(
        "  nest step: median {:.3} s over {} steps; {:.1} GFLOP/s",
        steps.medians[0], steps.mrl_steps, steps.gflops
    ));
    let tmp = std::env::temp_dir().join(format!("nest-bench-train-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    let (epoch, _) = epoch::epoch_benchmark(a, &s, &tmp, say)?;
    let rss = machine::peak_rss_mb();
    let epoch_file = tmp.join("pairs.tsv");
    let mut peers = Vec::new();
    if let Some(py) = &a.python {
        peers.push(peer::run_python(py, a, &epoch_file, "mrl", say)?);
        // the peer also steps 2DMSE (not under GradCache, which its script leaves to MRL)
        if kinds.iter().any(|k| k == "2dmse") && a.mini_batch_size == 0 {
            peers.push(peer::run_python(py, a, &epoch_file, "2dmse", say)?);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let md = table::table(a, &kinds, &steps, epoch, rss, &peers);
    Ok(format!("Measured on {here}.\n\n{md}"))
}
