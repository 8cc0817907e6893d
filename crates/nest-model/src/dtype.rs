//! The arithmetic an encoder runs in (`--dtype`, `dtype =` in recipes): the one owner of that
//! choice. `--precision` is a different axis: how finished vectors are *stored* (nest-eval,
//! nest-index).
//!
//! - [`Dtype::Float32`]: every tensor float32 (the parity fixtures' arithmetic).
//! - [`Dtype::Bf16`]: the matrix products (the linear layers and attention) in bfloat16, the
//!   residual stream, LayerNorm, softmax statistics, pooling and every loss in float32. For
//!   inference the linear weights are converted once; for training (mixed precision) the
//!   float32 master weights stay and are cast per use, so AdamW and checkpoints stay float32.
//! - [`Dtype::Int8`]: dynamic quantisation of the encoder's linear layers, for inference only:
//!   int8 weights per output channel, activations quantised per row at run time, int32
//!   accumulation (libtorch's `_int_mm`), see [`crate::linear`].
//!
//! `auto` ([`DtypeChoice::Auto`], the default for inference) measures float32 against bf16
//! matrix products on the machine it runs on, once: the result is cached per machine (CPU model,
//! flags and thread count) in `$NEST_CACHE/dtype/` and printed when measured. It picks bf16 only
//! when the measured speed-up is at least [`AUTO_MIN_SPEEDUP`]; it never picks int8 (its quality
//! cost depends on the model: `nest eval --dtype` shows it).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// The arithmetic an encoder runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Float32,
    Bf16,
    Int8,
}

impl Dtype {
    pub const ALL: [Dtype; 3] = [Dtype::Float32, Dtype::Bf16, Dtype::Int8];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Bf16 => "bf16",
            Dtype::Int8 => "int8",
        }
    }

    /// The tensor kind of the matrix products that are not quantised (int8 runs attention in
    /// float32).
    pub fn matmul_kind(self) -> Kind {
        match self {
            Dtype::Bf16 => Kind::BFloat16,
            Dtype::Float32 | Dtype::Int8 => Kind::Float,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "float32" | "fp32" | "f32" => Ok(Dtype::Float32),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            "int8" => Ok(Dtype::Int8),
            other => Err(format!(
                "unknown dtype '{other}': expected float32, bf16 or int8"
            )),
        }
    }
}

/// What a user asked for: a fixed dtype, or `auto` (measured on this machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DtypeChoice {
    #[default]
    Auto,
    Fixed(Dtype),
}

impl FromStr for DtypeChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(DtypeChoice::Auto);
        }
        s.parse::<Dtype>()
            .map(DtypeChoice::Fixed)
            .map_err(|e| e.replace("expected", "expected auto,"))
    }
}

impl TryFrom<String> for DtypeChoice {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<DtypeChoice> for String {
    fn from(c: DtypeChoice) -> String {
        c.to_string()
    }
}

impl fmt::Display for DtypeChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DtypeChoice::Auto => f.write_str("auto"),
            DtypeChoice::Fixed(d) => d.fmt(f),
        }
    }
}

/// `auto` picks bf16 only when its matrix products measured at least this much faster than
/// float32's: the whole forward pass gains less than the products alone (tokenisation, pooling
/// and the float32 LayerNorms do not speed up), so a bare win would not pay for the casts.
pub const AUTO_MIN_SPEEDUP: f64 = 1.25;

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

/// What `auto` (or a fixed choice) resolved to, and why: printed once, recorded in reports,
/// run dirs and the server's `/v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    pub dtype: Dtype,
    pub requested: String,
    pub reason: String,
}

/// The `auto` rule on a measurement (pure; tests feed it synthetic ones).
pub fn decide_auto(m: &Measurement) -> Resolved {
    let (dtype, reason) = match m.bf16_speedup() {
        _ if !m.bf16_instructions => (
            Dtype::Float32,
            format!(
                "{}: no AVX512-BF16 / AMX-BF16 instructions, float32",
                m.machine
            ),
        ),
        Some(s) if s >= AUTO_MIN_SPEEDUP => (
            Dtype::Bf16,
            format!(
                "{}: bf16 products measured {s:.2}x float32 ({:.0} vs {:.0} GFLOP/s, {} threads)",
                m.machine,
                m.bf16_gflops.unwrap_or(0.0),
                m.float32_gflops,
                m.threads
            ),
        ),
        Some(s) => (
            Dtype::Float32,
            format!(
                "{}: bf16 products measured {s:.2}x float32 (below {AUTO_MIN_SPEEDUP}x), float32",
                m.machine
            ),
        ),
        None => (Dtype::Float32, format!("{}: float32", m.machine)),
    };
    Resolved {
        dtype,
        requested: "auto".into(),
        reason,
    }
}

