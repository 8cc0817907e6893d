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
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind};

mod measure;
pub use measure::{measure, measure_cached, probe, Measurement};

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
                    "; note: this CPU has no VNNI / AMX-INT8, so int8 products run in float32 here (the quantised model, no speed-up)"
                }
                _ => "",
            };
            Resolved {
                dtype: d,
                requested: d.name().into(),
                reason: format!("asked for {d}{note}"),
            }
        }
        DtypeChoice::Auto => auto(device),
    }
}

/// `auto` on `device`: the cached measurement and [`decide_auto`]; a fresh measurement is
/// printed on stderr once, with where it was cached.
pub fn auto(device: Device) -> Resolved {
    let (m, fresh) = measure_cached(device);
    let r = decide_auto(&m);
    if let Some(path) = fresh {
        eprintln!(
            "dtype auto: measured once on this machine: {}{}",
            r.reason,
            path.map(|p| format!(" (cached in {}; delete it to measure again)", p.display()))
                .unwrap_or_default()
        );
    }
    r
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
}
