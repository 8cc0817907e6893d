//! The machine record (`nest_model::machine`) against independent sources on this machine:
//! util-linux's `lscpu` for the CPU, coreutils' `nproc` for the CPUs this process may use, and
//! the torch wheel's own `version.py` (or a libtorch archive's `build-version`) for the libtorch
//! version. A source that is missing here skips its check with a message.

use std::process::Command;

use nest_model::machine::Machine;
use tch::Device;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_cpu_is_what_lscpu_and_nproc_say() {
    let m = Machine::this(Device::Cpu);
    let Some(lscpu) = output("lscpu", &[]) else {
        eprintln!("no lscpu here: skipped");
        return;
    };
    let field = |key: &str| {
        lscpu
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    if let Some(model) = field("Model name:") {
        assert_eq!(m.cpu, model);
    }
    let flags = field("Flags:").unwrap_or_default();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    for f in ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16"] {
        assert_eq!(
            m.cpu_flags.iter().any(|x| x == f),
            flags.contains(&f),
            "flag {f}: {:?} against lscpu's",
            m.cpu_flags
        );
    }
    if let Some(n) = output("nproc", &[]) {
        assert_eq!(m.logical_cpus.to_string(), n.trim());
    }
    assert!(m.libtorch_threads >= 1);
}

#[test]
fn the_torch_version_is_the_linked_wheels() {
    let m = Machine::this(Device::Cpu);
    let Some(root) = std::env::var_os("LIBTORCH").map(std::path::PathBuf::from) else {
        eprintln!("LIBTORCH is not set here: skipped");
        return;
    };
    let wheel = std::fs::read_to_string(root.join("version.py"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("__version__ = "))
                .map(|v| v.trim().trim_matches('\'').trim_matches('"').to_string())
        });
    let archive = std::fs::read_to_string(root.join("build-version")).ok();
    let Some(full) = wheel.or(archive) else {
        panic!(
            "{} has neither version.py nor build-version",
            root.display()
        );
    };
    // "2.13.0+cu130" or "2.13.0+cpu": the headers' TORCH_VERSION has no local part
    let release = full.trim().split('+').next().unwrap_or_default();
    assert_eq!(m.torch, release, "libtorch at {}", root.display());
}
