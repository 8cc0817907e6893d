//! Compiles Nest's C++ shims (`shim/*.cpp`: libtorch's fused AdamW and multi-tensor kernels,
//! pinned host memory, c10d's TCPStore and process groups, the libtorch version, an operator
//! count, a profiler trace; with the `cuda` feature also CUDA graphs, the caching allocator's counters, NCCL and a
//! GPU's properties) into one static library, against the libtorch headers tch builds against
//! (`LIBTORCH`, as `scripts/setup.sh` writes it into `.cargo/config.toml`). The symbols they
//! call live in `libtorch_cpu.so` (and `libtorch_cuda.so`), which torch-sys links. cc compiles
//! the files in parallel (its `parallel` feature).

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    let (root, include, abi) = libtorch("torch/csrc/distributed/c10d/TCPStore.hpp");
    let mut build = cc::Build::new();
    build.cpp(true).files([
        "shim/message.cpp",
        "shim/fused_adamw.cpp",
        "shim/foreach.cpp",
        "shim/pinned.cpp",
        "shim/dist.cpp",
        "shim/info.cpp",
        "shim/ops.cpp",
        "shim/profile.cpp",
    ]);
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        for dir in cuda_includes(&root, &["cuda_runtime_api.h", "nccl.h"]) {
            build.include(dir);
        }
        build
            .file("shim/cuda_graph.cpp")
            .define("USE_C10D_NCCL", None)
            .define("NEST_DIST_NCCL", None)
            .define("NEST_CUDA_INFO", None)
            .flag_if_supported("-Wno-interference-size");
        // Kept linked although no symbol of it is named directly (the linker's default
        // `--as-needed` would drop it, and libtorch would see no GPU).
        println!(
            "cargo:rustc-link-search=native={}",
            root.join("lib").display()
        );
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
    build
        .include("shim")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++20")
        .flag_if_supported("-Wno-unused-parameter")
        .define("USE_C10D_GLOO", None)
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .compile("nest_shim");
}

/// The libtorch that tch builds against (`LIBTORCH`, as `scripts/setup.sh` writes it into
/// `.cargo/config.toml`): its folder, its `include` folder (checked to hold `header`, which
/// the shims need), and the C++ ABI flag (`LIBTORCH_CXX11_ABI`, default 1). Panics with
/// what to do when either is missing, as a build script reports errors.
fn libtorch(header: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let root = std::env::var("LIBTORCH")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            panic!(
                "nest-sys: LIBTORCH is not set; run scripts/setup.sh (it writes .cargo/config.toml) \
                 or point LIBTORCH at a libtorch / torch wheel folder"
            )
        });
    let include = root.join("include");
    assert!(
        include.join(header).exists(),
        "nest-sys: {} has no {header}; use the torch wheel's libtorch",
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
fn cuda_includes(libtorch: &std::path::Path, headers: &[&str]) -> Vec<std::path::PathBuf> {
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
            "nest-sys (cuda feature): no {h} in {dirs:?}; install the NVIDIA wheels torch depends \
             on (plus nvidia-cuda-crt and nvidia-cuda-cccl for the headers) or set \
             NEST_CUDA_INCLUDE"
        );
    }
    dirs
}
