//! 2DMSE: Two-dimensional Matryoshka Sentence Embeddings (Li et al. 2024, `2DMSE.md`).
//!
//! Paper: "2D Matryoshka Sentence Embeddings" (Li, Li, Li, Xie and Li 2024, arXiv:2402.14776
//! v1), eq. 2-5 (the last layer at full and sampled dims, a sampled shallow layer at both),
//! eq. 6 (KL alignment of the shallow layer to the last) and eq. 7 (the weighted sum).

use rand::seq::index::sample;
use serde::{Deserialize, Serialize};
use tch::Tensor;

mod sums;

use super::component::{increasing, BuildContext, Component};
use super::{BatchOutput, LayerWeighting, Objective, StepContext, TaskLoss, Term};
use crate::losses;
use sums::{accumulate, ShallowSums};

fn one() -> f64 {
    1.0
}
fn one_layer() -> usize {
    1
}
fn st_temperature() -> f64 {
    0.3
}
fn inverse() -> LayerWeighting {
    LayerWeighting::Inverse
}
fn yes() -> bool {
    true
}

/// The keys of a `[[objective]]` table with `kind = "2dmse"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TwoDConfig {
    /// Weight of the whole component in a composite objective.
    #[serde(default = "one")]
    pub weight: f64,
    /// Prefix dims (increasing); empty = the recipe's `matryoshka_dims`. The full dim is always
    /// trained (eq. 2-3).
    #[serde(default)]
    pub dims: Vec<usize>,
    /// One weight per dim; empty = all 1.
    #[serde(default)]
    pub dim_weights: Vec<f64>,
    /// Shallow layers sampled per micro-batch, uniformly without replacement from 1..N-1
    /// (eq. 3: one); 0 = every shallow layer.
    #[serde(default = "one_layer")]
    pub layers_per_step: usize,
    /// Prefix dims sampled per micro-batch (eq. 4-5 sample one), shared by the last and the
    /// shallow layers; 0 = every dim.
    #[serde(default)]
    pub dims_per_step: usize,
    /// lambda of the last layer's terms (eq. 7).
    #[serde(default = "one")]
    pub last_layer_weight: f64,
    /// lambda of the shallow layers' terms (eq. 7), times the per-layer weighting.
    #[serde(default = "one")]
    pub prior_layers_weight: f64,
    /// lambda of the alignment (eq. 6-7).
    #[serde(default = "one")]
    pub kl_weight: f64,
    /// Softmax temperature of the alignment; 0 turns it off.
    #[serde(default = "st_temperature")]
    pub kl_temperature: f64,
    /// Weight of shallow layer `i` (0-based): `inverse` 1/(1+i), `log` 1/(1+ln(1+i)), `uniform`.
    #[serde(default = "inverse")]
    pub layer_weighting: LayerWeighting,
    /// Also align the prefix dims (the second KL of eq. 6); off = sentence-transformers'
    /// `AdaptiveLayerLoss`, which aligns the full dim only.
    #[serde(default = "yes")]
    pub align_prefix: bool,
    /// Keep the last layer out of the KL's gradient (it is the teacher). On = sentence-transformers
    /// 6 (`AdaptiveLayerLoss`, issue #3757); off = sentence-transformers <= 5 and AnglE, where the
    /// last layer is also pulled towards the shallow one.
    #[serde(default = "yes")]
    pub detach_teacher: bool,
}

impl Default for TwoDConfig {
    fn default() -> Self {
        toml::Value::Table(Default::default())
            .try_into()
            .expect("every key has a default")
    }
}

/// 2DMSE (Li et al. 2024, sections 3.2-3.4): per micro-batch, with one forward pass,
/// - the task loss at the last layer N at the full dim D and at the prefix dims (eq. 2, 4),
/// - the same at sampled shallow layers n ~ U(1, N-1) (eq. 3, 5), weighted per layer,
/// - the alignment of each sampled layer's embedding to the last layer's (eq. 6), at D and, with
///   `align_prefix`, averaged over the prefix dims of the step,
///
/// summed with one lambda per group (eq. 7).
///
/// Choices where the paper is silent (section 3.3 does not define the KL's distributions), after
/// sentence-transformers' `AdaptiveLayerLoss` / `Matryoshka2dLoss` so that a side-by-side is
/// like for like: the distributions are `softmax(e / T)` over the coordinates of the model's
/// output embedding (L2-normalised when the model ends with `Normalize`, as all-MiniLM-L6-v2
/// does; prefixes re-normalised), T = 0.3, batch-mean KL times T ([`losses::kl_align`]), one KL
/// per sampled layer; shallow layer `i` (0-based) weighted `1 / (1 + i)` (sentence-transformers
/// <= 5's fixed weighting, `layer_weighting="linear"` in version 6, whose default became uniform)
/// and divided by the number of sampled layers (the shipped recipes `recipes/2dmse-*.toml` set
/// `layer_weighting = "uniform"`, sentence-transformers 6's default, chosen on STS-B dev: it
/// lifts the shallow layers by about 3 points at the same full point; docs/TRAINING.md).
/// **The last layer receives no gradient through the KL by default** (`detach_teacher`):
/// sentence-transformers 6 detaches the teacher (its issue #3757), the peer this project
/// compares with; sentence-transformers <= 5 and AnglE do not, which `detach_teacher = false`
/// reproduces. Unlike `Matryoshka2dLoss` (which samples one dim at each layer independently
/// and may skip D), D is always trained, per eq. 2-3; with `dims_per_step = 0` (the default)
/// every dim is trained, which equals `Matryoshka2dLoss(n_dims_per_step=-1)` when
/// `align_prefix = false`.
#[derive(Debug, Clone)]
pub struct TwoDMse {
    task: TaskLoss,
    config: TwoDConfig,
    /// The full dimension D.
    hidden: usize,
    /// Prefix dims below D with their weights.
    pub prefix: Vec<(usize, f64)>,
    /// Weight of the full dim's task terms.
    full_weight: f64,
}

