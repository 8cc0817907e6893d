//! A trace of a piece of work by libtorch's own profiler (Kineto, `shim/profile.cpp`; what
//! `torch.profiler` drives from Python): the host's operators and, on a GPU, every kernel and
//! copy with its device time, written as a Chrome trace (`chrome://tracing`, Perfetto). On a
//! GPU a wall clock says how long a pass took; the trace says which kernels ran, how long each
//! took, and how long the device sat idle between them (`scripts/gpu/trace_summary.py` sums
//! them), which is what bounds a small batch's pass.

use std::ffi::CString;
use std::path::Path;
use std::sync::Mutex;

use crate::{Error, Result};

/// The profiler is one per process: one trace at a time.
static ONE: Mutex<()> = Mutex::new(());

fn error(what: impl Into<String>) -> Error {
    Error::Core(nest_core::Error::value("profile", what))
}

/// Runs `work` under the profiler (the GPU's kernels too where `cuda`) and writes the trace to
/// `path` (JSON; its folder made if missing), atomically: the profiler writes beside it, then
/// the file is renamed into place. The profiler stops even when `work` panics.
pub fn trace<R>(path: &Path, cuda: bool, work: impl FnOnce() -> R) -> Result<R> {
    let tmp = nest_core::fsutil::temp_beside(path)?;
    let at = CString::new(tmp.to_string_lossy().as_bytes())
        .map_err(|_| error(format!("{}: a path with a NUL byte", path.display())))?;
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: no pointer is passed; errors come back through the shim's contract.
    nest_sys::call(|err| unsafe { nest_sys::nest_profile_start(i32::from(cuda), err) })
        .map_err(error)?;
    let running = Running(Some(at));
    let out = work();
    running.stop()?;
    // libtorch's profiler logs a failed write and goes on: the file says whether it wrote
    if !tmp.is_file() {
        return Err(error(format!(
            "{}: libtorch's profiler wrote no trace there",
            tmp.display()
        )));
    }
    std::fs::rename(&tmp, path).map_err(|e| nest_core::Error::io(path, e))?;
    Ok(out)
}

/// A profiler started: stopped (its trace written) by [`Running::stop`], or when dropped.
struct Running(Option<CString>);

impl Running {
    fn stop(mut self) -> Result<()> {
        stop(&self.0.take().expect("started"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(at) = self.0.take() {
            let _ = stop(&at); // unwinding already: the trace's error, if any, is dropped
        }
    }
}

fn stop(at: &CString) -> Result<()> {
    // SAFETY: `at` is a NUL-terminated string that lives for the call.
    nest_sys::call(|err| unsafe { nest_sys::nest_profile_stop(at.as_ptr(), err) }).map_err(|m| {
        error(format!(
            "{}: the trace could not be written ({m})",
            at.to_string_lossy()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// The trace is a JSON file naming the operators the work ran, with their times.
    #[test]
    fn a_trace_names_the_operators_it_timed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        let a = Tensor::ones([64, 64], (Kind::Float, Device::Cpu));
        let out = trace(&path, false, || {
            a.matmul(&a).sum(Kind::Float).double_value(&[])
        })
        .unwrap();
        assert_eq!(out, 64.0 * 64.0 * 64.0);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let events = json["traceEvents"].as_array().expect("a Chrome trace");
        let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
        assert!(names.contains(&"aten::matmul"), "{names:?}");
        assert!(events.iter().any(|e| e["dur"].as_f64().is_some()));
        // a missing folder is made; one that cannot be (a file is in the way) is an error
        // naming it, before the profiler starts
        trace(&dir.path().join("new").join("t.json"), false, || ()).unwrap();
        assert!(dir.path().join("new").join("t.json").is_file());
        let bad = path.join("t.json");
        let e = trace(&bad, false, || ()).unwrap_err().to_string();
        assert!(e.contains("trace.json"), "{e}");
        // a panicking `work` stops the profiler: the next trace starts
        let caught = std::panic::catch_unwind(|| trace(&path, false, || panic!("work failed")));
        assert!(caught.is_err());
        trace(&path, false, || ()).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file left"
        );
    }
}
