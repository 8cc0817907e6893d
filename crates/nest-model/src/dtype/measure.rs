//! Measuring the machine for `auto`: the CPU's bf16 / int8 instructions, float32 against bf16
//! matrix-product speed (interleaved rounds), and the per-machine cache of the result.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// What the machine measured (cached per machine).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// CPU model name, or the device for a GPU.
    pub machine: String,
    /// Whether the CPU reports bf16 instructions (AVX512-BF16 or AMX-BF16); true on GPUs.
    pub bf16_instructions: bool,
    /// Whether the CPU reports int8 dot-product instructions (AVX512-VNNI, AVX-VNNI, AMX-INT8).
    pub int8_instructions: bool,
    pub threads: i64,
    /// GFLOP/s of the reference product in float32 and in bf16 (None: not measured).
    pub float32_gflops: f64,
    pub bf16_gflops: Option<f64>,
}

impl Measurement {
    pub fn bf16_speedup(&self) -> Option<f64> {
        self.bf16_gflops.map(|b| b / self.float32_gflops)
    }
}

/// What can be known without measuring.
pub fn probe(device: Device) -> Measurement {
    let threads = tch::get_num_threads() as i64;
    if device != Device::Cpu {
        return Measurement {
            machine: format!("{device:?}"),
            bf16_instructions: true,
            int8_instructions: true,
            threads,
            float32_gflops: 0.0,
            bf16_gflops: None,
        };
    }
    let (model, flags) = crate::machine::cpu_info();
    let has = |f: &str| flags.iter().any(|x| x == f);
    Measurement {
        machine: model,
        bf16_instructions: has("avx512_bf16") || has("amx_bf16"),
        int8_instructions: has("avx512_vnni") || has("avx_vnni") || has("amx_int8"),
        threads,
        float32_gflops: 0.0,
        bf16_gflops: None,
    }
}

/// Best GFLOP/s of `[m, k] x [k, n]` products in each kind, measured in interleaved rounds (so
/// that a burst of load elsewhere on the machine hits both kinds alike; the best round of each
/// is the machine's capability).
fn gflops(kinds: &[Kind], device: Device, rounds: usize) -> Vec<f64> {
    let (m, k, n) = (1024i64, 384i64, 1536i64);
    let _g = tch::no_grad_guard();
    let a = Tensor::randn([m, k], (Kind::Float, device));
    let w = Tensor::randn([n, k], (Kind::Float, device));
    let pairs: Vec<(Tensor, Tensor)> = kinds
        .iter()
        .map(|&kind| (a.to_kind(kind), w.to_kind(kind)))
        .collect();
    let sync = || {
        if let Device::Cuda(i) = device {
            tch::Cuda::synchronize(i as i64);
        }
    };
    let mut best = vec![0.0f64; kinds.len()];
    for round in 0..=rounds {
        for (i, (a, w)) in pairs.iter().enumerate() {
            sync();
            let start = Instant::now();
            let reps = 4;
            for _ in 0..reps {
                let _ = a.linear::<Tensor>(w, None);
            }
            sync();
            let rate = 2.0 * (m * k * n * reps) as f64 / start.elapsed().as_secs_f64() / 1e9;
            if round > 0 {
                best[i] = best[i].max(rate); // round 0 warms up
            }
        }
    }
    best
}

/// Measures float32 and (where the instructions exist) bf16 products now (~0.3 s on a CPU).
pub fn measure(device: Device) -> Measurement {
    let mut m = probe(device);
    if m.bf16_instructions {
        let g = gflops(&[Kind::Float, Kind::BFloat16], device, 5);
        m.float32_gflops = g[0];
        m.bf16_gflops = Some(g[1]);
    } else {
        m.float32_gflops = gflops(&[Kind::Float], device, 5)[0];
    }
    m
}

/// Where measurements are cached: `$NEST_CACHE/dtype` or `~/.cache/nest/dtype`.
fn cache_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("NEST_CACHE") {
        return Some(PathBuf::from(d).join("dtype"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nest/dtype"))
}

/// The cache key: CPU model, flags and thread count (a GPU is measured every time: cheap).
fn machine_key(device: Device) -> Option<String> {
    if device != Device::Cpu {
        return None;
    }
    let (model, flags) = crate::machine::cpu_info();
    let text = format!("{model}|{}|{}", flags.join(" "), tch::get_num_threads());
    Some(nest_core::fsutil::sha256_hex(text.as_bytes())[..16].to_string())
}

/// [`measure`], cached per machine: read from the cache when there, else measured and written
/// (atomically; a cache that cannot be written is only a note). The second value is where a
/// fresh measurement was cached (`Some(None)`: measured but not cached; `None`: read from the
/// cache), so that the caller can say once what it measured.
pub fn measure_cached(device: Device) -> (Measurement, Option<Option<PathBuf>>) {
    measure_cached_in(cache_dir(), device)
}

fn measure_cached_in(
    dir: Option<PathBuf>,
    device: Device,
) -> (Measurement, Option<Option<PathBuf>>) {
    let path = machine_key(device).and_then(|k| dir.map(|d| d.join(format!("{k}.json"))));
    if let Some(p) = &path {
        if let Some(m) = std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Measurement>(&b).ok())
        {
            return (m, None);
        }
    }
    let m = measure(device);
    if let Some(p) = &path {
        let bytes = serde_json::to_vec_pretty(&m).unwrap_or_default();
        if let Err(e) = nest_core::fsutil::write_atomic(p, &bytes) {
            eprintln!(
                "note: cannot cache the dtype measurement at {}: {e}",
                p.display()
            );
        }
    }
    (m, Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurement_is_cached_per_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (a, fresh) = measure_cached_in(Some(dir.path().to_path_buf()), Device::Cpu);
        let (b, again) = measure_cached_in(Some(dir.path().to_path_buf()), Device::Cpu);
        assert!(fresh.is_some() && again.is_none());
        // the second call reads the cache (JSON keeps ~15 significant digits)
        assert!((a.float32_gflops - b.float32_gflops).abs() < 1e-9 * a.float32_gflops);
        assert_eq!(a.bf16_gflops.is_some(), b.bf16_gflops.is_some());
        assert!(a.float32_gflops > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
