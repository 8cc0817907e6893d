//! The figures as a Markdown table, the peers' beside Nest's where measured.

use std::fmt::Write as _;

use super::machine::{gemm_gflops, peak_gflops};
use super::step::StepFigures;
use super::TrainBench;

/// The Markdown table of the figures, the peers' beside Nest's where measured.
// long: one table, its rows written top to bottom in the order they print
pub(super) fn table(
    a: &TrainBench,
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
    let cached = match a.mini_batch_size {
        0 => String::new(),
        m => format!(", GradCache chunks of {m} on both sides"),
    };
    row(
        &format!(
            "MRL(MNRL) step at batch {}{cached}, median (vs plain PyTorch)",
            a.batch_size
        ),
        step,
        get("torch_step_s"),
        "s",
    );
    row(
        &format!(
            "one epoch, {} pairs{cached} (vs sentence-transformers)",
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
