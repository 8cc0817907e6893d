mod advise;
mod bench;
mod bench_host;
mod bench_search;
mod bench_serve;
mod bench_train;
mod compress;
mod distill;
mod encode;
mod eval;
pub(crate) mod eval_out;
mod index;
mod index_common;
mod index_parts;
mod info;
mod inspect;
mod mine;
mod mine_flags;
mod search;
mod serve;
mod slim;
mod train;

use anyhow::{Context, Result};
use nest_model::{DtypeChoice, ElasticEncoder};

use crate::args::{BenchCommand, Cli, Command, ModelArgs};

pub fn run(cli: Cli) -> Result<()> {
    if let Some(t) = cli.threads {
        set_threads(t)?;
    }
    match cli.command {
        Command::Encode(a) => encode::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Advise(a) => advise::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Train(a) => train::run(a),
        Command::Distill(a) => distill::run(a),
        Command::Info(a) => info::run(a),
        Command::Slim(a) => slim::run(a),
        Command::Compress(a) => compress::run(a),
        Command::Index(c) => index::run(c),
        Command::Search(a) => search::run(a),
        Command::Mine(a) => mine::run(a),
        Command::Export(c) => search::export(c),
        Command::Serve(a) => serve::run(a),
        Command::Bench(BenchCommand::Serve(a)) => bench_serve::serve(a),
        Command::Bench(BenchCommand::Search(a)) => bench_search::search(a),
        Command::Bench(BenchCommand::Soak(a)) => bench_serve::soak(a),
        Command::Bench(BenchCommand::Encode(a)) => bench::run_encode(a),
        Command::Bench(BenchCommand::Train(a)) => bench_train::run(a),
    }
}

/// The `--threads` this command was given, once set ([`set_threads`]).
static THREADS: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// `--threads`: libtorch's intra-op threads, wherever the flag stands (clap's global flag, or
/// among a command's recipe flags: `crate::flags::split`).
pub fn set_threads(t: i32) -> Result<()> {
    anyhow::ensure!(t >= 1, "--threads must be at least 1, got {t}");
    tch::set_num_threads(t);
    let _ = THREADS.set(t);
    Ok(())
}

/// `--threads N ` as this command was given it (empty without): what a printed command that
/// continues a run repeats, since a resume on another thread count is not bit-exact.
pub fn threads_given() -> String {
    THREADS
        .get()
        .map_or(String::new(), |t| format!("--threads {t} "))
}

/// Resolves `--model` (local directory or hub id) and loads it in the one `--dtype` asked.
pub fn load_model(m: &ModelArgs) -> Result<ElasticEncoder> {
    let [choice] = m.dtype.as_slice() else {
        anyhow::bail!(
            "--dtype takes one value for this command, got {} (nest eval and nest bench encode take several)",
            m.dtype.len()
        );
    };
    load_model_in(m, *choice)
}

/// Loads `--model` and converts it for inference in `choice` (resolved on this machine).
pub fn load_model_in(m: &ModelArgs, choice: DtypeChoice) -> Result<ElasticEncoder> {
    let mut enc = load_model_path(&m.model, m.max_length)?;
    let r = nest_model::dtype::resolve(choice, enc.device());
    enc.convert_for_inference(r.dtype)?;
    Ok(enc)
}

pub fn load_model_path(model: &str, max_length: Option<usize>) -> Result<ElasticEncoder> {
    anyhow::ensure!(max_length != Some(0), "--max-length must be at least 1");
    let default = model == crate::args_model::DEFAULT_MODEL;
    anyhow::ensure!(
        !default || std::path::Path::new(model).exists(),
        "--model {model} (the default when none is given) is not in this folder ({}): pass \
         --model DIR (a model folder or a hub id), or run from the checkout where \
         scripts/setup.sh put it",
        std::env::current_dir().map_or("?".into(), |d| d.display().to_string())
    );
    let dir = nest_model::hub::resolve(model)?;
    ElasticEncoder::load(&dir, nest_model::default_device(), max_length)
        .with_context(|| format!("loading model '{model}'"))
}

/// The chunks a cut run of this job kept beside `out` (`nest_core::kept`), saying what was
/// found: kept chunks of `chunk` `what`s resumed, or another job's dropped.
fn open_kept(
    out: &std::path::Path,
    key: serde_json::Value,
    dim: usize,
    (chunk, what): (usize, &str),
    pb: &indicatif::ProgressBar,
) -> Result<nest_core::kept::Embedded> {
    // (before opening: a key of chunk 0 would drop a cut run's chunks)
    anyhow::ensure!(chunk >= 1, "--encode-chunk must be at least 1");
    let (kept, found) = nest_core::kept::Embedded::open(out, key, dim)?;
    let dir = kept.dir().display();
    pb.suspend(|| {
        if found.dropped {
            eprintln!("{dir}: vectors of a cut run on other texts, model or settings; dropped");
        }
        if found.chunks > 0 {
            let n = found.chunks;
            eprintln!("resuming: {n} chunks of {chunk} {what} embedded by a cut run ({dir})");
        }
    });
    Ok(kept)
}
