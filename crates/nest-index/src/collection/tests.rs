//! Collection: the generic path against the index's own search, filters, adds, restarts and torn lines.

use super::*;
use crate::{IndexBuilder, Level, Precision};
use rand::{Rng, SeedableRng};

fn vecs(n: usize, d: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..d).map(|_| r.random_range(-1.0f32..1.0)).collect())
        .collect()
}

/// 300 rows of dim 16 at float32/int8/binary x 8/16, payload {"group": row % 3}.
fn built(dir: &Path) -> Vec<Vec<f32>> {
    let levels: Vec<Level> = [8, 16]
        .iter()
        .flat_map(|&dim| Precision::ALL.map(|precision| Level { precision, dim }))
        .collect();
    let rows = vecs(300, 16, 1);
    let mut b = IndexBuilder::create(dir, 16, &levels, true, Value::Null, false).unwrap();
    for (i, v) in rows.iter().enumerate() {
        let p = serde_json::json!({"group": i % 3});
        b.push(&format!("d{i}"), Some(&p), v).unwrap();
    }
    b.finish().unwrap();
    rows
}

#[test]
fn the_generic_path_equals_the_index_search() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("idx");
    built(&dir);
    let c = Collection::open(&dir).unwrap();
    let all = Filter::parse(&serde_json::json!({"group": {"$in": [0, 1, 2]}})).unwrap();
    let queries = vecs(5, 16, 2);
    for f in [
        "float32:16",
        "binary:16@40>float32:16",
        "int8:8@30>int8:16@10>float32:16",
    ] {
        let funnel = Funnel::parse(f).unwrap();
        let fast = c.search(&queries, &funnel, 7, None).unwrap();
        let generic = c.search(&queries, &funnel, 7, Some(&all)).unwrap();
        assert_eq!(fast, generic, "{f}");
    }
}

#[test]
fn filters_adds_restarts_and_torn_lines() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("idx");
    let rows = built(&dir);
    let c = Collection::open(&dir).unwrap();
    let funnel = Funnel::parse("binary:16@50>float32:16").unwrap();
    let g1 = Filter::parse(&serde_json::json!({"group": 1})).unwrap();
    let hits = c.search(&rows[..2], &funnel, 10, Some(&g1)).unwrap();
    assert!(hits
        .iter()
        .flatten()
        .all(|h| h.payload.as_ref().unwrap()["group"] == 1));
    assert_eq!(hits[1][0].id, "d1"); // row 1 is in group 1 and is its own best match
                                     // adds: a new row is found, an existing id is skipped
    let new = vec![
        NewRow {
            id: "n0".into(),
            payload: Some(serde_json::json!({"group": 1})),
            vector: rows[5].iter().map(|x| -x).collect(),
        },
        NewRow {
            id: "d7".into(),
            payload: None,
            vector: rows[7].clone(),
        },
    ];
    let r = c.add(new.clone()).unwrap();
    assert_eq!(
        (r.added, r.existing),
        (vec!["n0".to_string()], vec!["d7".to_string()])
    );
    let q = vec![new[0].vector.clone()];
    let top = |c: &Collection, f: Option<&Filter>| c.search(&q, &funnel, 3, f).unwrap().remove(0);
    assert_eq!(top(&c, None)[0].id, "n0");
    assert_eq!(top(&c, Some(&g1))[0].id, "n0");
    assert_eq!(c.len(), 301);
    // a restart replays the journal; a torn last line (never acknowledged) is cut off
    drop(c);
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(JOURNAL))
        .unwrap();
    f.write_all(br#"{"id":"torn","vector":[0.1,"#).unwrap();
    drop(f);
    let c = Collection::open(&dir).unwrap();
    assert_eq!(c.len(), 301);
    assert_eq!(top(&c, None)[0].id, "n0");
    let r = c
        .add(vec![NewRow {
            id: "n0".into(),
            payload: None,
            vector: rows[0].clone(),
        }])
        .unwrap();
    assert_eq!(r.existing, vec!["n0".to_string()]);
    assert!(std::fs::read_to_string(dir.join(JOURNAL))
        .unwrap()
        .ends_with("}\n"));
    // a damaged line in the middle is an error naming it; wrong dims are refused
    std::fs::write(
        dir.join(JOURNAL),
        "{\"id\":\"x\",\"vector\":[1]}\nnot json\n",
    )
    .unwrap();
    let e = Collection::open(&dir).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("16"), "{e}");
    assert!(Filter::parse(&serde_json::json!({"g": {"$gt": 1}})).is_err());
    assert!(Filter::parse(&serde_json::json!([1])).is_err());
    // numbers by value: a payload's 1 passes a filter's 1.0 (and the other way round)
    let one = Filter::parse(&serde_json::json!({"n": 1.0})).unwrap();
    assert!(one.matches(Some(&serde_json::json!({"n": 1}))));
    let one = Filter::parse(&serde_json::json!({"n": {"$in": [1, 2]}})).unwrap();
    assert!(one.matches(Some(&serde_json::json!({"n": 1.0}))));
    assert!(!one.matches(Some(&serde_json::json!({"n": "1"}))));
}
