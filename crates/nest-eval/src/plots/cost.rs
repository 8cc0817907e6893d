//! Quality vs cost: every cell of a task against its encode latency and its bytes per vector,
//! with the Pareto front.

use std::path::Path;

use plotters::prelude::*;

use super::{axis_range, log2_mesh, perr, quality_chart, QualityChart};
use crate::report::{pareto_front, Point, Report, TaskResult};
use crate::Result;

/// The colour of the Pareto front in a cost plot.
const FRONT_RED: RGBColor = RGBColor(214, 39, 40);
/// The colour of the other cells in a cost plot.
const CELL_GREY: RGBColor = RGBColor(150, 150, 150);

/// The axis ranges of a cost plot.
struct CostRanges {
    /// Quality (y of both panels).
    lo: f64,
    hi: f64,
    /// Upper end of the latency axis.
    lmax: f64,
    /// Smallest and largest bytes per vector.
    bmin: f64,
    bmax: f64,
}

impl CostRanges {
    /// The ranges that hold every finite point.
    fn of(points: &[Point]) -> Self {
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
        CostRanges {
            lo,
            hi,
            lmax: lat.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.1,
            bmin: points.iter().map(|p| p.bytes).min().unwrap_or(1).max(1) as f64,
            bmax: points.iter().map(|p| p.bytes).max().unwrap_or(2).max(2) as f64,
        }
    }
}

/// Two panels: quality vs latency (ms/text) and quality vs bytes per vector (log2), every cell a
/// dot, the 3-way Pareto front (latency, bytes, quality) in red.
pub(super) fn cost_svg(path: &Path, r: &Report, t: &TaskResult) -> Result<()> {
    let err = perr(path);
    let points = r.points(&t.task)?;
    let front = pareto_front(&points);
    let CostRanges {
        lo,
        hi,
        lmax,
        bmin,
        bmax,
    } = CostRanges::of(&points);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1040, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let (left, right) = root.split_horizontally(520);
        let caption = format!("{}: {} vs encode latency", t.task, t.main_metric);
        let mut c1 = quality_chart(&left, path, caption, 15, 0.0..lmax, lo..hi)?;
        c1.configure_mesh()
            .x_desc("ms per text (layer cost)")
            .y_desc(t.main_metric.as_str())
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let caption = format!("{}: {} vs bytes per vector", t.task, t.main_metric);
        let x = bmin.log2() - 0.3..bmax.log2() + 0.3;
        let mut c2 = quality_chart(&right, path, caption, 15, x, lo..hi)?;
        let y_desc = t.main_metric.as_str();
        let bytes_range = (bmin.log2(), bmax.log2());
        log2_mesh(
            &mut c2,
            path,
            "bytes per vector (log2 scale)",
            y_desc,
            bytes_range,
        )?;
        draw_cost_dots(&mut c1, &mut c2, path, &points, &front)?;
        draw_cost_fronts(&mut c1, &mut c2, path, &points)?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    nest_core::fsutil::write_atomic(path, svg.as_bytes())?;
    Ok(())
}

/// Every point with a finite quality as a dot on both panels (latency, then bytes), the
/// Pareto front's larger and red.
fn draw_cost_dots(
    c1: &mut QualityChart,
    c2: &mut QualityChart,
    path: &Path,
    points: &[Point],
    front: &[Point],
) -> Result<()> {
    let err = perr(path);
    let is_front = |p: &Point| {
        front
            .iter()
            .any(|f| f.layer == p.layer && f.dim == p.dim && f.precision == p.precision)
    };
    for p in points.iter().filter(|p| p.quality.is_finite()) {
        let (c, s) = if is_front(p) {
            (FRONT_RED, 4)
        } else {
            (CELL_GREY, 2)
        };
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
    Ok(())
}

/// The best quality reachable at each cost as a red staircase on both panels (the front's
/// projection on each axis).
fn draw_cost_fronts(
    c1: &mut QualityChart,
    c2: &mut QualityChart,
    path: &Path,
    points: &[Point],
) -> Result<()> {
    let err = perr(path);
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
    c1.draw_series(LineSeries::new(l_front, FRONT_RED.stroke_width(1)))
        .map_err(|e| err(e.to_string()))?;
    c2.draw_series(LineSeries::new(b_front, FRONT_RED.stroke_width(1)))
        .map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The points, sorted by cost, that beat the quality of every cheaper one.
fn staircase(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
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
}
