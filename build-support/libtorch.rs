// The part of a build script that finds libtorch, shared by the crates that compile C++ against
// it (nest-model's AdamW shim, nest-dist's c10d shim) through
// `include!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../build-support/libtorch.rs"))`.

/// The libtorch that tch builds against (`LIBTORCH`, as `scripts/setup.sh` writes it into
/// `.cargo/config.toml`): its folder, its `include` folder (checked to hold `header`, which
/// `krate`'s C++ needs), and the C++ ABI flag (`LIBTORCH_CXX11_ABI`, default 1). Panics with
/// what to do when either is missing, as a build script reports errors.
fn libtorch(krate: &str, header: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let root = std::env::var("LIBTORCH")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            panic!(
                "{krate}: LIBTORCH is not set; run scripts/setup.sh (it writes .cargo/config.toml) \
                 or point LIBTORCH at a libtorch / torch wheel folder"
            )
        });
    let include = root.join("include");
    assert!(
        include.join(header).exists(),
        "{krate}: {} has no {header}; use the torch wheel's libtorch",
        include.display()
    );
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    (root, include, abi)
}

/// Folders holding `headers` (the CUDA runtime's, NCCL's) for a `cuda` build: those in
/// `NEST_CUDA_INCLUDE` (`:`-separated) if set, else those of the NVIDIA wheels next to the torch
/// wheel (`nvidia/*/include`, as `pip install torch` and `scripts/setup/check_cuda_build.sh` lay them
/// out), then `$CUDA_HOME/include` and `/usr/local/cuda/include`. Panics (a build script's error)
/// naming what to install when a header is in none of them.
#[allow(dead_code)]
fn cuda_includes(
    krate: &str,
    libtorch: &std::path::Path,
    headers: &[&str],
) -> Vec<std::path::PathBuf> {
    use std::path::PathBuf;
    println!("cargo:rerun-if-env-changed=NEST_CUDA_INCLUDE");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    if let Ok(v) = std::env::var("NEST_CUDA_INCLUDE") {
        return std::env::split_paths(&v).collect();
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(libtorch.join("../nvidia"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("include"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    if let Ok(home) = std::env::var("CUDA_HOME") {
        dirs.push(PathBuf::from(home).join("include"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    for h in headers {
        assert!(
            dirs.iter().any(|d| d.join(h).exists()),
            "{krate} (cuda feature): no {h} in {dirs:?}; install the NVIDIA wheels torch depends \
             on (plus nvidia-cuda-crt and nvidia-cuda-cccl for the headers) or set \
             NEST_CUDA_INCLUDE"
        );
    }
    dirs
}
