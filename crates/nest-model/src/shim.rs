//! What every call into nest-model's C++ shims shares (`shim/*.cpp`): an error comes back as a
//! malloc'd, NUL-terminated message that Rust copies and frees once.

use std::ffi::{c_char, CStr};

extern "C" {
    fn nest_fused_adamw_free_message(m: *mut c_char);
}

/// The message a shim left in `err` (freed here), or `none` when it left none.
#[allow(unsafe_code)]
pub(crate) fn take_message(err: *mut c_char, none: &str) -> String {
    if err.is_null() {
        return none.to_string();
    }
    // SAFETY: the shim wrote a NUL-terminated malloc'd string, freed right after copying, once.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    unsafe { nest_fused_adamw_free_message(err) };
    msg
}
