//! `report.md`: the Markdown rendering of a [`Report`].

use std::fmt::Write as _;

use super::{grid_markdown, pareto_front, table, Report, TaskResult};
use crate::family::FAMILIES;
use crate::quantize::Precision;

impl Report {
    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.model;
        let _ = writeln!(s, "# Nest evaluation report\n");
        let _ = writeln!(
            s,
            "Model `{}` ({}, {} layers x {} dims, {} pooling, max {} tokens). Command: `{}`. Time: {:.1} s. All metrics x100.\n",
            m.path, m.architecture, m.num_layers, m.hidden_size, m.pooling, m.max_seq_length, self.command, self.seconds
        );
        self.cost_section(&mut s);
        self.family_averages(&mut s);
        for t in &self.tasks {
            self.task_section(&mut s, t);
        }
        s
    }

    /// The encode latency per layer, where the report measured it.
    fn cost_section(&self, s: &mut String) {
        if !self.costs.latency_ms.is_empty() {
            let _ = writeln!(s, "## Cost\n");
            let _ = writeln!(
                s,
                "Encode latency (ms per text, batch {}, {} texts, {} threads); bytes per vector = dim x 4 (float32), dim (int8), dim/8 (binary).\n",
                self.costs.latency_batch, self.costs.latency_texts, self.costs.libtorch_threads
            );
            if let Some(m) = &self.costs.machine {
                let _ = writeln!(s, "Measured on {m}.\n");
            }
            let _ = writeln!(s, "| layer | ms / text |\n|---:|---:|");
            for (l, v) in &self.costs.latency_ms {
                let _ = writeln!(s, "| {l} | {v:.3} |");
            }
            s.push('\n');
        }
    }

    /// One task's section: heading, data files, warnings, a table per precision, the metrics
    /// at the full point and the Pareto front.
    fn task_section(&self, s: &mut String, t: &TaskResult) {
        let _ = writeln!(
            s,
            "## {} ({}, main metric {}, n = {})\n",
            t.task,
            t.kind.name(),
            t.main_metric,
            t.n_examples
        );
        for f in &t.files {
            let _ = writeln!(s, "- `{}` sha256 `{}`", f.path, f.sha256);
        }
        for w in &t.warnings {
            let _ = writeln!(s, "- warning: {w}");
        }
        s.push('\n');
        for &p in &self.precisions {
            let _ = writeln!(
                s,
                "{} {} (rows = dims, columns = layers):\n",
                t.main_metric,
                p.name()
            );
            s.push_str(&table(t, p, &self.layers, &self.dims));
            s.push('\n');
        }
        self.full_point_metrics(s, t);
        self.pareto_section(s, t);
    }

    /// Every metric of `t` at the last layer and dim in float32, where that cell exists.
    fn full_point_metrics(&self, s: &mut String, t: &TaskResult) {
        if let Some(c) = t.cells.iter().find(|c| {
            c.layer == *self.layers.last().unwrap_or(&0)
                && c.dim == *self.dims.last().unwrap_or(&0)
                && c.precision == Precision::Float32
        }) {
            let all: Vec<String> = c
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect();
            let _ = writeln!(
                s,
                "All metrics at layer {}, dim {}, float32: {}.\n",
                c.layer,
                c.dim,
                all.join(", ")
            );
        }
    }

    /// The Pareto front of `t`'s cells as a table, where it has one.
    fn pareto_section(&self, s: &mut String, t: &TaskResult) {
        if let Ok(points) = self.points(&t.task) {
            let front = pareto_front(&points);
            if !front.is_empty() {
                let _ = writeln!(
                    s,
                    "Pareto front (no other cell is as fast, as small and better):\n"
                );
                let _ = writeln!(s, "| layer | dim | precision | {} | ms/text | bytes |\n|---:|---:|---|---:|---:|---:|", t.main_metric);
                for p in front {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {:.2} | {:.3} | {} |",
                        p.layer,
                        p.dim,
                        p.precision.name(),
                        p.quality,
                        p.latency_ms,
                        p.bytes
                    );
                }
                s.push('\n');
            }
        }
    }

    /// The mean main metric over a family's tasks per cell (e.g. the papers' STS average over
    /// STS12-16, STS-B and SICK-R), where the report has two tasks of the family or more.
    fn family_averages(&self, s: &mut String) {
        for f in FAMILIES.iter().filter(|f| f.averaged()) {
            let members: Vec<&TaskResult> =
                self.tasks.iter().filter(|t| t.kind == f.kind()).collect();
            if members.len() < 2 {
                continue;
            }
            let names: Vec<&str> = members.iter().map(|t| t.task.as_str()).collect();
            let _ = writeln!(
                s,
                "## {} average over {} tasks ({})\n",
                f.name(),
                members.len(),
                names.join(", ")
            );
            for &p in &self.precisions {
                let _ = writeln!(s, "{} {}:\n", f.main_metric(), p.name());
                s.push_str(&grid_markdown(&self.layers, &self.dims, |l, d| {
                    let v: Option<Vec<f64>> = members.iter().map(|t| t.main(l, d, p)).collect();
                    v.map(|v| format!("{:.2}", v.iter().sum::<f64>() / v.len() as f64))
                }));
                s.push('\n');
            }
        }
    }
}
