//! The machine a figure was measured on, as one record: the CPU (its model name and the
//! instructions that decide Nest's precision choices), its threads, the libtorch version, and
//! on a GPU the card (name, memory, compute capability, multiprocessors), the CUDA runtime and
//! the driver. Every benchmark prints it above its figures, and an evaluation report keeps it
//! beside its latencies, so that a figure never travels without what it was measured on.

use serde::{Deserialize, Serialize};
use tch::Device;

/// The CPU flags that change what Nest runs fastest (`dtype`'s `auto`: bf16 and int8
/// products), in the order they are listed.
const NOTABLE_FLAGS: [&str; 7] = [
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
];

/// Where a machine's figures come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU's model name (`/proc/cpuinfo`, what `lscpu` calls "Model name"), else the
    /// architecture.
    pub cpu: String,
    /// Those of [`NOTABLE_FLAGS`] the CPU reports.
    pub cpu_flags: Vec<String>,
    /// The CPUs this process may run on.
    pub logical_cpus: usize,
    /// libtorch's intra-op threads (`--threads`).
    pub libtorch_threads: i64,
    /// The libtorch version Nest was built against and links (`2.13.0`).
    pub torch: String,
    /// Where the model runs: `cpu` or `cuda:N`.
    pub device: String,
    /// The GPU, when `device` is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Gpu>,
}

/// A GPU's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// As the CUDA runtime names it (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    pub memory_mib: u64,
    /// `major.minor` (`9.0` for an H100).
    pub compute_capability: String,
    pub multiprocessors: u32,
    /// The CUDA runtime libtorch loaded (`13.0`).
    pub cuda_runtime: String,
    /// The NVIDIA driver (`580.159.04`, from `/proc/driver/nvidia/version`), when readable.
    pub driver: Option<String>,
}

impl Machine {
    /// This machine, on the device Nest picks here ([`crate::default_device`]).
    pub fn here() -> Machine {
        Machine::this(crate::default_device())
    }

    /// This machine, running on `device`.
    pub fn this(device: Device) -> Machine {
        let (cpu, flags) = cpu_info();
        Machine {
            cpu,
            cpu_flags: NOTABLE_FLAGS
                .iter()
                .filter(|f| flags.iter().any(|x| x == *f))
                .map(|f| f.to_string())
                .collect(),
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            libtorch_threads: tch::get_num_threads() as i64,
            torch: torch_version(),
            device: match device {
                Device::Cuda(i) => format!("cuda:{i}"),
                other => format!("{other:?}").to_lowercase(),
            },
            gpu: gpu(device),
        }
    }
}

impl std::fmt::Display for Machine {
    /// One line: `AMD EPYC (avx2; 2 logical CPUs), 2 libtorch threads, libtorch 2.13.0, on cpu`,
    /// with the card after `on cuda:N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flags = match self.cpu_flags.is_empty() {
            true => "no avx2".to_string(),
            false => self.cpu_flags.join(" "),
        };
        write!(
            f,
            "{} ({flags}; {} logical CPUs), {} libtorch threads, libtorch {}, on {}",
            self.cpu, self.logical_cpus, self.libtorch_threads, self.torch, self.device
        )?;
        if let Some(g) = &self.gpu {
            write!(
                f,
                ": {} (compute {}, {} multiprocessors, {} MiB), CUDA runtime {}, driver {}",
                g.name,
                g.compute_capability,
                g.multiprocessors,
                g.memory_mib,
                g.cuda_runtime,
                g.driver.as_deref().unwrap_or("unknown")
            )?;
        }
        Ok(())
    }
}

/// The CPU's model name and instruction flags (from /proc/cpuinfo; the architecture and no
/// flags elsewhere).
pub(crate) fn cpu_info() -> (String, Vec<String>) {
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

/// The libtorch version of this build (`shim/info.cpp`).
pub fn torch_version() -> String {
    // SAFETY: the shim returns a pointer to a static NUL-terminated string literal.
    let v = unsafe { std::ffi::CStr::from_ptr(nest_sys::nest_torch_version()) };
    v.to_string_lossy().into_owned()
}

/// The NVIDIA driver's version out of `/proc/driver/nvidia/version`'s text: the first
/// dotted number after `NVRM version:` (`NVRM version: NVIDIA UNIX x86_64 Kernel Module
/// 580.159.04 ...`, or `... Open Kernel Module for x86_64  580.82.07 ...`).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

#[cfg(feature = "cuda")]
fn gpu(device: Device) -> Option<Gpu> {
    let Device::Cuda(i) = device else {
        return None;
    };
    let (name, out) = crate::graph::cuda::device_info(i).ok()?;
    let runtime = out[4];
    Some(Gpu {
        name,
        memory_mib: (out[0].max(0) as u64) >> 20,
        compute_capability: format!("{}.{}", out[1], out[2]),
        multiprocessors: out[3].max(0) as u32,
        cuda_runtime: format!("{}.{}", runtime / 1000, runtime % 1000 / 10),
        driver: std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|t| driver_version(&t)),
    })
}

#[cfg(not(feature = "cuda"))]
fn gpu(_device: Device) -> Option<Gpu> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_is_read_off_either_kernel_module() {
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct 9 \
                      UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(driver_version(closed).as_deref(), Some("580.159.04"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.82.07  \
                    Release Build  (dvs-builder@U16-I1-N07-13-3)  Wed Aug 27 2025\n";
        assert_eq!(driver_version(open).as_deref(), Some("580.82.07"));
        assert_eq!(driver_version("GCC version: 12.2.0\n"), None);
    }

    #[test]
    fn one_line_and_json_carry_the_gpu() {
        let mut m = Machine::this(Device::Cpu);
        assert_eq!(m.device, "cpu");
        assert!(m.gpu.is_none());
        let line = m.to_string();
        assert!(line.contains(&format!("libtorch {}", m.torch)), "{line}");
        assert!(line.ends_with("on cpu"), "{line}");
        m.device = "cuda:0".into();
        m.gpu = Some(Gpu {
            name: "NVIDIA H100 80GB HBM3".into(),
            memory_mib: 81_559,
            compute_capability: "9.0".into(),
            multiprocessors: 132,
            cuda_runtime: "13.0".into(),
            driver: None,
        });
        let line = m.to_string();
        assert!(
            line.ends_with(
                "on cuda:0: NVIDIA H100 80GB HBM3 (compute 9.0, 132 multiprocessors, \
                 81559 MiB), CUDA runtime 13.0, driver unknown"
            ),
            "{line}"
        );
        let back: Machine = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
