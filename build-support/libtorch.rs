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
