//! Nest's C++ shims over libtorch (`shim/*.cpp`), one static library: the raw declarations of
//! what they export, and [`check`] / [`take_message`], the one place a shim's error comes back.
//!
//! The contract every function keeps (`shim/guard.h`): no C++ exception crosses; a failure
//! returns non-zero (or null) with a malloc'd, NUL-terminated message in `*err`, which Rust
//! copies and frees once. Pointers passed in live for the call. The safe wrappers live with the
//! types they serve: nest-model's `optim/fused.rs` and `optim/foreach.rs`, `graph/cuda.rs` and
//! `encoder/transfer.rs` (`pinned`), `machine.rs`, `ops.rs`, `profile.rs`, and nest-dist's
//! `lib.rs`.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_long, c_void, CStr};

pub use torch_sys::C_tensor;

// Tensors and the shims' messages: `shim/message.cpp`, `fused_adamw.cpp`, `foreach.cpp`,
// `pinned.cpp`, `info.cpp`, `ops.cpp`, `profile.cpp`.
extern "C" {
    /// Frees a message a shim wrote into `err` (`shim/message.cpp`).
    fn nest_free_message(m: *mut c_char);

    /// `at::_fused_adamw_` over `n` parameters (`shim/fused_adamw.cpp`).
    pub fn nest_fused_adamw(
        params: *const *const c_void,
        grads: *const *const c_void,
        exp_avgs: *const *const c_void,
        exp_avg_sqs: *const *const c_void,
        n: c_long,
        step: *const c_void,
        lr: f64,
        lr_tensor: *const c_void,
        found_inf: *const c_void,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        err: *mut *mut c_char,
    ) -> c_int;

    /// A new `at::Tensor*`: the L2 norms of `n` tensors, stacked, or null
    /// (`shim/foreach.cpp`).
    pub fn nest_foreach_norm(
        ts: *const *const c_void,
        n: c_long,
        err: *mut *mut c_char,
    ) -> *mut c_void;

    /// `n` tensors multiplied in place by the scalar tensor `factor`, or by `value` when
    /// `factor` is null (`shim/foreach.cpp`).
    pub fn nest_foreach_mul_(
        ts: *const *const c_void,
        n: c_long,
        factor: *const c_void,
        value: f64,
        err: *mut *mut c_char,
    ) -> c_int;

    /// `n` tensors set to zero in place (`shim/foreach.cpp`).
    pub fn nest_foreach_zero_(ts: *const *const c_void, n: c_long, err: *mut *mut c_char) -> c_int;

    /// A new `at::Tensor*` holding `t` in pinned host memory, or null (`shim/pinned.cpp`).
    pub fn nest_pin_memory(t: *const c_void, err: *mut *mut c_char) -> *mut c_void;

    /// `dst.copy_(src, non_blocking)` into `dst`'s own storage (`shim/pinned.cpp`).
    pub fn nest_copy_into(
        dst: *mut c_void,
        src: *const c_void,
        non_blocking: c_int,
        err: *mut *mut c_char,
    ) -> c_int;

    /// The libtorch version, a static NUL-terminated string (`shim/info.cpp`).
    pub fn nest_torch_version() -> *const c_char;

    /// Starts counting this thread's top-level non-view ATen operators (`shim/ops.cpp`).
    pub fn nest_ops_start(handle: *mut std::ffi::c_ulonglong, err: *mut *mut c_char) -> c_int;

    /// Stops the count `handle` started on this thread, into `count` (`shim/ops.cpp`).
    pub fn nest_ops_stop(
        handle: std::ffi::c_ulonglong,
        count: *mut std::ffi::c_longlong,
        err: *mut *mut c_char,
    ) -> c_int;

    /// Starts libtorch's Kineto profiler: host operators, and GPU kernels where `cuda` is
    /// non-zero (`shim/profile.cpp`).
    pub fn nest_profile_start(cuda: c_int, err: *mut *mut c_char) -> c_int;

    /// Stops the profiler and writes its Chrome trace to `path` (NUL-terminated;
    /// `shim/profile.cpp`).
    pub fn nest_profile_stop(path: *const c_char, err: *mut *mut c_char) -> c_int;
}

// `shim/dist.cpp`: c10d's TCPStore and process groups (Gloo; NCCL with the `cuda` feature).
extern "C" {
    /// Rendezvous and join a c10d group (`shim/dist.cpp`).
    pub fn nest_dist_new(
        host: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        timeout_ms: c_long,
        prefix: *const c_char,
        server: c_int,
        backend: c_int,
        device: c_int,
        out: *mut *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn nest_dist_allreduce_sum(
        g: *mut c_void,
        t: *mut C_tensor,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn nest_dist_allgather(
        g: *mut c_void,
        input: *mut C_tensor,
        outputs: *const *mut C_tensor,
        world: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn nest_dist_barrier(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    pub fn nest_dist_free(g: *mut c_void, how: c_int);
}

// `shim/cuda_graph.cpp`: CUDA graphs and the caching allocator's counters; `shim/info.cpp`: a
// GPU's properties.
#[cfg(feature = "cuda")]
extern "C" {
    pub fn nest_graph_new(err: *mut *mut c_char) -> *mut c_void;
    pub fn nest_graph_free(g: *mut c_void);
    pub fn nest_graph_enter(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    pub fn nest_graph_leave(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    pub fn nest_graph_pool(out: *mut std::ffi::c_ulonglong, err: *mut *mut c_char) -> c_int;
    pub fn nest_graph_begin(
        g: *mut c_void,
        pool_a: std::ffi::c_ulonglong,
        pool_b: std::ffi::c_ulonglong,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn nest_graph_end(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    pub fn nest_graph_replay(g: *mut c_void, err: *mut *mut c_char) -> c_int;
    pub fn nest_cuda_memory(
        device: c_int,
        out: *mut std::ffi::c_longlong,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn nest_cuda_reset_peak(device: c_int, err: *mut *mut c_char) -> c_int;
    pub fn nest_cuda_own_stream(device: c_int, err: *mut *mut c_char) -> c_int;

    /// A GPU's name and properties (`shim/info.cpp`).
    pub fn nest_cuda_device_info(
        device: c_int,
        name: *mut c_char,
        name_len: c_int,
        out: *mut std::ffi::c_longlong,
        err: *mut *mut c_char,
    ) -> c_int;
}

/// The message a shim left in `err` (freed here), or `none` when it left none.
///
/// # Safety
/// `err` is null or what a shim wrote into its `err` out-pointer, not yet freed; it is freed
/// here and must not be used again.
pub unsafe fn take_message(err: *mut c_char, none: &str) -> String {
    if err.is_null() {
        return none.to_string();
    }
    // SAFETY: per the contract above, a NUL-terminated malloc'd string (guard.h), copied, then
    // freed once.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    unsafe { nest_free_message(err) };
    msg
}

/// Runs a shim call that reports through an `err` out-pointer (the closure passes it on and
/// returns the call's code): `Ok` for 0, else the message the shim wrote.
pub fn call(f: impl FnOnce(*mut *mut c_char) -> c_int) -> Result<(), String> {
    let mut err: *mut c_char = std::ptr::null_mut();
    if f(&mut err) == 0 {
        return Ok(());
    }
    // SAFETY: `err` is null or the shim's message (only a shim writes through the pointer).
    Err(unsafe { take_message(err, "(no message)") })
}
