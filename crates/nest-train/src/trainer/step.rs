//! One training step, as `nest train` and `nest bench train` both run it: a micro-batch's
//! forward pass (every column once, all layers), the objective's named terms, backward; and
//! the optimizer update after `grad_accum` micro-batches.

use nest_model::{ClsAttention, ElasticEncoder};
use tch::Tensor;

use crate::data::{Batch, Source};
use crate::error::Error;
use crate::objective::{BatchOutput, Column, Objective, StepContext};
use crate::optim::AdamW;
use crate::recipe::LossKind;

/// Encodes one column of a batch (`train` turns dropout on), all layers.
pub(crate) fn encode_column(
    enc: &ElasticEncoder,
    src: &Source,
    b: &Batch,
    col: usize,
    train: bool,
    attention: ClsAttention,
) -> Column {
    let seqs: Vec<&[i64]> = b
        .examples
        .iter()
        .map(|&i| src.ids[i][col].as_slice())
        .collect();
    let input = enc.make_input(&seqs);
    let out = enc.forward_with(&input, enc.num_layers(), train, attention);
    let mask = pool_mask(src, col, &input.mask);
    Column {
        hidden: out.hidden_states,
        mask,
        pooling: enc.pooling,
        head: enc.head.shallow_clone(),
        cls_attention: out.cls_attention,
        pooled: Vec::new(),
    }
}

/// The pooling mask of column `col`: the attention mask with the column's prompt tokens (which
/// attend and are attended to) left out of the pooling.
///
/// # Shapes
/// - `mask`: `[batch, seq]`; returns the same
pub(crate) fn pool_mask(src: &Source, col: usize, mask: &Tensor) -> Tensor {
    match src.prompt_tokens.get(col).copied().unwrap_or(0) {
        0 => mask.shallow_clone(),
        k => {
            let m = mask.copy();
            let _ = m.narrow(1, 0, (k as i64).min(m.size()[1])).fill_(0);
            m
        }
    }
}

/// Forward pass of one batch into what the objective sees: one forward per column (SimCSE: the
/// same texts twice, two dropout masks).
pub fn batch_output(
    enc: &ElasticEncoder,
    src: &Source,
    b: &Batch,
    loss: LossKind,
    train: bool,
    attention: ClsAttention,
) -> BatchOutput {
    let columns = if loss == LossKind::Simcse {
        vec![
            encode_column(enc, src, b, 0, train, attention),
            encode_column(enc, src, b, 0, train, attention),
        ]
    } else {
        (0..src.columns())
            .map(|c| encode_column(enc, src, b, c, train, attention))
            .collect()
    };
    assemble(enc, src, &b.examples, columns)
}

/// What the objective sees, from encoded `columns` whose rows are `examples` in that order:
/// the gold scores follow the same order (GradCache encodes a batch sorted by length, and a
/// score must stay with its row); the objective's targets are the caller's ([`targets`]).
pub(crate) fn assemble(
    enc: &ElasticEncoder,
    src: &Source,
    examples: &[usize],
    columns: Vec<Column>,
) -> BatchOutput {
    let scores = (!src.scores.is_empty()).then(|| {
        let s: Vec<f32> = examples.iter().map(|&i| src.scores[i] as f32).collect();
        Tensor::from_slice(&s).to_device(enc.device())
    });
    BatchOutput {
        columns,
        scores,
        layers: enc.num_layers(),
        normalize: enc.normalize,
        targets: None,
    }
}

/// `objective`'s targets of the rows `examples`, in their order (a teacher's vectors of their
/// first texts), on the host: a recorded step copies them into its static input, an eager one
/// puts them on the device ([`BatchOutput::targets`]).
pub(crate) fn targets(
    objective: &dyn Objective,
    src: &Source,
    examples: &[usize],
) -> Option<Tensor> {
    let texts: Vec<&str> = examples.iter().map(|&i| src.texts[i][0].as_str()).collect();
    objective.targets(&texts)
}

/// What one micro-batch gave.
#[derive(Debug, Clone)]
pub struct MicroResult {
    /// The summed loss (before division by `grad_accum`).
    pub loss: f64,
    /// Each named term's value.
    pub terms: Vec<(String, f64)>,
}

