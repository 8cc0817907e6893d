//! With the `cuda` feature, keep `libtorch_cuda.so` linked although no symbol of it is named
//! directly (the linker's default `--as-needed` would drop it and libtorch would see no GPU).
fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
