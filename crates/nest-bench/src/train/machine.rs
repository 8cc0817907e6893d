//! What the machine gives: this process's peak resident memory, the best matrix-product rate
//! through libtorch and the CPU's nominal peak, and the FLOPs of a training step's columns.

use std::time::Instant;

use nest_model::ElasticEncoder;

/// Peak resident memory of this process (VmHWM), in MiB.
pub(super) fn peak_rss_mb() -> f64 {
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
pub(super) fn gemm_gflops(kind: tch::Kind, device: tch::Device) -> f64 {
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
pub(super) fn peak_gflops() -> f64 {
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
pub(super) fn column_flops(enc: &ElasticEncoder, lengths: &[usize]) -> f64 {
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
