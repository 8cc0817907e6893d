//! Heap retention under load. glibc's malloc raises its mmap threshold each time a large block
//! is freed, so after a while the big activation buffers of large batches come from the heap,
//! and a heap that has grown is rarely given back: under a long mixed load the server's resident
//! memory climbs to the high-water mark of its biggest batches and stays there (measured in
//! docs/RELIABILITY.md: 406 -> 897 MiB in 200 s). A fixed threshold makes every block at least
//! that large its own mapping, returned to the system when freed.

/// Sets glibc's mmap threshold to `mib` MiB (0: leave glibc's adaptive default), unless the
/// user set `MALLOC_MMAP_THRESHOLD_` (glibc reads that itself). Returns a line for the log, or
/// `None` when nothing was changed.
pub fn fix_mmap_threshold(mib: usize) -> Option<String> {
    if mib == 0 || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
        return None;
    }
    set(mib)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(mib: usize) -> Option<String> {
    let bytes = libc::c_int::try_from(mib.checked_mul(1 << 20)?).ok()?;
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes a tuning parameter of glibc's allocator; M_MMAP_THRESHOLD
    // takes any value up to HEAP_MAX/2 (32 MiB on 64-bit), checked by glibc, which returns 0
    // and changes nothing otherwise. No memory is touched.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) } == 1;
    ok.then(|| {
        format!("allocations of {mib} MiB and more get their own mappings (--mmap-threshold-mib)")
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_mib: usize) -> Option<String> {
    None
}
