//! nest-index against numpy (tests/reference/index_numpy.py -> tests/fixtures/index), plus the
//! corruption, overwrite and no-panic guarantees.

use std::path::{Path, PathBuf};

use nest_index::level::{pack_bits, prefix_normalized, quantize_int8};
use nest_index::{kernels, Error, Funnel, Index, IndexBuilder, Level, Precision};
use proptest::prelude::*;
use serde_json::Value;

fn fixture() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/index/reference.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn mat(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn ints(v: &Value) -> Vec<Vec<i64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect()
        })
        .collect()
}

fn levels(s: &str) -> Vec<Level> {
    s.split(',').map(|l| Level::parse(l).unwrap()).collect()
}

fn build(dir: &Path, x: &[Vec<f32>], lv: &[Level], payload: bool) -> PathBuf {
    let out = dir.join("idx");
    let mut b = IndexBuilder::create(&out, x[0].len(), lv, payload, Value::Null, false).unwrap();
    for (i, v) in x.iter().enumerate() {
        let p = serde_json::json!({ "n": i });
        b.push(&format!("doc{i}"), payload.then_some(&p), v)
            .unwrap();
    }
    b.finish().unwrap();
    out
}

#[test]
fn levels_match_numpy_bits_and_codes() {
    let f = fixture();
    let x = mat(&f["vectors"]);
    for d in [24usize, 12] {
        let want = ints(&f[format!("binary_{d}_first5")]);
        for (r, w) in want.iter().enumerate() {
            let got: Vec<i64> = pack_bits(&prefix_normalized(&x[r], d))
                .iter()
                .map(|&b| b as i64)
                .collect();
            assert_eq!(&got, w, "binary:{d} row {r}");
        }
    }
    let codes = ints(&f["int8_24_first5"]);
    let scales = f["int8_24_scales_first5"].as_array().unwrap();
    for r in 0..5 {
        let (q, s) = quantize_int8(&prefix_normalized(&x[r], 24));
        let s_ref = scales[r].as_f64().unwrap();
        assert!(
            ((s as f64) - s_ref).abs() < 1e-6 * s_ref,
            "scale row {r}: {s} vs {s_ref}"
        );
        // float32 vs float64 may move a code sitting on .5 by one step
        for (a, b) in q.iter().zip(&codes[r]) {
            assert!((*a as i64 - b).abs() <= 1, "int8 row {r}: {a} vs {b}");
        }
    }
}

#[test]
fn one_stage_searches_match_numpy_top10() {
    let f = fixture();
    let x = mat(&f["vectors"]);
    let q = mat(&f["queries"]);
    let k = f["k"].as_u64().unwrap() as usize;
    let tmp = tempfile::tempdir().unwrap();
    let idx = Index::open(&build(
        tmp.path(),
        &x,
        &levels("float32:24,float32:8,int8:24,binary:24"),
        false,
    ))
    .unwrap();
    for (funnel, key) in [
        ("float32:24", "exact_24"),
        ("float32:8", "exact_8"),
        ("binary:24", "binary_24_top"),
        ("int8:24", "int8_24_top"),
    ] {
        let hits = idx.search(&q, &Funnel::parse(funnel).unwrap(), k).unwrap();
        let want = ints(&f[key]);
        for (qi, h) in hits.iter().enumerate() {
            let got: Vec<i64> = h.iter().map(|h| h.row as i64).collect();
            assert_eq!(got, want[qi], "{funnel}, query {qi}");
        }
    }
    // exact scores are cosines
    let hits = idx.search(&q[..1], &Funnel::exact(24), 1).unwrap();
    let a = prefix_normalized(&q[0], 24);
    let b = prefix_normalized(&x[hits[0][0].row as usize], 24);
    let cos: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((hits[0][0].score - cos).abs() < 1e-5);
}

