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
