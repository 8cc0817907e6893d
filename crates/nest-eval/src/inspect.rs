//! `nest inspect`: diagnostics of an embedding space at one layer.
//!
//! - per-dimension variance with the Matryoshka boundaries marked (MIC, Figure 1);
//! - Pearson cross-correlation between the first `d` dims and the residual dims (MIC, Figure 2);
//! - alignment (mean squared distance of positive pairs) and uniformity
//!   (`log E exp(-2 |x - y|^2)`) of each normalised prefix (Wang & Isola 2020; IBKD section 4.7);
//! - effective rank `exp(entropy(eigenvalues / sum))` of each prefix's covariance
//!   (Roy & Vetterli 2007).

use std::path::{Path, PathBuf};

use nest_model::pooling::{l2_normalize, truncate_normalize};
use nest_model::{ElasticEncoder, EncodeOptions};
use plotters::prelude::*;
use serde::Serialize;
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Statistics of one normalised prefix.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixStats {
    pub dim: usize,
    pub effective_rank: f64,
    /// `None` without positive pairs.
    pub alignment: Option<f64>,
    pub uniformity: f64,
}

/// The whole inspection.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub layer: usize,
    pub n_texts: usize,
    pub n_positive_pairs: usize,
    /// Variance of each coordinate of the normalised full vectors.
    pub variance: Vec<f64>,
    pub boundaries: Vec<usize>,
    pub cross_dim: usize,
    pub mean_abs_cross_corr: f64,
    pub max_abs_cross_corr: f64,
    pub prefixes: Vec<PrefixStats>,
}

fn effective_rank(x: &Tensor) -> f64 {
    let xc = x - x.mean_dim([0i64].as_slice(), true, Kind::Double);
    let n = (x.size()[0] as f64 - 1.0).max(1.0);
    let cov = xc.transpose(0, 1).matmul(&xc) / n;
    let ev = cov.linalg_eigvalsh("L").clamp_min(0.0);
    let total = ev.sum(Kind::Double).double_value(&[]);
    if total <= 0.0 {
        return 0.0;
    }
    let p = ev / total;
    let h = -(&p * p.clamp_min(1e-300).log())
        .sum(Kind::Double)
        .double_value(&[]);
    h.exp()
}

fn uniformity(x: &Tensor) -> f64 {
    let n = x.size()[0];
    let sq = x.matmul(&x.transpose(0, 1)); // cosines of unit vectors
    let d2: Tensor = (sq * -2.0 + 2.0).clamp_min(0.0); // |x - y|^2 of unit vectors
    let mask = Tensor::ones([n, n], (Kind::Bool, x.device())).triu(1);
    let v = d2.masked_select(&mask);
    (v * -2.0).exp().mean(Kind::Double).log().double_value(&[])
}

/// What to inspect.
#[derive(Debug, Clone)]
pub struct InspectSpec {
    /// Layer whose pooled states are inspected.
    pub layer: usize,
    /// Prefix length for the prefix/residual cross-correlation.
    pub cross_dim: usize,
    /// Prefix lengths to mark and to compute statistics at (the full size is added).
    pub boundaries: Vec<usize>,
}

