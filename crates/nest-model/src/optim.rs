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

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.zero_grad();
        }
    }

    /// Whether every defined gradient is finite (no NaN, no infinity).
    pub fn grads_finite(&self) -> bool {
        let _g = tch::no_grad_guard();
        self.params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .all(|g| g.isfinite().all().int64_value(&[]) != 0)
    }

    /// Global L2 norm of the gradients; scales them to at most `max_norm` when `max_norm > 0`
    /// (`torch.nn.utils.clip_grad_norm_`). Returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let _g = tch::no_grad_guard();
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect();
        if grads.is_empty() {
            return 0.0;
        }
        let norms: Vec<Tensor> = grads
            .iter()
            .map(|g| g.norm().to_kind(Kind::Double).square())
            .collect();
        let total = Tensor::stack(&norms, 0)
            .sum(Kind::Double)
            .sqrt()
            .double_value(&[]);
        if max_norm > 0.0 {
            let coef = (max_norm / (total + 1e-6)).min(1.0);
            if coef < 1.0 {
                for mut g in grads {
                    let _ = g.g_mul_scalar_(coef);
                }
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
        let mut groups: Vec<Group> = (0..2 * lrs.len()).map(|_| Group::default()).collect();
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
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect();
        if grads.is_empty() {
            return Ok(update.step.zeros_like().to_kind(Kind::Double));
        }
        let norms: Vec<Tensor> = grads
            .iter()
            .map(|g| g.norm().to_kind(Kind::Double).square())
            .collect();
        let total = Tensor::stack(&norms, 0).sum(Kind::Double).sqrt();
        if max_norm > 0.0 {
            let coef = total
                .full_like(max_norm)
                .g_div(&(&total + 1e-6))
                .clamp_max(1.0);
            for mut g in grads {
                let _ = g.g_mul_(&coef);
            }
        }
        let found_inf = total.isfinite().logical_not().to_kind(Kind::Float);
        let _ = update.step.shallow_clone().g_add_scalar_(1.0);
        let mut groups: Vec<Group> = (0..2 * update.lrs.len())
            .map(|_| Group::default())
            .collect();
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

/// The call into `shim/fused_adamw.cpp`.
#[allow(unsafe_code)]
mod fused {
    use std::ffi::{c_char, c_long, c_void, CStr};

    use tch::Tensor;

    use super::Group;

    extern "C" {
        fn nest_fused_adamw(
            params: *const *const c_void,
            grads: *const *const c_void,
            exp_avgs: *const *const c_void,
            exp_avg_sqs: *const *const c_void,
            n: c_long,
            step: *const c_void,
            lr: f64,
            lr_tensor: *const c_void,
            found_inf: *const c_void,
            beta1: f64,
            beta2: f64,
            weight_decay: f64,
            eps: f64,
            err: *mut *mut c_char,
        ) -> i32;
        fn nest_fused_adamw_free_message(m: *mut c_char);
    }

    /// `at::_fused_adamw_` on `group` at step `step` with `[lr, beta1, beta2, weight_decay,
    /// eps]`; libtorch's error (kinds, devices) as the message. The kernel walks each
    /// parameter's elements through the other three tensors' memory without checking their
    /// shapes, so shapes and contiguity are checked here first.
    /// With `on_device`: the rate read from that float32 scalar tensor instead of `h[0]`, and
    /// the update skipped by the kernel where the second tensor holds 1 (a non-finite norm).
    pub(super) fn adamw(
        group: &Group,
        step: &Tensor,
        h: [f64; 5],
        on_device: Option<(&Tensor, &Tensor)>,
    ) -> Result<(), String> {
        for (i, p) in group.params.iter().enumerate() {
            let others = [&group.grads[i], &group.m[i], &group.v[i]];
            if others.iter().any(|t| t.size() != p.size()) {
                return Err(format!(
                    "parameter {i} has shape {:?}, its gradient and moments {:?}",
                    p.size(),
                    others.map(|t| t.size())
                ));
            }
            if !p.is_contiguous() || others.iter().any(|t| !t.is_contiguous()) {
                return Err(format!(
                    "parameter {i}: the fused kernel needs contiguous tensors"
                ));
            }
        }
        let ptrs = |ts: &[Tensor]| {
            ts.iter()
                .map(|t| t.as_ptr().cast::<c_void>())
                .collect::<Vec<_>>()
        };
        let (p, g, m, v) = (
            ptrs(&group.params),
            ptrs(&group.grads),
            ptrs(&group.m),
            ptrs(&group.v),
        );
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: every pointer is a live `at::Tensor*` owned by a `Tensor` borrowed for the
        // call (tch's handle type is `at::Tensor*`); the four lists have `n` entries each; the
        // shim catches every C++ exception and reports it through `err`.
        let rc = unsafe {
            nest_fused_adamw(
                p.as_ptr(),
                g.as_ptr(),
                m.as_ptr(),
                v.as_ptr(),
                p.len() as c_long,
                step.as_ptr().cast(),
                h[0],
                on_device.map_or(std::ptr::null(), |d| d.0.as_ptr().cast()),
                on_device.map_or(std::ptr::null(), |d| d.1.as_ptr().cast()),
                h[1],
                h[2],
                h[3],
                h[4],
                &mut err,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        if err.is_null() {
            return Err("fused AdamW failed (no message)".into());
        }
        // SAFETY: the shim wrote a NUL-terminated malloc'd string, freed right after copying.
        let msg = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        unsafe { nest_fused_adamw_free_message(err) };
        Err(format!("fused AdamW: {msg}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two groups at rates 0 and 0.1: group 0 stays, group 1 takes AdamW's first step,
    /// `p (1 - lr wd) - lr g / (|g| + eps)` (decay only where [`decays`] says so).
    #[test]
    fn each_group_steps_at_its_own_rate() {
        let a = Tensor::from_slice(&[1.0f32, -2.0]).set_requires_grad(true);
        let b = Tensor::from_slice(&[0.5f32, 3.0]).set_requires_grad(true);
        let c = Tensor::from_slice(&[0.25f32]).set_requires_grad(true);
        let named = vec![
            ("enc.weight".to_string(), a.shallow_clone()),
            ("head.weight".to_string(), b.shallow_clone()),
            ("head.bias".to_string(), c.shallow_clone()),
        ];
        let mut opt = AdamW::new(named, 0.01);
        opt.set_groups(|n| usize::from(n.starts_with("head")));
        assert_eq!(opt.num_groups(), 2);
        let loss = (&a * 3.0).sum(Kind::Float)
            + (&b * -0.5).sum(Kind::Float)
            + (&c * 2.0).sum(Kind::Float);
        loss.backward();
        assert!(opt.step_groups(&[0.1]).is_err(), "one rate for two groups");
        assert_eq!(opt.step, 0);
        opt.step_groups(&[0.0, 0.1]).unwrap();
        let v = |t: &Tensor| Vec::<f32>::try_from(&t.detach()).unwrap();
        assert_eq!(v(&a), [1.0, -2.0]);
        let step = |p: f64, g: f64, wd: f64| p * (1.0 - 0.1 * wd) - 0.1 * g / (g.abs() + 1e-8);
        let want = [step(0.5, -0.5, 0.01), step(3.0, -0.5, 0.01)];
        for (got, want) in v(&b).iter().zip(want) {
            assert!((f64::from(*got) - want).abs() < 1e-6, "{got} vs {want}");
        }
        assert!((f64::from(v(&c)[0]) - step(0.25, 2.0, 0.0)).abs() < 1e-6);
    }

    #[test]
    fn matches_hand_computed_first_steps() {
        // one scalar parameter, constant gradient 0.5: after step 1, p = p0 * (1 - lr wd) - lr * sign(g)
        let p = Tensor::from_slice(&[1.0f32]).set_requires_grad(true);
        let mut opt = AdamW::new(vec![("w.weight".into(), p.shallow_clone())], 0.1);
        let loss = (&p * 0.5).sum(Kind::Float);
        loss.backward();
        opt.step(0.01).unwrap();
        let got = p.double_value(&[0]);
        let want = 1.0 * (1.0 - 0.01 * 0.1) - 0.01 * 0.5 / (0.5 + 1e-8);
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        assert!(
            !decays("encoder.layer.0.output.LayerNorm.weight")
                && !decays("x.bias")
                && decays("x.weight")
        );
    }

    /// Two optimizers over equal copies of two parameters in two groups, with equal gradients.
    fn twin_optimizers(scale: f64) -> [(Vec<Tensor>, AdamW); 2] {
        [0, 1].map(|_| {
            tch::manual_seed(3);
            let named: Vec<(String, Tensor)> = ["enc.weight", "head.bias"]
                .iter()
                .map(|n| {
                    let t = Tensor::randn([4, 3], (Kind::Float, tch::Device::Cpu));
                    (n.to_string(), t.set_requires_grad(true))
                })
                .collect();
            let params: Vec<Tensor> = named.iter().map(|n| n.1.shallow_clone()).collect();
            let mut opt = AdamW::new(named, 0.01);
            opt.set_groups(|n| usize::from(n.starts_with("head")));
            let loss: Tensor = params
                .iter()
                .map(|p| (p * p * scale).sum(Kind::Float))
                .reduce(|a, b| a + b)
                .unwrap();
            loss.backward();
            (params, opt)
        })
    }

    /// The device-side update is the host one, bit for bit, clipped (norm 30 > 1) or not (norm
    /// under 100), over two steps; rates are float32 scalars on the device, so the host side
    /// runs at the same float32-rounded rates.
    #[test]
    fn the_device_update_is_the_host_update() {
        let lrs = [(2e-3f32) as f64, (5e-4f32) as f64];
        for (scale, max_norm) in [(3.0, 1.0), (0.5, 100.0), (0.5, 0.0)] {
            let [(host_p, mut host), (dev_p, mut dev)] = twin_optimizers(scale);
            let update = DeviceUpdate::new(&dev, tch::Device::Cpu);
            update.set_lrs(&lrs);
            for step in 0..2 {
                if step == 1 {
                    for (h, d) in host_p.iter().zip(&dev_p) {
                        (h * h * scale).sum(Kind::Float).backward();
                        (d * d * scale).sum(Kind::Float).backward();
                    }
                }
                let norm = host.clip_grad_norm(max_norm);
                host.step_groups(&lrs).unwrap();
                host.zero_grad();
                let got = dev.clip_and_step_on_device(max_norm, &update).unwrap();
                dev.zero_grad();
                assert_eq!(got.double_value(&[]), norm, "norm, step {step}");
                assert_eq!(update.step.double_value(&[]), (step + 1) as f64);
                for (h, d) in host_p.iter().zip(&dev_p) {
                    let (h, d) = (
                        Vec::<f32>::try_from(&h.detach().view([-1])).unwrap(),
                        Vec::<f32>::try_from(&d.detach().view([-1])).unwrap(),
                    );
                    assert_eq!(h, d, "scale {scale}, max_norm {max_norm}, step {step}");
                }
            }
        }
    }

    /// A non-finite gradient norm: the kernel leaves weights and moments as they were.
    #[test]
    fn a_non_finite_norm_skips_the_device_update() {
        let p = Tensor::from_slice(&[0.0f32, 1.0]).set_requires_grad(true);
        let mut opt = AdamW::new(vec![("w.weight".into(), p.shallow_clone())], 0.01);
        let update = DeviceUpdate::new(&opt, tch::Device::Cpu);
        update.set_lrs(&[0.1]);
        p.sqrt().sum(Kind::Float).backward(); // finite loss, infinite gradient
        let norm = opt.clip_and_step_on_device(1.0, &update).unwrap();
        assert!(!norm.double_value(&[]).is_finite());
        assert_eq!(Vec::<f32>::try_from(&p.detach()).unwrap(), [0.0, 1.0]);
        assert_eq!(opt.m[0].abs().sum(Kind::Float).double_value(&[]), 0.0);
    }

    /// A parameter `[1, 2]` with a gradient, and its optimizer.
    fn one_parameter() -> (Tensor, AdamW) {
        let p = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
        let opt = AdamW::new(vec![("a.weight".into(), p.shallow_clone())], 0.0);
        (&p * 0.5).sum(Kind::Float).backward();
        (p, opt)
    }

    #[test]
    fn a_state_the_fused_kernel_rejects_is_an_error_not_a_crash() {
        // a float64 moment next to a float32 parameter: libtorch's fused kernel refuses the
        // mix (a C++ exception); it comes back as an error, and the parameter is not updated
        let (p, mut opt) = one_parameter();
        opt.m[0] = Tensor::zeros([2], (Kind::Double, tch::Device::Cpu));
        match opt.step(0.01) {
            Err(tch::TchError::Torch(msg)) => {
                assert!(
                    msg.starts_with("fused AdamW") && msg.contains("Double"),
                    "{msg}"
                )
            }
            other => panic!("expected libtorch's error, got {other:?}"),
        }
        assert_eq!(Vec::<f32>::try_from(&p.detach()).unwrap(), [1.0, 2.0]);
    }

    #[test]
    fn a_moment_of_another_shape_is_refused_before_the_kernel() {
        let (p, mut opt) = one_parameter();
        opt.v[0] = Tensor::zeros([3], (Kind::Float, tch::Device::Cpu));
        let e = opt.step(0.01).unwrap_err().to_string();
        assert!(e.contains("shape [2]") && e.contains("[3]"), "{e}");
        assert_eq!(opt.step, 0);
        assert_eq!(Vec::<f32>::try_from(&p.detach()).unwrap(), [1.0, 2.0]);
    }

    #[test]
    fn a_finite_loss_with_an_infinite_gradient_is_seen() {
        // sqrt at 0: loss 0, gradient 1 / (2 sqrt(0)) = inf
        let p = Tensor::from_slice(&[0.0f32, 1.0]).set_requires_grad(true);
        let mut opt = AdamW::new(vec![("w.weight".into(), p.shallow_clone())], 0.0);
        let loss = p.sqrt().sum(Kind::Float);
        assert!(loss.double_value(&[]).is_finite());
        loss.backward();
        assert!(!opt.grads_finite());
        assert!(!opt.clip_grad_norm(1.0).is_finite());
        opt.zero_grad();
        (&p * 2.0).sum(Kind::Float).backward();
        assert!(opt.grads_finite());
    }
}