/// One micro-batch: re-seeds libtorch's RNG with `seed + micro_batch` (dropout, randomised SVD),
/// runs the forward pass, sums the objective's terms and back-propagates `sum / grad_accum`.
/// A non-finite loss is returned without any backward pass, so that the caller can stop with
/// the weights and gradients untouched.
pub fn micro_step(
    enc: &ElasticEncoder,
    objective: &dyn Objective,
    src: &Source,
    b: &Batch,
    loss: LossKind,
    ctx: &StepContext,
    grad_accum: usize,
) -> MicroResult {
    tch::manual_seed(ctx.seed.wrapping_add(ctx.micro_batch) as i64);
    let mut out = batch_output(enc, src, b, loss, true, objective.attention());
    out.targets = targets(objective, src, &b.examples).map(|t| t.to_device(enc.device()));
    let (res, _) = score(objective, &out, ctx, grad_accum);
    res
}

/// The objective on one batch's outputs: its terms summed and, when the sum is finite,
/// back-propagated as `sum / grad_accum`. Returns the values and whether it back-propagated.
pub(crate) fn score(
    objective: &dyn Objective,
    out: &BatchOutput,
    ctx: &StepContext,
    grad_accum: usize,
) -> (MicroResult, bool) {
    let terms = objective.terms(out, ctx);
    let total = terms
        .iter()
        .map(|t| t.value.shallow_clone())
        .reduce(|a, b| a + b)
        .expect("an objective returns terms");
    let value = total.double_value(&[]);
    let mut terms: Vec<(String, f64)> = terms
        .iter()
        .map(|t| (t.name.clone(), t.value.double_value(&[])))
        .collect();
    let diagnostics = tch::no_grad(|| objective.diagnostics(out));
    terms.extend(
        diagnostics
            .into_iter()
            .map(|(n, v)| (format!("diag/{n}"), v.double_value(&[]))),
    );
    let finite = value.is_finite();
    if finite {
        (total / grad_accum as f64).backward();
    }
    (MicroResult { loss: value, terms }, finite)
}

/// The optimizer update after the accumulated micro-batches: clip, AdamW step at `lrs` (one
/// rate per parameter group), zero
/// the gradients. Returns the gradient norm before clipping, or `non_finite(norm)` without
/// touching the weights or the optimizer state when a gradient is NaN or infinite (a finite
/// loss can still have one, e.g. the square root's at 0).
pub(crate) fn apply_update(
    opt: &mut AdamW,
    max_grad_norm: f64,
    lrs: &[f64],
    non_finite: impl FnOnce(f64) -> Error,
) -> Result<f64, Error> {
    let grad_norm = opt.clip_grad_norm(max_grad_norm);
    if !grad_norm.is_finite() {
        opt.zero_grad();
        return Err(non_finite(grad_norm));
    }
    opt.step_groups(lrs)?;
    opt.zero_grad();
    Ok(grad_norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Kind, Tensor};

    #[test]
    fn an_infinite_gradient_leaves_weights_and_moments_untouched() {
        let p = Tensor::from_slice(&[0.0f32, 1.0]).set_requires_grad(true);
        let mut opt = AdamW::new(vec![("w.weight".into(), p.shallow_clone())], 0.01);
        p.sqrt().sum(Kind::Float).backward(); // finite loss, infinite gradient
        let before: Vec<f32> = Vec::try_from(&p.detach()).unwrap();
        let non_finite = |value| Error::NonFinite {
            what: "gradient norm",
            step: 1,
            value,
            last_checkpoint: String::new(),
        };
        let e = apply_update(&mut opt, 1.0, &[0.1], non_finite).unwrap_err();
        assert!(matches!(e, Error::NonFinite { value, .. } if !value.is_finite()));
        assert_eq!(Vec::<f32>::try_from(&p.detach()).unwrap(), before);
        assert_eq!(opt.step, 0);
        assert_eq!(opt.m[0].abs().sum(Kind::Float).double_value(&[]), 0.0);
        // the gradients were dropped: a finite step afterwards goes through
        (&p * 2.0).sum(Kind::Float).backward();
        assert!(apply_update(&mut opt, 1.0, &[0.1], non_finite).is_ok());
        assert_eq!(opt.step, 1);
    }
}
