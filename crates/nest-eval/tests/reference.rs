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

fn eval_fixture() -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/metrics/eval.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn f64s(v: &serde_json::Value) -> Vec<f64> {
    serde_json::from_value(v.clone()).unwrap()
}

/// MTEB threshold search + scikit-learn AP. Tolerance 1e-12 (same float64 arithmetic).
#[test]
fn pair_metrics_match_mteb_and_sklearn() {
    let fx = eval_fixture();
    for c in fx["pair"].as_array().unwrap() {
        let scores = f64s(&c["scores"]);
        let labels: Vec<bool> = c["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64() == Some(1))
            .collect();
        let got = nest_eval::metrics::pair::pair_scores(&scores, &labels);
        let close = |a: f64, k: &str| {
            let want = c[k].as_f64().unwrap();
            assert!(
                (a - want).abs() < 1e-12,
                "{k}: got {a}, reference {want} (n={})",
                scores.len()
            );
        };
        close(got.accuracy, "accuracy");
        close(got.accuracy_threshold, "accuracy_threshold");
        close(got.f1, "f1");
        close(got.precision, "precision");
        close(got.recall, "recall");
        close(got.f1_threshold, "f1_threshold");
        close(got.ap, "ap");
    }
}

/// pytrec_eval per query. Tolerance 1e-9 (trec_eval prints doubles; ties broken the same way).
#[test]
fn retrieval_metrics_match_pytrec_eval() {
    use nest_eval::metrics::retrieval::{query_scores, rank_docs};
    use std::collections::HashMap;
    let fx = eval_fixture();
    let r = &fx["retrieval"];
    let docs: Vec<String> = serde_json::from_value(r["docs"].clone()).unwrap();
    let qrels: HashMap<String, HashMap<String, i64>> =
        serde_json::from_value(r["qrels"].clone()).unwrap();
    let mut checked = 0;
    for (q, want) in r["per_query"].as_object().unwrap() {
        let scores = f64s(&r["run"][q]);
        let mut scored: Vec<(f64, &str)> = scores
            .iter()
            .copied()
            .zip(docs.iter().map(String::as_str))
            .collect();
        rank_docs(&mut scored);
        let ranked: Vec<&str> = scored.iter().take(1000).map(|x| x.1).collect();
        let got = query_scores(&ranked, &qrels[q]);
        for (k, v) in [
            ("ndcg_at_10", got.ndcg_at_10),
            ("mrr_at_10", got.mrr_at_10),
            ("recall_at_100", got.recall_at_100),
            ("recall_at_1000", got.recall_at_1000),
            ("map_at_100", got.map_at_100),
        ] {
            let w = want[k].as_f64().unwrap();
            assert!(
                (v - w).abs() < 1e-9,
                "query {q} {k}: got {v}, pytrec_eval {w}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 25);
}

/// scikit-learn LogisticRegression: accuracy within 0.5 points (the bar) and macro-F1
/// within 0.005.
#[test]
fn logistic_regression_matches_sklearn() {
    use nest_eval::metrics::classify::{accuracy_macro_f1, LogReg, LogRegConfig};
    let fx = eval_fixture();
    let c = &fx["classification"];
    let rows = |k: &str| -> tch::Tensor {
        let v: Vec<Vec<f32>> = serde_json::from_value(c[k].clone()).unwrap();
        let d = v[0].len() as i64;
        let flat: Vec<f32> = v.into_iter().flatten().collect();
        tch::Tensor::from_slice(&flat).view([-1, d])
    };
    let ytr: Vec<i64> = serde_json::from_value(c["y_train"].clone()).unwrap();
    let yte: Vec<i64> = serde_json::from_value(c["y_test"].clone()).unwrap();
    let k = c["classes"].as_u64().unwrap() as usize;
    let m = LogReg::fit(&rows("x_train"), &ytr, k, LogRegConfig::default());
    let pred = m.predict(&rows("x_test"));
    let (acc, f1) = accuracy_macro_f1(&yte, &pred, k);
    let (want_acc, want_f1) = (
        c["accuracy"].as_f64().unwrap(),
        c["macro_f1"].as_f64().unwrap(),
    );
    eprintln!("logreg: accuracy {acc} (sklearn {want_acc}), macro-F1 {f1} (sklearn {want_f1}), {} iterations", m.iterations);
    assert!(
        (acc - want_acc).abs() <= 0.005,
        "accuracy {acc} vs sklearn {want_acc}"
    );
    assert!(
        (f1 - want_f1).abs() <= 0.005,
        "macro-F1 {f1} vs sklearn {want_f1}"
    );
    let want_pred: Vec<i64> = serde_json::from_value(c["predictions"].clone()).unwrap();
    let agree =
        pred.iter().zip(&want_pred).filter(|(a, b)| a == b).count() as f64 / pred.len() as f64;
    assert!(
        agree >= 0.98,
        "predictions agree with sklearn's on {agree:.3} of the test rows"
    );
}

/// sentence-transformers' quantize_embeddings: int8 codes and sign bits exact.
#[test]
fn quantization_matches_sentence_transformers() {
    use nest_eval::quantize::{quantize, Calibration, Precision};
    let fx = eval_fixture();
    let q = &fx["quantize"];
    let x: Vec<Vec<f32>> = serde_json::from_value(q["x"].clone()).unwrap();
    let d = x[0].len() as i64;
    let t = tch::Tensor::from_slice(&x.into_iter().flatten().collect::<Vec<f32>>()).view([-1, d]);
    let cal = Calibration::from(&t);
    let i8s: Vec<f32> =
        Vec::try_from(&quantize(&t, Precision::Int8Calibrated, &cal).view([-1])).unwrap();
    let want: Vec<i64> = q["int8"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()))
        .collect();
    let got: Vec<i64> = i8s.iter().map(|v| *v as i64).collect();
    assert_eq!(got, want, "int8 codes");
    let bits: Vec<f32> = Vec::try_from(&quantize(&t, Precision::Binary, &cal).view([-1])).unwrap();
    let want: Vec<i64> = q["bits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()))
        .collect();
    for (a, b) in bits.iter().zip(&want) {
        assert_eq!(*a > 0.0, *b == 1);
    }
}
