//! The objectives whose steps are recorded as CUDA graphs (`Objective::recorded_draws` is
//! `Some`: MRL, 2DMSE, MIC, MIPIC, distillation, HSIC and their compositions) call no tensor
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
/// the host before the step ([`Objective::targets`]), outside the recording.
const RECORDED: [&str; 13] = [
    "src/objective/mrl.rs",
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
const READS_BACK: [(&str, &str); 13] = [
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
];

#[test]
fn recorded_objectives_read_nothing_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for file in RECORDED {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (a recorded objective's file moved?)",
                path.display()
            )
        });
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
    }
    assert!(
        found.is_empty(),
        "operations a CUDA graph cannot record in a recorded objective:\n{}",
        found.join("\n")
    );
}

/// The scan finds what it looks for: MIC's old line would fail it.
#[test]
fn the_scan_catches_the_trace_that_stopped_the_h200_recording() {
    let old = "    let off = (k.sum(None::<Kind>) - k.trace()) / (b * (b - 1)) as f64;";
    let code = old.split("//").next().unwrap();
    assert!(READS_BACK.iter().any(|(p, _)| code.contains(p)));
}
