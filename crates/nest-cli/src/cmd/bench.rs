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

use super::bench_host::{print_tokenising, profile_pass, Pass};
use crate::args_bench::{BenchEncodeArgs, WordsCache};

/// One timed run: Nest in one dtype, or a peer.
struct Row {
    run: String,
    /// sentences/s per layer.
    rates: BTreeMap<usize, f64>,
    /// STS Spearman x100 at the full dim per layer (Nest rows; peers print theirs on stderr).
    spearman: BTreeMap<usize, f64>,
}

pub fn run_encode(a: BenchEncodeArgs) -> Result<()> {
    anyhow::ensure!(a.repeats >= 1, "--repeats must be at least 1");
    let pairs = nest_core::data::read_sts(&a.data)?;
    let texts: Vec<&str> = pairs
        .iter()
        .flat_map(|p| [p.sentence1.as_str(), p.sentence2.as_str()])
        .collect();
    let gold: Vec<f64> = pairs.iter().map(|p| p.score).collect();
    let layers = parse_layers(&a.layers)?;
    let streams = a.model.encode_options()?.streams;
    eprintln!(
        "bench encode: {} sentences from {}, batch {}, {} libtorch threads in {} stream(s), best of {} after a warm-up",
        texts.len(),
        a.data.display(),
        a.model.batch_size,
        tch::get_num_threads(),
        streams,
        a.repeats
    );
    let device = nest_model::default_device();
    let machine = nest_model::machine::Machine::this(device);
    eprintln!("  machine: {machine}");
    let mut rows = Vec::new();
    for &choice in &a.model.dtype {
        nest_model::graph::reset_peak_memory(device);
        let model = super::load_model_in(&a.model, choice)?;
        model.check(&layers, &[])?;
        let run = format!("nest {} ({choice})", model.dtype());
        rows.push(time_nest(&model, &run, &texts, &gold, &layers, &a)?);
        // libtorch's caching allocator since the load (weights, activations, recorded shapes'
        // pools; not the CUDA context), as the peer prints torch's
        if let Some((allocated, reserved)) = nest_model::graph::peak_memory(device) {
            eprintln!(
                "  {run}: peak GPU memory (libtorch's allocator): {} MiB allocated, {} MiB reserved",
                allocated >> 20,
                reserved >> 20
            );
        }
    }
    if let Some(py) = &a.python {
        for peer in a.peers.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            rows.push(Row {
                run: format!("sentence-transformers {peer}"),
                rates: run_python(py, &a, &layers, peer)?,
                spearman: BTreeMap::new(),
            });
        }
    }
    let md = format!("Measured on {machine}.\n\n{}", table(&rows, &layers));
    println!("{md}");
    if let Some(p) = &a.markdown {
        append_markdown(p, &md)?;
    }
    Ok(())
}

/// Times `model` per layer (best of `repeats` after a warm-up) and scores the STS pairs.
fn time_nest(
    model: &nest_model::ElasticEncoder,
    run: &str,
    texts: &[&str],
    gold: &[f64],
    layers: &[usize],
    a: &BenchEncodeArgs,
) -> Result<Row> {
    let opts = a.model.encode_options()?;
    let adaptor = match &a.adaptor {
        Some(p) => Some(nest_model::Adaptor::load(p)?),
        None => None,
    };
    let mut row = Row {
        run: run.to_string(),
        rates: BTreeMap::new(),
        spearman: BTreeMap::new(),
    };
    // the host's share that no layer count shortens (early exit's ceiling on a fast device)
    print_tokenising(model, run, texts, a.model.batch_size, a.repeats)?;
    let cold = a.words == WordsCache::Cold;
    for &layer in layers {
        if let Some(ad) = &adaptor {
            time_adaptor(model, ad, texts, layer, opts, a.repeats)?;
        }
        let spec = ElasticSpec {
            layer,
            dim: model.output_dim(),
        };
        let e = model.embed(texts, spec, opts, &mut |_| {})?; // warm-up, and the scores
        let mut best = Pass::default();
        for _ in 0..a.repeats {
            if let (true, Some(words)) = (cold, model.tokenizer.word_cache()) {
                words.clear();
            }
            let pass = Pass::time(|progress| model.embed(texts, spec, opts, progress))?;
            if pass.took < best.took {
                best = pass;
            }
        }
        let rate = texts.len() as f64 / best.took;
        let rho = 100.0 * nest_eval::metrics::rank::spearman(&pair_cosines(&e), gold);
        eprintln!("  {run} layer {layer}: {rate:.1} sentences/s, STS Spearman {rho:.2}");
        best.print(&format!("{run} layer {layer}"));
        if let Some(dir) = &a.profile {
            // a trace is a diagnostic: its failure (no CUPTI, say) leaves the figures standing
            let pass = || model.embed(texts, spec, opts, &mut |_| {});
            if let Err(e) = profile_pass(model, run, dir, layer, &pass) {
                eprintln!("warning: {run} layer {layer}: no profiler trace ({e:#})");
            }
        }
        row.rates.insert(layer, rate);
        row.spearman.insert(layer, rho);
    }
    Ok(row)
}

