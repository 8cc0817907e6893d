//! Metrics against SciPy (`tests/reference/metrics.py` -> `tests/fixtures/metrics/`).
//! Tolerance: 1e-12 absolute (both sides compute in float64).

use std::path::Path;

#[test]
fn spearman_matches_scipy_with_ties() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/metrics/spearman.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let x: Vec<f64> = serde_json::from_value(c["x"].clone()).unwrap();
        let y: Vec<f64> = serde_json::from_value(c["y"].clone()).unwrap();
        let want = c["spearman"].as_f64().unwrap();
        let got = nest_eval::metrics::spearman(&x, &y);
        assert!(
            (got - want).abs() < 1e-12,
            "n={}: got {got}, scipy {want}",
            x.len()
        );
    }
}
