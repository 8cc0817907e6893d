//! A whole compression run as one library call, as `nest compress` and Python's
//! `nest.compress` run it: the inputs (embedding files, or a model's embeddings of a BEIR folder
//! through the cache), a fresh start or a resumed sequential adaptor, the output folder's lock,
//! training, the adaptor and its test report on disk.
//!
//! Everything that can be checked without data (method, dims, options, the output folder) is
//! checked before anything is embedded or written; a failed start leaves no folder behind.

use std::path::{Path, PathBuf};

use nest_model::Adaptor;

use crate::method::{check_dims, Options};
use crate::run::{compress, test_report};
use crate::{EpochLog, Error, Method, Result};

mod beir;
mod inputs;

use inputs::inputs;
pub use inputs::Source;

/// One compression run.
#[derive(Debug, Clone)]
pub struct Job {
    /// `smec`, `mrl+smrl`, `search-adaptor`, ... ([`Method::parse`]; none: smec); a resume
    /// takes the adaptor's own (another named is refused).
    pub method: Option<String>,
    /// Target dims, in either order.
    pub dims: Vec<usize>,
    pub options: Options,
    /// Share of the training queries held out for stopping and choices, in (0, 1).
    pub val_fraction: f64,
    /// The inputs (None with `resume`: the adaptor's recorded ones).
    pub source: Option<Source>,
    /// Where the adaptor goes (None with `resume`: the resumed folder).
    pub out: Option<PathBuf>,
    /// A sequential adaptor (smec, mrl+smrl) to continue: its smallest dim heads the new chain.
    pub resume: Option<PathBuf>,
    /// Replace a folder that holds files already.
    pub overwrite: bool,
    /// The command line recorded in the test report.
    pub command: String,
}

/// What a run reports as it goes.
pub enum Event<'a> {
    Message(String),
    /// Texts embedded so far of `total` (`what`: "corpus" or "queries").
    Encoding {
        what: &'static str,
        done: usize,
        total: usize,
    },
    Epoch(&'a EpochLog),
}

/// The trained adaptor and where it was written.
pub struct Outcome {
    pub adaptor: Adaptor,
    pub out: PathBuf,
}

/// The dims largest first (the order of the adaptor's nested chain): increasing dims (as every
/// command takes them) are reversed; any other order is kept for [`check_dims`] to judge.
fn largest_first(dims: &[usize]) -> Vec<usize> {
    let mut d = dims.to_vec();
    if d.windows(2).all(|w| w[0] < w[1]) {
        d.reverse();
    }
    d
}

/// Checks the options' ranges.
fn check_options(job: &Job) -> Result<()> {
    if !(job.val_fraction > 0.0 && job.val_fraction < 1.0) {
        return Err(Error::option(
            "--val-fraction",
            format!("must be in (0, 1), got {}", job.val_fraction),
        ));
    }
    if job.options.batch_size < 2 || job.options.epochs < 1 {
        return Err(Error::option(
            "--batch-size / --epochs",
            "--batch-size must be >= 2 and --epochs >= 1",
        ));
    }
    Ok(())
}

/// What a run starts from: the method, the inputs, the adaptor it continues, the output.
struct Start {
    method: Method,
    source: Source,
    init: Option<Adaptor>,
    out: PathBuf,
}

fn start(job: &Job, dims: &mut Vec<usize>) -> Result<Start> {
    let Some(dir) = &job.resume else {
        let out = job
            .out
            .clone()
            .ok_or_else(|| Error::option("--out", "is needed (where the adaptor goes)"))?;
        let source = job.source.clone().ok_or_else(|| {
            Error::option(
                "inputs",
                "give --embeddings/--queries/--qrels or --model/--beir",
            )
        })?;
        return Ok(Start {
            method: Method::parse(job.method.as_deref().unwrap_or("smec"))?,
            source,
            init: None,
            out,
        });
    };
    let prev = Adaptor::load(dir)?;
    let method = Method::parse(&prev.meta.method)?;
    if let Some(asked) = job.method.as_deref().filter(|m| *m != method.name()) {
        // (it trained the adaptor's own method, silently: helper trial E)
        return Err(Error::option(
            "--method",
            format!(
                "{asked}: the adaptor at {} was trained with {}, and a resume continues its \
                 method; leave out --method (or train a new adaptor into another --out)",
                dir.display(),
                method.name()
            ),
        ));
    }
    if !method.sequential() {
        return Err(Error::input(
            dir,
            format!(
                "a {} adaptor cannot be continued; only smec and mrl+smrl train stage by stage",
                method.name()
            ),
        ));
    }
    let smallest = *prev
        .dims()
        .first()
        .ok_or_else(|| Error::input(dir, "an adaptor without dims"))?;
    if let Some(d) = dims.iter().find(|&&d| d >= smallest) {
        return Err(Error::option(
            "--dims",
            format!(
                "{d}: a resume adds stages below the adaptor's smallest dim ({smallest}; it \
                 serves {:?}), e.g. --dims {}",
                prev.dims(),
                smallest / 2
            ),
        ));
    }
    dims.insert(0, smallest);
    let recorded = prev
        .meta
        .info
        .get("source")
        .ok_or_else(|| Error::input(dir, "the adaptor records no inputs to resume from"))?;
    let source = Source::from_json(recorded, dir)?;
    Ok(Start {
        method,
        source,
        init: Some(prev),
        out: job.out.clone().unwrap_or_else(|| dir.clone()),
    })
}

