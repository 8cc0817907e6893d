//! The C allocator's settings, the one place Nest sets them. libtorch takes every CPU tensor
//! from glibc's `malloc`, so these decide whether tensor memory is reused or paid again. (The
//! `nest` binary's Rust allocations go through mimalloc instead: `crates/nest-cli/src/main.rs`.)
//!
//! - Batch jobs (training, encoding, evaluation: [`keep_freed_memory`]). By default glibc serves
//!   blocks from 128 KiB up (rising to 32 MiB as blocks are freed) with their own `mmap`,
//!   returns them to the kernel on `free`, and trims the heap's free top above 128 KiB. A
//!   training step frees and re-allocates its activations, gradients and bf16 weight copies
//!   (megabytes each) every step, so each step paid for its memory again in page faults: `perf`
//!   put 15% of a bf16 step in the kernel. Blocks up to 1 GiB now come from the heap, which keeps
//!   up to 1 GiB of free top and grows by 256 MiB at a time. `nest --threads 2 bench train
//!   --objectives mrl --dtype bf16` on the Zen 5 EPYC: step 0.250 / 0.262 s without, 0.229 /
//!   0.238 s with (interleaved), peak RSS +50-90 MiB; bulk encoding 1-2% faster, +20 MiB
//!   (BENCHMARKS.md, "Training step"). `NEST_MALLOC=default` leaves glibc's defaults.
//! - The server ([`fix_mmap_threshold`]). glibc's malloc raises its mmap threshold each time a
//!   large block is freed, so after a while the big activation buffers of large batches come
//!   from the heap, and a heap that has grown is rarely given back: under a long mixed load the
//!   server's resident memory climbs to the high-water mark of its biggest batches and stays
//!   there (measured in docs/RELIABILITY.md: 406 -> 897 MiB in 200 s). A fixed threshold makes
//!   every block at least that large its own mapping, returned to the system when freed. The
//!   server does not call [`keep_freed_memory`].

/// Sets glibc's mmap threshold to `mib` MiB (0: leave glibc's adaptive default), unless the
/// user set `MALLOC_MMAP_THRESHOLD_` (glibc reads that itself). Returns a line for the log, or
/// `None` when nothing was changed.
pub fn fix_mmap_threshold(mib: usize) -> Option<String> {
    if mib == 0 || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
        return None;
    }
    set(mib)
}

/// The batch jobs' settings (module docs), unless `NEST_MALLOC=default`; returns whether they
/// were applied. Call first in `main`, before other threads start. The heap settings follow
/// only once a large mmap threshold was accepted: without it they would leave glibc at its
/// smallest threshold (a bf16 training step then ran 1.6x slower).
pub fn keep_freed_memory() -> bool {
    if std::env::var("NEST_MALLOC").as_deref() == Ok("default") {
        return false;
    }
    keep()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep() -> bool {
    const MIB: libc::c_int = 1 << 20;
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes tuning parameters of glibc's allocator (a rejected value
    // returns 0 and changes nothing); no memory is touched.
    let mallopt = |param, value| unsafe { libc::mallopt(param, value) } == 1;
    let threshold = [1024 * MIB, 32 * MIB]
        .into_iter()
        .any(|v| mallopt(libc::M_MMAP_THRESHOLD, v));
    threshold && mallopt(libc::M_TRIM_THRESHOLD, 1024 * MIB) && mallopt(libc::M_TOP_PAD, 256 * MIB)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep() -> bool {
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(mib: usize) -> Option<String> {
    let bytes = libc::c_int::try_from(mib.checked_mul(1 << 20)?).ok()?;
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes a tuning parameter of glibc's allocator; glibc checks the
    // value (the server's flag stays within 32 MiB, which every glibc accepts) and returns 0,
    // changing nothing, if it refuses it. No memory is touched.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) } == 1;
    ok.then(|| {
        format!("allocations of {mib} MiB and more get their own mappings (--mmap-threshold-mib)")
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_mib: usize) -> Option<String> {
    None
}

/// Gives the freed memory of every malloc arena back to the kernel (glibc's `malloc_trim(0)`:
/// the free top, and free pages inside the heap through `madvise`), so that a long-running
/// server's resident memory follows what it holds rather than its highest mark. Returns whether
/// anything was released (always `false` off glibc). Costs a walk of the free lists: the server
/// calls it at most once a second per worker, between batches (`--trim-interval-ms`). In the
/// `nest` binary this is libtorch's memory (tensors, activations): Rust's own allocations go
/// through mimalloc there, which gives its freed pages back by itself.
pub fn release_freed() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only returns free memory of glibc's own arenas to the kernel; it takes
    // the arenas' locks itself and touches no allocated block.
    let released = unsafe { libc::malloc_trim(0) };
    released == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc accepts the batch jobs' settings (a glibc that refused both thresholds would leave
    /// training paying page faults every step, silently).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_batch_settings_are_accepted() {
        assert!(keep());
    }
}
