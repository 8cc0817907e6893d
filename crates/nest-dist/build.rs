//! Compiles `shim/dist.cpp` against the same libtorch headers tch builds against (`LIBTORCH`,
//! as `scripts/setup.sh` writes it into `.cargo/config.toml`). The symbols it calls live in
//! `libtorch_cpu.so`, which torch-sys already links.
//!
//! With the `cuda` feature the shim also gets c10d's `ProcessGroupNCCL` (symbols in
//! `libtorch_cuda.so`, linked here). Its headers need the CUDA runtime's and NCCL's headers:
//! the folders in `NEST_CUDA_INCLUDE` (`:`-separated) if set, else those of the NVIDIA wheels
//! next to the torch wheel (`nvidia/*/include`, as `pip install torch` and
//! `scripts/setup/check_cuda_build.sh` lay them out), else `$CUDA_HOME/include` and
//! `/usr/local/cuda/include`.

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../build-support/libtorch.rs"
));

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-changed=../../build-support");
    println!("cargo:rerun-if-env-changed=NEST_CUDA_INCLUDE");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let (root, include, abi) = libtorch("nest-dist", "torch/csrc/distributed/c10d/TCPStore.hpp");
    let mut build = cc::Build::new();
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        for dir in cuda_includes("nest-dist", &root, &["cuda_runtime_api.h", "nccl.h"]) {
            build.include(dir);
        }
        build
            .define("USE_C10D_NCCL", None)
            .define("NEST_DIST_NCCL", None)
            .flag_if_supported("-Wno-interference-size");
        println!(
            "cargo:rustc-link-search=native={}",
            root.join("lib").display()
        );
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
    build
        .cpp(true)
        .file("shim/dist.cpp")
        .include("shim")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++20")
        .flag_if_supported("-Wno-unused-parameter")
        .define("USE_C10D_GLOO", None)
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .compile("nest_dist_shim");
}
