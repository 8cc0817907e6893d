//! The paired bootstrap, Holm's correction and the seed spread against scipy / numpy
//! (`tests/reference/significance.py` -> `tests/fixtures/significance/cases.json`).
//!
//! Tolerances: the observed difference is an exact computation (1e-6); the interval bounds
//! and p-values come from two independent Monte-Carlo runs of 20,000 resamples each, whose
//! standard errors are about 0.03 sd (bounds) and 0.005 (p near 0.1): bounds must agree within
//! 0.15 sd of the resampled differences, the shares across zero within 0.02 and the Wald
//! p-values (whose only noise is the standard error's, about 0.5% relative) within 0.01.

use nest_eval::significance::{holm, t975, Bootstrap, Side};
use nest_eval::tasks::TaskKind;
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/significance/cases.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn kind(name: &str) -> TaskKind {
    match name {
        "sts" => TaskKind::Sts,
        "pair" => TaskKind::Pair,
        "cls" => TaskKind::Cls,
        _ => TaskKind::Retrieval,
    }
}

#[test]
fn bootstrap_matches_scipy() {
    let f = fixture();
    for c in f["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let gold = floats(&c["gold"]);
        let a: Vec<Vec<f32>> = c["a"].as_array().unwrap().iter().map(floats).collect();
        let b: Vec<Vec<f32>> = c["b"].as_array().unwrap().iter().map(floats).collect();
        let ra: Vec<&[f32]> = a.iter().map(Vec::as_slice).collect();
        let rb: Vec<&[f32]> = b.iter().map(Vec::as_slice).collect();
        let boot = Bootstrap {
            resamples: c["resamples"].as_u64().unwrap() as usize,
            seed: 11,
        };
        let t = boot
            .paired(
                kind(c["kind"].as_str().unwrap()),
                Side {
                    gold: &gold,
                    runs: &ra,
                },
                Side {
                    gold: &gold,
                    runs: &rb,
                },
            )
            .unwrap();
        let sd = c["sd"].as_f64().unwrap();
        let want = |k: &str| c[k].as_f64().unwrap();
        assert!((t.delta - want("delta")).abs() < 1e-6, "{name}: {t:?}");
        assert!(
            (t.lo - want("lo")).abs() < 0.15 * sd,
            "{name}: lo {} vs scipy {}",
            t.lo,
            want("lo")
        );
        assert!(
            (t.hi - want("hi")).abs() < 0.15 * sd,
            "{name}: hi {} vs scipy {}",
            t.hi,
            want("hi")
        );
        assert!(
            (t.p - want("p")).abs() < 0.02,
            "{name}: p {} vs numpy {}",
            t.p,
            want("p")
        );
    }
}

#[test]
fn holm_matches_reference() {
    let f = fixture();
    let p: Vec<f64> = f["holm"]["p"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let want: Vec<f64> = f["holm"]["adjusted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    for (a, w) in holm(&p).iter().zip(&want) {
        assert!((a - w).abs() < 1e-12, "{a} vs {w}");
    }
}

#[test]
fn t_quantiles_match_scipy() {
    let f = fixture();
    for (i, w) in f["t975"].as_array().unwrap().iter().enumerate() {
        let df = i + 1;
        let w = w.as_f64().unwrap();
        // a table to 4 decimals up to 30 degrees of freedom, an expansion beyond
        let tol = if df <= 30 { 5e-5 } else { 1e-4 };
        assert!((t975(df) - w).abs() < tol, "df {df}: {} vs {w}", t975(df));
    }
}