impl TwoDMse {
    /// `dims`, `weights`: the resolved dims (empty weights = 1).
    pub fn new(task: TaskLoss, config: TwoDConfig, hidden: usize) -> Self {
        let weights: Vec<f64> = if config.dim_weights.is_empty() {
            vec![1.0; config.dims.len()]
        } else {
            config.dim_weights.clone()
        };
        let full_weight = config
            .dims
            .iter()
            .zip(&weights)
            .find(|(&d, _)| d == hidden)
            .map_or(1.0, |(_, &w)| w);
        let prefix = config
            .dims
            .iter()
            .copied()
            .zip(weights)
            .filter(|&(d, _)| d < hidden)
            .collect();
        TwoDMse {
            task,
            config,
            hidden,
            prefix,
            full_weight,
        }
    }

    /// The shallow layers (1-based, in 1..N-1) drawn for this micro-batch.
    pub fn sample_layers(&self, ctx: &StepContext, num_layers: usize) -> Vec<usize> {
        let pool = num_layers.saturating_sub(1);
        let k = self.config.layers_per_step;
        if k == 0 || k >= pool {
            return (1..=pool).collect();
        }
        let mut l: Vec<usize> = sample(&mut ctx.rng(1), pool, k)
            .into_iter()
            .map(|i| i + 1)
            .collect();
        l.sort_unstable();
        l
    }

    /// The prefix dims (with weights) used for this micro-batch.
    pub fn sample_dims(&self, ctx: &StepContext) -> Vec<(usize, f64)> {
        let k = self.config.dims_per_step;
        if k == 0 || k >= self.prefix.len() {
            return self.prefix.clone();
        }
        let mut idx = sample(&mut ctx.rng(2), self.prefix.len(), k).into_vec();
        idx.sort_unstable();
        idx.into_iter().map(|i| self.prefix[i]).collect()
    }

    /// The terms for given shallow layers and prefix dims (what [`Objective::terms`] computes
    /// after sampling them).
    pub fn terms_at(
        &self,
        out: &BatchOutput,
        shallow: &[usize],
        prefix: &[(usize, f64)],
    ) -> Vec<Term> {
        let mut terms = self.last_layer_terms(out, prefix);
        if shallow.is_empty() {
            return terms;
        }
        let c = &self.config;
        let teacher = self.alignment_teacher(out);
        let mut sums = ShallowSums::new(prefix.len());
        for &l in shallow {
            let lw = c.prior_layers_weight * c.layer_weighting.weight(l - 1) / shallow.len() as f64;
            self.add_shallow_task(out, l, lw, prefix, &mut sums);
            if let Some(t) = &teacher {
                self.add_alignment(out, l, t, prefix, &mut sums);
            }
        }
        sums.push_terms(&mut terms, &self.task.name(), self.hidden, prefix);
        terms
    }

    /// The last layer's task terms (eq. 2, 4): at the full dim, then at each prefix dim.
    fn last_layer_terms(&self, out: &BatchOutput, prefix: &[(usize, f64)]) -> Vec<Term> {
        let c = &self.config;
        let scores = out.scores.as_ref();
        let name = self.task.name();
        let last = out.pooled(out.layers);
        let mut terms = vec![Term {
            name: format!("last/{name}@{}", self.hidden),
            value: self.task.at_dim(&last, self.hidden, scores)
                * (self.full_weight * c.last_layer_weight),
        }];
        for &(d, w) in prefix {
            terms.push(Term {
                name: format!("last/{name}@{d}"),
                value: self.task.at_dim(&last, d, scores) * (w * c.last_layer_weight),
            });
        }
        terms
    }

