//! Panics as errors. `tch`'s tensor methods panic on libtorch's errors (out of memory on the
//! device or the host, an index out of range, a kernel's failure), and a command must end on
//! them as on any other error: saying what failed and what to change, with its run folder
//! settled, not with a Rust backtrace. [`catch`] runs work and returns such a panic as a
//! [`Caught`]; while it runs, the default panic report (the "thread panicked at" lines and the
//! backtrace) is not printed for that thread, unless `RUST_BACKTRACE` asks for backtraces.
//!
//! [`Caught::summary`] gives libtorch's own message without its C++ frames, and
//! [`out_of_memory`] tells an out-of-memory error apart (CUDA's caching allocator and the CPU's
//! allocator word it differently), so that callers can say which setting lowers the memory.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, UnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many [`catch`]es this thread is inside, and where the last panic in one happened.
    static QUIET: Cell<u32> = const { Cell::new(0) };
    static WHERE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic caught by [`catch`].
#[derive(Debug, Clone)]
pub struct Caught {
    /// The panic's message as it was given (for a libtorch error: tch's `Torch("...")` with
    /// libtorch's frames).
    pub message: String,
    /// The source file and line of the panic, when the report hook saw it.
    pub location: Option<String>,
}

impl Caught {
    /// libtorch's message without its frames and `[enforce fail ...]` prefix; any other panic's
    /// message as it is.
    pub fn summary(&self) -> String {
        libtorch_message(&self.message).unwrap_or_else(|| self.message.clone())
    }

    /// What a user is told: for an allocation that failed, libtorch's message; for any other
    /// libtorch error, that libtorch panicked (an input Nest should have refused, or a bug);
    /// for a panic of Nest's own, that Nest panicked, where. Every panic but a failed
    /// allocation still says "panicked", as the tests that look for panics expect.
    pub fn describe(&self) -> String {
        let place = self.location.as_ref().map(|l| format!(" at {l}"));
        match (self.out_of_memory(), self.is_libtorch()) {
            (true, _) => self.summary(),
            (false, true) => format!(
                "libtorch panicked: {} (an input Nest should have refused, or a bug in Nest: \
                 please report it)",
                self.summary()
            ),
            (false, false) => format!(
                "Nest panicked: {}{} (a bug: please report it)",
                self.message,
                place.unwrap_or_default()
            ),
        }
    }

    /// Whether the panic was an error of libtorch's (through `tch`), not a bug of Nest's.
    pub fn is_libtorch(&self) -> bool {
        libtorch_message(&self.message).is_some()
    }

    /// Whether the panic was a failed allocation.
    pub fn out_of_memory(&self) -> bool {
        out_of_memory(&self.message)
    }
}

impl std::fmt::Display for Caught {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary())
    }
}

/// Runs `work`; a panic inside it comes back as [`Caught`] instead of unwinding further.
pub fn catch<T>(work: impl FnOnce() -> T + UnwindSafe) -> Result<T, Caught> {
    install_hook();
    QUIET.with(|q| q.set(q.get() + 1));
    let ran = catch_unwind(work);
    QUIET.with(|q| q.set(q.get() - 1));
    ran.map_err(|payload| Caught {
        message: payload_message(payload.as_ref()),
        location: WHERE.with(|w| w.borrow_mut().take()),
    })
}

/// Whether an error's text says an allocation failed: CUDA's "CUDA out of memory", the CPU
/// allocator's "can't allocate memory" / "not enough memory", a Rust "memory allocation ...
/// failed".
pub fn out_of_memory(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "out of memory",
        "can't allocate memory",
        "not enough memory",
        "cannot allocate memory",
    ]
    .iter()
    .any(|s| m.contains(s))
}

/// libtorch's message inside a panic's text (`... Torch("<message>")`, Rust-escaped) or inside
/// an error's display (`libtorch: <message>`), up to its first C++ frame; `None` when the text
/// holds no libtorch error.
pub fn libtorch_message(text: &str) -> Option<String> {
    let inner = if let Some(at) = text.find("Torch(\"") {
        let quoted = &text[at + "Torch(\"".len()..];
        unescape(quoted.strip_suffix("\")").unwrap_or(quoted))
    } else if let Some(at) = text.find("libtorch: ") {
        text[at + "libtorch: ".len()..].to_string()
    } else {
        return None;
    };
    let mut m = without_frames(&inner);
    // "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: ..." -> the message
    if m.starts_with("[enforce fail") {
        if let Some(i) = m.find("] ") {
            let rest = &m[i + 2..];
            m = rest.split_once(". ").map_or(rest, |(_, after)| after);
        }
    }
    Some(m.trim().to_string())
}