#[test]
fn a_wide_funnel_equals_exact_search_and_ids_payloads_survive() {
    let f = fixture();
    let x = mat(&f["vectors"]);
    let q = mat(&f["queries"]);
    let tmp = tempfile::tempdir().unwrap();
    let idx = Index::open(&build(
        tmp.path(),
        &x,
        &levels("float32:24,float32:8,binary:24"),
        true,
    ))
    .unwrap();
    let exact = idx.search(&q, &Funnel::exact(24), 10).unwrap();
    // shortlists of all 300 rows: the funnel must return exactly the exact top-10
    let wide = idx
        .search(
            &q,
            &Funnel::parse("binary:24@300>float32:8@300>float32:24").unwrap(),
            10,
        )
        .unwrap();
    assert_eq!(exact, wide);
    // a narrow funnel returns k hits, best first, each row at most once
    let narrow = idx
        .search(&q, &Funnel::parse("binary:24>float32:24").unwrap(), 10)
        .unwrap();
    for h in &narrow {
        assert_eq!(h.len(), 10);
        assert!(h.windows(2).all(|w| w[0].score >= w[1].score));
        let mut rows: Vec<u32> = h.iter().map(|h| h.row).collect();
        rows.sort();
        rows.dedup();
        assert_eq!(rows.len(), 10);
    }
    assert_eq!(idx.id(17), "doc17");
    assert_eq!(idx.payload(17).unwrap()["n"], 17);
    assert_eq!(idx.len(), 300);
    assert_eq!(idx.levels().len(), 3);
    // a level that is not stored, a zero k, a wrong query length: named errors
    let e = idx
        .search(&q, &Funnel::parse("int8:24").unwrap(), 10)
        .unwrap_err()
        .to_string();
    assert!(e.contains("int8:24") && e.contains("float32:24"), "{e}");
    assert!(idx.search(&q, &Funnel::exact(24), 0).is_err());
    let e = idx
        .search(&[vec![0.0; 5]], &Funnel::exact(24), 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("5 dims"), "{e}");
}

#[test]
fn kernels_match_the_plain_loops() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for n in [1usize, 7, 8, 33, 384, 768] {
        let a: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let (x, y) = (kernels::dot_f32(&a, &b), kernels::plain::dot_f32(&a, &b));
        assert!((x - y).abs() < 1e-4, "dot_f32 n={n}: {x} vs {y}");
        let ai: Vec<i8> = (0..n).map(|_| rng.random_range(-127..=127)).collect();
        let bi: Vec<i8> = (0..n).map(|_| rng.random_range(-127..=127)).collect();
        assert_eq!(
            kernels::dot_i8(&ai, &bi),
            kernels::plain::dot_i8(&ai, &bi),
            "dot_i8 n={n}"
        );
        let au: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        let bu: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        assert_eq!(
            kernels::hamming(&au, &bu),
            kernels::plain::hamming(&au, &bu),
            "hamming n={n}"
        );
    }
}

#[test]
fn hamming_many_matches_the_plain_loop() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for w in [1usize, 6, 8, 48, 50] {
        let q: Vec<u8> = (0..w).map(|_| rng.random()).collect();
        let rows: Vec<u8> = (0..w * 37).map(|_| rng.random()).collect();
        let mut out = vec![0u16; 37];
        kernels::hamming_many(&q, &rows, &mut out);
        for (r, d) in out.iter().enumerate() {
            assert_eq!(
                *d as u32,
                kernels::plain::hamming(&q, &rows[r * w..(r + 1) * w]),
                "w={w} row {r}"
            );
        }
    }
}

fn small(dir: &Path) -> PathBuf {
    let x: Vec<Vec<f32>> = (0..50)
        .map(|i| {
            (0..16)
                .map(|j| ((i * 7 + j * 3) % 11) as f32 - 5.0)
                .collect()
        })
        .collect();
    build(dir, &x, &levels("float32:16,int8:16,binary:16"), true)
}

#[test]
fn a_flipped_byte_or_a_truncated_file_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small(tmp.path());
    Index::open(&out).unwrap();
    for name in [
        "float32-16.bin",
        "int8-16.bin",
        "int8-16.scale",
        "binary-16.bin",
        "ids.txt",
        "payload.jsonl",
    ] {
        let p = out.join(name);
        let orig = std::fs::read(&p).unwrap();
        let mut bad = orig.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x10;
        std::fs::write(&p, &bad).unwrap();
        let e = Index::open(&out).unwrap_err();
        assert!(
            matches!(e, Error::Corrupt { .. }) && e.to_string().contains(name),
            "{name}: {e}"
        );
        std::fs::write(&p, &orig[..orig.len() - 1]).unwrap();
        let e = Index::open(&out).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains("truncated"), "{name}: {e}");
        std::fs::write(&p, &orig).unwrap();
    }
    Index::open(&out).unwrap();
    std::fs::write(out.join("index.json"), "{").unwrap();
    let e = Index::open(&out).unwrap_err().to_string();
    assert!(e.contains("index.json"), "{e}");
}

