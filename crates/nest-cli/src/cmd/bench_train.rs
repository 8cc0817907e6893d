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
use nest_train::data::{Batch, Source};
use nest_train::objective::{Objective, StepContext};
use nest_train::optim::AdamW;
use nest_train::recipe::{DataFormat, DataSource, LossKind};
use nest_train::trainer::{apply_update, micro_step, train, TrainOptions};
use nest_train::Recipe;

use super::bench_objectives::{bench_teacher, objective_toml};
use crate::args_bench::BenchTrainArgs;

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

/// Best fp32 GFLOP/s of a 2048^3 matrix product through libtorch (MKL): the practical ceiling.
fn sgemm_gflops() -> f64 {
    let _g = tch::no_grad_guard();
    let n = 2048i64;
    let a = tch::Tensor::randn([n, n], (tch::Kind::Float, tch::Device::Cpu));
    let b = tch::Tensor::randn([n, n], (tch::Kind::Float, tch::Device::Cpu));
    let _ = a.mm(&b);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let c = a.mm(&b);
        let _ = c.double_value(&[0, 0]);
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

/// Forward + backward FLOPs of one column: 3 x forward (backward = 2 x forward), forward per
/// layer = 2 T (4 H^2 + 2 H I) for the projections and FFN plus 4 B S^2 H for attention.
fn column_flops(enc: &ElasticEncoder, b: usize, s: usize) -> f64 {
    let c = &enc.config;
    let (h, i, l) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.num_hidden_layers as f64,
    );
    let t = (b * s) as f64;
    let fwd = l * (2.0 * t * (4.0 * h * h + 2.0 * h * i) + 4.0 * b as f64 * (s * s) as f64 * h);
    3.0 * fwd
}

