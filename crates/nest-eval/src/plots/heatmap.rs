//! The layer x dim heatmap: one coloured cell per (layer, dim) with its value written in it.

use std::path::Path;

use plotters::prelude::*;

use crate::{Error, Result};

/// How a heatmap colours and labels a value: diverging around 0 (deltas), else a viridis ramp
/// over `[lo, lo + span]`.
struct Scale {
    diverging: bool,
    lo: f64,
    span: f64,
    /// The largest |value| (the diverging scale's ends).
    amax: f64,
}

impl Scale {
    /// The cell's fill and whether it is dark (white text); grey for an undefined value.
    fn colour(&self, v: Option<f64>) -> (RGBColor, bool) {
        match v {
            Some(v) if v.is_finite() && self.diverging => {
                let t = (v / self.amax).clamp(-1.0, 1.0);
                let c = if t >= 0.0 {
                    RGBColor(
                        (255.0 * (1.0 - t)) as u8,
                        (255.0 - 90.0 * t) as u8,
                        (255.0 * (1.0 - t)) as u8,
                    )
                } else {
                    RGBColor(255, (255.0 * (1.0 + t)) as u8, (255.0 * (1.0 + t)) as u8)
                };
                (c, t.abs() > 0.6)
            }
            Some(v) if v.is_finite() => {
                let t = (v - self.lo) / self.span;
                let c = ViridisRGB::get_color(t);
                (RGBColor(c.0, c.1, c.2), t < 0.6)
            }
            _ => (RGBColor(210, 210, 210), false),
        }
    }

    fn label(&self, v: Option<f64>) -> String {
        match v {
            Some(v) if self.diverging => format!("{v:+.1}"),
            Some(v) => format!("{v:.1}"),
            None => "-".into(),
        }
    }
}

/// A layer x dim grid of values drawn as coloured cells with the value written in each.
/// `diverging`: colour by sign around 0 (for deltas), else a viridis ramp over the range.
pub fn heatmap_svg(
    path: &Path,
    title: &str,
    layers: &[usize],
    dims: &[usize],
    value: &dyn Fn(usize, usize) -> Option<f64>,
    diverging: bool,
) -> Result<()> {
    let err = Error::plot(path);
    let (cw, ch) = (70i32, 34i32);
    let width = (150 + cw * layers.len() as i32).max(420) as u32;
    let height = (110 + ch * dims.len() as i32) as u32;
    let vals: Vec<f64> = dims
        .iter()
        .flat_map(|&d| layers.iter().filter_map(move |&l| value(l, d)))
        .filter(|v| v.is_finite())
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let amax = vals.iter().map(|v| v.abs()).fold(1e-9, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let font = |s: u32| ("sans-serif", s).into_font();
        root.draw(&Text::new(title.to_string(), (10, 10), font(15)))
            .map_err(|e| err(e.to_string()))?;
        let (x0, y0) = (100, 50);
        for (di, d) in dims.iter().enumerate() {
            let y = y0 + di as i32 * ch;
            root.draw(&Text::new(format!("d={d}"), (20, y + 10), font(13)))
                .map_err(|e| err(e.to_string()))?;
            for (li, l) in layers.iter().enumerate() {
                let x = x0 + li as i32 * cw;
                let v = value(*l, *d);
                let scale = Scale {
                    diverging,
                    lo,
                    span,
                    amax,
                };
                let (fill, dark) = scale.colour(v);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cw - 2, y + ch - 2)],
                    fill.filled(),
                ))
                .map_err(|e| err(e.to_string()))?;
                let label = scale.label(v);
                let fg = if dark { WHITE } else { BLACK };
                root.draw(&Text::new(label, (x + 14, y + 9), font(13).color(&fg)))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        let yl = y0 + dims.len() as i32 * ch + 8;
        for (li, l) in layers.iter().enumerate() {
            root.draw(&Text::new(
                format!("L{l}"),
                (x0 + li as i32 * cw + 22, yl),
                font(13),
            ))
            .map_err(|e| err(e.to_string()))?;
        }
        root.draw(&Text::new(
            "layers (early exit) ->",
            (x0, yl + 22),
            font(13),
        ))
        .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    nest_core::fsutil::write_atomic(path, svg.as_bytes())?;
    Ok(())
}
