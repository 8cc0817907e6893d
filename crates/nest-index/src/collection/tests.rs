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
    let r = c.add(new.clone(), Existing::Keep).unwrap();
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
        .add(
            vec![NewRow {
                id: "n0".into(),
                payload: None,
                vector: rows[0].clone(),
            }],
            Existing::Keep,
        )
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

/// The documents as they should stand after a sequence of changes, built as a fresh index:
/// what the collection with its journal must search like.
fn fresh(dir: &Path, docs: &[(String, Vec<f32>, i64)]) -> Collection {
    let levels = [Level {
        precision: Precision::Float32,
        dim: 16,
    }];
    let mut b = IndexBuilder::create(dir, 16, &levels, true, Value::Null, false).unwrap();
    for (id, v, g) in docs {
        b.push(id, Some(&serde_json::json!({"group": g})), v)
            .unwrap();
    }
    b.finish().unwrap();
    Collection::open(dir).unwrap()
}

/// Hits as (id, score rounded to 1e-5) sorted: the same documents at the same scores,
/// whatever rows they sit in.
fn hits(c: &Collection, q: &[Vec<f32>], f: Option<&Filter>) -> Vec<Vec<(String, i64)>> {
    let funnel = Funnel::exact(16);
    c.search(q, &funnel, 12, f)
        .unwrap()
        .into_iter()
        .map(|h| {
            let mut h: Vec<_> = h
                .into_iter()
                .map(|x| (x.id, (x.score * 1e5).round() as i64))
                .collect();
            h.sort();
            h
        })
        .collect()
}

/// What an add of `rows` (payload group `g`) should leave in `want`.
fn expect_add(want: &mut Vec<(String, Vec<f32>, i64)>, rows: &[NewRow], e: Existing, g: i64) {
    let mut seen = HashSet::new();
    for row in rows.iter().filter(|row| seen.insert(row.id.clone())) {
        let entry = (row.id.clone(), row.vector.clone(), g);
        match want.iter().position(|w| w.0 == row.id) {
            Some(p) if e == Existing::Replace => {
                want.remove(p);
                want.push(entry);
            }
            Some(_) => {}
            None => want.push(entry),
        }
    }
}

/// Random adds, replacements (upserts) and deletions, of built and added documents: after
/// each batch, and after a restart that replays the journal, the collection searches (with and
/// without a filter), counts and lists payloads exactly as a fresh index of the documents as
/// they should stand; retries change nothing; a torn deletion is cut off.
#[test]
// long for a reason: one random sequence of changes and the state it should leave, checked
// after each batch and across a restart; split, each part would replay the sequence again
fn replacements_and_deletions_search_as_a_fresh_index_and_survive_a_restart() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("idx");
    let start: Vec<(String, Vec<f32>, i64)> = vecs(40, 16, 3)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("d{i}"), v, (i % 3) as i64))
        .collect();
    fresh(&dir, &start);
    let mut want = start.clone();
    let c = Collection::open(&dir).unwrap();
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let q = vecs(4, 16, 4);
    let g1 = Filter::parse(&serde_json::json!({"group": 1})).unwrap();
    let check = |c: &Collection, want: &[(String, Vec<f32>, i64)], n: usize| {
        let f = fresh(&t.path().join(format!("fresh{n}")), want);
        assert_eq!(hits(c, &q, None), hits(&f, &q, None), "batch {n}");
        assert_eq!(hits(c, &q, Some(&g1)), hits(&f, &q, Some(&g1)), "batch {n}");
        assert_eq!(c.len(), want.len(), "batch {n}");
        let mut p: Vec<String> = c.payloads().map(|p| p.unwrap().to_string()).collect();
        let mut w: Vec<String> = f.payloads().map(|p| p.unwrap().to_string()).collect();
        p.sort();
        w.sort();
        assert_eq!(p, w, "batch {n}");
    };
    for n in 0..12 {
        let ids: Vec<String> = (0..4)
            .map(|_| format!("d{}", r.random_range(0..50)))
            .collect();
        let vs = vecs(4, 16, 100 + n);
        if n % 3 == 2 {
            let d = c.delete(&ids).unwrap();
            want.retain(|w| !ids.contains(&w.0));
            assert!(d.deleted.iter().chain(&d.missing).count() <= ids.len());
            assert_eq!(c.delete(&d.deleted).unwrap().missing, d.deleted, "a retry");
        } else {
            let existing = [Existing::Keep, Existing::Replace][(n % 3) as usize];
            let rows: Vec<NewRow> = ids
                .iter()
                .zip(&vs)
                .map(|(id, v)| NewRow {
                    id: id.clone(),
                    payload: Some(serde_json::json!({"group": n as i64 % 3})),
                    vector: v.clone(),
                })
                .collect();
            let a = c.add(rows.clone(), existing).unwrap();
            expect_add(&mut want, &rows, existing, n as i64 % 3);
            let again = c.add(rows, existing).unwrap();
            if existing == Existing::Keep {
                assert!(
                    again.added.is_empty() && again.replaced.is_empty(),
                    "a retry"
                );
            }
            assert!(a.added.len() + a.replaced.len() + a.existing.len() <= 4 + 4);
        }
        check(&c, &want, n as usize);
    }
    drop(c);
    // a deletion torn mid-write (never acknowledged) is cut off; the rest replays
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(JOURNAL))
        .unwrap();
    f.write_all(br#"{"delete":"d"#).unwrap();
    drop(f);
    let c = Collection::open(&dir).unwrap();
    check(&c, &want, 99);
    journal_alone_says(&dir, &start, &want);
}

/// The journal read alone (as a pgvector export or a rebuild reads it): the built ids it does
/// not name, and its rows, are the documents as they stand.
fn journal_alone_says(
    dir: &Path,
    start: &[(String, Vec<f32>, i64)],
    want: &[(String, Vec<f32>, i64)],
) {
    let replayed = read_journal(dir, 16).unwrap();
    let mut ids: Vec<&str> = start
        .iter()
        .map(|s| s.0.as_str())
        .filter(|id| !replayed.named.contains_key(*id))
        .chain(replayed.rows.iter().map(|r| r.id.as_str()))
        .collect();
    let mut w: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
    ids.sort();
    w.sort();
    assert_eq!(ids, w);
}

/// Two processes' views of one index: the second's change, after the first changed the
/// journal, is refused (its memory no longer says what the journal says) until it opens the
/// index again.
#[test]
fn a_change_over_a_journal_changed_elsewhere_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("idx");
    let rows = built(&dir);
    let (a, b) = (
        Collection::open(&dir).unwrap(),
        Collection::open(&dir).unwrap(),
    );
    let row = |id: &str| NewRow {
        id: id.into(),
        payload: None,
        vector: rows[0].clone(),
    };
    a.add(vec![row("x")], Existing::Keep).unwrap();
    let before = std::fs::read(dir.join(JOURNAL)).unwrap();
    let e = b
        .add(vec![row("x")], Existing::Keep)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("changed since this process opened") && e.contains("open the index again"),
        "{e}"
    );
    assert!(b.delete(&["d1".into()]).is_err());
    assert_eq!(std::fs::read(dir.join(JOURNAL)).unwrap(), before);
    let b = Collection::open(&dir).unwrap();
    assert_eq!(
        b.add(vec![row("x")], Existing::Keep).unwrap().existing,
        ["x"]
    );
    assert_eq!(b.delete(&["d1".into()]).unwrap().deleted, ["d1"]);
}
