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
    peers: &[serde_json::Value],
) -> String {
    let py = peers.first();
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
    objective_rows(&mut md, a.batch_size, kinds, &steps.medians, peers);
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

/// Each objective after MRL: its step against Nest's MRL step (`medians[0]`), and against plain
/// PyTorch's step of that objective where a peer timed it (its JSON names the objective).
fn objective_rows(
    md: &mut String,
    batch: usize,
    kinds: &[String],
    medians: &[f64],
    peers: &[serde_json::Value],
) {
    let step = medians[0];
    for (k, m) in kinds.iter().zip(medians).skip(1) {
        let _ = writeln!(
            md,
            "| {k}(MNRL) step, median (vs Nest's MRL step in the same run, {step:.3} s) | {m:.3} s | | {:.2}x MRL |",
            m / step
        );
        let peer = peers
            .iter()
            .find(|p| p["objective"].as_str() == Some(k.as_str()));
        if let Some(theirs) = peer.and_then(|p| p["torch_step_s"].as_f64()) {
            let _ = writeln!(
                md,
                "| {k}(MNRL) step at batch {batch}, median (vs plain PyTorch's {k}) | {m:.3} s | {theirs:.3} s | {:.2}x |",
                theirs / m
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch's 2DMSE step (the second peer run) sits on Nest's 2DMSE row, the ratio theirs
    /// over ours; the MRL peer's step on the MRL row.
    #[test]
    fn each_peer_step_sits_on_its_objectives_row() {
        let a = TrainBench {
            model: "m".into(),
            data: "d.tsv".into(),
            batch_size: 16,
            max_length: 32,
            dims: "8,16".into(),
            steps: 3,
            teacher: "t".into(),
            objectives: "mrl,2dmse".into(),
            dtype: nest_model::Dtype::Float32,
            epoch_pairs: 64,
            python: None,
            peer_args: Vec::new(),
            cuda_graph: nest_train::trainer::GraphMode::Off,
            mini_batch_size: 0,
        };
        let steps = StepFigures {
            medians: vec![0.5, 0.25],
            mrl_steps: 3,
            gflops: 1.0,
            rss: 10.0,
            gpu_peak: None,
        };
        let kinds = ["mrl".to_string(), "2dmse".to_string()];
        let peers = [
            serde_json::json!({"torch_step_s": 1.0, "st_epoch_s": 4.0, "peak_rss_mb": 20.0}),
            serde_json::json!({"torch_step_s": 1.5, "objective": "2dmse"}),
        ];
        let md = table(&a, &kinds, &steps, 2.0, 10.0, &peers);
        assert!(
            md.contains("median (vs plain PyTorch) | 0.500 s | 1.000 s | 2.00x |"),
            "{md}"
        );
        assert!(
            md.contains("(vs plain PyTorch's 2dmse) | 0.250 s | 1.500 s | 6.00x |"),
            "{md}"
        );
        let md = table(&a, &kinds, &steps, 2.0, 10.0, &peers[..1]);
        assert!(!md.contains("plain PyTorch's 2dmse"), "{md}");
    }
}
