//! The C allocator's settings for libtorch's tensors, set once at start.
//!
//! libtorch takes every CPU tensor from glibc's `malloc`. By default glibc serves blocks from
//! 128 KiB up (rising to at most 32 MiB as blocks are freed) with their own `mmap`, returns them
//! to the kernel on `free`, and trims the heap's free top above 128 KiB. A training step frees
//! and re-allocates its activations, gradients and bf16 weight copies (megabytes each) every
//! step, so each step paid its memory again in page faults: `perf` put 15% of a bf16 step in the
//! kernel. Here blocks up to 1 GiB come from the heap, which keeps up to 1 GiB of free top and
//! grows by 256 MiB at a time: freed blocks are reused. Measured with `nest --threads 2 bench
//! train --objectives mrl --dtype bf16` on the Zen 5 EPYC: step 0.257-0.279 s without, 0.216-
//! 0.247 s with, peak RSS +30-90 MiB (BENCHMARKS.md, "Training step").
//!
//! `NEST_MALLOC=default` leaves glibc's defaults (to measure the difference).

/// Applies the settings above, unless `NEST_MALLOC=default`; returns whether it did.
#[allow(unsafe_code)]
pub fn keep_freed_memory() -> bool {
    if std::env::var("NEST_MALLOC").as_deref() == Ok("default") {
        return false;
    }
    const GIB: i32 = 1 << 30;
    // SAFETY: `mallopt` only changes glibc's allocator parameters; it is called first in `main`,
    // before any other thread exists. A rejected value (return 0) leaves the default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, GIB);
        libc::mallopt(libc::M_TRIM_THRESHOLD, GIB);
        libc::mallopt(libc::M_TOP_PAD, GIB / 4);
    }
    true
}
