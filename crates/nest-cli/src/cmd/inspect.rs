use anyhow::Result;
use nest_core::parse_dims;

use crate::args::InspectArgs;
use crate::progress;

pub fn run(a: InspectArgs) -> Result<()> {
    let InspectTexts { texts, pairs } = read_texts(&a)?;
    let model = super::load_model(&a.model)?;
    let spec = resolve_spec(&a, &model)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pb = progress::bar(refs.len(), "inspect");
    let (ins, corr) = nest_eval::inspect::inspect(
        &model,
        &refs,
        &pairs,
        &spec,
        a.model.encode_options()?,
        &mut |d| pb.set_position(d as u64),
    )?;
    pb.finish_and_clear();
    print_inspection(&ins, model.num_layers());
    let written = nest_eval::inspect::write(&a.out, &ins, &corr, &a.model.model)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// `--data`'s default (args_eval.rs), named in the error when it is missing.
const DEFAULT_DATA: &str = "../shared/datasets/stsb/test.tsv";

/// The texts to encode and the index pairs among them that count as positives.
struct InspectTexts {
    texts: Vec<String>,
    pairs: Vec<(i64, i64)>,
}

/// Reads `--data`: an STS file gives texts and positive pairs; anything else is one sentence per line.
fn read_texts(a: &InspectArgs) -> Result<InspectTexts> {
    if !a.data.exists() && a.data == std::path::Path::new(DEFAULT_DATA) {
        anyhow::bail!(
            "{DEFAULT_DATA}: no such file (the default of --data, relative to the current \
             folder; pass --data FILE)"
        );
    }
    match nest_core::data::read_sts(&a.data) {
        Ok(rows) => Ok(sts_texts(&rows, a.positive_min)),
        Err(nest_core::Error::Content { .. }) if a.data.extension().is_none_or(|e| e != "tsv") => {
            Ok(InspectTexts {
                texts: nest_core::data::read_sentences(&a.data)?,
                pairs: vec![],
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Deduplicated texts of STS rows, with the pairs scoring at least `positive_min` as positives.
fn sts_texts(rows: &[nest_core::data::StsPair], positive_min: f64) -> InspectTexts {
    let mut texts = Vec::new();
    let mut pairs = Vec::new();
    let mut ids = std::collections::HashMap::new();
    let mut id = |s: &str, texts: &mut Vec<String>| -> i64 {
        *ids.entry(s.to_string()).or_insert_with(|| {
            texts.push(s.to_string());
            texts.len() as i64 - 1
        })
    };
    for r in rows {
        let (x, y) = (id(&r.sentence1, &mut texts), id(&r.sentence2, &mut texts));
        if r.score >= positive_min {
            pairs.push((x, y));
        }
    }
    InspectTexts { texts, pairs }
}

/// The layer, cross dim and prefix boundaries to inspect, checked against what the model offers.
fn resolve_spec(
    a: &InspectArgs,
    model: &nest_model::ElasticEncoder,
) -> Result<nest_eval::inspect::InspectSpec> {
    let layer = a.layer.unwrap_or(model.num_layers());
    let hidden = model.output_dim();
    let dim = a.dim.unwrap_or(hidden / 4);
    let boundaries = match &a.boundaries {
        Some(s) => parse_dims(s)?,
        None if !model.meta.matryoshka_dims.is_empty() => model.meta.matryoshka_dims.clone(),
        None => nest_model::point::default_dims(hidden),
    };
    let keys = nest_model::Keys {
        layer: "--layer",
        dim: "--boundaries",
    };
    let offer = nest_model::Offer::new(model, None)?;
    offer.resolve_grid(Some(vec![layer]), Some(boundaries.clone()), keys)?;
    offer.resolve(
        Some(layer),
        Some(dim),
        nest_model::Keys::FLAGS,
        nest_model::Policy::AnyInRange,
    )?;
    Ok(nest_eval::inspect::InspectSpec {
        layer,
        cross_dim: dim,
        boundaries,
    })
}

/// Prints the inspection's summary lines and its per-prefix table.
fn print_inspection(ins: &nest_eval::inspect::Inspection, num_layers: usize) {
    println!(
        "layer {} of {}: {} texts, {} positive pairs",
        ins.layer, num_layers, ins.n_texts, ins.n_positive_pairs
    );
    println!(
        "prefix/residual cross-correlation at d={}: mean |corr| {:.4}, max {:.4}",
        ins.cross_dim, ins.mean_abs_cross_corr, ins.max_abs_cross_corr
    );
    println!(
        "{:>6} {:>14} {:>10} {:>11}",
        "dim", "effective rank", "alignment", "uniformity"
    );
    for p in &ins.prefixes {
        let al = p
            .alignment
            .map(|v| format!("{v:.4}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>6} {:>14.2} {:>10} {:>11.4}",
            p.dim, p.effective_rank, al, p.uniformity
        );
    }
}