#[test]
fn building_never_clobbers_and_bad_vectors_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let out = small(tmp.path());
    let lv = levels("float32:16");
    let e = IndexBuilder::create(&out, 16, &lv, false, Value::Null, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--overwrite"), "{e}");
    // an overwrite that fails midway leaves the old index intact
    let mut b = IndexBuilder::create(&out, 16, &lv, false, Value::Null, true).unwrap();
    let e = b.push("x", None, &[f32::NAN; 16]).unwrap_err().to_string();
    assert!(e.contains("not finite") && e.contains("vector 0"), "{e}");
    assert!(b
        .push("a\nb", None, &[1.0; 16])
        .unwrap_err()
        .to_string()
        .contains("line break"));
    assert!(b
        .push("x", None, &[1.0; 15])
        .unwrap_err()
        .to_string()
        .contains("15 dims"));
    drop(b);
    assert_eq!(Index::open(&out).unwrap().len(), 50);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left.len(),
        1,
        "a dropped build leaves nothing behind: {left:?}"
    );
    // an empty build is refused; a wider level than the vectors too
    let b =
        IndexBuilder::create(&tmp.path().join("e"), 16, &lv, false, Value::Null, false).unwrap();
    assert!(b.finish().is_err());
    assert!(!tmp.path().join("e").exists());
    assert!(IndexBuilder::create(
        &tmp.path().join("w"),
        16,
        &levels("float32:32"),
        false,
        Value::Null,
        false
    )
    .is_err());
    // overwrite of a non-index folder is refused
    std::fs::create_dir_all(tmp.path().join("other")).unwrap();
    std::fs::write(tmp.path().join("other/keep.txt"), "x").unwrap();
    let mut b =
        IndexBuilder::create(&tmp.path().join("other"), 16, &lv, false, Value::Null, true).unwrap();
    b.push("a", None, &[1.0; 16]).unwrap();
    assert!(b
        .finish()
        .unwrap_err()
        .to_string()
        .contains("not a Nest index"));
    assert!(tmp.path().join("other/keep.txt").exists());
}

