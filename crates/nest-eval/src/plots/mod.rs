//! SVG plots (plotters): layer x dim heatmaps, quality-vs-dim curves and quality-vs-cost with
//! the Pareto front.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::quantize::Precision;
use crate::report::{Report, TaskResult};
use crate::{Error, Result};

mod cost;
mod heatmap;

use cost::cost_svg;
pub use heatmap::heatmap_svg;

fn perr(path: &Path) -> impl Fn(String) -> Error + '_ {
    Error::plot(path)
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Tick label on a log2 axis: the power of two at whole exponents, nothing in between.
fn pow2_label(x: &f64) -> String {
    if (x - x.round()).abs() < 0.02 {
        format!("{}", 2f64.powf(x.round()))
    } else {
        String::new()
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The y range of a quality axis: the finite values' range with a point of margin; 0-100 when no
/// value is defined (e.g. Spearman of constant gold scores), where an infinite range would make
/// the plotting library loop forever.
fn axis_range(vals: &[f64]) -> (f64, f64) {
    let finite = vals.iter().copied().filter(|v| v.is_finite());
    let lo = finite.clone().fold(f64::INFINITY, f64::min);
    let hi = finite.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        (0.0, 100.0)
    } else {
        (lo - 1.0, hi.max(lo) + 1.0)
    }
}

/// A chart of quality against a float x axis, as every chart here draws it.
type QualityChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Builds a quality chart on `area` (margin 12, label areas 40 and 50) over `x` and `y`.
fn quality_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    path: &Path,
    caption: String,
    font_size: i32,
    x: Range<f64>,
    y: Range<f64>,
) -> Result<QualityChart<'a, 'b>> {
    ChartBuilder::on(area)
        .caption(caption, ("sans-serif", font_size))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x, y)
        .map_err(|e| perr(path)(e.to_string()))
}

/// Draws the mesh of a chart whose x axis is log2 of `xmin..xmax`, labelled with powers of two.
fn log2_mesh(
    chart: &mut QualityChart,
    path: &Path,
    x_desc: &str,
    y_desc: &str,
    (xmin, xmax): (f64, f64),
) -> Result<()> {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(((xmax - xmin).round() as usize + 1) * 4)
        .x_label_formatter(&pow2_label)
        .draw()
        .map_err(|e| perr(path)(e.to_string()))
}

/// Draws `pts` as a line of `width` with a legend entry `label`.
fn draw_line(
    chart: &mut QualityChart,
    path: &Path,
    pts: &[(f64, f64)],
    color: RGBColor,
    width: u32,
    label: String,
) -> Result<()> {
    chart
        .draw_series(LineSeries::new(pts.to_vec(), color.stroke_width(width)))
        .map_err(|e| perr(path)(e.to_string()))?
        .label(label)
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
        });
    Ok(())
}

/// Quality vs dim (log2 x), one line per layer at float32, and one dashed-style line per other
/// precision at the deepest layer.
fn curves_svg(path: &Path, r: &Report, t: &TaskResult) -> Result<()> {
    let err = perr(path);
    let mut svg = String::new();
    let vals: Vec<f64> = t
        .cells
        .iter()
        .filter_map(|c| c.metrics.get(&t.main_metric).copied())
        .filter(|v| v.is_finite())
        .collect();
    let (lo, hi) = axis_range(&vals);
    let xmin = (*r.dims.first().unwrap_or(&1) as f64).log2();
    let xmax = (*r.dims.last().unwrap_or(&2) as f64).log2().max(xmin + 1.0);
    {
        let root = SVGBackend::with_string(&mut svg, (720, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let caption = format!("{} - {} vs dim ({})", t.task, t.main_metric, r.model.path);
        let x = xmin - 0.2..xmax + 0.2;
        let mut chart = quality_chart(&root, path, caption, 16, x, lo..hi)?;
        let y_desc = t.main_metric.as_str();
        log2_mesh(&mut chart, path, "dim (log2 scale)", y_desc, (xmin, xmax))?;
        draw_layer_curves(&mut chart, path, r, t)?;
        draw_precision_curves(&mut chart, path, r, t)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    nest_core::fsutil::write_atomic(path, svg.as_bytes())?;
    Ok(())
}

/// One float32 curve (line and dots) per layer.
fn draw_layer_curves(
    chart: &mut QualityChart,
    path: &Path,
    r: &Report,
    t: &TaskResult,
) -> Result<()> {
    let err = perr(path);
    for (i, &l) in r.layers.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = r
            .dims
            .iter()
            .filter_map(|&d| {
                t.main(l, d, Precision::Float32)
                    .map(|v| ((d as f64).log2(), v))
            })
            .collect();
        draw_line(chart, path, &pts, color, 2, format!("layer {l} float32"))?;
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    Ok(())
}

/// One curve (thin line and triangles) per precision other than float32, at the deepest layer.
fn draw_precision_curves(
    chart: &mut QualityChart,
    path: &Path,
    r: &Report,
    t: &TaskResult,
) -> Result<()> {
    let err = perr(path);
    let deepest = *r.layers.last().unwrap_or(&1);
    for (j, &p) in r
        .precisions
        .iter()
        .filter(|p| **p != Precision::Float32)
        .enumerate()
    {
        let color = PALETTE[(r.layers.len() + j) % PALETTE.len()];
        let pts: Vec<(f64, f64)> = r
            .dims
            .iter()
            .filter_map(|&d| t.main(deepest, d, p).map(|v| ((d as f64).log2(), v)))
            .collect();
        let label = format!("layer {deepest} {}", p.name());
        draw_line(chart, path, &pts, color, 1, label)?;
        chart
            .draw_series(
                pts.iter()
                    .map(|q| TriangleMarker::new(*q, 4, color.filled())),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    Ok(())
}

/// Every plot of a report: `heatmap-<task>-<precision>.svg`, `curve-<task>.svg`,
/// `cost-<task>.svg`.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for t in &r.tasks {
        for &p in &r.precisions {
            let path = dir.join(format!("heatmap-{}-{}.svg", slug(&t.task), p.name()));
            let title = format!(
                "{} - {} {} ({})",
                t.task,
                t.main_metric,
                p.name(),
                r.model.path
            );
            heatmap_svg(
                &path,
                &title,
                &r.layers,
                &r.dims,
                &|l, d| t.main(l, d, p),
                false,
            )?;
            out.push(path);
        }
        let path = dir.join(format!("curve-{}.svg", slug(&t.task)));
        curves_svg(&path, r, t)?;
        out.push(path);
        if !r.costs.latency_ms.is_empty() {
            let path = dir.join(format!("cost-{}.svg", slug(&t.task)));
            cost_svg(&path, r, t)?;
            out.push(path);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ranges_are_finite() {
        assert_eq!(axis_range(&[]), (0.0, 100.0));
        assert_eq!(axis_range(&[f64::NAN]), (0.0, 100.0));
        assert_eq!(axis_range(&[5.0]), (4.0, 6.0));
        assert_eq!(axis_range(&[5.0, f64::NAN, 7.0]), (4.0, 8.0));
    }
}
