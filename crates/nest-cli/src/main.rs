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
    // the allocator keeps freed tensor memory for reuse, except in the server, whose memory
    // bound is its own setting (--mmap-threshold-mib)
    if !matches!(cli.command, args::Command::Serve(_)) {
        nest_core::heap::keep_freed_memory();
    }
    if let Err(e) = cmd::run(cli) {
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