/// Computes the diagnostics of `texts`. `pairs` (indices into `texts`) are positive pairs for
/// alignment; the first 2000 texts enter uniformity and effective rank.
pub fn inspect(
    encoder: &ElasticEncoder,
    texts: &[&str],
    pairs: &[(i64, i64)],
    spec: &InspectSpec,
    opts: EncodeOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<(Inspection, Tensor)> {
    let (layer, cross_dim, boundaries) = (spec.layer, spec.cross_dim, spec.boundaries.as_slice());
    let hidden = check_inputs(encoder, texts, spec)?;
    let pooled = encoder
        .embed_layers(texts, &[layer], opts, progress)?
        .remove(0)
        .to_kind(Kind::Double);
    let _g = tch::no_grad_guard();
    let full = l2_normalize(&pooled);
    let variance: Vec<f64> =
        Vec::try_from(&full.var_dim([0i64].as_slice(), false, false)).unwrap_or_default();
    let corr = cross_correlation(&full, cross_dim, hidden, texts.len() as f64);
    let abs = corr.abs();
    let sample = texts.len().min(2000) as i64;
    let dims = prefix_dims(boundaries, hidden);
    let prefixes = dims
        .iter()
        .map(|&d| prefix_stats(&pooled, d, pairs, sample))
        .collect();
    Ok((
        Inspection {
            layer,
            n_texts: texts.len(),
            n_positive_pairs: pairs.len(),
            variance,
            boundaries: dims,
            cross_dim,
            mean_abs_cross_corr: abs.mean(Kind::Double).double_value(&[]),
            max_abs_cross_corr: abs.max().double_value(&[]),
            prefixes,
        },
        corr,
    ))
}

/// Checks the layer, the cross dim (shorter than the hidden size) and that there are at least 3
/// texts; returns the hidden size.
fn check_inputs(encoder: &ElasticEncoder, texts: &[&str], spec: &InspectSpec) -> Result<usize> {
    let cross_dim = spec.cross_dim;
    encoder.check(&[spec.layer], &[cross_dim])?;
    let hidden = encoder.output_dim();
    if cross_dim >= hidden {
        return Err(Error::Core(nest_core::Error::value(
            "--dim",
            format!("the cross-correlation needs a prefix shorter than the hidden size {hidden}"),
        )));
    }
    if texts.len() < 3 {
        return Err(Error::Core(nest_core::Error::value(
            "--data",
            "at least 3 texts are needed",
        )));
    }
    Ok(hidden)
}

/// Pearson correlation `[cross_dim, hidden - cross_dim]` between the first `cross_dim` columns
/// of `full` (`n` rows) and the rest.
fn cross_correlation(full: &Tensor, cross_dim: usize, hidden: usize, n: f64) -> Tensor {
    // cross-correlation of standardised columns
    let z = (full - full.mean_dim([0i64].as_slice(), true, Kind::Double))
        / full
            .std_dim([0i64].as_slice(), false, true)
            .clamp_min(1e-12);
    z.narrow(1, 0, cross_dim as i64)
        .transpose(0, 1)
        .matmul(&z.narrow(1, cross_dim as i64, (hidden - cross_dim) as i64))
        / n
}

/// The boundaries within `1..=hidden`, with `hidden` added if missing.
fn prefix_dims(boundaries: &[usize], hidden: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = boundaries
        .iter()
        .copied()
        .filter(|&d| d >= 1 && d <= hidden)
        .collect();
    if !dims.contains(&hidden) {
        dims.push(hidden);
    }
    dims
}

/// The statistics of the normalised `d`-prefix of `pooled`; rank and uniformity on the first
/// `sample` rows.
fn prefix_stats(pooled: &Tensor, d: usize, pairs: &[(i64, i64)], sample: i64) -> PrefixStats {
    let e = truncate_normalize(pooled, d);
    let alignment = (!pairs.is_empty()).then(|| alignment(&e, pairs));
    let es = e.narrow(0, 0, sample);
    PrefixStats {
        dim: d,
        effective_rank: effective_rank(&es),
        alignment,
        uniformity: uniformity(&es),
    }
}

/// Mean squared distance between the rows of each positive pair.
fn alignment(e: &Tensor, pairs: &[(i64, i64)]) -> f64 {
    let a = Tensor::from_slice(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let b = Tensor::from_slice(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    (e.index_select(0, &a) - e.index_select(0, &b))
        .square()
        .sum_dim_intlist(1, false, Kind::Double)
        .mean(Kind::Double)
        .double_value(&[])
}

fn perr(path: &Path, e: impl ToString) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Writes `inspect.json`, `variance.svg` and `crosscorr.svg` into `dir`.
pub fn write(dir: &Path, ins: &Inspection, corr: &Tensor, model: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let p = dir.join("inspect.json");
    let json = serde_json::to_string_pretty(ins).map_err(|e| Error::Report(e.to_string()))?;
    nest_core::fsutil::write_atomic(&p, json.as_bytes())?;
    out.push(p);

    let p = dir.join("variance.svg");
    let svg = variance_svg(&p, ins, model)?;
    nest_core::fsutil::write_atomic(&p, svg.as_bytes())?;
    out.push(p);

    let p = dir.join("crosscorr.svg");
    let svg = crosscorr_svg(&p, ins, corr)?;
    nest_core::fsutil::write_atomic(&p, svg.as_bytes())?;
    out.push(p);
    Ok(out)
}

/// The per-dimension variance bar chart with the prefix boundaries as red lines (`p` names
/// the file in errors).
fn variance_svg(p: &Path, ins: &Inspection, model: &str) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| perr(p, e))?;
        let vmax = ins.variance.iter().copied().fold(1e-12, f64::max) * 1.05;
        let n = ins.variance.len();
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!(
                    "per-dimension variance, layer {} ({model}); red lines: prefix boundaries",
                    ins.layer
                ),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, 0f64..vmax)
            .map_err(|e| perr(p, e))?;
        c.configure_mesh()
            .x_desc("dimension")
            .y_desc("variance")
            .draw()
            .map_err(|e| perr(p, e))?;
        let blue = RGBColor(31, 119, 180);
        c.draw_series(
            ins.variance.iter().enumerate().map(|(i, v)| {
                Rectangle::new([(i as f64, 0.0), (i as f64 + 0.9, *v)], blue.filled())
            }),
        )
        .map_err(|e| perr(p, e))?;
        for &b in &ins.boundaries {
            c.draw_series(LineSeries::new(
                vec![(b as f64, 0.0), (b as f64, vmax)],
                RGBColor(214, 39, 40).stroke_width(1),
            ))
            .map_err(|e| perr(p, e))?;
        }
        root.present().map_err(|e| perr(p, e))?;
    }
    Ok(svg)
}

