//! The objectives whose steps are recorded as CUDA graphs (`Objective::recorded_draws` is
//! `Some`: MRL, 2DMSE, MIC, MIPIC, distillation, HSIC, ESE without its PCA term, and their
//! compositions) call no tensor
//! operation that reads a value back to the host, in their forward or in the backward libtorch
//! derives for it. A recording refuses such a read ("operation not permitted when stream is
//! capturing"), and the CPU fake, which runs the body eagerly, cannot show it: MIC's
//! `trace()`, whose backward reads a scalar back, passed every CPU test and stopped its first
//! recording on an H200 (2026-11-28).
//!
//! This scans the sources those steps run for the operations known to read back; an objective
//! that needs one belongs with the eager ones (`recorded_draws` left `None`).

use std::path::Path;

/// The files a recorded step's objective terms run (the objective registry's recorded members,
/// their task loss and the shared losses). Distillation's teacher lookup (`teacher.rs`) runs on
/// the host before the step ([`Objective::targets`]), outside the recording; ESE's PCA
/// (`losses/pca.rs`, an SVD) runs only in its eager steps.
const RECORDED: [&str; 14] = [
    "src/objective/mrl.rs",
    "src/objective/ese.rs",
    "src/objective/distill.rs",
    "src/objective/hsic.rs",
    "src/objective/mipic/mod.rs",
    "src/objective/mipic/terms.rs",
    "src/objective/two_d.rs",
    "src/objective/two_d/sums.rs",
    "src/objective/mic.rs",
    "src/objective/task_loss.rs",
    "src/objective/composite.rs",
    "src/objective/component.rs",
    "src/objective/column.rs",
    "src/losses.rs",
];

/// Calls that read a tensor's value back to the host, directly or in their backward, or that
/// copy from pageable host memory: (pattern, why).
const READS_BACK: [(&str, &str); 19] = [
    (
        ".trace()",
        "its backward reads a scalar back (index_fill_ with a tensor index)",
    ),
    (".nonzero(", "its output's size depends on the values"),
    (".masked_select(", "its output's size depends on the values"),
    (".unique", "its output's size depends on the values"),
    (
        ".repeat_interleave",
        "without an output size it reads the repeats back",
    ),
    (".bincount(", "its output's size depends on the values"),
    (".argwhere(", "its output's size depends on the values"),
    (".double_value(", "reads a value back"),
    (".int64_value(", "reads a value back"),
    ("::try_from(", "a tensor into a host value reads it back"),
    (".item(", "reads a value back"),
    ("Device::Cpu", "a copy to or from the host"),
    ("from_slice(", "a tensor made on the host, then copied"),
    // libtorch's linear algebra checks the solver's status on the host (`_linalg_check_errors`)
    ("svd(", "an SVD checks its result on the host"),
    (
        "eigh(",
        "an eigendecomposition checks its result on the host",
    ),
    (
        "eig(",
        "an eigendecomposition checks its result on the host",
    ),
    (
        "cholesky(",
        "a Cholesky factorisation checks its result on the host (cholesky_ex does not)",
    ),
    (
        "linalg_inv(",
        "an inverse checks its result on the host (linalg_inv_ex does not)",
    ),
    (
        "linalg_solve(",
        "a solve checks its result on the host (linalg_solve_ex does not)",
    ),
];

/// The lines of `file` (under this crate) that call an operation of [`READS_BACK`], as
/// `file:line: pattern: why`; a file's unit tests (from `#[cfg(test)]` on) and comments are
/// not scanned.
fn reads_back(file: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (a recorded objective's file moved?)",
            path.display()
        )
    });
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // a file's unit tests (at its end) run on the host, never in a recording
        if line.trim() == "#[cfg(test)]" {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        for (pattern, why) in READS_BACK {
            if code.contains(pattern) {
                found.push(format!("{file}:{}: `{pattern}`: {why}", n + 1));
            }
        }
    }
    found
}

#[test]
fn recorded_objectives_read_nothing_back() {
    let found: Vec<String> = RECORDED.iter().flat_map(|f| reads_back(f)).collect();
    assert!(
        found.is_empty(),
        "operations a CUDA graph cannot record in a recorded objective:\n{}",
        found.join("\n")
    );
}

/// ESE's PCA is what keeps its steps eager: the scan flags its SVD, so its file stays out of
/// [`RECORDED`] and ESE with it out of the recorded objectives.
#[test]
fn the_scan_flags_the_svd_of_eses_pca() {
    let found = reads_back("src/losses/pca.rs");
    assert!(found.iter().any(|f| f.contains("`svd(`")), "{found:?}");
}

/// The scan finds what it looks for: MIC's old line would fail it.
#[test]
fn the_scan_catches_the_trace_that_stopped_the_h200_recording() {
    let old = "    let off = (k.sum(None::<Kind>) - k.trace()) / (b * (b - 1)) as f64;";
    let code = old.split("//").next().unwrap();
    assert!(READS_BACK.iter().any(|(p, _)| code.contains(p)));
}
