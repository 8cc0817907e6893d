//! The extension finds libtorch next to it in site-packages (`nest/_nest*.so` ->
//! `torch/lib`), the libtorch of the `torch` wheel the package depends on. `nest/__init__.py`
//! imports torch first anyway, so its libraries are loaded by the time `_nest` is.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-cdylib=-Wl,-rpath,$ORIGIN/../torch/lib");
}
