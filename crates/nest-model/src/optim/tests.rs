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
    let loss =
        (&a * 3.0).sum(Kind::Float) + (&b * -0.5).sum(Kind::Float) + (&c * 2.0).sum(Kind::Float);
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

/// Parameters of several shapes (one without a gradient) whose gradients are fixed,
/// uneven values, and their optimizer.
fn uneven_gradients() -> (Vec<Tensor>, AdamW) {
    let shapes: [&[i64]; 5] = [&[7, 5], &[3], &[64, 33], &[1], &[2, 2]];
    let params: Vec<Tensor> = shapes
        .iter()
        .map(|s| Tensor::zeros(*s, (Kind::Float, tch::Device::Cpu)).set_requires_grad(true))
        .collect();
    let named = params
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("p{i}.weight"), p.shallow_clone()))
        .collect();
    let opt = AdamW::new(named, 0.0);
    let loss: Tensor = params[..4]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let n = p.numel() as i64;
            let w = (Tensor::arange(n, (Kind::Float, tch::Device::Cpu)) * (0.37 + i as f64)).sin()
                * (i as f64 * 3.0 + 0.5);
            (p * w.view(p.size().as_slice())).sum(Kind::Float)
        })
        .reduce(|a, b| a + b)
        .unwrap();
    loss.backward();
    (params, opt)
}

/// The multi-tensor kernels (`optim/foreach.rs`) give on the CPU what the per-tensor
/// operations gave, bit for bit: the global norm (each tensor's norm squared and summed in
/// float64), the clipping by a host or a device factor, and the zeroing; a parameter without
/// a gradient is left out.
#[test]
fn the_multi_tensor_kernels_are_the_per_tensor_operations() {
    let (params, mut opt) = uneven_gradients();
    let grads: Vec<Tensor> = params[..4].iter().map(|p| p.grad().copy()).collect();
    let per_tensor: Vec<Tensor> = grads
        .iter()
        .map(|g| g.norm().to_kind(Kind::Double).square())
        .collect();
    let want = Tensor::stack(&per_tensor, 0).sum(Kind::Double).sqrt();
    let got = global_norm(&opt.grads());
    assert_eq!(got.double_value(&[]), want.double_value(&[]));
    assert!(!params[4].grad().defined());

    let norm = opt.clip_grad_norm(1.0);
    assert_eq!(norm, want.double_value(&[]));
    let coef = 1.0 / (norm + 1e-6);
    assert!(coef < 1.0, "the gradients are clipped: norm {norm}");
    let v = |t: &Tensor| Vec::<f32>::try_from(&t.view([-1])).unwrap();
    for (p, g) in params.iter().zip(&grads) {
        assert_eq!(v(&p.grad()), v(&(g * coef)));
    }
    // the device factor (a float64 scalar made float32), as the recorded step's clipping
    let by = Tensor::from(0.25f64).to_kind(Kind::Float);
    foreach::mul_(&opt.grads(), foreach::Factor::Tensor(&by)).unwrap();
    for (p, g) in params.iter().zip(&grads) {
        assert_eq!(v(&p.grad()), v(&(g * coef * Tensor::from(0.25f64))));
    }
    opt.zero_grad();
    for p in &params[..4] {
        assert!(p.grad().defined(), "zeroed in place, not freed");
        assert_eq!(p.grad().abs().sum(Kind::Float).double_value(&[]), 0.0);
    }
    // libtorch's refusal is an error, not a crash
    let other = Tensor::zeros([2], (Kind::Float, tch::Device::Cpu));
    let wrong = Tensor::from_slice(&[1.0f32, 2.0]);
    assert!(foreach::mul_(&[other], foreach::Factor::Tensor(&wrong)).is_err());
    assert!(foreach::norms(&[]).is_err());
}
