//! `nest bench encode`: sentences/s per layer on a fixed set of sentences, with
//! sentence-transformers timed in the same run when a Python is given.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nest_core::{parse_layers, ElasticSpec};
use nest_model::EncodeOptions;

use crate::args::BenchEncodeArgs;

pub fn run_encode(a: BenchEncodeArgs) -> Result<()> {
    anyhow::ensure!(a.repeats >= 1, "--repeats must be at least 1");
    let pairs = nest_core::data::read_sts(&a.data)?;
    let texts: Vec<&str> = pairs
        .iter()
        .flat_map(|p| [p.sentence1.as_str(), p.sentence2.as_str()])
        .collect();
    let model = super::load_model(&a.model)?;
    let layers = parse_layers(&a.layers)?;
    model.check(&layers, &[])?;
    let opts = EncodeOptions {
        batch_size: a.model.batch_size,
    };
    eprintln!(
        "bench encode: {} sentences from {}, batch {}, {} libtorch threads, best of {} after a warm-up",
        texts.len(),
        a.data.display(),
        opts.batch_size,
        tch::get_num_threads(),
        a.repeats
    );
    let adaptor = match &a.adaptor {
        Some(p) => Some(nest_model::Adaptor::load(p)?),
        None => None,
    };
    let mut nest: BTreeMap<usize, f64> = BTreeMap::new();
    for &layer in &layers {
        if let Some(ad) = &adaptor {
            // plain vs adapted, interleaved, best of each
            let d = ad.dims()[0];
            let spec = ElasticSpec {
                layer,
                dim: model.output_dim(),
            };
            let (mut plain, mut adapted, mut apply) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
            for _ in 0..=a.repeats {
                let t = Instant::now();
                model.embed(&texts, spec, opts, &mut |_| {})?;
                plain = plain.min(t.elapsed().as_secs_f64());
                let t = Instant::now();
                let x = model.embed_layers(&texts, &[layer], opts, &mut |_| {})?;
                let ta = Instant::now();
                let _compressed = ad.apply(&x[0], d)?;
                apply = apply.min(ta.elapsed().as_secs_f64());
                adapted = adapted.min(t.elapsed().as_secs_f64());
            }
            eprintln!(
                "  layer {layer}: plain {plain:.3} s, through the adaptor (dim {d}) {adapted:.3} s: {:+.1}%; the adaptor itself {:.4} s = {:.2}% of plain",
                100.0 * (adapted / plain - 1.0),
                apply,
                100.0 * apply / plain
            );
        }
        let spec = ElasticSpec {
            layer,
            dim: model.output_dim(),
        };
        model.embed(&texts, spec, opts, &mut |_| {})?; // warm-up
        let mut best = f64::INFINITY;
        for _ in 0..a.repeats {
            let t = Instant::now();
            model.embed(&texts, spec, opts, &mut |_| {})?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        let rate = texts.len() as f64 / best;
        eprintln!("  nest layer {layer}: {rate:.1} sentences/s");
        nest.insert(layer, rate);
    }
    let st = match &a.python {
        Some(py) => Some(run_python(py, &a, &layers)?),
        None => None,
    };
    let full = model.num_layers();
    let mut md = String::new();
    let _ = writeln!(md, "| layer | nest sent/s | sentence-transformers sent/s | nest / ST | nest vs nest layer {full} |");
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|");
    let full_rate = nest.get(&full).copied();
    for (&l, &r) in &nest {
        let s = st.as_ref().and_then(|m| m.get(&l).copied());
        let _ = writeln!(
            md,
            "| {l} | {r:.1} | {} | {} | {} |",
            s.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            s.map(|v| format!("{:.2}x", r / v))
                .unwrap_or_else(|| "-".into()),
            full_rate
                .map(|f| format!("{:.2}x", r / f))
                .unwrap_or_else(|| "-".into()),
        );
    }
    println!("{md}");
    if let Some(p) = &a.markdown {
        append_markdown(p, &md)?;
    }
    Ok(())
}

/// Appends a benchmark's Markdown table to `path` (atomically: the whole file is rewritten).
pub(super) fn append_markdown(path: &Path, md: &str) -> Result<()> {
    let mut prev = std::fs::read_to_string(path).unwrap_or_default();
    prev.push_str(md);
    nest_core::fsutil::write_atomic(path, prev.as_bytes())?;
    Ok(())
}

/// Runs `scripts/bench_st.py` and parses its `{"layer": sentences_per_s}` JSON line.
fn run_python(py: &Path, a: &BenchEncodeArgs, layers: &[usize]) -> Result<BTreeMap<usize, f64>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_st.py");
    let layers_arg = layers
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join(",");
    eprintln!("  running sentence-transformers with {} ...", py.display());
    let out = Command::new(py)
        .arg(&script)
        .args(["--model", &a.model.model, "--data"])
        .arg(&a.data)
        .args([
            "--batch-size",
            &a.model.batch_size.to_string(),
            "--layers",
            &layers_arg,
        ])
        .args(["--repeats", &a.repeats.to_string()])
        .output()
        .with_context(|| format!("starting {}", py.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed:\n{}",
            py.display(),
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let parsed: BTreeMap<String, f64> = serde_json::from_str(line)
        .with_context(|| format!("parsing bench_st.py output '{line}'"))?;
    let mut m = BTreeMap::new();
    for (k, v) in parsed {
        let l: usize = k.parse().with_context(|| format!("layer key '{k}'"))?;
        eprintln!("  sentence-transformers layer {l}: {v:.1} sentences/s");
        m.insert(l, v);
    }
    Ok(m)
}
