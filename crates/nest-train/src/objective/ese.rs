//! ESE / Espresso Sentence Embeddings (Li et al. 2024), the successor of 2DMSE, as AnglE's
//! `AngleESETrainer` trains it.
//!
//! Paper: "ESE: Espresso Sentence Embeddings" (Li, Li, Li, Xie and Li, ICLR 2025; the later
//! versions of arXiv:2402.14776), section 3.1 (learn-to-express: every layer's embedding
//! trained) and section 3.2 (learn-to-compress: the first `k` dims distilled towards the PCA of
//! the full embedding, [`crate::losses::mse_kl`]).

use serde::{Deserialize, Serialize};

use super::component::{BuildContext, Component};
use super::{BatchOutput, LayerWeighting, Objective, StepContext, TaskLoss, Term};
use crate::losses;

fn one() -> f64 {
    1.0
}
fn d_compression() -> usize {
    128
}
fn log() -> LayerWeighting {
    LayerWeighting::Log
}
fn yes() -> bool {
    true
}

/// The keys of a `[[objective]]` table with `kind = "ese"` (defaults: AnglE's
/// `AngleESETrainer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EseConfig {
    /// Weight of the whole component in a composite objective.
    #[serde(default = "one")]
    pub weight: f64,
    /// The compression prefix k (`ese_compression_size`).
    #[serde(default = "d_compression")]
    pub compression_size: usize,
    /// Temperature of the learn-to-compress KL (`ese_kl_temperature`); 0 = MSE only.
    #[serde(default = "one")]
    pub kl_temperature: f64,
    /// Weight of the learn-to-compress MSE.
    #[serde(default = "one")]
    pub mse_weight: f64,
    /// The learn-to-compress term (`apply_ese_pca`).
    #[serde(default = "yes")]
    pub pca: bool,
    /// Weight of shallow layer `i` (0-based): AnglE's `log` = 1/(1+ln(1+i)).
    #[serde(default = "log")]
    pub layer_weighting: LayerWeighting,
}

impl Default for EseConfig {
    fn default() -> Self {
        toml::Value::Table(Default::default())
            .try_into()
            .expect("every key has a default")
    }
}

/// ESE as AnglE's `AngleESETrainer.compute_loss` does it, with one forward pass:
/// - last layer N: `task(e_N) + task(e_N[:k]) + distill(e_N[:k], pca(e_N))`,
/// - every shallow layer i in 1..N-1 each step: `(task(e_i[:k]) + distill(e_i[:k], pca(e_i))) /
///   (1 + ln(i))`, the sum divided by N - 1,
///
/// where `distill` is MSE plus the temperature-scaled KL ([`losses::mse_kl`]) and `pca` the
/// no-gradient projection on the top-k singular directions of `softmax(m^T m / sqrt(D))`
/// ([`losses::pca_compress`], randomised SVD as `torch.svd_lowrank`). Embeddings are the raw
/// pooled vectors; the PCA runs over all columns of the batch stacked, as AnglE's batch holds
/// every text. One deliberate difference: AnglE indexes `hidden_states`, whose entry 0 is the
/// embedding layer, so its loop covers the embedding output and layers 1..N-2; Nest trains
/// layers 1..N-1, the exits a user can take.
#[derive(Debug, Clone)]
pub struct Ese {
    pub task: TaskLoss,
    pub config: EseConfig,
    pub hidden: usize,
}

impl Ese {
    /// `task` on the first `k` dims and, with `pca`, the learn-to-compress term, at `layer`.
    fn layer_terms(&self, out: &BatchOutput, layer: usize) -> (tch::Tensor, Option<tch::Tensor>) {
        let k = self.config.compression_size;
        let e = out.pooled(layer);
        let task = self.task.at_dim(&e, k, out.scores.as_ref());
        let compress = self.config.pca.then(|| {
            let all = tch::Tensor::cat(&e, 0);
            let target = losses::pca_compress(&all, k);
            losses::mse_kl(
                &all.narrow(1, 0, k as i64),
                &target,
                self.config.mse_weight,
                self.config.kl_temperature,
            )
        });
        (task, compress)
    }
}

impl Objective for Ese {
    fn describe(&self) -> String {
        format!(
            "ese({}) k={} of {}, every layer, KL T={}, pca {}",
            self.task.name(),
            self.config.compression_size,
            self.hidden,
            self.config.kl_temperature,
            self.config.pca
        )
    }

    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let (k, name, n) = (self.config.compression_size, self.task.name(), out.layers);
        let last = out.pooled(n);
        let mut terms = vec![Term {
            name: format!("last/{name}@{}", self.hidden),
            value: self.task.apply(&last, out.scores.as_ref()),
        }];
        let (task, compress) = self.layer_terms(out, n);
        terms.push(Term {
            name: format!("last/{name}@{k}"),
            value: task,
        });
        if let Some(c) = compress {
            terms.push(Term {
                name: "last/compress".into(),
                value: c,
            });
        }
        if n < 2 {
            return terms;
        }
        let (mut task_sum, mut compress_sum) = (None::<tch::Tensor>, None::<tch::Tensor>);
        for l in 1..n {
            let w = self.config.layer_weighting.weight(l - 1) / (n - 1) as f64;
            let (t, c) = self.layer_terms(out, l);
            let t = t * w;
            task_sum = Some(match task_sum {
                Some(a) => a + t,
                None => t,
            });
            if let Some(c) = c {
                let c = c * w;
                compress_sum = Some(match compress_sum {
                    Some(a) => a + c,
                    None => c,
                });
            }
        }
        if let Some(v) = task_sum {
            terms.push(Term {
                name: format!("shallow/{name}@{k}"),
                value: v,
            });
        }
        if let Some(v) = compress_sum {
            terms.push(Term {
                name: "shallow/compress".into(),
                value: v,
            });
        }
        terms
    }

    /// Nothing is drawn, but the PCA term's SVD checks its result on the host
    /// ([`losses::pca_compress`]): only ESE without it (`pca = false`) is recorded.
    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        (!self.config.pca).then(Vec::new)
    }

    fn trained_dims(&self) -> Vec<usize> {
        vec![self.config.compression_size, self.hidden]
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        (1..=num_layers).collect()
    }
}

impl Component for EseConfig {
    fn weight(&self) -> f64 {
        self.weight
    }

    fn uses_task_loss(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), String> {
        if self.compression_size == 0 {
            return Err("compression_size must be >= 1".into());
        }
        if self.kl_temperature < 0.0 || self.mse_weight < 0.0 {
            return Err("kl_temperature and mse_weight must be >= 0".into());
        }
        Ok(())
    }

    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        cx.in_range(&[self.compression_size])?;
        Ok(Box::new(Ese {
            task: cx.task,
            config: self.clone(),
            hidden: cx.hidden,
        }))
    }
}
