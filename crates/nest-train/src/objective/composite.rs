//! Objectives composed: a [`Composite`] sums its [`Part`]s' terms, each weighted, drawing from
//! its own random stream.

use nest_model::ClsAttention;
use tch::Tensor;

use super::{BatchOutput, Objective, StepContext, Term};

/// Several objectives summed, each with a weight; term names are prefixed with the component's
/// name when there is more than one.
pub struct Composite {
    pub parts: Vec<Part>,
}

/// One component of a [`Composite`].
pub struct Part {
    /// Prefix of its term names (the recipe's `kind`).
    pub name: String,
    /// Multiplies each of its terms.
    pub weight: f64,
    pub objective: Box<dyn Objective>,
}

impl Part {
    pub fn new(name: impl Into<String>, weight: f64, objective: Box<dyn Objective>) -> Self {
        Part {
            name: name.into(),
            weight,
            objective,
        }
    }
}

impl std::fmt::Debug for Composite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Objective for Composite {
    fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| {
                if p.weight == 1.0 {
                    p.objective.describe()
                } else {
                    format!("{} x {}", p.weight, p.objective.describe())
                }
            })
            .collect();
        parts.join(" + ")
    }

    /// Each part's draws after their count; `None` when a part has none.
    fn recorded_draws(&self, ctx: &StepContext, num_layers: usize) -> Option<Vec<usize>> {
        let mut all = Vec::new();
        for (k, p) in self.parts.iter().enumerate() {
            let draws = p
                .objective
                .recorded_draws(&part_context(ctx, k), num_layers)?;
            all.push(draws.len());
            all.extend(draws);
        }
        Some(all)
    }

    fn terms(&self, out: &BatchOutput, ctx: &StepContext) -> Vec<Term> {
        let many = self.parts.len() > 1;
        let mut all = Vec::new();
        for (
            k,
            Part {
                name,
                weight: w,
                objective: o,
            },
        ) in self.parts.iter().enumerate()
        {
            for t in o.terms(out, &part_context(ctx, k)) {
                all.push(Term {
                    name: if many {
                        format!("{name}/{}", t.name)
                    } else {
                        t.name
                    },
                    value: if *w == 1.0 { t.value } else { t.value * *w },
                });
            }
        }
        all
    }

    fn trained_dims(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self
            .parts
            .iter()
            .flat_map(|p| p.objective.trained_dims())
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        let mut l: Vec<usize> = self
            .parts
            .iter()
            .flat_map(|p| p.objective.trained_layers(num_layers))
            .collect();
        l.sort_unstable();
        l.dedup();
        l
    }

    fn reads_tokens(&self) -> Option<String> {
        self.parts.iter().find_map(|p| p.objective.reads_tokens())
    }

    /// The first part's targets that has some: a run has one teacher (`BuildContext`), whose
    /// rows every part that reads targets reads.
    fn targets(&self, texts: &[&str]) -> Option<Tensor> {
        self.parts.iter().find_map(|p| p.objective.targets(texts))
    }

    fn diagnostics(&self, out: &BatchOutput) -> Vec<(String, Tensor)> {
        let many = self.parts.len() > 1;
        self.parts
            .iter()
            .flat_map(|p| {
                p.objective
                    .diagnostics(out)
                    .into_iter()
                    .map(|(n, v)| match many {
                        true => (format!("{}/{n}", p.name), v),
                        false => (n, v),
                    })
            })
            .collect()
    }

    fn attention(&self) -> ClsAttention {
        let asks: Vec<ClsAttention> = self.parts.iter().map(|p| p.objective.attention()).collect();
        if asks.contains(&ClsAttention::PerHead) {
            ClsAttention::PerHead
        } else if asks.contains(&ClsAttention::Mean) {
            ClsAttention::Mean
        } else {
            ClsAttention::None
        }
    }
}

/// Part `k`'s context: each component draws from its own stream.
fn part_context(ctx: &StepContext, k: usize) -> StepContext {
    StepContext {
        seed: ctx.seed.wrapping_add(k as u64 * 0x9e37_79b9),
        ..*ctx
    }
}
