//! AdamW with decoupled weight decay (Loshchilov & Hutter 2019), its moments held here so that
//! they can be checkpointed and restored exactly. The update is PyTorch's `torch.optim.AdamW`,
//! through its fused kernel (`shim/fused_adamw.cpp`): `p *= 1 - lr * wd` (decay groups only),
//! `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
//! `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
//! Biases and LayerNorm weights get no decay.
//!
//! Parameter groups (as `torch.optim` param groups): each parameter belongs to a group (0 by
//! default, see [`AdamW::set_groups`]) and [`AdamW::step_groups`] takes one learning rate per
//! group, so that heads and projectors can run at their own rate and warm-up beside the encoder.

use tch::{Kind, Tensor};

/// Optimizer state: parameters (shared with the VarStore), moments, step count.
#[derive(Debug)]
pub struct AdamW {
    pub names: Vec<String>,
    params: Vec<Tensor>,
    pub m: Vec<Tensor>,
    pub v: Vec<Tensor>,
    decay: Vec<bool>,
    /// Each parameter's group (an index into [`AdamW::step_groups`]' rates).
    group: Vec<usize>,
    pub step: i64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// The host numbers of an update as device tensors, for [`AdamW::clip_and_step_on_device`]:
/// what a recorded step reads at each replay.
#[derive(Debug)]
pub struct DeviceUpdate {
    /// Updates done so far (a float32 scalar), counted up by each update.
    pub step: Tensor,
    /// One learning rate per parameter group (float32 scalars), set before each replay.
    pub lrs: Vec<Tensor>,
}

impl DeviceUpdate {
    /// `opt`'s step count and a zero rate per group, on `device`.
    pub fn new(opt: &AdamW, device: tch::Device) -> DeviceUpdate {
        DeviceUpdate {
            step: Tensor::from(opt.step as f32).to_device(device),
            lrs: (0..opt.num_groups())
                .map(|_| Tensor::zeros([], (Kind::Float, device)))
                .collect(),
        }
    }

    /// Sets the rates (outside a recording: a fill of each scalar).
    pub fn set_lrs(&self, lrs: &[f64]) {
        for (t, &lr) in self.lrs.iter().zip(lrs) {
            let _ = t.shallow_clone().fill_(lr);
        }
    }
}

/// No decay for biases and LayerNorm parameters.
pub fn decays(name: &str) -> bool {
    !(name.ends_with(".bias") || name.contains("LayerNorm") || name.contains("layer_norm"))
}

impl AdamW {
    /// `named`: the trainable variables (shallow clones sharing storage with the model).
    pub fn new(mut named: Vec<(String, Tensor)>, weight_decay: f64) -> Self {
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<String> = named.iter().map(|n| n.0.clone()).collect();
        let decay = names.iter().map(|n| decays(n)).collect();
        let group = vec![0; names.len()];
        let params: Vec<Tensor> = named.into_iter().map(|n| n.1).collect();
        let m = params.iter().map(Tensor::zeros_like).collect();
        let v = params.iter().map(Tensor::zeros_like).collect();
        AdamW {
            names,
            params,
            m,
            v,
            decay,
            group,
            step: 0,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
        }
    }

    /// Puts each parameter in group `of(name)`; [`AdamW::step_groups`] then needs a rate for
    /// every group named here.
    pub fn set_groups(&mut self, of: impl Fn(&str) -> usize) {
        self.group = self.names.iter().map(|n| of(n)).collect();
    }

    /// The number of groups (one more than the highest group index).
    pub fn num_groups(&self) -> usize {
        self.group.iter().max().map_or(1, |g| g + 1)
    }

    /// The gradients that exist (a shallow handle each, sharing storage), with their names, in
    /// the optimizer's fixed name order: what data-parallel training sums across processes.
    pub fn named_grads(&self) -> Vec<(&str, Tensor)> {
        self.names
            .iter()
            .zip(&self.params)
            .map(|(n, p)| (n.as_str(), p.grad()))
            .filter(|(_, g)| g.defined())
            .collect()
    }

