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
