//! `at::cuda::CUDAGraph` and the caching allocator's counters through `shim/cuda_graph.cpp`
//! (the `cuda` feature; the unsafe inventory: ARCHITECTURE.md).

use std::ffi::{c_char, c_int, c_longlong, c_void};

use super::{Replay, StepGraph};
use crate::{Error, Result};

extern "C" {
    fn nest_graph_new(err: *mut *mut c_char) -> *mut c_void;
    fn nest_graph_free(g: *mut c_void);
    fn nest_graph_enter(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn nest_graph_leave(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn nest_graph_begin(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn nest_graph_end(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn nest_graph_replay(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn nest_cuda_memory(device: c_int, out: *mut c_longlong, err: *mut *mut c_char) -> c_int;
    fn nest_cuda_reset_peak(device: c_int, err: *mut *mut c_char) -> c_int;
}

/// The shim's error message (freed here), as an error naming `what`.
fn check(rc: c_int, err: *mut c_char, what: &str) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let msg = crate::shim::take_message(err, "(no message)");
    Err(Error::Core(nest_core::Error::value(
        "cuda graph",
        format!("{what}: {msg}"),
    )))
}

/// One `at::cuda::CUDAGraph` with its side stream (owned by the shim).
pub struct CudaGraph {
    raw: *mut c_void,
    recorded: bool,
}

impl CudaGraph {
    pub fn new() -> Result<CudaGraph> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the shim returns a new object or null with `err` set.
        let raw = unsafe { nest_graph_new(&mut err) };
        if raw.is_null() {
            check(1, err, "creating a CUDA graph")?;
        }
        Ok(CudaGraph {
            raw,
            recorded: false,
        })
    }

    fn call(
        &mut self,
        f: unsafe extern "C" fn(*mut c_void, *mut *mut c_char) -> c_int,
        what: &str,
    ) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: `raw` is the live object `nest_graph_new` made; the shim catches every
        // C++ exception and reports it through `err`.
        let rc = unsafe { f(self.raw, &mut err) };
        check(rc, err, what)
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: made by `nest_graph_new`, freed once.
        unsafe { nest_graph_free(self.raw) }
    }
}

impl StepGraph for CudaGraph {
    fn enter(&mut self) -> Result<()> {
        self.call(nest_graph_enter, "entering the side stream")
    }
    fn leave(&mut self) -> Result<()> {
        self.call(nest_graph_leave, "leaving the side stream")
    }
    fn begin(&mut self) -> Result<()> {
        self.call(nest_graph_begin, "beginning the capture")
    }
    fn end(&mut self) -> Result<()> {
        self.call(nest_graph_end, "ending the capture")?;
        self.recorded = true;
        Ok(())
    }
    fn replay(&mut self) -> Result<Replay> {
        self.call(nest_graph_replay, "replaying")?;
        Ok(Replay::Replayed)
    }
    fn records(&self) -> bool {
        true
    }
}

/// `{allocated, allocated peak, reserved, reserved peak}` bytes on device `i`.
pub fn memory(i: usize) -> Result<[i64; 4]> {
    let mut out = [0 as c_longlong; 4];
    let mut err = std::ptr::null_mut();
    // SAFETY: `out` has the four slots the shim writes.
    let rc = unsafe { nest_cuda_memory(i as c_int, out.as_mut_ptr(), &mut err) };
    check(rc, err, "reading the allocator's counters")?;
    Ok(out.map(|v| v as i64))
}

pub fn reset_peak(i: usize) -> Result<()> {
    let mut err = std::ptr::null_mut();
    // SAFETY: as in `memory`.
    let rc = unsafe { nest_cuda_reset_peak(i as c_int, &mut err) };
    check(rc, err, "resetting the allocator's peaks")
}
