//! `nest bench train`: (a) seconds per MRL(MNRL) training step next to plain PyTorch, and the
//! step time of each other objective (2DMSE, ESE) relative to MRL's, interleaved on the same
//! batches, all through the trainer's own step function; (b) one epoch end to end next to
//! sentence-transformers' MatryoshkaLoss; (c) peak RSS; (d) achieved GFLOP/s next to this CPU's
//! peak.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nest_core::data::TsvTable;
use nest_core::parse_dims;
use nest_model::ElasticEncoder;
use nest_train::trainer::{train, StepTimer, TrainOptions};
use nest_train::Recipe;

use super::bench_objectives::{bench_teacher, objective_toml};
use crate::args_bench::BenchTrainArgs;
use crate::flags;

/// Peak resident memory of this process (VmHWM), in MiB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Best GFLOP/s of a square matrix product in `kind` on `device` through libtorch (MKL or
/// oneDNN on CPU, cuBLAS on a GPU): the practical ceiling of the step's products. 2048^3 on CPU,
/// 8192^3 on a GPU (smaller ones are launch-bound there).
fn gemm_gflops(kind: tch::Kind, device: tch::Device) -> f64 {
    let _g = tch::no_grad_guard();
    let n = if device == tch::Device::Cpu {
        2048i64
    } else {
        8192
    };
    let a = tch::Tensor::randn([n, n], (kind, device));
    let b = tch::Tensor::randn([n, n], (kind, device));
    let _ = a.mm(&b).double_value(&[0, 0]);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let c = a.mm(&b);
        let _ = c.double_value(&[0, 0]); // waits for the product, on a GPU too
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * (n as f64).powi(3) / best / 1e9
}

/// Nominal fp32 peak: threads x 32 FLOP/cycle (AVX-512, 2 FMA units) x the clock that
/// /proc/cpuinfo reports (in a VM, often the base clock: turbo can exceed it).
fn peak_gflops() -> f64 {
    let mhz = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN);
    tch::get_num_threads() as f64 * 32.0 * mhz / 1000.0
}

/// Forward + backward FLOPs of one column of texts `lengths` tokens long: 3 x forward (backward
/// = 2 x forward), forward per layer = 2 T (4 H^2 + 2 H I) for the projections and FFN, on the
/// T real tokens (the layers skip the padding), plus 4 B S^2 H for attention, padded to the
/// longest text S.
fn column_flops(enc: &ElasticEncoder, lengths: &[usize]) -> f64 {
    let b = lengths.len();
    let s = lengths.iter().copied().max().unwrap_or(0);
    let c = &enc.config;
    let (h, i, l) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.num_hidden_layers as f64,
    );
    let t = lengths.iter().sum::<usize>() as f64;
    let fwd = l * (2.0 * t * (4.0 * h * h + 2.0 * h * i) + 4.0 * b as f64 * (s * s) as f64 * h);
    3.0 * fwd
}

/// The benchmark's pairs and the flags every recipe in it shares.
struct Setup {
    dims: Vec<usize>,
    pairs: Vec<(String, String)>,
    dims_toml: String,
}

