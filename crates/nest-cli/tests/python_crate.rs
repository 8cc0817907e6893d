//! The Python package's extension (`python/`: its own cargo workspace, so `cargo test
//! --workspace` never builds it) still compiles against the crates it wraps: `cargo check` of
//! it. A change of nest-model's or nest-train's API once broke it unseen; building and testing
//! the wheel itself takes longer than CI's test step (docs/PYTHON.md, "Tests").

use std::path::Path;
use std::process::Command;

#[test]
fn the_python_extension_compiles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // pyo3's build script asks a Python interpreter (>= 3.10, the package's abi3 floor) for
    // its configuration
    let new_enough = Command::new("python3")
        .args([
            "-c",
            "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !new_enough {
        eprintln!("skipped: no python3 >= 3.10 for pyo3's build script");
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["check", "--quiet", "--manifest-path", "python/Cargo.toml"])
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("running cargo check");
    assert!(
        out.status.success(),
        "cargo check of python/ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