/// `text` up to libtorch's first C++ frame ("Exception raised from ...", "frame #0 ...").
pub fn without_frames(text: &str) -> &str {
    let mut m = text;
    for end in ["\nException raised from", "\nframe #"] {
        if let Some(i) = m.find(end) {
            m = &m[..i];
        }
    }
    m.trim_end()
}

/// Undoes Rust's `{:?}` escaping of a string (`\n`, `\"`, `\\`, `\t`, `\'`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn payload_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The report hook, once per process: inside a [`catch`] it keeps the panic's place and prints
/// nothing (the caller reports the error), unless `RUST_BACKTRACE` is set to something other
/// than `0`; elsewhere it hands over to the hook that was there before.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        let backtraces = std::env::var("RUST_BACKTRACE").is_ok_and(|v| v != "0");
        std::panic::set_hook(Box::new(move |info| {
            let quiet = QUIET.with(Cell::get) > 0;
            if quiet {
                let place = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                WHERE.with(|w| *w.borrow_mut() = place);
            }
            if !quiet || backtraces {
                before(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tch's panic text for a failed CPU allocation, as a real run printed it (2026-11-29).
    const CPU_OOM: &str = "called `Result::unwrap()` on an `Err` value: Torch(\"[enforce fail at \
        alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to \
        allocate 25108896 bytes. Error code 12 (Cannot allocate memory)\\nframe #0: \
        c10::ThrowEnforceNotMet(char const*, int, char const*)\")";
    const INDEX: &str = "called `Result::unwrap()` on an `Err` value: Torch(\"index out of range \
        in self\\nException raised from operator() at /__w/pytorch/pytorch/aten/src/ATen/native/\
        TensorAdvancedIndexing.cpp:1767 (most recent call first):\\nframe #0: c10::Error\")";

    #[test]
    fn libtorch_messages_lose_their_frames() {
        assert_eq!(
            libtorch_message(CPU_OOM).unwrap(),
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 25108896 bytes. \
             Error code 12 (Cannot allocate memory)"
        );
        assert_eq!(
            libtorch_message(INDEX).unwrap(),
            "index out of range in self"
        );
        assert_eq!(
            libtorch_message("libtorch: CUDA out of memory. Tried to allocate 2.00 GiB.\nframe #0")
                .unwrap(),
            "CUDA out of memory. Tried to allocate 2.00 GiB."
        );
        assert_eq!(libtorch_message("index 3 is out of bounds"), None);
        assert_eq!(
            without_frames("recording failed (libtorch: CUDA out of memory.\nframe #0: x)"),
            "recording failed (libtorch: CUDA out of memory."
        );
        assert!(out_of_memory(CPU_OOM) && !out_of_memory(INDEX));
        assert!(out_of_memory(
            "CUDA out of memory. Tried to allocate 20.00 MiB"
        ));
    }

    #[test]
    fn a_caught_panic_is_an_error_with_its_place() {
        let c = catch(|| -> u32 { std::panic::panic_any(INDEX.to_string()) }).unwrap_err();
        assert!(c.is_libtorch() && !c.out_of_memory());
        assert_eq!(c.to_string(), "index out of range in self");
        assert!(
            c.location.as_deref().unwrap().contains("caught.rs"),
            "{c:?}"
        );
        let bug = catch(|| -> u32 { panic!("a bug: {}", 7) }).unwrap_err();
        assert!(!bug.is_libtorch());
        assert_eq!(bug.summary(), "a bug: 7");
        assert!(
            bug.describe().starts_with("Nest panicked: a bug: 7 at "),
            "{bug:?}"
        );
        assert!(c
            .describe()
            .starts_with("libtorch panicked: index out of range in self ("));
        assert_eq!(catch(|| 3).unwrap(), 3);
    }
}
