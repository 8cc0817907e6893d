//! `at::cuda::CUDAGraph` and the caching allocator's counters through `shim/cuda_graph.cpp`
//! (the `cuda` feature; the unsafe inventory: ARCHITECTURE.md).

use std::ffi::{c_char, c_int, c_longlong, c_ulonglong, c_void};

use super::{Replay, StepGraph};
use crate::{Error, Result};

use nest_sys::{
    nest_cuda_memory, nest_cuda_own_stream, nest_cuda_reset_peak, nest_graph_begin, nest_graph_end,
    nest_graph_enter, nest_graph_free, nest_graph_leave, nest_graph_new, nest_graph_pool,
    nest_graph_replay,
};

/// A shim call's result as an error naming `what`.
fn check(r: std::result::Result<(), String>, what: &str) -> Result<()> {
    r.map_err(|msg| {
        Error::Core(nest_core::Error::value(
            "cuda graph",
            format!("{what}: {msg}"),
        ))
    })
}

/// One `at::cuda::CUDAGraph` with its side stream (owned by the shim).
pub struct CudaGraph {
    raw: *mut c_void,
    recorded: bool,
    /// The shared memory pool it records into (`None`: one of its own).
    pool: Option<[u64; 2]>,
}

/// A new memory pool id for graphs to share (`at::cuda::graph_pool_handle()`).
pub fn new_pool() -> Result<[u64; 2]> {
    let mut out = [0 as c_ulonglong; 2];
    // SAFETY: `out` has the two slots the shim writes.
    let r = nest_sys::call(|err| unsafe { nest_graph_pool(out.as_mut_ptr(), err) });
    check(r, "making a graph memory pool")?;
    Ok(out.map(u64::from))
}

impl CudaGraph {
    pub fn new(pool: Option<[u64; 2]>) -> Result<CudaGraph> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the shim returns a new object or null with `err` set.
        let raw = unsafe { nest_graph_new(&mut err) };
        if raw.is_null() {
            // SAFETY: `err` is null or the message the shim wrote.
            let msg = unsafe { nest_sys::take_message(err, "(no message)") };
            check(Err(msg), "creating a CUDA graph")?;
        }
        Ok(CudaGraph {
            raw,
            recorded: false,
            pool,
        })
    }

    fn call(
        &mut self,
        f: unsafe extern "C" fn(*mut c_void, *mut *mut c_char) -> c_int,
        what: &str,
    ) -> Result<()> {
        let raw = self.raw;
        // SAFETY: `raw` is the live object `nest_graph_new` made; the shim catches every
        // C++ exception and reports it through `err`.
        check(nest_sys::call(|err| unsafe { f(raw, err) }), what)
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
        let raw = self.raw;
        let [a, b] = self.pool.unwrap_or([0, 0]);
        // SAFETY: as in `call`; {0, 0} asks libtorch for a pool of the graph's own.
        let r = nest_sys::call(|err| unsafe { nest_graph_begin(raw, a, b, err) });
        check(r, "beginning the capture")
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
    // SAFETY: `out` has the four slots the shim writes.
    let r = nest_sys::call(|err| unsafe { nest_cuda_memory(i as c_int, out.as_mut_ptr(), err) });
    check(r, "reading the allocator's counters")?;
    Ok(out.map(i64::from))
}

/// Device `i`'s name and `{total memory in bytes, compute capability major, minor,
/// multiprocessors, CUDA runtime version}` (`at::cuda::getDeviceProperties`, `shim/info.cpp`).
pub(crate) fn device_info(i: usize) -> Result<(String, [i64; 5])> {
    let mut name = [0 as c_char; 256];
    let mut out = [0 as c_longlong; 5];
    // SAFETY: `name` holds 256 bytes (the shim writes at most that many, NUL included) and `out`
    // the 5 values it writes, both alive for the call.
    let r = nest_sys::call(|err| unsafe {
        nest_sys::nest_cuda_device_info(
            i as c_int,
            name.as_mut_ptr(),
            name.len() as c_int,
            out.as_mut_ptr(),
            err,
        )
    });
    check(r, "reading the device's properties")?;
    // SAFETY: the shim wrote a NUL-terminated string (snprintf) into `name`.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    Ok((name.to_string_lossy().into_owned(), out.map(i64::from)))
}

/// Device `i`'s memory in bytes.
pub fn total_memory(i: usize) -> Result<u64> {
    Ok(device_info(i)?.1[0].max(0) as u64)
}

pub fn reset_peak(i: usize) -> Result<()> {
    // SAFETY: the shim reads only the device number.
    let r = nest_sys::call(|err| unsafe { nest_cuda_reset_peak(i as c_int, err) });
    check(r, "resetting the allocator's peaks")
}

/// Gives the calling thread a stream of libtorch's pool on device `i` as its current stream.
pub fn own_stream(i: usize) -> Result<()> {
    // SAFETY: the shim reads only the device number and sets this thread's current stream.
    let r = nest_sys::call(|err| unsafe { nest_cuda_own_stream(i as c_int, err) });
    check(r, "making a stream of its own current")
}
