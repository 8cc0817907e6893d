//! `nest compress`: train an adaptor on frozen embeddings (files, or a model + BEIR folder).
//! The run is one library call ([`nest_compress::job::run`]); this file maps the flags onto a
//! [`Job`] and prints what it reports.

use anyhow::{bail, Context, Result};
use nest_compress::job::{self, Event, Job, Source};
use nest_compress::method::Options;
use nest_model::Adaptor;

use crate::args::CompressArgs;
use crate::progress;

/// `--dims` as numbers, in the order given (the job reverses increasing dims).
fn parse_dims(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .with_context(|| format!("--dims: '{x}' is not a number"))
        })
        .collect()
}

/// The inputs the flags name (none under `--resume`: the adaptor's recorded ones).
fn source(a: &CompressArgs) -> Result<Option<Source>> {
    if a.resume.is_some() && a.model.is_none() && a.embeddings.is_none() {
        return Ok(None);
    }
    Ok(Some(match (&a.model, &a.embeddings) {
        (Some(m), None) => Source::Beir {
            model: m.clone(),
            beir: a.beir.clone().context("--beir is needed with --model")?,
            split: a.split.clone(),
            cache: a.cache.clone(),
        },
        (None, Some(e)) => Source::Files {
            embeddings: e.clone(),
            corpus_ids: a.corpus_ids.clone(),
            queries: a
                .queries
                .clone()
                .context("--queries is needed with --embeddings")?,
            query_ids: a.query_ids.clone(),
            qrels: a
                .qrels
                .clone()
                .context("--qrels is needed with --embeddings")?,
            test_qrels: a.test_qrels.clone(),
        },
        _ => bail!("give either --embeddings/--queries/--qrels or --model/--beir"),
    }))
}

fn job(a: &CompressArgs) -> Result<Job> {
    Ok(Job {
        method: a.method.clone(),
        dims: parse_dims(&a.dims)?,
        options: Options {
            alpha: a.alpha,
            scale: a.scale,
            lr: a.lr,
            batch_size: a.batch_size,
            epochs: a.epochs,
            patience: a.patience.filter(|&p| p > 0),
            hard_negatives: a.hard_negatives,
            neighbours: a.neighbours,
            memory_size: a.memory_size,
            tau: a.tau,
            ads_soft: a.ads_gradient == "soft",
            seed: a.seed,
        },
        val_fraction: a.val_fraction,
        source: source(a)?,
        out: a.out.clone(),
        resume: a.resume.clone(),
        overwrite: a.overwrite,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    })
}

/// The validation and test nDCG@10 (x100, as `nest eval` prints it) per dim that training
/// recorded, as a markdown table, each beside the original vectors truncated to that dim (what
/// the adaptor has to beat; adaptors written before 2026-11-30 show `-` there); a warning for
/// each dim where the adaptor scores below truncation on validation (helper trial E).
pub(super) fn print_scores(adaptor: &Adaptor) {
    let info = &adaptor.meta.info;
    println!(
        "| dim | val nDCG@10 | truncated | test nDCG@10 | truncated |\n|---:|---:|---:|---:|---:|"
    );
    let score = |k: &str, d: usize| info[k].get(d.to_string()).and_then(|v| v.as_f64());
    for &d in adaptor.dims().iter().rev() {
        let g = |k: &str| score(k, d).map_or("-".into(), |v| format!("{:.2}", 100.0 * v));
        println!(
            "| {d} | {} | {} | {} | {} |",
            g("val_ndcg_at_10"),
            g("truncated_val_ndcg_at_10"),
            g("test_ndcg_at_10"),
            g("truncated_test_ndcg_at_10")
        );
    }
    for &d in adaptor.dims().iter().rev() {
        let val = (
            score("val_ndcg_at_10", d),
            score("truncated_val_ndcg_at_10", d),
        );
        if let (Some(v), Some(t)) = val {
            if v < t {
                eprintln!(
                    "warning: at dim {d} the adaptor scores below the truncated vectors on \
                     validation ({:.2} < {:.2}): truncation serves that dim better (train \
                     longer, or another --method)",
                    100.0 * v,
                    100.0 * t
                );
            }
        }
    }
}

pub fn run(a: CompressArgs) -> Result<()> {
    let job = job(&a)?;
    crate::interrupt::explain_on_signals(crate::interrupt::kept_or(
        "stopped; nothing written: an adaptor is written whole after its last stage, so one \
         already at its --out is as it was (--epochs or --patience make a shorter run)"
            .into(),
    ))?;
    let mut bar: Option<(indicatif::ProgressBar, &'static str)> = None;
    let out = job::run(&job, &mut |e| match e {
        Event::Message(m) => eprintln!("{m}"),
        Event::Encoding { what, done, total } => {
            if bar.as_ref().is_none_or(|b| b.1 != what) {
                bar = Some((progress::bar(total, what), what));
            }
            let b = &bar.as_ref().expect("set above").0;
            b.set_position(done as u64);
            if done >= total {
                b.finish_and_clear();
            }
        }
        Event::Epoch(e) => eprintln!(
            "  stage {} {:?} epoch {:>2}: train {:.4}  val {:.4}  {:.2} s (S-XBM {:.2} s)",
            e.phase,
            e.dims,
            e.epoch + 1,
            e.train_loss,
            e.val_loss,
            e.seconds,
            e.memory_seconds
        ),
    })?;
    print_scores(&out.adaptor);
    let o = out.out.display();
    eprintln!(
        "wrote {o}: apply it with `nest encode --adaptor {o} --dim D`, `nest serve --adaptor \
         {o}` or `nest eval --adaptor {o}` (Python: nest.Encoder(model, adaptor=...))"
    );
    Ok(())
}