    /// The last layer's output embeddings that the shallow layers align to (eq. 6), detached
    /// with `detach_teacher`; `None` when the alignment is off.
    fn alignment_teacher(&self, out: &BatchOutput) -> Option<Tensor> {
        let c = &self.config;
        let align = c.kl_temperature > 0.0 && c.kl_weight > 0.0;
        align.then(|| {
            let t = out.output_embeddings(out.layers);
            if c.detach_teacher {
                t.detach()
            } else {
                t
            }
        })
    }

    /// Shallow layer `l`'s task terms (eq. 3, 5) at the full and the prefix dims, times its
    /// layer weight `lw`.
    fn add_shallow_task(
        &self,
        out: &BatchOutput,
        l: usize,
        lw: f64,
        prefix: &[(usize, f64)],
        sums: &mut ShallowSums,
    ) {
        let scores = out.scores.as_ref();
        let h = out.pooled(l);
        accumulate(
            &mut sums.task[0],
            self.task.at_dim(&h, self.hidden, scores) * (self.full_weight * lw),
        );
        for (k, &(d, w)) in prefix.iter().enumerate() {
            accumulate(
                &mut sums.task[k + 1],
                self.task.at_dim(&h, d, scores) * (w * lw),
            );
        }
    }

    /// Shallow layer `l`'s alignment to `teacher` (eq. 6): at the full dim and, with
    /// `align_prefix`, averaged over the prefix dims.
    fn add_alignment(
        &self,
        out: &BatchOutput,
        l: usize,
        teacher: &Tensor,
        prefix: &[(usize, f64)],
        sums: &mut ShallowSums,
    ) {
        let c = &self.config;
        let s = out.output_embeddings(l);
        accumulate(
            &mut sums.kl_full,
            losses::kl_align(&s, teacher, c.kl_temperature) * c.kl_weight,
        );
        if c.align_prefix && !prefix.is_empty() {
            let per_dim: Vec<Tensor> = prefix
                .iter()
                .map(|&(d, _)| {
                    let cut = |x: &Tensor| {
                        let p = x.narrow(1, 0, d as i64);
                        if out.normalize {
                            nest_model::pooling::l2_normalize(&p)
                        } else {
                            p
                        }
                    };
                    losses::kl_align(&cut(&s), &cut(teacher), c.kl_temperature)
                })
                .collect();
            let mean = Tensor::stack(&per_dim, 0).mean(per_dim[0].kind());
            accumulate(&mut sums.kl_prefix, mean * c.kl_weight);
        }
    }
}

impl Objective for TwoDMse {
    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "2dmse({}) dims {:?} + {}, {} layer(s)/step, {} dim(s)/step, KL T={} x{}{}, layer weights {:?}",
            self.task.name(),
            self.prefix.iter().map(|p| p.0).collect::<Vec<_>>(),
            self.hidden,
            if c.layers_per_step == 0 { "all".to_string() } else { c.layers_per_step.to_string() },
            if c.dims_per_step == 0 { "all".to_string() } else { c.dims_per_step.to_string() },
            c.kl_temperature,
            c.kl_weight,
            if c.align_prefix { " (full and prefix)" } else { " (full)" },
            c.layer_weighting,
        )
    }

    fn terms(&self, out: &BatchOutput, ctx: &StepContext) -> Vec<Term> {
        let shallow = self.sample_layers(ctx, out.layers);
        let prefix = self.sample_dims(ctx);
        self.terms_at(out, &shallow, &prefix)
    }

    /// The sampled shallow layers (after their count) and prefix dims: given them, the terms
    /// are fixed tensor operations that read nothing back ([`Self::terms_at`]).
    fn recorded_draws(&self, ctx: &StepContext, num_layers: usize) -> Option<Vec<usize>> {
        let shallow = self.sample_layers(ctx, num_layers);
        let prefix = self.sample_dims(ctx);
        let mut draws = vec![shallow.len()];
        draws.extend(shallow);
        draws.extend(prefix.iter().map(|p| p.0));
        Some(draws)
    }

    fn trained_dims(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self.prefix.iter().map(|p| p.0).collect();
        d.push(self.hidden);
        d
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        (1..=num_layers).collect()
    }
}

impl Component for TwoDConfig {
    fn weight(&self) -> f64 {
        self.weight
    }

    fn uses_task_loss(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), String> {
        increasing(&self.dims, &self.dim_weights)?;
        if self.kl_temperature < 0.0 || self.kl_weight < 0.0 {
            return Err("kl_temperature and kl_weight must be >= 0".into());
        }
        Ok(())
    }

    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        let (dims, dim_weights) = cx.dims(&self.dims, &self.dim_weights)?;
        let config = TwoDConfig {
            dims,
            dim_weights,
            ..self.clone()
        };
        Ok(Box::new(TwoDMse::new(cx.task, config, cx.hidden)))
    }
}
