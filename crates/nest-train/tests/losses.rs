//! Task losses against `tests/reference/losses.py` (PyTorch + sentence-transformers' similarity
//! functions, float64). Tolerance: 1e-9 relative (both sides in float64).

use std::collections::HashMap;
use std::path::Path;

use nest_train::losses;
use tch::Tensor;

fn fixture() -> HashMap<String, Tensor> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/losses/losses.safetensors");
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

fn close(got: &Tensor, want: &Tensor, what: &str) {
    let diff = (got - want).abs().max().double_value(&[]);
    let scale = want.abs().max().double_value(&[]).max(1e-12);
    assert!(
        diff / scale < 1e-9,
        "{what}: got {got:?}, reference {want:?}"
    );
}

#[test]
fn losses_match_pytorch() {
    let f = fixture();
    let (a, p, n, gold) = (&f["a"], &f["p"], &f["n"], &f["gold"]);
    for d in [8i64, 32] {
        let (aa, pp, nn) = (a.narrow(1, 0, d), p.narrow(1, 0, d), n.narrow(1, 0, d));
        close(
            &losses::mnrl(&aa, &pp, None, 20.0).reshape([1]),
            &f[&format!("mnrl_{d}")],
            "mnrl",
        );
        close(
            &losses::simcse(&aa, &pp, 20.0).reshape([1]),
            &f[&format!("mnrl_{d}")],
            "simcse",
        );
        close(
            &losses::mnrl(&aa, &pp, Some(&nn), 20.0).reshape([1]),
            &f[&format!("mnrl_hard_{d}")],
            "mnrl + hard negatives",
        );
        close(
            &losses::mnrl_symmetric(&aa, &pp, Some(&nn), 20.0).reshape([1]),
            &f[&format!("mnrl_sym_hard_{d}")],
            "symmetric mnrl",
        );
        close(
            &losses::cosent(&aa, &pp, gold, 20.0).reshape([1]),
            &f[&format!("cosent_{d}")],
            "cosent",
        );
        close(
            &losses::angle_sim(&aa, &pp),
            &f[&format!("angle_sim_{d}")],
            "angle similarity",
        );
        close(
            &losses::angle(&aa, &pp, gold, 20.0).reshape([1]),
            &f[&format!("angle_{d}")],
            "angle loss",
        );
    }
}

/// AdamW against torch.optim.AdamW over 6 steps (`tests/reference/adamw.py`), weight-decay and
/// no-decay groups, a zero first learning rate. Tolerance 1e-6 absolute (float32; the update's
/// scalars are folded differently, so rounding differs).
#[test]
fn adamw_matches_pytorch() {
    use nest_train::optim::AdamW;
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/losses/adamw.safetensors");
    let f: HashMap<String, Tensor> = Tensor::read_safetensors(p).unwrap().into_iter().collect();
    let w = f["w0"].copy().set_requires_grad(true);
    let b = f["b0"].copy().set_requires_grad(true);
    let mut opt = AdamW::new(
        vec![
            ("layer.weight".into(), w.shallow_clone()),
            ("layer.bias".into(), b.shallow_clone()),
        ],
        0.01,
    );
    let lrs: Vec<f64> = Vec::try_from(&f["lrs"]).unwrap();
    for (k, lr) in lrs.iter().enumerate() {
        // set the gradients to the stored ones through a linear "loss"
        let loss = (&w * &f[&format!("gw{k}")]).sum(tch::Kind::Float)
            + (&b * &f[&format!("gb{k}")]).sum(tch::Kind::Float);
        loss.backward();
        opt.step(*lr).unwrap();
        opt.zero_grad();
        for (name, t) in [("w", &w), ("b", &b)] {
            let want = &f[&format!("{name}{}", k + 1)];
            let diff = (t - want).abs().max().double_value(&[]);
            assert!(diff < 1e-6, "step {} {name}: max diff {diff}", k + 1);
        }
    }
}
