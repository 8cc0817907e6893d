//! SVG plots (plotters): layer x dim heatmaps, quality-vs-dim curves and quality-vs-cost with
//! the Pareto front.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::quantize::Precision;
use crate::report::{pareto_front, Point, Report, TaskResult};
use crate::{Error, Result};

mod heatmap;

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
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{} - {} vs dim ({})", t.task, t.main_metric, r.model.path),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(xmin - 0.2..xmax + 0.2, lo..hi)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("dim (log2 scale)")
            .y_desc(t.main_metric.as_str())
            .x_labels(((xmax - xmin).round() as usize + 1) * 4)
            .x_label_formatter(&pow2_label)
            .draw()
            .map_err(|e| err(e.to_string()))?;
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
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(format!("layer {l} float32"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(|e| err(e.to_string()))?;
        }
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
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(1)))
                .map_err(|e| err(e.to_string()))?
                .label(format!("layer {deepest} {}", p.name()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(1))
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|q| TriangleMarker::new(*q, 4, color.filled())),
                )
                .map_err(|e| err(e.to_string()))?;
        }
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

// long: one plotters chart, drawn in the order plotters needs (mesh, series, labels, legend).
/// Two panels: quality vs latency (ms/text) and quality vs bytes per vector (log2), every cell a
/// dot, the 3-way Pareto front (latency, bytes, quality) in red.
fn cost_svg(path: &Path, r: &Report, t: &TaskResult) -> Result<()> {
    let err = perr(path);
    let points = r.points(&t.task)?;
    let front = pareto_front(&points);
    let is_front = |p: &Point| {
        front
            .iter()
            .any(|f| f.layer == p.layer && f.dim == p.dim && f.precision == p.precision)
    };
    let q: Vec<f64> = points
        .iter()
        .map(|p| p.quality)
        .filter(|v| v.is_finite())
        .collect();
    let (lo, hi) = axis_range(&q);
    let lat: Vec<f64> = points
        .iter()
        .map(|p| p.latency_ms)
        .filter(|v| v.is_finite())
        .collect();
    let lmax = lat.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.1;
    let bmin = points.iter().map(|p| p.bytes).min().unwrap_or(1).max(1) as f64;
    let bmax = points.iter().map(|p| p.bytes).max().unwrap_or(2).max(2) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1040, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let (left, right) = root.split_horizontally(520);
        let mut c1 = ChartBuilder::on(&left)
            .caption(
                format!("{}: {} vs encode latency", t.task, t.main_metric),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..lmax, lo..hi)
            .map_err(|e| err(e.to_string()))?;
        c1.configure_mesh()
            .x_desc("ms per text (layer cost)")
            .y_desc(t.main_metric.as_str())
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let mut c2 = ChartBuilder::on(&right)
            .caption(
                format!("{}: {} vs bytes per vector", t.task, t.main_metric),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(bmin.log2() - 0.3..bmax.log2() + 0.3, lo..hi)
            .map_err(|e| err(e.to_string()))?;
        c2.configure_mesh()
            .x_desc("bytes per vector (log2 scale)")
            .y_desc(t.main_metric.as_str())
            .x_labels(((bmax.log2() - bmin.log2()).round() as usize + 1) * 4)
            .x_label_formatter(&pow2_label)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let grey = RGBColor(150, 150, 150);
        let red = RGBColor(214, 39, 40);
        for p in points.iter().filter(|p| p.quality.is_finite()) {
            let (c, s) = if is_front(p) { (red, 4) } else { (grey, 2) };
            if p.latency_ms.is_finite() {
                c1.draw_series(std::iter::once(Circle::new(
                    (p.latency_ms, p.quality),
                    s,
                    c.filled(),
                )))
                .map_err(|e| err(e.to_string()))?;
            }
            c2.draw_series(std::iter::once(Circle::new(
                ((p.bytes as f64).log2(), p.quality),
                s,
                c.filled(),
            )))
            .map_err(|e| err(e.to_string()))?;
        }
        // best quality reachable at each cost (the front's projection on each axis)
        let staircase = |mut v: Vec<(f64, f64)>| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut best = f64::NEG_INFINITY;
            v.into_iter()
                .filter(|p| {
                    if p.1 > best {
                        best = p.1;
                        true
                    } else {
                        false
                    }
                })
                .collect::<Vec<_>>()
        };
        let l_front = staircase(
            points
                .iter()
                .filter(|p| p.latency_ms.is_finite())
                .map(|p| (p.latency_ms, p.quality))
                .collect(),
        );
        let b_front = staircase(
            points
                .iter()
                .map(|p| ((p.bytes as f64).log2(), p.quality))
                .collect(),
        );
        c1.draw_series(LineSeries::new(l_front, red.stroke_width(1)))
            .map_err(|e| err(e.to_string()))?;
        c2.draw_series(LineSeries::new(b_front, red.stroke_width(1)))
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    nest_core::fsutil::write_atomic(path, svg.as_bytes())?;
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