/// Whether `dir` holds anything but a lock file (a killed start's).
fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut it| it.any(|e| e.is_ok_and(|e| e.file_name() != ".lock")))
}

/// Runs `job`: checks, takes the output folder's lock (one writer per adaptor folder), reads
/// every input, trains, writes the adaptor and its test report.
pub fn run(job: &Job, events: &mut dyn FnMut(Event)) -> Result<Outcome> {
    check_options(job)?;
    let mut dims = largest_first(&job.dims);
    let st = start(job, &mut dims)?;
    if let Some(prev) = &st.init {
        if prev.meta.input_dim < dims[0] {
            return Err(Error::input(
                job.resume.clone().unwrap_or_default(),
                "adaptor input narrower than its dims",
            ));
        }
    }
    // the dims' rules (order, halvings) need no data: checked before anything is embedded
    let widest = dims.iter().copied().max().unwrap_or(1);
    check_dims(&dims, widest, st.method)?;
    nest_core::fsutil::check_output_spares_inputs("--out", &st.out, &st.source.paths())?;
    let in_place = job.resume.as_deref() == Some(st.out.as_path());
    if let (true, false, Some(prev)) = (in_place, job.overwrite, &st.init) {
        // the new stage trains the rows of the smallest dim, a prefix of every dim's: the
        // adaptor's vectors change at every dim (SMRL, SMEC section 3.2)
        let rows = dims[0];
        return Err(Error::input(
            &st.out,
            format!(
                "continuing it trains the new stage over its first {rows} rows, which every dim \
                 shares: the vectors of dims {:?} change, and what was embedded or indexed with \
                 it must be again. Pass --out NEW to keep it as it is (Python: out=), or \
                 --overwrite (overwrite=True) to continue it in place",
                prev.dims()
            ),
        ));
    }
    if !job.overwrite && !in_place && holds_files(&st.out) {
        return Err(Error::input(
            &st.out,
            "holds an adaptor or other files already: pass --overwrite (Python: overwrite=True) to \
             replace it, or choose another --out",
        ));
    }
    let lock = nest_core::lock::FolderLock::take(&st.out)?;
    let result = train_and_write(job, st, dims, events);
    if result.is_err() {
        lock.discard();
    }
    result
}

fn train_and_write(
    job: &Job,
    st: Start,
    dims: Vec<usize>,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    // a model's width is known once it loads: checked there, before its texts are embedded
    let width = |w: usize| check_dims(&dims, w, st.method);
    let inp = inputs(&st.source, job.val_fraction, &width, events)?;
    check_dims(&dims, inp.corpus.dim(), st.method)?;
    events(Event::Message(format!(
        "compress: {} over dims {dims:?}; {} documents, {} queries x {} dims; {} training queries ({}% held out for validation)",
        st.method.name(),
        inp.corpus.ids.len(),
        inp.queries.ids.len(),
        inp.corpus.dim(),
        inp.train.len(),
        (job.val_fraction * 100.0).round()
    )));
    let n_val = crate::data::val_queries(inp.train.len(), job.val_fraction);
    if st.method.trains() && n_val < crate::data::FEW_VAL_QUERIES {
        events(Event::Message(format!(
            "warning: validation holds {n_val} queries: the validation loss that picks each \
             stage's best epoch is noisy at that size (more training qrels, or a larger \
             --val-fraction, steady it)"
        )));
    }
    let adaptor = compress(
        &inp,
        st.method,
        &dims,
        &job.options,
        st.init.as_ref(),
        &mut |e| events(Event::Epoch(e)),
    )?;
    adaptor.save(&st.out)?;
    if let Some(r) = test_report(&adaptor, &inp, &job.command)? {
        r.write(&st.out)?;
    }
    Ok(Outcome {
        adaptor,
        out: st.out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increasing_dims_are_reversed_and_others_kept() {
        assert_eq!(largest_first(&[8, 16, 32]), vec![32, 16, 8]);
        assert_eq!(largest_first(&[32, 16, 8]), vec![32, 16, 8]);
        assert_eq!(largest_first(&[16, 32, 8]), vec![16, 32, 8]);
    }
}