/// Cosines of rows (0,1), (2,3), ... of unit-norm embeddings.
fn pair_cosines(e: &nest_core::output::Matrix) -> Vec<f64> {
    e.data
        .chunks(2 * e.dim)
        .map(|p| {
            let (x, y) = p.split_at(e.dim);
            x.iter().zip(y).map(|(a, b)| f64::from(a * b)).sum()
        })
        .collect()
}

/// Plain vs through the adaptor (at its smallest dim), interleaved, best of each; printed.
fn time_adaptor(
    model: &nest_model::ElasticEncoder,
    ad: &nest_model::Adaptor,
    texts: &[&str],
    layer: usize,
    opts: EncodeOptions,
    repeats: usize,
) -> Result<()> {
    let d = ad.dims()[0];
    let spec = ElasticSpec {
        layer,
        dim: model.output_dim(),
    };
    let (mut plain, mut adapted, mut apply) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..=repeats {
        let t = Instant::now();
        model.embed(texts, spec, opts, &mut |_| {})?;
        plain = plain.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let x = model.embed_layers(texts, &[layer], opts, &mut |_| {})?;
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
    Ok(())
}

/// The Markdown table: one row per (layer, run), with ratios to the first run (Nest's first
/// dtype), to the fastest peer at that layer, and to the same run's deepest layer.
fn table(rows: &[Row], layers: &[usize]) -> String {
    let deepest = layers.iter().copied().max().unwrap_or(0);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| layer | run | sent/s | STS Spearman | vs {} | vs fastest peer | vs layer {deepest} |",
        rows.first().map_or("-", |r| r.run.as_str())
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|");
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    for &l in layers {
        let fastest_peer = rows
            .iter()
            .filter(|r| r.spearman.is_empty())
            .filter_map(|r| r.rates.get(&l).copied())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let base = rows.first().and_then(|r| r.rates.get(&l).copied());
        for r in rows {
            let Some(&rate) = r.rates.get(&l) else {
                continue;
            };
            let is_peer = r.spearman.is_empty();
            let _ = writeln!(
                md,
                "| {l} | {} | {rate:.1} | {} | {} | {} | {} |",
                r.run,
                r.spearman.get(&l).map_or("-".into(), |v| format!("{v:.2}")),
                ratio(Some(rate), base),
                if is_peer {
                    "-".into()
                } else {
                    ratio(Some(rate), fastest_peer)
                },
                ratio(Some(rate), r.rates.get(&deepest).copied()),
            );
        }
    }
    md
}

/// Appends a benchmark's Markdown table to `path` (atomically: the whole file is rewritten).
pub(super) fn append_markdown(path: &Path, md: &str) -> Result<()> {
    let mut prev = std::fs::read_to_string(path).unwrap_or_default();
    prev.push_str(md);
    nest_core::fsutil::write_atomic(path, prev.as_bytes())?;
    Ok(())
}

/// The Python peers' `--device`: the GPU when Nest itself runs on one (its default device), so
/// that both sides of a benchmark use the same hardware; nothing (the CPU) otherwise.
pub(crate) fn peer_device_args() -> Vec<String> {
    match nest_model::default_device() {
        tch::Device::Cuda(i) => vec!["--device".into(), format!("cuda:{i}")],
        _ => Vec::new(),
    }
}

/// Runs `scripts/bench/bench_st.py` and parses its `{"layer": sentences_per_s}` JSON line.
fn run_python(
    py: &Path,
    a: &BenchEncodeArgs,
    layers: &[usize],
    peer: &str,
) -> Result<BTreeMap<usize, f64>> {
    let (backend, dtype) = match peer {
        "torch-float32" | "torch" => ("torch", "float32"),
        "torch-bf16" => ("torch", "bf16"),
        "onnx" | "onnx-int8" | "openvino" => (peer, "float32"),
        "openvino-bf16" => ("openvino", "bf16"),
        other => bail!(
            "--peers: unknown peer '{other}' (expected torch-float32, torch-bf16, onnx, onnx-int8, openvino, openvino-bf16)"
        ),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench/bench_st.py");
    let layers_arg = layers
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join(",");
    eprintln!(
        "  running sentence-transformers {peer} with {} ...",
        py.display()
    );
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
        .args(["--backend", backend, "--dtype", dtype])
        .args(peer_device_args())
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
    // the peer's own machine line (torch version, device) and peak GPU memory, beside Nest's
    for l in String::from_utf8_lossy(&out.stderr).lines() {
        if l.starts_with("torch ") || l.contains("peak GPU memory") {
            eprintln!("  sentence-transformers {peer}: {}", l.trim());
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let parsed: BTreeMap<String, f64> = serde_json::from_str(line)
        .with_context(|| format!("parsing bench_st.py output '{line}'"))?;
    let mut m = BTreeMap::new();
    for (k, v) in parsed {
        let l: usize = k.parse().with_context(|| format!("layer key '{k}'"))?;
        eprintln!("  sentence-transformers {peer} layer {l}: {v:.1} sentences/s");
        m.insert(l, v);
    }
    Ok(m)
}
