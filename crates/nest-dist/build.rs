//! Compiles `shim/dist.cpp` against the same libtorch headers tch builds against (`LIBTORCH`,
//! as `scripts/setup.sh` writes it into `.cargo/config.toml`). The symbols it calls live in
//! `libtorch_cpu.so`, which torch-sys already links.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let root = std::env::var("LIBTORCH")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            panic!(
            "nest-dist: LIBTORCH is not set; run scripts/setup.sh (it writes .cargo/config.toml) \
             or point LIBTORCH at a libtorch / torch wheel folder"
        )
        });
    let include = root.join("include");
    assert!(
        include.join("torch/csrc/distributed/c10d/TCPStore.hpp").exists(),
        "nest-dist: {} has no c10d headers (torch/csrc/distributed/c10d); use the torch wheel's libtorch",
        include.display()
    );
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
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
