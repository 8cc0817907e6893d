//! Building a recipe's objective: each `[[objective]]` component checked (values, dims against
//! the model) and constructed, its parameters registered under its own prefix.

use super::{
    distill, hsic, Composite, Ese, Matryoshka, Mic, Mipic, MrlConfig, Objective, TaskLoss,
    TwoDConfig, TwoDMse,
};
use crate::recipe::{LossKind, ObjectiveSpec, Recipe};
use crate::{Error, Result};

fn increasing(dims: &[usize], weights: &[f64]) -> std::result::Result<(), String> {
    if dims.windows(2).any(|w| w[0] >= w[1]) || dims.contains(&0) {
        return Err(format!("dims {dims:?} must be increasing and >= 1"));
    }
    if !weights.is_empty() && weights.len() != dims.len() {
        return Err(format!("{} weights for {} dims", weights.len(), dims.len()));
    }
    Ok(())
}

impl ObjectiveSpec {
    /// Value checks that need no model.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let w = match self {
            ObjectiveSpec::Mrl(c) => {
                increasing(&c.dims, &c.dim_weights)?;
                c.weight
            }
            ObjectiveSpec::TwoD(c) => {
                increasing(&c.dims, &c.dim_weights)?;
                if c.kl_temperature < 0.0 || c.kl_weight < 0.0 {
                    return Err("kl_temperature and kl_weight must be >= 0".into());
                }
                c.weight
            }
            ObjectiveSpec::Ese(c) => {
                if c.compression_size == 0 {
                    return Err("compression_size must be >= 1".into());
                }
                if c.kl_temperature < 0.0 || c.mse_weight < 0.0 {
                    return Err("kl_temperature and mse_weight must be >= 0".into());
                }
                c.weight
            }
            ObjectiveSpec::Mipic(c) => {
                if !c.dims.is_empty() {
                    increasing(&c.dims, &[])?;
                }
                if !c.sia && !c.pic {
                    return Err("sia and pic are both off: the component would do nothing".into());
                }
                if !(c.attention_temperature > 0.0 && c.pic_temperature > 0.0) {
                    return Err("attention_temperature and pic_temperature must be > 0".into());
                }
                c.weight
            }
            ObjectiveSpec::Mic(c) => {
                if !c.dims.is_empty() {
                    increasing(&c.dims, &[])?;
                }
                if !(0.0..=1.0).contains(&c.tau_corr) || c.lambda_var < 0.0 || c.uniformity_t <= 0.0
                {
                    return Err(
                        "tau_corr must be in [0, 1], lambda_var >= 0, uniformity_t > 0".into(),
                    );
                }
                c.weight
            }
            ObjectiveSpec::Distill(c) => {
                if !c.dims.is_empty() {
                    increasing(&c.dims, &[])?;
                }
                if c.temperature.is_nan() || c.temperature <= 0.0 {
                    return Err("temperature must be > 0".into());
                }
                c.weight
            }
            ObjectiveSpec::Hsic(c) => {
                if c.gamma.is_nan() || c.gamma <= 0.0 {
                    return Err("gamma must be > 0".into());
                }
                c.weight
            }
        };
        if !(w > 0.0 && w.is_finite()) {
            return Err(format!("weight must be > 0, got {w}"));
        }
        Ok(())
    }
}

/// Builds the recipe's objective for a model with `hidden` dims: its `[[objective]]`
/// components, or MRL over `matryoshka_dims` when there are none. `params` is where components
/// with trainable parameters register them (the trainer optimises and checkpoints that store;
/// the exported model never holds it), each under its own `c{i}_{kind}` prefix.
pub fn build(
    r: &Recipe,
    hidden: usize,
    num_layers: usize,
    params: &tch::nn::Path,
) -> Result<Composite> {
    build_with(r, hidden, num_layers, params, None)
}