/// Resolves a choice on `device`: a fixed dtype as asked (with a note when the CPU lacks the
/// instructions that make it fast), `auto` by [`measure_cached`] and [`decide_auto`].
pub fn resolve(choice: DtypeChoice, device: Device) -> Resolved {
    match choice {
        DtypeChoice::Fixed(d) => {
            let m = probe(device);
            let note = match d {
                Dtype::Bf16 if !m.bf16_instructions => {
                    "; note: this CPU has no AVX512-BF16 / AMX-BF16, bf16 is emulated and slow"
                }
                Dtype::Int8 if !m.int8_instructions => {
                    "; note: this CPU has no VNNI / AMX-INT8, int8 products are slow"
                }
                _ => "",
            };
            Resolved {
                dtype: d,
                requested: d.name().into(),
                reason: format!("asked for {d}{note}"),
            }
        }
        DtypeChoice::Auto => decide_auto(&measure_cached(device)),
    }
}

/// The CPU's model name and instruction flags (from /proc/cpuinfo; empty elsewhere).
fn cpu_info() -> (String, Vec<String>) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let flags = field("flags")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (model, flags)
}

/// What can be known without measuring.
fn probe(device: Device) -> Measurement {
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
    let (model, flags) = cpu_info();
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
    let (model, flags) = cpu_info();
    let text = format!("{model}|{}|{}", flags.join(" "), tch::get_num_threads());
    Some(nest_core::fsutil::sha256_hex(text.as_bytes())[..16].to_string())
}

/// [`measure`], cached per machine: read from the cache when there, else measured, printed on
/// stderr once and written (atomically; a cache that cannot be written is only a note).
pub fn measure_cached(device: Device) -> Measurement {
    measure_cached_in(cache_dir(), device)
}

fn measure_cached_in(dir: Option<PathBuf>, device: Device) -> Measurement {
    let path = machine_key(device).and_then(|k| dir.map(|d| d.join(format!("{k}.json"))));
    if let Some(p) = &path {
        if let Some(m) = std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Measurement>(&b).ok())
        {
            return m;
        }
    }
    let m = measure(device);
    let r = decide_auto(&m);
    eprintln!(
        "dtype auto: measured once on this machine: {}{}",
        r.reason,
        path.as_ref()
            .map(|p| format!(" (cached in {}; delete it to measure again)", p.display()))
            .unwrap_or_default()
    );
    if let Some(p) = &path {
        let bytes = serde_json::to_vec_pretty(&m).unwrap_or_default();
        if let Err(e) = nest_core::fsutil::write_atomic(p, &bytes) {
            eprintln!(
                "note: cannot cache the dtype measurement at {}: {e}",
                p.display()
            );
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(bf16: Option<f64>, instr: bool) -> Measurement {
        Measurement {
            machine: "test cpu".into(),
            bf16_instructions: instr,
            int8_instructions: false,
            threads: 2,
            float32_gflops: 100.0,
            bf16_gflops: bf16,
        }
    }

    #[test]
    fn auto_picks_bf16_only_when_measured_faster() {
        assert_eq!(decide_auto(&m(Some(450.0), true)).dtype, Dtype::Bf16);
        // slower, equal, or a win below the margin: float32
        assert_eq!(decide_auto(&m(Some(58.0), true)).dtype, Dtype::Float32);
        assert_eq!(decide_auto(&m(Some(100.0), true)).dtype, Dtype::Float32);
        assert_eq!(decide_auto(&m(Some(120.0), true)).dtype, Dtype::Float32);
        // no instructions: float32 whatever was measured, with the reason
        let r = decide_auto(&m(Some(450.0), false));
        assert_eq!(r.dtype, Dtype::Float32);
        assert!(r.reason.contains("no AVX512-BF16"), "{}", r.reason);
    }

    #[test]
    fn parses_names_and_refuses_others() {
        assert_eq!("bf16".parse::<Dtype>(), Ok(Dtype::Bf16));
        assert_eq!("bfloat16".parse::<Dtype>(), Ok(Dtype::Bf16));
        assert_eq!("FP32".parse::<Dtype>(), Ok(Dtype::Float32));
        assert_eq!("auto".parse::<DtypeChoice>(), Ok(DtypeChoice::Auto));
        assert_eq!(
            "int8".parse::<DtypeChoice>(),
            Ok(DtypeChoice::Fixed(Dtype::Int8))
        );
        let e = "fp16".parse::<DtypeChoice>().unwrap_err();
        assert!(e.contains("expected auto, float32, bf16 or int8"), "{e}");
    }

    #[test]
    fn measurement_is_cached_per_machine() {
        let dir = tempfile::tempdir().unwrap();
        let a = measure_cached_in(Some(dir.path().to_path_buf()), Device::Cpu);
        let b = measure_cached_in(Some(dir.path().to_path_buf()), Device::Cpu);
        // the second call reads the cache (JSON keeps ~15 significant digits)
        assert!((a.float32_gflops - b.float32_gflops).abs() < 1e-9 * a.float32_gflops);
        assert_eq!(a.bf16_gflops.is_some(), b.bf16_gflops.is_some());
        assert!(a.float32_gflops > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