impl Setup {
    fn read(a: &BenchTrainArgs) -> Result<Setup> {
        let dims = parse_dims(&a.dims)?;
        anyhow::ensure!(
            matches!(
                a.dtype,
                nest_model::Dtype::Float32 | nest_model::Dtype::Bf16
            ),
            "--dtype {}: training runs in float32 or bf16",
            a.dtype
        );
        let t = TsvTable::read(&a.data, &["anchor", "positive"])?;
        let need = (a.batch_size * (a.steps + 3)).max(a.epoch_pairs);
        if t.rows.len() < need {
            bail!(
                "{}: {} rows, the benchmark needs {need}",
                a.data.display(),
                t.rows.len()
            );
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

    /// The recipe flags of the step benchmark and of the epoch run (MNRL on pairs, the
    /// benchmark's dims, lr 2e-5, weight decay 0.01, gradient clipping at 1, seed 42).
    fn flags(&self, a: &BenchTrainArgs, data: &Path, extra: &[&str]) -> Vec<String> {
        let data = format!("{}:pairs", data.display());
        let mut f: Vec<&str> = vec![
            "--model",
            &a.model,
            "--data",
            &data,
            "--loss",
            "mnrl",
            "--matryoshka-dims",
            &self.dims_toml,
            "--lr",
            "2e-5",
            "--weight-decay",
            "0.01",
            "--max-grad-norm",
            "1.0",
            "--seed",
            "42",
        ];
        f.extend_from_slice(extra);
        f.iter().map(|s| s.to_string()).collect()
    }
}

/// What the step benchmark measured: each objective's median step, MRL's FLOP rate and the
/// peak RSS after it.
struct StepFigures {
    medians: Vec<f64>,
    mrl_steps: usize,
    gflops: f64,
    rss: f64,
    /// The CUDA allocator's (allocated, reserved) peak bytes over the step benchmark.
    gpu_peak: Option<(u64, u64)>,
}

/// Interleaved timed steps of every objective on the same batches (3 warm-up steps first).
fn step_benchmark(a: &BenchTrainArgs, s: &Setup, kinds: &[String]) -> Result<StepFigures> {
    let model_dir = nest_model::hub::resolve(&a.model)?;
    let mut enc =
        ElasticEncoder::load(&model_dir, nest_model::default_device(), Some(a.max_length))?;
    enc.check(&[], &s.dims)?;
    enc.set_training_dtype(a.dtype)?;
    // a cached teacher for the objectives that need one (the anchors' vectors)
    let teacher = match kinds.iter().any(|k| k == "ibkd" || k == "distill") {
        true => Some(std::rc::Rc::new(bench_teacher(a, &s.pairs)?)),
        false => None,
    };
    let recipes = kinds
        .iter()
        .map(|k| {
            let toml = objective_toml(k);
            let ov = flags::overrides(&s.flags(a, &a.data, &["--objective", &toml]))?;
            Ok(Recipe::load(None, &ov)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut timer = StepTimer::new(enc, recipes, teacher, 2e-5)?;
    timer.set_graph_mode(a.cuda_graph);
    nest_model::graph::reset_peak_memory(timer.encoder().device());
    eprintln!(
        "bench train: {} in {} (max {} tokens), batch {} pairs, {} dims, {} libtorch threads; objectives {}",
        a.model,
        a.dtype,
        a.max_length,
        a.batch_size,
        s.dims.len(),
        tch::get_num_threads(),
        a.objectives
    );
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
        eprintln!(
            "  cuda graphs: {graphs} shapes recorded{}",
            failed.map_or(String::new(), |f| format!("; recording stopped: {f}"))
        );
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

/// One epoch over the first `epoch_pairs` pairs, the trainer as `nest train` runs it (written
/// to `epoch_file`): (training seconds, optimizer steps).
fn epoch_benchmark(a: &BenchTrainArgs, s: &Setup, dir: &Path) -> Result<(f64, u64)> {
    let epoch_file = dir.join("pairs.tsv");
    let mut text = String::from("anchor\tpositive\n");
    for p in s.pairs.iter().take(a.epoch_pairs) {
        let _ = writeln!(text, "{}\t{}", p.0, p.1);
    }
    std::fs::write(&epoch_file, text)
        .with_context(|| format!("writing {}", epoch_file.display()))?;
    let (batch, max_len) = (a.batch_size.to_string(), a.max_length.to_string());
    let extra = [
        "--batch-size",
        &batch,
        "--warmup-ratio",
        "0.1",
        "--decay",
        "linear",
        "--max-length",
        &max_len,
        "--save-every",
        "0",
        "--dtype",
        a.dtype.name(),
        "--cuda-graph",
        a.cuda_graph.name(),
    ];
    let recipe = Recipe::load(None, &flags::overrides(&s.flags(a, &epoch_file, &extra))?)?;
    let opts = TrainOptions {
        run_dir: dir.join("run"),
        resume: false,
        overwrite: true,
        device: nest_model::default_device(),
        stop_after_steps: None,
        allow_world_change: false,
    };
    let summary = train(&recipe, &opts, &mut |_| {})?;
    eprintln!(
        "  nest epoch ({} pairs, {} steps): {:.1} s",
        a.epoch_pairs, summary.steps, summary.train_seconds
    );
    Ok((summary.train_seconds, summary.steps))
}

/// (a) the step benchmark, (b) one epoch, (c) the peers with `--python`, then the table.
pub fn run(a: BenchTrainArgs) -> Result<()> {
    let s = Setup::read(&a)?;
    // each objective as a recipe builds it, all on the same model and batches
    let kinds: Vec<String> = a
        .objectives
        .split(',')
        .map(|k| k.trim().to_string())
        .collect();
    anyhow::ensure!(
        kinds.first().map(String::as_str) == Some("mrl"),
        "--objectives must start with mrl (the reference), got '{}'",
        a.objectives
    );
    let steps = step_benchmark(&a, &s, &kinds)?;
    eprintln!(
        "  nest step: median {:.3} s over {} steps; {:.1} GFLOP/s",
        steps.medians[0], steps.mrl_steps, steps.gflops
    );
    let tmp = std::env::temp_dir().join(format!("nest-bench-train-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let (epoch, _) = epoch_benchmark(&a, &s, &tmp)?;
    let rss = peak_rss_mb();
    let py = match &a.python {
        Some(py) => Some(run_python(py, &a, &tmp.join("pairs.tsv"))?),
        None => None,
    };
    let _ = std::fs::remove_dir_all(&tmp);
    let md = table(&a, &kinds, &steps, epoch, rss, py.as_ref());
    println!("{md}");
    if let Some(p) = &a.markdown {
        super::bench::append_markdown(p, &md)?;
    }
    Ok(())
}

/// The Markdown table of the figures, the peers' beside Nest's where measured.
fn table(
    a: &BenchTrainArgs,
    kinds: &[String],
    steps: &StepFigures,
    epoch: f64,
    rss: f64,
    py: Option<&serde_json::Value>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| measure | nest | PyTorch / sentence-transformers | ratio |\n|---|---:|---:|---:|"
    );
    let get = |k: &str| py.and_then(|v| v[k].as_f64());
    let mut row = |name: &str, ours: f64, theirs: Option<f64>, unit: &str| {
        let fmt = |v: f64| format!("{v:.3} {unit}");
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} |",
            fmt(ours),
            theirs.map_or_else(|| "-".into(), fmt),
            theirs.map_or_else(|| "-".into(), |t| format!("{:.2}x", t / ours))
        );
    };
    let step = steps.medians[0];
    row(
        "MRL(MNRL) step, median (vs plain PyTorch)",
        step,
        get("torch_step_s"),
        "s",
    );
    row(
        &format!(
            "one epoch, {} pairs (vs sentence-transformers)",
            a.epoch_pairs
        ),
        epoch,
        get("st_epoch_s"),
        "s",
    );
    row("peak RSS, whole benchmark", rss, get("peak_rss_mb"), "MiB");
    let _ = writeln!(
        md,
        "| peak RSS after the step benchmark | {:.0} MiB | | |",
        steps.rss
    );
    if let Some((alloc, reserved)) = steps.gpu_peak {
        let _ = writeln!(
            md,
            "| peak GPU memory in the step benchmark (allocated / reserved) | {:.0} / {:.0} MiB | | |",
            alloc as f64 / 1048576.0,
            reserved as f64 / 1048576.0
        );
    }
    for (k, m) in kinds.iter().zip(&steps.medians).skip(1) {
        let _ = writeln!(
            md,
            "| {k}(MNRL) step, median (vs Nest's MRL step in the same run, {step:.3} s) | {m:.3} s | | {:.2}x MRL |",
            m / step
        );
    }
    let device = nest_model::default_device();
    let kind = a.dtype.matmul_kind();
    let ceiling = gemm_gflops(kind, device);
    let nominal = match device {
        tch::Device::Cpu => format!(
            "; nominal fp32 peak at the reported clock {:.0}",
            peak_gflops()
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        md,
        "| achieved GFLOP/s in the {} step | {:.1} ({:.1}% of a {kind:?} matrix product's {ceiling:.0} on {device:?}{nominal}) | | |",
        a.dtype,
        steps.gflops,
        100.0 * steps.gflops / ceiling
    );
    md
}

fn run_python(py: &Path, a: &BenchTrainArgs, epoch_file: &Path) -> Result<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench/bench_train.py");
    eprintln!(
        "  running PyTorch and sentence-transformers with {} ...",
        py.display()
    );
    let out = Command::new(py)
        .arg(&script)
        .args(["--model", &a.model, "--data"])
        .arg(&a.data)
        .arg("--epoch-data")
        .arg(epoch_file)
        .args([
            "--batch-size",
            &a.batch_size.to_string(),
            "--max-length",
            &a.max_length.to_string(),
            "--dims",
            &a.dims,
            "--steps",
            &a.steps.to_string(),
        ])
        .args((a.dtype == nest_model::Dtype::Bf16).then_some("--bf16"))
        .args(super::bench::peer_device_args())
        .output()
        .with_context(|| format!("starting {}", py.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("parsing '{line}'"))?;
    Ok(v)
}
