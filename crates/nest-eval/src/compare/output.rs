//! A comparison written out: Markdown tables ([`markdown`]), and with them `compare.json` and
//! the heatmaps of the deltas ([`write`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::delta::{CellDelta, Group, TaskDelta};
use crate::significance::Bootstrap;
use crate::{Error, Result};

/// How a comparison was made, for the Markdown header.
#[derive(Debug, Clone, Copy)]
pub struct Legend {
    pub boot: Option<Bootstrap>,
    pub alpha: f64,
    /// Cells in Holm's family.
    pub family: usize,
}

fn fmt_value(v: f64, sd: f64) -> String {
    if sd.is_finite() {
        format!("{v:.2}±{sd:.2}")
    } else {
        format!("{v:.2}")
    }
}

/// Markdown: one table per task and precision, each cell `other (delta [lo, hi])`, `*` where
/// the difference survives Holm's correction.
pub fn markdown(base: &Group, other: &Group, deltas: &[TaskDelta], legend: Legend) -> String {
    let (bn, on) = (&base.name, &other.name);
    let runs = |g: &Group| match g.reports.len() {
        1 => String::new(),
        n => format!(" (mean ± sd over {n} runs)"),
    };
    let mut s = format!(
        "# {on} vs {bn}\n\nCells: {on}'s main metric (x100){}, and in brackets its difference from {bn}{}",
        runs(other),
        runs(base)
    );
    match legend.boot {
        Some(b) => {
            let _ = write!(
                s,
                " with a 95% paired-bootstrap interval over the test items ({} resamples, seed {}). \
                 `*`: the difference survives Holm's correction at {} over all {} cells compared.\n\n",
                b.resamples, b.seed, legend.alpha, legend.family
            );
        }
        None => s.push_str(" (no significance test: --resamples 0).\n\n"),
    }
    for t in deltas {
        let n_sig = t.all().filter(|c| c.significant(legend.alpha)).count();
        let widths = match t.all().find(|c| c.other_dim != c.dim) {
            Some(c) => format!(", full vectors: dim {} against {}", c.dim, c.other_dim),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "## {} ({} {}{widths}), mean delta {:+.2}{}\n",
            t.task,
            t.main_metric,
            t.precision.name(),
            t.mean_delta(),
            if legend.boot.is_some() {
                format!(", {n_sig} of {} cells significant", t.all().count())
            } else {
                String::new()
            }
        );
        s.push_str(&crate::report::grid_markdown(&t.layers, &t.dims, |l, d| {
            let c = t.cell(l, d)?;
            let v = fmt_value(c.other, c.other_sd);
            Some(match c.test {
                Some(x) => format!(
                    "{v} ({:+.2} [{:+.2}, {:+.2}]){}",
                    c.delta(),
                    x.lo,
                    x.hi,
                    if c.significant(legend.alpha) {
                        " *"
                    } else {
                        ""
                    }
                ),
                None => format!("{v} ({:+.2})", c.delta()),
            })
        }));
        s.push('\n');
    }
    s
}

/// Writes `compare.md`, `compare.json`, a diverging heatmap of the deltas per task and
/// precision, and with a test, one of the significant deltas only.
pub fn write(
    dir: &Path,
    base: &Group,
    other: &Group,
    deltas: &[TaskDelta],
    legend: Legend,
) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let p = dir.join("compare.md");
    let md = markdown(base, other, deltas, legend);
    nest_core::fsutil::write_atomic(&p, md.as_bytes())?;
    out.push(p);
    let p = dir.join("compare.json");
    let json = serde_json::json!({
        "base": {"name": base.name, "reports": base.paths},
        "other": {"name": other.name, "reports": other.paths},
        "resamples": legend.boot.map(|b| b.resamples),
        "seed": legend.boot.map(|b| b.seed),
        "alpha": legend.alpha,
        "correction": "holm",
        "family": legend.family,
        "tasks": deltas,
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| Error::Report(e.to_string()))?;
    nest_core::fsutil::write_atomic(&p, text.as_bytes())?;
    out.push(p);
    let (bn, on) = (&base.name, &other.name);
    for t in deltas {
        let slug: String = t
            .task
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let p = dir.join(format!("compare-{slug}-{}.svg", t.precision.name()));
        let title = format!("{} {}: {on} - {bn}", t.task, t.main_metric);
        crate::plots::heatmap_svg(&p, &title, &t.layers, &t.dims, &|l, d| t.delta(l, d), true)?;
        out.push(p);
        if legend.boot.is_some() {
            let p = dir.join(format!(
                "compare-{slug}-{}-significant.svg",
                t.precision.name()
            ));
            let title = format!(
                "{} {}: {on} - {bn}, Holm p < {}",
                t.task, t.main_metric, legend.alpha
            );
            let sig = |l, d| {
                t.cell(l, d)
                    .filter(|c| c.significant(legend.alpha))
                    .map(CellDelta::delta)
            };
            crate::plots::heatmap_svg(&p, &title, &t.layers, &t.dims, &sig, true)?;
            out.push(p);
        }
    }
    Ok(out)
}