#[test]
fn funnel_text_errors() {
    for bad in [
        "",
        "float32",
        "float32:0",
        "f16:8",
        "binary:8@0",
        "binary:8@x>float32:8",
        "float32:8>",
    ] {
        assert!(Funnel::parse(bad).is_err(), "{bad:?} should be refused");
    }
    // another separator: the error writes the funnel meant
    let e = Funnel::parse("binary:64,float32:384")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'binary:64>float32:384'"), "{e}");
    let f = Funnel::parse("binary:384@2000>float32:64>float32:384").unwrap();
    assert_eq!(f.to_string(), "binary:384@2000>float32:64>float32:384");
    assert_eq!(f.keeps(10), vec![2000, 100, 10]);
    assert_eq!(
        Funnel::parse("binary:64>int8:64>float32:64")
            .unwrap()
            .keeps(5),
        vec![500, 50, 5]
    );
    assert_eq!(
        Precision::parse_list("binary,float32,float32").unwrap(),
        vec![Precision::Float32, Precision::Binary]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Arbitrary bytes in any index file (checksum recomputed or not) never panic `open` or a
    /// search that follows a successful open.
    #[test]
    fn arbitrary_files_never_panic(which in 0usize..7, bytes in proptest::collection::vec(any::<u8>(), 0..2000), fix_sum in any::<bool>()) {
        let tmp = tempfile::tempdir().unwrap();
        let out = small(tmp.path());
        let names = ["index.json", "float32-16.bin", "int8-16.bin", "int8-16.scale", "binary-16.bin", "ids.txt", "payload.jsonl"];
        std::fs::write(out.join(names[which]), &bytes).unwrap();
        if fix_sum && which > 0 {
            let m = out.join("index.json");
            let mut j: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
            let crc = crc32fast::hash(&bytes);
            let fix = |fs: &mut Value| if fs["name"] == names[which] { fs["crc32"] = crc.into(); fs["bytes"] = bytes.len().into(); };
            for l in j["levels"].as_array_mut().unwrap() { fix(&mut l["data"]); if !l["scales"].is_null() { fix(&mut l["scales"]); } }
            fix(&mut j["ids"]);
            fix(&mut j["payload"]);
            std::fs::write(&m, serde_json::to_string(&j).unwrap()).unwrap();
        }
        if let Ok(idx) = Index::open(&out) {
            let q = vec![vec![0.5f32; 16]];
            for f in ["float32:16", "int8:16", "binary:16>float32:16"] {
                let _ = idx.search(&q, &Funnel::parse(f).unwrap(), 5);
            }
            for r in 0..idx.len() { let _ = idx.payload(r); let _ = idx.id(r); }
        }
    }

    #[test]
    fn arbitrary_funnel_text_never_panics(s in ".{0,40}") {
        let _ = Funnel::parse(&s);
    }
}

/// A rebuild over an index a server added documents to (its journal) drops none of them
/// without a choice: refused, kept (but those the new build holds), or dropped; kept only when
/// the new build embeds as the old one did.
#[test]
fn a_rebuild_keeps_drops_or_refuses_the_added_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let lv = levels("float32:16,binary:16");
    let source = serde_json::json!({"model": "m", "layer": 6, "max_length": 128});
    let v = |i: usize| -> Vec<f32> {
        (0..16)
            .map(|j| ((i * 7 + j * 3) % 11) as f32 - 5.0)
            .collect()
    };
    let rebuild = |ids: &[&str], source: &Value, keep: Option<bool>| {
        let mut b = IndexBuilder::create(&out, 16, &lv, false, source.clone(), true).unwrap();
        if let Some(k) = keep {
            b.keep_added(k)?;
        }
        for (i, id) in ids.iter().enumerate() {
            b.push(id, None, &v(i)).unwrap();
        }
        b.finish()
    };
    let mut b = IndexBuilder::create(&out, 16, &lv, false, source.clone(), false).unwrap();
    b.push("a", None, &v(0)).unwrap();
    b.finish().unwrap();
    let rows = |ids: &[&str]| -> Vec<nest_index::collection::NewRow> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| nest_index::collection::NewRow {
                id: id.to_string(),
                payload: Some(serde_json::json!({"i": i})),
                vector: v(10 + i),
            })
            .collect()
    };
    use nest_index::collection::Existing;
    {
        // added x and y, then x replaced and the built a deleted
        let c = nest_index::Collection::open(&out).unwrap();
        c.add(rows(&["x", "y"]), Existing::Keep).unwrap();
        let mut x = rows(&["x"]);
        x[0].payload = Some(serde_json::json!({"i": 5}));
        x[0].vector = v(20);
        assert_eq!(c.add(x, Existing::Replace).unwrap().replaced, ["x"]);
        assert_eq!(c.delete(&["a".to_string()]).unwrap().deleted, ["a"]);
        assert_eq!(c.len(), 2);
    }
    assert_eq!(nest_index::rebuild::added_rows(&out), 3);
    let journal = || std::fs::read(out.join("added.jsonl")).unwrap();
    let before = journal();
    // no choice: refused at finish, the old index and its journal as they were
    let e = rebuild(&["a", "b"], &source, None).unwrap_err().to_string();
    assert!(
        e.contains("3 documents added, replaced or deleted") && e.contains("--keep-added"),
        "{e}"
    );
    assert!(journal() == before && Index::open(&out).unwrap().len() == 1);
    // kept only when embedded at the same point
    let other = serde_json::json!({"model": "m", "layer": 3, "max_length": 128});
    let e = rebuild(&["a"], &other, Some(true)).unwrap_err().to_string();
    assert!(
        e.contains("layer 6 -> 3") && e.contains("--drop-added"),
        "{e}"
    );
    // kept: the input has the last word on its ids ("y" replaces the added one, the deleted
    // "a" is back); "x" is searched as last replaced, from a journal of one put
    rebuild(&["a", "y"], &source, Some(true)).unwrap();
    let c = nest_index::Collection::open(&out).unwrap();
    assert_eq!((c.index().len(), c.len()), (2, 3));
    let hits = c.search(&[v(20)], &Funnel::exact(16), 1, None).unwrap();
    assert_eq!(hits[0][0].id, "x");
    assert_eq!(hits[0][0].payload, Some(serde_json::json!({"i": 5})));
    assert_eq!(String::from_utf8(journal()).unwrap().lines().count(), 1);
    assert_eq!(nest_index::rebuild::added_rows(&out), 1);
    drop(c);
    // dropped
    rebuild(&["a"], &source, Some(false)).unwrap();
    assert_eq!(nest_index::rebuild::added_rows(&out), 0);
    assert_eq!(nest_index::Collection::open(&out).unwrap().len(), 1);
}