// Long (~310 lines): the whole benchmark protocol read top to bottom (steps, epoch, peer, table).
// Splitting it around library entry points is issue 19's (a step-timing API in nest-train).
// long: one benchmark protocol (data, warm-up, timed steps, epoch, peers, table) in the order
// it runs; it rebuilds the trainer's parts by hand until nest-train offers a step-timing API
// (issue 19, open).
pub fn run(a: BenchTrainArgs) -> Result<()> {
    let dims = parse_dims(&a.dims)?;
    let model_dir = nest_model::hub::resolve(&a.model)?;
    let mut enc =
        ElasticEncoder::load(&model_dir, nest_model::default_device(), Some(a.max_length))?;
    enc.check(&[], &dims)?;
    anyhow::ensure!(
        matches!(
            a.dtype,
            nest_model::Dtype::Float32 | nest_model::Dtype::Bf16
        ),
        "--dtype {}: training runs in float32 or bf16",
        a.dtype
    );
    enc.set_training_dtype(a.dtype)?;
    let t = TsvTable::read(&a.data, &["anchor", "positive"])?;
    let need = a.batch_size * (a.steps + 3);
    if t.rows.len() < need.max(a.epoch_pairs) {
        bail!(
            "{}: {} rows, the benchmark needs {}",
            a.data.display(),
            t.rows.len(),
            need.max(a.epoch_pairs)
        );
    }
    let pairs: Vec<(String, String)> = t
        .rows
        .iter()
        .map(|(_, r)| (r[0].clone(), r[1].clone()))
        .collect();
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
    let dims_toml = format!("[{}]", a.dims);
    let base_flags = |extra: &[String]| -> Vec<String> {
        let mut f: Vec<String> = [
            "--model",
            &a.model,
            "--data",
            &format!("{}:pairs", a.data.display()),
            "--loss",
            "mnrl",
            "--matryoshka-dims",
            &dims_toml,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        f.extend_from_slice(extra);
        f
    };
    // a cached teacher for the objectives that need one (the anchors' vectors)
    let teacher = if kinds.iter().any(|k| k == "ibkd" || k == "distill") {
        Some(std::rc::Rc::new(bench_teacher(&a, &pairs)?))
    } else {
        None
    };
    let params = tch::nn::VarStore::new(enc.device());
    let objectives: Vec<Box<dyn Objective>> = kinds
        .iter()
        .map(|k| -> Result<Box<dyn Objective>> {
            let r = Recipe::load(
                None,
                &base_flags(&["--objective".into(), objective_toml(k)]),
            )?;
            Ok(Box::new(nest_train::objective::build_with(
                &r,
                enc.output_dim(),
                enc.num_layers(),
                &(params.root() / k.as_str()),
                teacher.clone(),
            )?))
        })
        .collect::<Result<_>>()?;
    // the objectives' own parameters (MIPIC's projectors) are optimised too, as in training
    let mut named: Vec<(String, tch::Tensor)> = enc.vs.variables().into_iter().collect();
    named.extend(params.variables());
    let mut opt = AdamW::new(named, 0.01);
    eprintln!(
        "bench train: {} in {} (max {} tokens), batch {} pairs, {} dims, {} libtorch threads; objectives {}",
        a.model,
        a.dtype,
        a.max_length,
        a.batch_size,
        dims.len(),
        tch::get_num_threads(),
        a.objectives
    );
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); objectives.len()];
    let mut flops = Vec::new();
    for i in 0..a.steps + 3 {
        let chunk = &pairs[i * a.batch_size..(i + 1) * a.batch_size];
        for (o, objective) in objectives.iter().enumerate() {
            let start = Instant::now();
            let texts: Vec<&str> = chunk
                .iter()
                .flat_map(|p| [p.0.as_str(), p.1.as_str()])
                .collect();
            let ids = enc.tokenizer.encode(&texts)?;
            let src = Source {
                spec: DataSource {
                    path: a.data.clone(),
                    format: DataFormat::Pairs,
                    weight: 1.0,
                    made_by: None,
                },
                texts: chunk
                    .iter()
                    .map(|p| vec![p.0.clone(), p.1.clone()])
                    .collect(),
                ids: ids.chunks(2).map(|c| c.to_vec()).collect(),
                scores: vec![],
            };
            let batch = Batch {
                source: 0,
                examples: (0..chunk.len()).collect(),
            };
            let ctx = StepContext {
                step: i as u64,
                micro_batch: i as u64,
                seed: 42,
            };
            micro_step(
                &enc,
                objective.as_ref(),
                &src,
                &batch,
                LossKind::Mnrl,
                &ctx,
                1,
            );
            apply_update(&mut opt, 1.0, 2e-5)
                .map_err(|g| anyhow::anyhow!("non-finite gradient norm {g}"))?;
            if i >= 3 {
                times[o].push(start.elapsed().as_secs_f64());
                if o == 0 {
                    let f: f64 = (0..2)
                        .map(|c| {
                            column_flops(
                                &enc,
                                chunk.len(),
                                src.ids.iter().map(|x| x[c].len()).max().unwrap_or(0),
                            )
                        })
                        .sum();
                    flops.push(f);
                }
            }
        }
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let times = times[0].clone();
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let step = sorted[sorted.len() / 2];
    let gflops = flops.iter().sum::<f64>() / times.iter().sum::<f64>() / 1e9;
    let rss_step = peak_rss_mb();
    eprintln!(
        "  nest step: median {step:.3} s over {} steps; {gflops:.1} GFLOP/s",
        times.len()
    );

    // one epoch end to end over `epoch_pairs` pairs, the trainer as `nest train` runs it
    let tmp = std::env::temp_dir().join(format!("nest-bench-train-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let epoch_file = tmp.join("pairs.tsv");
    let mut text = String::from("anchor\tpositive\n");
    for p in pairs.iter().take(a.epoch_pairs) {
        let _ = writeln!(text, "{}\t{}", p.0, p.1);
    }
    std::fs::write(&epoch_file, text)?;
    let flags: Vec<String> = [
        "--model",
        &a.model,
        "--data",
        &format!("{}:pairs", epoch_file.display()),
        "--loss",
        "mnrl",
        "--matryoshka-dims",
        &dims_toml,
        "--batch-size",
        &a.batch_size.to_string(),
        "--lr",
        "2e-5",
        "--weight-decay",
        "0.01",
        "--warmup-ratio",
        "0.1",
        "--decay",
        "linear",
        "--max-grad-norm",
        "1.0",
        "--seed",
        "42",
        "--max-length",
        &a.max_length.to_string(),
        "--save-every",
        "0",
        "--dtype",
        a.dtype.name(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let recipe = Recipe::load(None, &flags)?;
    let opts = TrainOptions {
        run_dir: tmp.join("run"),
        resume: false,
        overwrite: true,
        device: nest_model::default_device(),
        stop_after_steps: None,
        allow_world_change: false,
    };
    let summary = train(&recipe, &opts, &mut |_| {})?;
    let epoch = summary.train_seconds;
    let rss = peak_rss_mb();
    eprintln!(
        "  nest epoch ({} pairs, {} steps): {epoch:.1} s",
        a.epoch_pairs, summary.steps
    );

    let py = match &a.python {
        Some(py) => Some(run_python(py, &a, &epoch_file)?),
        None => None,
    };
    let _ = std::fs::remove_dir_all(&tmp);
    let peak = peak_gflops();
    let sgemm = sgemm_gflops();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| measure | nest | PyTorch / sentence-transformers | ratio |\n|---|---:|---:|---:|"
    );
    let get = |k: &str| py.as_ref().and_then(|v| v[k].as_f64());
    let row = |md: &mut String,
               name: &str,
               ours: f64,
               theirs: Option<f64>,
               unit: &str,
               ratio: Option<f64>| {
        let _ = writeln!(
            md,
            "| {name} | {ours:.3} {unit} | {} | {} |",
            theirs
                .map(|v| format!("{v:.3} {unit}"))
                .unwrap_or_else(|| "-".into()),
            ratio
                .map(|r| format!("{r:.2}x"))
                .unwrap_or_else(|| "-".into())
        );
    };
    row(
        &mut md,
        "MRL(MNRL) step, median (vs plain PyTorch)",
        step,
        get("torch_step_s"),
        "s",
        get("torch_step_s").map(|t| t / step),
    );
    row(
        &mut md,
        &format!(
            "one epoch, {} pairs (vs sentence-transformers)",
            a.epoch_pairs
        ),
        epoch,
        get("st_epoch_s"),
        "s",
        get("st_epoch_s").map(|t| t / epoch),
    );
    row(
        &mut md,
        "peak RSS, whole benchmark",
        rss,
        get("peak_rss_mb"),
        "MiB",
        get("peak_rss_mb").map(|t| t / rss),
    );
    let _ = writeln!(
        md,
        "| peak RSS after the step benchmark | {rss_step:.0} MiB | | |"
    );
    for (k, m) in kinds.iter().zip(&medians).skip(1) {
        let _ = writeln!(
            md,
            "| {k}(MNRL) step, median (vs Nest's MRL step in the same run, {:.3} s) | {m:.3} s | | {:.2}x MRL |",
            medians[0],
            m / medians[0]
        );
    }
    let _ = writeln!(
        md,
        "| achieved GFLOP/s in the {} step | {gflops:.1} ({:.0}% of the measured fp32 SGEMM ceiling {sgemm:.0}; nominal fp32 peak at the reported clock {peak:.0}) | | |",
        a.dtype,
        100.0 * gflops / sgemm
    );
    println!("{md}");
    if let Some(p) = &a.markdown {
        super::bench::append_markdown(p, &md)?;
    }
    Ok(())
}

fn run_python(py: &Path, a: &BenchTrainArgs, epoch_file: &Path) -> Result<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_train.py");
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
