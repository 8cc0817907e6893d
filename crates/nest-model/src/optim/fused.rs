//! The call into nest-sys's `shim/fused_adamw.cpp` (the unsafe inventory: ARCHITECTURE.md).

use std::ffi::{c_long, c_void};

use tch::Tensor;

use super::Group;

/// `at::_fused_adamw_` on `group` at step `step` with `[lr, beta1, beta2, weight_decay,
/// eps]`; libtorch's error (kinds, devices) as the message. The kernel walks each
/// parameter's elements through the other three tensors' memory without checking their
/// shapes, so shapes and contiguity are checked here first.
/// With `on_device`: the rate read from that float32 scalar tensor instead of `h[0]`, and
/// the update skipped by the kernel where the second tensor holds 1 (a non-finite norm).
pub(super) fn adamw(
    group: &Group,
    step: &Tensor,
    h: [f64; 5],
    on_device: Option<(&Tensor, &Tensor)>,
) -> Result<(), String> {
    for (i, p) in group.params.iter().enumerate() {
        let others = [&group.grads[i], &group.m[i], &group.v[i]];
        if others.iter().any(|t| t.size() != p.size()) {
            return Err(format!(
                "parameter {i} has shape {:?}, its gradient and moments {:?}",
                p.size(),
                others.map(|t| t.size())
            ));
        }
        if !p.is_contiguous() || others.iter().any(|t| !t.is_contiguous()) {
            return Err(format!(
                "parameter {i}: the fused kernel needs contiguous tensors"
            ));
        }
    }
    let ptrs = |ts: &[Tensor]| {
        ts.iter()
            .map(|t| t.as_ptr().cast::<c_void>())
            .collect::<Vec<_>>()
    };
    let (p, g, m, v) = (
        ptrs(&group.params),
        ptrs(&group.grads),
        ptrs(&group.m),
        ptrs(&group.v),
    );
    // SAFETY: every pointer is a live `at::Tensor*` owned by a `Tensor` borrowed for the
    // call (tch's handle type is `at::Tensor*`); the four lists have `n` entries each; the
    // shim catches every C++ exception and reports it through `err`.
    nest_sys::call(|err| unsafe {
        nest_sys::nest_fused_adamw(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            p.len() as c_long,
            step.as_ptr().cast(),
            h[0],
            on_device.map_or(std::ptr::null(), |d| d.0.as_ptr().cast()),
            on_device.map_or(std::ptr::null(), |d| d.1.as_ptr().cast()),
            h[1],
            h[2],
            h[3],
            h[4],
            err,
        )
    })
    .map_err(|m| format!("fused AdamW: {m}"))
}