/// `|corr|` block-max pooled to at most 96 x 96 cells.
struct PooledCorr {
    /// Columns of the correlation before pooling (residual dims).
    cols: i64,
    /// Pooled rows.
    rows: i64,
    /// Pooled columns.
    pooled_cols: i64,
    /// Pooled cells, row-major.
    vals: Vec<f32>,
}

/// Block-max pools `|corr|` to at most 96 x 96 cells (`p` names the file in errors).
fn pool_corr(p: &Path, corr: &Tensor) -> Result<PooledCorr> {
    let (rows, cols) = corr.size2().map_err(|e| perr(p, e))?;
    let br = (rows as f64 / 96.0).ceil().max(1.0) as i64;
    let bc = (cols as f64 / 96.0).ceil().max(1.0) as i64;
    let abs = corr.abs().unsqueeze(0).unsqueeze(0).to_kind(Kind::Float);
    let pooled = abs
        .max_pool2d([br, bc], [br, bc], [0, 0], [1, 1], true)
        .squeeze();
    let pooled = if pooled.dim() == 1 {
        pooled.unsqueeze(0)
    } else {
        pooled
    };
    let (pr, pc) = pooled.size2().map_err(|e| perr(p, e))?;
    let vals: Vec<f32> = Vec::try_from(&pooled.contiguous().view([-1])).unwrap_or_default();
    Ok(PooledCorr {
        cols,
        rows: pr,
        pooled_cols: pc,
        vals,
    })
}

/// The `|corr|` heatmap, block-max pooled to at most 96 x 96 cells (`p` names the file in
/// errors).
fn crosscorr_svg(p: &Path, ins: &Inspection, corr: &Tensor) -> Result<String> {
    let PooledCorr {
        cols,
        rows: pr,
        pooled_cols: pc,
        vals,
    } = pool_corr(p, corr)?;
    let cell = 6i32;
    let mut svg = String::new();
    {
        let w = (80 + cell * pc as i32).max(460) as u32;
        let h = (80 + cell * pr as i32) as u32;
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| perr(p, e))?;
        root.draw(&Text::new(
            format!(
                "|corr| prefix dims 0..{} (rows) x residual dims {}..{} (cols); mean {:.3}",
                ins.cross_dim,
                ins.cross_dim,
                ins.cross_dim + cols as usize,
                ins.mean_abs_cross_corr
            ),
            (10, 10),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(|e| perr(p, e))?;
        for r in 0..pr {
            for c in 0..pc {
                let v = vals[(r * pc + c) as usize] as f64;
                let col = ViridisRGB::get_color(v.clamp(0.0, 1.0));
                let (x, y) = (40 + c as i32 * cell, 40 + r as i32 * cell);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cell, y + cell)],
                    RGBColor(col.0, col.1, col.2).filled(),
                ))
                .map_err(|e| perr(p, e))?;
            }
        }
        root.present().map_err(|e| perr(p, e))?;
    }
    Ok(svg)
}
