//! `nest`: train, compress, evaluate and serve elastic (Matryoshka x early-exit) text embeddings.
//!
//! A thin binary: clap arguments become validated library calls; errors are printed with their
//! whole `anyhow` chain and exit code 1.

mod args;
mod args_bench;
mod args_eval;
mod args_mine;
mod args_model;
mod args_search;
mod args_train;
mod cmd;
mod flags;
mod interrupt;
mod progress;

/// Rust's allocations through mimalloc (libtorch's stay with the C allocator, which `nest
/// serve` trims: `nest_core::heap`): tokenising, the host's share of an encode that no layer
/// count shortens, allocates many small strings and vectors. Against the system allocator
/// (2-vCPU Intel Xeon; BENCHMARKS.md): STS-B test through MiniLM's tokenizer, the tokenizers
/// library alone 1.4x faster, the word cache cold 1.13-1.17x; the encode's passes the same
/// within noise; `nest serve` under 64 clients 4-8% more requests, resident memory alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    nest_core::env_vars::warn_unknown("nest");
    // the allocator keeps freed tensor memory for reuse, except in the server, whose memory
    // bound is its own setting (--mmap-threshold-mib)
    if !matches!(cli.command, args::Command::Serve(_)) {
        nest_core::heap::keep_freed_memory();
    }
    // a panic (libtorch's error through tch: out of memory, say) ends as an error, unprinted
    let ran = nest_core::caught::catch(std::panic::AssertUnwindSafe(|| cmd::run(cli)));
    if let Err(e) = ran.unwrap_or_else(|c| Err(panic_error(&c))) {
        let mut said = e.to_string();
        eprintln!("error: {said}");
        for cause in e.chain().skip(1) {
            // a cause its error already quotes (an I/O error's) is not printed twice
            let cause = cause.to_string();
            if !said.contains(&cause) {
                eprintln!("  caused by: {cause}");
                said.push_str(&cause);
            }
        }
        std::process::exit(1);
    }
}

/// The error a caught panic ends the command with: for an allocation that failed, what lowers
/// the memory of the commands that take batches.
fn panic_error(c: &nest_core::caught::Caught) -> anyhow::Error {
    match c.out_of_memory() {
        true => anyhow::anyhow!(
            "out of memory: {}; a smaller --batch-size (or --max-length, where the command takes \
             it) lowers what one pass holds",
            c.summary()
        ),
        false => anyhow::anyhow!("{}", c.describe()),
    }
}