    /// Sets every gradient to zero (one multi-tensor kernel: `optim/foreach.rs`), as tch's
    /// `Tensor::zero_grad` does tensor by tensor; the gradients keep their storage (a recorded
    /// step reads them there).
    pub fn zero_grad(&mut self) {
        let grads = self.grads();
        if !grads.is_empty() {
            foreach::zero_(&grads).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// The parameters' gradients, where defined, in the optimizer's order.
    fn grads(&self) -> Vec<Tensor> {
        self.params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect()
    }

    /// Whether every defined gradient is finite (no NaN, no infinity).
    pub fn grads_finite(&self) -> bool {
        let _g = tch::no_grad_guard();
        let grads = self.grads();
        grads
            .iter()
            .all(|g| g.isfinite().all().int64_value(&[]) != 0)
    }

    /// Global L2 norm of the gradients; scales them to at most `max_norm` when `max_norm > 0`
    /// (`torch.nn.utils.clip_grad_norm_`). Returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let _g = tch::no_grad_guard();
        let grads = self.grads();
        if grads.is_empty() {
            return 0.0;
        }
        let total = global_norm(&grads).double_value(&[]);
        if max_norm > 0.0 {
            let coef = (max_norm / (total + 1e-6)).min(1.0);
            if coef < 1.0 {
                foreach::mul_(&grads, foreach::Factor::Value(coef))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        total
    }

    /// One update with learning rate `lr`, through libtorch's fused AdamW kernel (what
    /// `torch.optim.AdamW(fused=True)` runs): one pass over each parameter, gradient and pair
    /// of moments instead of eight tensor operations, 7-9 against 20-23 ms for MiniLM's 22.7M
    /// parameters on 2 threads (`examples/adamw_kernels.rs`; BENCHMARKS.md, "Training step").
    /// The gradients are read, not changed. At `lr` 0 the moments still move (as in PyTorch)
    /// and the parameters do not. An error (a moment of another shape, kind or device than its
    /// parameter) leaves the step count as it was.
    pub fn step(&mut self, lr: f64) -> Result<(), tch::TchError> {
        let lrs = vec![lr; self.num_groups()];
        self.step_groups(&lrs)
    }

    /// [`AdamW::step`] with learning rate `lrs[g]` for the parameters of group `g`. An error
    /// (too few rates, or a kernel error) leaves the step count as it was.
    pub fn step_groups(&mut self, lrs: &[f64]) -> Result<(), tch::TchError> {
        if lrs.len() < self.num_groups() {
            return Err(tch::TchError::Torch(format!(
                "{} learning rates for {} parameter groups",
                lrs.len(),
                self.num_groups()
            )));
        }
        let _g = tch::no_grad_guard();
        let t = self.step + 1;
        // one fused call per (group, decay): [g0 no decay, g0 decay, g1 no decay, ...]
        let groups = self.fused_groups(lrs.len());
        for (k, group) in groups.iter().enumerate() {
            let (lr, wd) = (lrs[k / 2], [0.0, self.weight_decay][k % 2]);
            if let Some(first) = group.params.first() {
                let step = Tensor::from(t as f32).to_device(first.device());
                fused::adamw(
                    group,
                    &step,
                    [lr, self.beta1, self.beta2, wd, self.eps],
                    None,
                )
                .map_err(tch::TchError::Torch)?;
            }
        }
        self.step = t;
        Ok(())
    }

    /// [`AdamW::clip_grad_norm`] and [`AdamW::step_groups`] without reading anything back to
    /// the host, for a step recorded as a CUDA graph ([`crate::graph`]): the norm stays on the
    /// device, the clipping factor `min(1, max_norm / (norm + 1e-6))` multiplies every gradient
    /// (1 when not clipping: the same values), `update.step` counts up on the device, each
    /// group's rate is read from `update.lrs`, and the kernel skips the update (weights and
    /// moments untouched) when the norm is not finite. Returns the norm (a float64 scalar
    /// tensor). The host's [`AdamW::step`] count is the caller's to advance once it has read a
    /// finite norm; after a non-finite one the device count is one ahead, and training stops.
    pub fn clip_and_step_on_device(
        &mut self,
        max_norm: f64,
        update: &DeviceUpdate,
    ) -> Result<Tensor, tch::TchError> {
        let _g = tch::no_grad_guard();
        if update.lrs.len() < self.num_groups() {
            return Err(tch::TchError::Torch(format!(
                "{} learning rates for {} parameter groups",
                update.lrs.len(),
                self.num_groups()
            )));
        }
        let grads = self.grads();
        if grads.is_empty() {
            return Ok(update.step.zeros_like().to_kind(Kind::Double));
        }
        let total = global_norm(&grads);
        if max_norm > 0.0 {
            // made float32, as a float64 scalar tensor is read when it multiplies float32
            // gradients: the same products as before, and the kernel's fast path on a GPU
            let coef = total
                .full_like(max_norm)
                .g_div(&(&total + 1e-6))
                .clamp_max(1.0)
                .to_kind(Kind::Float);
            foreach::mul_(&grads, foreach::Factor::Tensor(&coef)).map_err(tch::TchError::Torch)?;
        }
        let found_inf = total.isfinite().logical_not().to_kind(Kind::Float);
        let _ = update.step.shallow_clone().g_add_scalar_(1.0);
        let groups = self.fused_groups(update.lrs.len());
        for (k, group) in groups.iter().enumerate() {
            let wd = [0.0, self.weight_decay][k % 2];
            if !group.params.is_empty() {
                let h = [0.0, self.beta1, self.beta2, wd, self.eps];
                fused::adamw(
                    group,
                    &update.step,
                    h,
                    Some((&update.lrs[k / 2], &found_inf)),
                )
                .map_err(tch::TchError::Torch)?;
            }
        }
        Ok(total)
    }

    /// The parameters with a gradient, in fused calls' groups for `rates` learning rates:
    /// `[g0 no decay, g0 decay, g1 no decay, ...]`.
    fn fused_groups(&self, rates: usize) -> Vec<Group> {
        let mut groups: Vec<Group> = (0..2 * rates).map(|_| Group::default()).collect();
        for i in 0..self.params.len() {
            let g = self.params[i].grad();
            if g.defined() {
                let group = &mut groups[2 * self.group[i] + usize::from(self.decay[i])];
                group.params.push(self.params[i].shallow_clone());
                group.grads.push(g);
                group.m.push(self.m[i].shallow_clone());
                group.v.push(self.v[i].shallow_clone());
            }
        }
        groups
    }

    /// Named state tensors for a checkpoint (`m.<name>`, `v.<name>`).
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(2 * self.names.len());
        for (i, n) in self.names.iter().enumerate() {
            out.push((format!("m.{n}"), self.m[i].shallow_clone()));
            out.push((format!("v.{n}"), self.v[i].shallow_clone()));
        }
        out
    }

    /// Restores moments saved by [`AdamW::state`]; names must match exactly.
    pub fn load_state(
        &mut self,
        named: &std::collections::HashMap<String, Tensor>,
        step: i64,
    ) -> Result<(), String> {
        let _g = tch::no_grad_guard();
        for (i, n) in self.names.iter().enumerate() {
            for (prefix, dst) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
                let key = format!("{prefix}.{n}");
                let src = named
                    .get(&key)
                    .ok_or_else(|| format!("optimizer state has no '{key}'"))?;
                if src.size() != dst.size() {
                    return Err(format!(
                        "optimizer state '{key}' has shape {:?}, expected {:?}",
                        src.size(),
                        dst.size()
                    ));
                }
                dst.copy_(src);
            }
        }
        self.step = step;
        Ok(())
    }
}

/// The tensors of one weight-decay group, in the optimizer's order (shallow handles).
#[derive(Default)]
struct Group {
    params: Vec<Tensor>,
    grads: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

/// The global L2 norm of `grads` (not empty; a float64 scalar on their device, no read-back),
/// as `torch.nn.utils.clip_grad_norm_` computes it: each tensor's norm (one multi-tensor
/// kernel), squared and summed in float64.
fn global_norm(grads: &[Tensor]) -> Tensor {
    let norms = foreach::norms(grads).unwrap_or_else(|e| panic!("{e}"));
    norms
        .to_kind(Kind::Double)
        .square()
        .sum(Kind::Double)
        .sqrt()
}

/// The call into nest-sys's `shim/fused_adamw.cpp`.
#[allow(unsafe_code)]
mod fused;

/// The calls into nest-sys's `shim/foreach.cpp`.
#[allow(unsafe_code)]
mod foreach;

#[cfg(test)]
mod tests;
