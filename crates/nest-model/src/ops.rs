//! How many ATen operators a piece of work runs (`shim/ops.cpp`): on a GPU every operator that
//! computes is at least one kernel, and a small batch's pass costs about its kernel count, not
//! its arithmetic (BENCHMARKS.md, "On a GPU"). Counted on the CPU, the figure says what a GPU
//! will launch, so the fixed part of an encode pass can be kept small without a GPU at hand.
//!
//! Counted: the operators called on this thread at the top level (one that others run inside,
//! as `linear` runs `addmm`, counts once), views left out (they launch nothing). On a GPU an
//! operator may launch more than one kernel, and a CPU path may differ from the GPU's inside
//! an operator, and a conversion to the kind a tensor already has counts but launches nothing:
//! the count is an estimate and a comparison, not a kernel trace. `NEST_OPS_TRACE=1` prints
//! each counted operator's name to standard error.

use crate::{Error, Result};

/// Runs `work` and returns its result with the number of operators it ran on this thread.
pub fn count<R>(work: impl FnOnce() -> R) -> Result<(R, usize)> {
    let mut handle: std::ffi::c_ulonglong = 0;
    // SAFETY: `handle` lives for the call; errors come back through the shim's contract.
    nest_sys::call(|err| unsafe { nest_sys::nest_ops_start(&mut handle, err) })
        .map_err(|m| Error::Core(nest_core::Error::value("operator count", m)))?;
    let counting = Counting(Some(handle));
    let out = work();
    Ok((out, counting.stop()?))
}

/// A count started on this thread: stopped by [`Counting::stop`], or when dropped (`work`
/// panicked), so that no callback outlives its count.
struct Counting(Option<std::ffi::c_ulonglong>);

impl Counting {
    fn stop(mut self) -> Result<usize> {
        stop(self.0.take().expect("started"))
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = stop(handle); // unwinding already: the count's error, if any, is dropped
        }
    }
}

/// Removes the callback `handle` (from `nest_ops_start` on this thread); its count.
fn stop(handle: std::ffi::c_ulonglong) -> Result<usize> {
    let mut n: std::ffi::c_longlong = 0;
    // SAFETY: `handle` came from `nest_ops_start` on this thread; `n` lives for the call.
    nest_sys::call(|err| unsafe { nest_sys::nest_ops_stop(handle, &mut n, err) })
        .map_err(|m| Error::Core(nest_core::Error::value("operator count", m)))?;
    Ok(n.max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// Computing operators count once each, views not at all, nested ones inside their caller.
    #[test]
    fn counts_top_level_operators_without_views() {
        let a = Tensor::ones([4, 3], (Kind::Float, Device::Cpu));
        let w = Tensor::ones([2, 3], (Kind::Float, Device::Cpu));
        let (_, n) = count(|| {
            let b = &a + 1.0; // add
            let c = b.unsqueeze(0).narrow(1, 0, 2); // views
            let _ = c.sum(Kind::Float); // sum
            a.linear(&w, None::<Tensor>) // linear (t and matmul inside)
        })
        .unwrap();
        assert_eq!(n, 3);
        // a second count starts from zero and stops counting at its end
        let (_, n) = count(|| &a * 2.0).unwrap();
        assert_eq!(n, 1);
        let (_, n) = count(|| ()).unwrap();
        assert_eq!(n, 0);
        // a panicking `work` stops its count: the next one counts only its own
        let caught = std::panic::catch_unwind(|| count(|| panic!("work failed")));
        assert!(caught.is_err());
        let (_, n) = count(|| &a - 1.0).unwrap();
        assert_eq!(n, 1);
    }
}
