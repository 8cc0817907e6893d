//! Compiles `shim/fused_adamw.cpp` (libtorch's fused AdamW kernel behind one C function; see
//! `src/optim/fused.rs`) against the libtorch headers tch builds against (`LIBTORCH`, as
//! `scripts/setup.sh` writes it into `.cargo/config.toml`). The symbol it calls lives in
//! `libtorch_cpu.so`, which torch-sys already links.
//!
//! With the `cuda` feature, also compiles `shim/cuda_graph.cpp` (CUDA graphs and the caching
//! allocator's counters; it needs the CUDA runtime's headers, found as nest-dist finds them) and
//! keeps `libtorch_cuda.so` linked (the linker's default `--as-needed` would drop it when no
//! symbol of it is named directly, and libtorch would see no GPU).

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../build-support/libtorch.rs"
));

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-changed=../../build-support");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    let (root, include, abi) = libtorch("nest-model", "ATen/ops/_fused_adamw.h");
    cc::Build::new()
        .cpp(true)
        .file("shim/fused_adamw.cpp")
        .file("shim/pinned.cpp")
        .include(&include)
        .flag("-std=c++20")
        .flag_if_supported("-Wno-unused-parameter")
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .compile("nest_model_shim");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        let mut graph = cc::Build::new();
        for dir in cuda_includes("nest-model", &root, &["cuda_runtime_api.h"]) {
            graph.include(dir);
        }
        graph
            .cpp(true)
            .file("shim/cuda_graph.cpp")
            .include(&include)
            .flag("-std=c++20")
            .flag_if_supported("-Wno-unused-parameter")
            .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
            .compile("nest_model_cuda_shim");
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
}