// long: one central match over every objective; an objective registry replacing it is open in
// issue 19.
/// [`build`] with a teacher's vectors of the training texts, which `distill` components need.
pub fn build_with(
    r: &Recipe,
    hidden: usize,
    num_layers: usize,
    params: &tch::nn::Path,
    teacher: Option<std::rc::Rc<distill::TeacherTable>>,
) -> Result<Composite> {
    let task = TaskLoss {
        kind: r.loss,
        scale: r.scale,
        angle_weight: r.angle_weight,
    };
    let specs = if r.objective.is_empty() {
        vec![ObjectiveSpec::Mrl(MrlConfig {
            weight: 1.0,
            dims: Vec::new(),
            dim_weights: Vec::new(),
        })]
    } else {
        r.objective.clone()
    };
    let bad = |what: &str, message: String| Error::Recipe {
        source_name: what.into(),
        message,
    };
    let resolve = |dims: &[usize], weights: &[f64]| -> (Vec<usize>, Vec<f64>) {
        if !dims.is_empty() {
            (dims.to_vec(), weights.to_vec())
        } else if !r.matryoshka_dims.is_empty() {
            (r.matryoshka_dims.clone(), r.matryoshka_weights.clone())
        } else {
            (vec![hidden], Vec::new())
        }
    };
    let mut parts: Vec<(String, f64, Box<dyn Objective>)> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let key = if r.objective.is_empty() {
            "matryoshka_dims".to_string()
        } else {
            format!("objective[{i}] ({})", spec.kind())
        };
        let task_loss = matches!(
            spec,
            ObjectiveSpec::Mrl(_) | ObjectiveSpec::TwoD(_) | ObjectiveSpec::Ese(_)
        );
        if task_loss && r.loss == LossKind::None {
            return Err(bad(
                &key,
                "needs a task loss, but the recipe's loss is \"none\"".into(),
            ));
        }
        let (weight, part): (f64, Box<dyn Objective>) = match spec {
            ObjectiveSpec::Mrl(c) => {
                let (dims, w) = resolve(&c.dims, &c.dim_weights);
                let weights = if w.is_empty() {
                    vec![1.0; dims.len()]
                } else {
                    w
                };
                check_dims(&key, &dims, hidden).map_err(|m| bad(&key, m))?;
                (
                    c.weight,
                    Box::new(Matryoshka {
                        task,
                        dims,
                        weights,
                    }),
                )
            }
            ObjectiveSpec::TwoD(c) => {
                let (dims, dim_weights) = resolve(&c.dims, &c.dim_weights);
                check_dims(&key, &dims, hidden).map_err(|m| bad(&key, m))?;
                let config = TwoDConfig {
                    dims,
                    dim_weights,
                    ..c.clone()
                };
                (c.weight, Box::new(TwoDMse::new(task, config, hidden)))
            }
            ObjectiveSpec::Ese(c) => {
                check_dims(&key, &[c.compression_size], hidden).map_err(|m| bad(&key, m))?;
                (
                    c.weight,
                    Box::new(Ese {
                        task,
                        config: c.clone(),
                        hidden,
                    }),
                )
            }
            ObjectiveSpec::Mipic(c) => {
                let (dims, _) = resolve(&c.dims, &[]);
                check_dims(&key, &dims, hidden).map_err(|m| bad(&key, m))?;
                let path = params / format!("c{i}_mipic");
                let m = Mipic::new(c.clone(), dims, hidden, num_layers, &path)
                    .map_err(|m| bad(&key, m))?;
                (c.weight, Box::new(m))
            }
            ObjectiveSpec::Mic(c) => {
                let (dims, _) = resolve(&c.dims, &[]);
                check_dims(&key, &dims, hidden).map_err(|m| bad(&key, m))?;
                let m = Mic::new(c.clone(), dims, hidden, num_layers).map_err(|m| bad(&key, m))?;
                (c.weight, Box::new(m))
            }
            ObjectiveSpec::Distill(c) => {
                let table = teacher.clone().ok_or_else(|| {
                    bad(
                        &key,
                        "needs a teacher's vectors: run it with `nest distill`".into(),
                    )
                })?;
                let dims = if c.dims.is_empty() {
                    vec![hidden]
                } else {
                    c.dims.clone()
                };
                check_dims(&key, &dims, hidden).map_err(|m| bad(&key, m))?;
                let path = params / format!("c{i}_distill");
                (
                    c.weight,
                    Box::new(distill::Distill::new(c.clone(), dims, table, &path)),
                )
            }
            ObjectiveSpec::Hsic(c) => {
                if c.input_layer > num_layers {
                    return Err(bad(
                        &key,
                        format!(
                            "input_layer {} is above the model's {num_layers} layers",
                            c.input_layer
                        ),
                    ));
                }
                (c.weight, Box::new(hsic::Hsic { config: c.clone() }))
            }
        };
        parts.push((spec.kind().to_string(), weight, part));
    }
    Ok(Composite { parts })
}

fn check_dims(_key: &str, dims: &[usize], hidden: usize) -> std::result::Result<(), String> {
    match dims.iter().find(|&&d| d > hidden) {
        Some(d) => Err(format!("dim {d} is above the model's hidden size {hidden}")),
        None => Ok(()),
    }
}
