//! Layer x dim heatmap (SVG) with the score written in each cell.

use std::path::Path;

use plotters::prelude::*;

use crate::report::TaskGrid;
use crate::{Error, Result};

/// Draws `t` as a heatmap: x = layers, y = dims, colour = score (ViridisRGB over the grid's range).
pub fn write_svg(path: &Path, t: &TaskGrid, model: &str) -> Result<()> {
    let err = |e: String| Error::Plot {
        path: path.to_path_buf(),
        message: e,
    };
    let (nl, nd) = (t.layers.len(), t.dims.len());
    let cell_w = 70u32;
    let cell_h = 34u32;
    let width = 150 + cell_w * nl as u32;
    let height = 110 + cell_h * nd as u32;
    let finite: Vec<f64> = t
        .scores
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let title = format!("{} - {} ({})", t.task, t.metric, model);
        root.draw(&Text::new(title, (10, 10), ("sans-serif", 16).into_font()))
            .map_err(|e| err(e.to_string()))?;
        let x0 = 100i32;
        let y0 = 50i32;
        for (di, d) in t.dims.iter().enumerate() {
            let y = y0 + (di as i32) * cell_h as i32;
            root.draw(&Text::new(
                format!("d={d}"),
                (20, y + 10),
                ("sans-serif", 13).into_font(),
            ))
            .map_err(|e| err(e.to_string()))?;
            for (li, v) in t.scores[di].iter().enumerate() {
                let x = x0 + (li as i32) * cell_w as i32;
                let c = if v.is_finite() {
                    ViridisRGB::get_color((v - lo) / span)
                } else {
                    RGBColor(200, 200, 200)
                };
                root.draw(&Rectangle::new(
                    [(x, y), (x + cell_w as i32 - 2, y + cell_h as i32 - 2)],
                    c.filled(),
                ))
                .map_err(|e| err(e.to_string()))?;
                let light = v.is_finite() && (v - lo) / span < 0.6;
                let fg = if light { WHITE } else { BLACK };
                root.draw(&Text::new(
                    format!("{v:.1}"),
                    (x + 14, y + 9),
                    ("sans-serif", 13).into_font().color(&fg),
                ))
                .map_err(|e| err(e.to_string()))?;
            }
        }
        let yl = y0 + (nd as i32) * cell_h as i32 + 8;
        for (li, l) in t.layers.iter().enumerate() {
            let x = x0 + (li as i32) * cell_w as i32;
            root.draw(&Text::new(
                format!("L{l}"),
                (x + 22, yl),
                ("sans-serif", 13).into_font(),
            ))
            .map_err(|e| err(e.to_string()))?;
        }
        root.draw(&Text::new(
            "layers (early exit) ->",
            (x0, yl + 22),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    nest_core::fsutil::write_atomic(path, svg.as_bytes())?;
    Ok(())
}
