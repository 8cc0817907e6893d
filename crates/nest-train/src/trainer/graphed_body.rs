//! The work a recorded training step runs ([`run_body`]: a whole step; [`micro_body`]: an
//! accumulated micro-batch) on a recording's static tensors, and what is read back after it.

use nest_model::optim::DeviceUpdate;
use nest_model::ElasticEncoder;
use tch::{Kind, Tensor};

use super::graphed::StepSpec;
use super::graphed_inputs::{self, Static, MAX_TERMS};
use super::step::MicroResult;
use crate::objective::{BatchOutput, Column};
use crate::optim::AdamW;

/// The step's loss, terms and norm, read back; the host step count follows a finite norm.
pub(super) fn outputs(opt: &mut AdamW, s: &Static) -> (MicroResult, f64) {
    let res = graphed_inputs::read(s);
    let norm = s.norm.double_value(&[]);
    if norm.is_finite() {
        opt.step += 1;
    }
    (res, norm)
}

/// The recorded work: forward every column, the objective's summed terms, backward, clip and
/// update on the device, zero the gradients (as the eager update leaves them); the loss and norm
/// into the static outputs.
pub(super) fn run_body(
    enc: &ElasticEncoder,
    opt: &mut AdamW,
    update: &DeviceUpdate,
    spec: &StepSpec,
    s: &Static,
) -> nest_model::Result<()> {
    let total = forward_and_backward(enc, spec, 1, s)?;
    s.loss.shallow_clone().copy_(&total);
    let norm = opt
        .clip_and_step_on_device(spec.max_grad_norm, update)
        .map_err(nest_model::Error::Torch)?;
    s.norm.shallow_clone().copy_(&norm);
    opt.zero_grad();
    Ok(())
}

/// An accumulated micro-batch's recorded work: forward every column, the objective's summed
/// terms, the backward of the sum over `grad_accum` (its gradients added to the parameters');
/// the loss into the static outputs.
pub(super) fn micro_body(
    enc: &ElasticEncoder,
    spec: &StepSpec,
    grad_accum: usize,
    s: &Static,
) -> nest_model::Result<()> {
    let total = forward_and_backward(enc, spec, grad_accum, s)?;
    s.loss.shallow_clone().copy_(&total);
    Ok(())
}

/// Forward every column, the objective's terms and diagnostics into the static outputs (named
/// at the first pass), and the backward of their sum over `grad_accum`: the sum (float64,
/// detached).
fn forward_and_backward(
    enc: &ElasticEncoder,
    spec: &StepSpec,
    grad_accum: usize,
    s: &Static,
) -> nest_model::Result<Tensor> {
    let out = nest_model::without_packing(|| batch_output(enc, s, spec));
    let terms = spec.objective.terms(&out, &spec.ctx);
    let diagnostics = tch::no_grad(|| spec.objective.diagnostics(&out));
    let logged: Vec<(String, &Tensor)> = terms
        .iter()
        .map(|t| (t.name.clone(), &t.value))
        .chain(diagnostics.iter().map(|(n, v)| (format!("diag/{n}"), v)))
        .take(MAX_TERMS)
        .collect();
    if s.names.borrow().is_empty() {
        *s.names.borrow_mut() = logged.iter().map(|(n, _)| n.clone()).collect();
    }
    let values: Vec<Tensor> = logged
        .iter()
        .map(|(_, v)| v.detach().to_kind(Kind::Double).reshape([1]))
        .collect();
    s.terms
        .narrow(0, 0, values.len() as i64)
        .copy_(&Tensor::cat(&values, 0));
    let total = terms
        .iter()
        .map(|t| t.value.shallow_clone())
        .reduce(|a, b| a + b)
        .expect("an objective returns terms");
    // an error fails the recording with its reason (an autograd formula that reads a value
    // back to the host cannot be recorded: the trace's, which MIC used until 2026-11-28)
    let scaled = match grad_accum {
        1 => total.shallow_clone(),
        k => &total / k as f64,
    };
    scaled.f_backward().map_err(nest_model::Error::Torch)?;
    Ok(total.detach().to_kind(Kind::Double))
}

/// The objective's view of the static inputs.
fn batch_output(enc: &ElasticEncoder, s: &Static, spec: &StepSpec) -> BatchOutput {
    let attention = spec.objective.attention();
    let columns = s
        .inputs
        .iter()
        .map(|(input, pool_mask)| {
            let out = enc.forward_with(input, enc.num_layers(), spec.train, attention);
            Column {
                hidden: out.hidden_states,
                mask: pool_mask.shallow_clone(),
                pooling: enc.pooling,
                head: enc.head.shallow_clone(),
                cls_attention: out.cls_attention,
                pooled: Vec::new(),
            }
        })
        .collect();
    BatchOutput {
        columns,
        scores: s.scores.as_ref().map(Tensor::shallow_clone),
        layers: enc.num_layers(),
        normalize: enc.normalize,
        targets: s.targets.as_ref().map(Tensor::shallow_clone),
    }
}
