//! The calls into nest-sys's `shim/foreach.cpp` (the unsafe inventory: ARCHITECTURE.md):
//! libtorch's multi-tensor kernels over a list of gradients, a few launches on a GPU where the
//! per-tensor operations took one or more per tensor. The CPU runs the same per-tensor
//! operations as before, so the values there are bit for bit the old ones (`optim::tests`).

use std::ffi::{c_long, c_void};

use tch::Tensor;

fn ptrs(ts: &[Tensor]) -> Vec<*const c_void> {
    ts.iter().map(|t| t.as_ptr().cast::<c_void>()).collect()
}

/// The L2 norm of each tensor of `ts` (not empty), stacked, in their kind
/// (`torch._foreach_norm`).
///
/// # Shapes
/// - `ts`: any; returns `[ts.len()]`
pub(super) fn norms(ts: &[Tensor]) -> Result<Tensor, String> {
    let p = ptrs(ts);
    let mut err = std::ptr::null_mut();
    // SAFETY: every pointer is a live `at::Tensor*` owned by a `Tensor` of `ts`, borrowed for
    // the call; the shim catches every C++ exception and returns either a new `at::Tensor*` or
    // null with `err` set.
    let out = unsafe { nest_sys::nest_foreach_norm(p.as_ptr(), p.len() as c_long, &mut err) };
    if out.is_null() {
        // SAFETY: `err` is null or the message the shim wrote.
        let m = unsafe { nest_sys::take_message(err, "(no message)") };
        return Err(format!("foreach norm: {m}"));
    }
    // SAFETY: a fresh heap `at::Tensor*` that nothing else owns: tch frees it on drop.
    Ok(unsafe { Tensor::from_ptr(out.cast()) })
}

/// Multiplies every tensor of `ts` in place by `by`: a scalar tensor on their device (read
/// there, nothing comes back to the host) or a host number (`torch._foreach_mul_`).
pub(super) fn mul_(ts: &[Tensor], by: Factor) -> Result<(), String> {
    let p = ptrs(ts);
    let (factor, value) = match by {
        Factor::Tensor(t) => (t.as_ptr().cast::<c_void>(), 0.0),
        Factor::Value(v) => (std::ptr::null(), v),
    };
    // SAFETY: every pointer is a live `at::Tensor*` borrowed for the call (`factor` null or
    // one); the kernel writes into the tensors' own storage (shared with their shallow clones,
    // as any in-place op does); the shim catches every C++ exception.
    nest_sys::call(|err| unsafe {
        nest_sys::nest_foreach_mul_(p.as_ptr(), p.len() as c_long, factor, value, err)
    })
    .map_err(|m| format!("foreach mul: {m}"))
}

/// What [`mul_`] multiplies by.
pub(super) enum Factor<'a> {
    Tensor(&'a Tensor),
    Value(f64),
}

/// Sets every tensor of `ts` to zero in place (`torch._foreach_zero_`).
pub(super) fn zero_(ts: &[Tensor]) -> Result<(), String> {
    let p = ptrs(ts);
    // SAFETY: as in [`mul_`].
    nest_sys::call(|err| unsafe {
        nest_sys::nest_foreach_zero_(p.as_ptr(), p.len() as c_long, err)
    })
    .map_err(|m| format!("foreach zero: {m}"))
}
