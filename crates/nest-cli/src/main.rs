//! `nest`: train, compress, evaluate and serve elastic (Matryoshka x early-exit) text embeddings.
//!
//! A thin binary: clap arguments become validated library calls; errors are printed with their
//! whole `anyhow` chain and exit code 1.

mod args;
mod args_bench;
mod args_eval;
mod args_model;
mod args_search;
mod args_train;
mod cmd;
mod progress;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    // the allocator keeps freed tensor memory for reuse, except in the server, whose memory
    // bound is its own setting (--mmap-threshold-mib)
    if !matches!(cli.command, args::Command::Serve(_)) {
        nest_core::heap::keep_freed_memory();
    }
    if let Err(e) = cmd::run(cli) {
        eprintln!("error: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}
