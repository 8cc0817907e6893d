//! nest-compress against independent computations (fixtures from tests/reference/smec.py and
//! tests/reference/adaptor_numpy.py), and its guarantees: seeded Gumbel draws, the FIFO memory,
//! frozen stages bit for bit, bad input named.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use nest_compress::ads::{achievement_rate, ware, Ads};
use nest_compress::data::{read_embeddings, read_qrels, split, EmbeddingCache, Embeddings, Qrels};
use nest_compress::loss::{cos_rows, pairwise_gap, rank_loss, similarity_gap};
use nest_compress::memory::Memory;
use nest_compress::method::{check_dims, Method, Options};
use nest_compress::run::{compress, Inputs};
use nest_model::Adaptor;
use tch::{Kind, Tensor};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/compress")
}

fn fixture(name: &str) -> HashMap<String, Tensor> {
    Tensor::read_safetensors(fixtures().join(name))
        .unwrap()
        .into_iter()
        .collect()
}

fn f(t: &Tensor) -> f64 {
    f64::try_from(t.to_kind(Kind::Double)).unwrap()
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1e-12),
        "{what}: got {got}, want {want}"
    );
}

/// The tests share libtorch's global RNG.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn losses_match_pytorch() {
    // tolerance 1e-5 relative: Nest sums in float32, the reference in float64
    let x = fixture("smec.safetensors");
    for scale in [1.0, 10.0] {
        let got = f(&rank_loss(&x["q"], &x["d"], &x["rel"], scale));
        close(
            got,
            f(&x[&format!("rank_{}", scale as i64)]),
            1e-5,
            "rank loss (eq. 8)",
        );
    }
    let (items, y, w) = (&x["x"], &x["y"], &x["w"]);
    let frozen = cos_rows(&items.unsqueeze(1).expand_as(y), y);
    let (ci, cy) = (items.matmul(&w.tr()), y.matmul(&w.tr()));
    let comp = cos_rows(&ci.unsqueeze(1).expand_as(&cy), &cy);
    close(
        f(&similarity_gap(&frozen, &comp)),
        f(&x["gap"]),
        1e-5,
        "similarity gap (eq. 7)",
    );
    close(
        f(&pairwise_gap(items, &ci)),
        f(&x["pairwise"]),
        1e-5,
        "pairwise term",
    );
    // WARE in float64: 1e-9
    let got = ware(&x["ware_a"], &x["ware_b"]);
    let want = &x["ware"];
    let diff = f(&(got - want).abs().max());
    assert!(diff < 1e-9 * f(&want.abs().max()), "WARE differs by {diff}");
}

#[test]
fn pca_matches_scikit_learn() {
    let x = fixture("smec.safetensors");
    let (w, b) = nest_compress::pca::fit(&x["pca_x"]);
    let comp = x["pca_components"].to_kind(Kind::Float);
    // each axis equal up to sign: |<w_i, c_i>| = 1 (1e-4, float32)
    let dots = (&w * &comp)
        .sum_dim_intlist([1i64].as_slice(), false, Kind::Double)
        .abs();
    let worst = f(&(dots - 1.0).abs().max());
    assert!(
        worst < 1e-4,
        "PCA axes differ from scikit-learn's by {worst}"
    );
    let want_b = -w.to_kind(Kind::Double).matmul(&x["pca_mean"]);
    assert!(f(&(b.to_kind(Kind::Double) - want_b).abs().max()) < 1e-4);
}

#[test]
fn the_numpy_recipe_equals_apply() {
    // the adaptor written by Python from the documented format, applied by the documented numpy
    // recipe; Nest reads the same directory (1e-6 absolute, float32)
    let a = Adaptor::load(&fixtures().join("adaptor")).unwrap();
    let r = fixture("recipe.safetensors");
    for d in [12, 6, 3, 4] {
        let got = a.apply(&r["x"], d).unwrap();
        let diff = f(&(got - &r[&format!("y{d}")]).abs().max());
        assert!(diff < 1e-6, "dim {d}: {diff}");
    }
    assert_eq!(a.dims(), vec![3, 4, 6, 12]);
    let e = a.apply(&r["x"], 5).unwrap_err().to_string();
    assert!(e.contains("serves dims [3, 4, 6, 12], not 5"), "{e}");
}

/// `soft`: the kept dims carry their Gumbel-softmax probabilities (the same draw as the
/// straight-through path, so the same dims), and the gradient reaches the logits.
#[test]
fn soft_ads_weights_are_the_gumbel_softmax_probabilities() {
    let _g = serial();
    let st = Ads::new(16, 4, 0.7);
    let soft = Ads {
        soft: true,
        ..Ads::new(16, 4, 0.7)
    };
    tch::manual_seed(5);
    let (i_st, w_st) = st.sample(None);
    tch::manual_seed(5);
    let (i_soft, w_soft) = soft.sample(None);
    assert!(
        i_st.equal(&i_soft),
        "the same noise must keep the same dims"
    );
    assert!(f(&(&w_st - 1.0).abs().max()) < 1e-6);
    let (lo, total) = (f(&w_soft.min()), f(&w_soft.sum(Kind::Float)));
    assert!(
        lo > 0.0 && total < 1.0 + 1e-6,
        "probabilities: min {lo}, sum {total}"
    );
    w_soft.sum(Kind::Float).backward();
    let g = soft.logits.grad();
    assert!(f(&g.abs().max()) > 0.0, "no gradient reached the logits");
}

#[test]
fn gumbel_draws_are_seeded() {
    let _g = serial();
    let a = Ads::new(32, 8, 1.0);
    let draw = |seed: i64| {
        tch::manual_seed(seed);
        Vec::<i64>::try_from(a.sample(None).0).unwrap()
    };
    assert_eq!(draw(3), draw(3));
    assert!(
        (0..5).any(|s| draw(s) != draw(3)),
        "different seeds always drew the same dims"
    );
    // strong logits win over the noise, and the inference choice takes the top logits
    let strong = Ads::new(32, 4, 0.5);
    tch::no_grad(|| {
        let _ =
            strong
                .logits
                .detach()
                .index_fill_(0, &Tensor::from_slice(&[3i64, 9, 20, 31]), 50.0);
    });
    assert_eq!(
        Vec::<i64>::try_from(strong.select(None)).unwrap(),
        vec![3, 9, 20, 31]
    );
    tch::manual_seed(1);
    let (idx, w) = strong.sample(None);
    assert_eq!(Vec::<i64>::try_from(idx).unwrap(), vec![3, 9, 20, 31]);
    // straight-through: value 1, gradient reaches the logits
    assert!(f(&(&w - 1.0).abs().max()) < 1e-6);
    w.sum(Kind::Float).backward();
    assert!(strong.logits.grad().defined());
    // a nested level only picks among its parent's dims
    let allowed = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6]);
    let child = Ads::new(32, 3, 1.0);
    tch::manual_seed(2);
    let got: Vec<i64> = Vec::try_from(child.sample(Some(&allowed)).0).unwrap();
    assert!(got.iter().all(|i| (1..=6).contains(i)), "{got:?}");
    assert_eq!(
        achievement_rate(&Tensor::from_slice(&[0.1f64, 5.0, 0.2, 4.0]), &[1, 3]),
        1.0
    );
}

#[test]
fn the_memory_is_a_fifo() {
    let row = |v: f32| Tensor::from_slice(&[v, 1.0]).view([1, 2]);
    let mut m = Memory::new(3, 2);
    assert!(m.neighbours(&row(1.0), 2).is_none());
    for v in [1.0, 2.0] {
        m.push(&row(v));
    }
    assert_eq!(m.len(), 2);
    m.push(&Tensor::cat(&[row(3.0), row(4.0)], 0));
    let firsts = |m: &Memory| Vec::<f32>::try_from(m.contents().select(1, 0)).unwrap();
    assert_eq!(
        firsts(&m),
        vec![2.0, 3.0, 4.0],
        "oldest evicted first, order kept"
    );
    let five: Vec<Tensor> = (5..10).map(|v| row(v as f32)).collect();
    m.push(&Tensor::cat(&five, 0));
    assert_eq!(
        firsts(&m),
        vec![7.0, 8.0, 9.0],
        "a push larger than the memory keeps its last rows"
    );
    // neighbours: the item itself (same vector) is skipped
    let (vecs, sims) = m.neighbours(&row(8.0), 1).unwrap();
    assert_eq!(vecs.size(), vec![1, 1, 2]);
    assert!(f(&sims.max()) < 1.0 - 1e-6);
    assert_ne!(f(&vecs.get(0).get(0).get(0)), 8.0);
}

/// A synthetic retrieval set: documents in `dim` dims, each query a noisy copy of its document.
fn synthetic(dim: i64) -> Inputs {
    tch::manual_seed(0);
    let docs = Tensor::randn([120, dim], (Kind::Float, tch::Device::Cpu));
    let qrows: Vec<i64> = (0..90).collect();
    let q = docs.index_select(0, &Tensor::from_slice(&qrows))
        + Tensor::randn([90, dim], (Kind::Float, tch::Device::Cpu)) * 0.8;
    let corpus = Embeddings {
        ids: (0..120).map(|i| format!("d{i}")).collect(),
        x: docs,
    };
    let queries = Embeddings {
        ids: (0..90).map(|i| format!("q{i}")).collect(),
        x: q,
    };
    let mut train = Qrels::new();
    let mut test = Qrels::new();
    for i in 0..90 {
        let target = if i < 60 { &mut train } else { &mut test };
        target.insert(format!("q{i}"), HashMap::from([(format!("d{i}"), 1)]));
    }
    Inputs {
        corpus,
        queries,
        train,
        test: Some(test),
        val_fraction: 0.25,
        source: serde_json::json!({}),
    }
    .normalized()
    .unwrap()
}

fn opts() -> Options {
    Options {
        epochs: 4,
        patience: Some(2),
        batch_size: 8,
        hard_negatives: 4,
        neighbours: 3,
        memory_size: 50,
        ..Options::default()
    }
}

#[test]
fn frozen_stages_stay_bit_for_bit() {
    let _g = serial();
    let inp = synthetic(16);
    let one = compress(&inp, Method::Smec, &[16, 8], &opts(), None, &mut |_| {}).unwrap();
    let two = compress(&inp, Method::Smec, &[16, 8, 4], &opts(), None, &mut |_| {}).unwrap();
    let rows = |a: &Adaptor, from: i64, n: i64| a.heads[0].0.narrow(0, from, n).copy();
    // stage 0 is the same run in both; stage 1 must not touch rows [8, 16)
    assert!(
        rows(&one, 8, 8).equal(&rows(&two, 8, 8)),
        "a later stage changed a frozen stage's rows"
    );
    assert!(
        !rows(&one, 0, 8).equal(&rows(&two, 0, 8)),
        "stage 1 trained nothing"
    );
    // a resume continues from the saved adaptor and leaves its frozen rows as they were
    let resumed = compress(
        &inp,
        Method::Smec,
        &[8, 4],
        &opts(),
        Some(&one),
        &mut |_| {},
    )
    .unwrap();
    assert!(rows(&one, 8, 8).equal(&rows(&resumed, 8, 8)));
    assert_eq!(resumed.dims(), vec![4, 8, 16]);
    // reproducible: the same inputs and seed give the same adaptor
    let again = compress(&inp, Method::Smec, &[16, 8, 4], &opts(), None, &mut |_| {}).unwrap();
    assert!(two.heads[0].0.equal(&again.heads[0].0));
}

#[test]
fn every_method_trains_and_beats_nothing_on_synthetic_data() {
    let _g = serial();
    let inp = synthetic(16);
    let test = inp.test.clone().unwrap();
    let base = |d| {
        nest_compress::eval::retrieval(None, &inp.corpus, &inp.queries, &test, d)
            .unwrap()
            .ndcg_at_10
    };
    for (name, m) in nest_compress::method::ALL {
        let a = compress(&inp, m, &[16, 8, 4], &opts(), None, &mut |_| {}).unwrap();
        assert_eq!(a.dims(), vec![4, 8, 16], "{name}");
        let info = &a.meta.info;
        let t4 = info["test_ndcg_at_10"]["4"].as_f64().unwrap();
        assert!(t4.is_finite() && t4 > 0.0, "{name}: {t4}");
        if name == "truncate" {
            close(t4, base(4), 1e-9, "truncation equals the plain prefix");
        }
        // the baseline beside each adaptor's score (helper trial C, U9: none was printed)
        let b4 = info["truncated_test_ndcg_at_10"]["4"].as_f64().unwrap();
        close(
            b4,
            base(4),
            1e-12,
            "the recorded baseline is the plain prefix's",
        );
        if m.trains() {
            assert!(!info["history"].as_array().unwrap().is_empty(), "{name}");
        }
    }
}

#[test]
fn bad_input_is_named() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let m = ndarray::Array2::<f32>::from_shape_fn((4, 3), |(i, j)| (i + j) as f32);
    ndarray_npy::write_npy(p("c.npy"), &m).unwrap();
    let q2 = ndarray::Array2::<f32>::from_shape_fn((2, 3), |(i, j)| (i * j) as f32 + 0.5);
    ndarray_npy::write_npy(p("q.npy"), &q2).unwrap();
    std::fs::write(p("ids.txt"), "a\nb\nc\n").unwrap();
    let e = read_embeddings(&p("c.npy"), Some(&p("ids.txt")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ids.txt") && e.contains("3 ids") && e.contains("4 rows"),
        "{e}"
    );
    let c = read_embeddings(&p("c.npy"), None).unwrap();
    let q = read_embeddings(&p("q.npy"), None).unwrap();
    std::fs::write(
        p("qrels.tsv"),
        "query-id\tcorpus-id\tscore\n0\t1\t1\n1\t9\t1\n",
    )
    .unwrap();
    let e = read_qrels(&p("qrels.tsv"), &q, &c).unwrap_err().to_string();
    assert!(
        e.contains("qrels.tsv") && e.contains("line 3") && e.contains("corpus id '9'"),
        "{e}"
    );
    // without an ids file the ids are row numbers, and the message says so (new-user #81)
    assert!(
        e.contains("without --corpus-ids the ids are the row numbers 0..3"),
        "{e}"
    );
    std::fs::write(p("qrels.tsv"), "query-id\tcorpus-id\tscore\n7\t1\t1\n").unwrap();
    let e = read_qrels(&p("qrels.tsv"), &q, &c).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("query id '7'"), "{e}");
    assert!(e.contains("--query-ids FILE"), "{e}");
    // with an ids file, no such hint
    std::fs::write(p("ids4.txt"), "a\nb\nc\nd\n").unwrap();
    let c4 = read_embeddings(&p("c.npy"), Some(&p("ids4.txt"))).unwrap();
    std::fs::write(p("qrels.tsv"), "query-id\tcorpus-id\tscore\n0\tz\t1\n").unwrap();
    let e = read_qrels(&p("qrels.tsv"), &q, &c4)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("corpus id 'z'") && !e.contains("row numbers"),
        "{e}"
    );
    let e = check_dims(&[3, 8], 3, Method::Pca).unwrap_err().to_string();
    assert!(e.contains("decreasing") || e.contains("larger"), "{e}");
    let e = check_dims(&[384, 200, 100], 384, Method::Smec)
        .unwrap_err()
        .to_string();
    assert!(e.contains("384 -> 200 is not a halving"), "{e}");
    let e = check_dims(&[768], 384, Method::Mrl)
        .unwrap_err()
        .to_string();
    assert!(e.contains("768 is larger than the embeddings' 384"), "{e}");
    assert!(check_dims(&[384, 200, 100], 384, Method::Mrl).is_ok());
    std::fs::write(p("bad.npy"), b"not numpy").unwrap();
    let e = read_embeddings(&p("bad.npy"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.npy") && e.contains("no NumPy header in its 9 bytes"),
        "{e}"
    );
    // an empty file and a 1-D array say what they are (helper trial E: "failed to fill whole
    // buffer", and the dtype named for a 1-D float32 array)
    std::fs::write(p("empty.npy"), b"").unwrap();
    let e = read_embeddings(&p("empty.npy"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no NumPy header in its 0 bytes"), "{e}");
    ndarray_npy::write_npy(p("one.npy"), &ndarray::Array1::<f32>::zeros(5)).unwrap();
    let e = read_embeddings(&p("one.npy"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("holds a 1-D array (shape (5,)): expected a 2-D"),
        "{e}"
    );
    let e = Method::parse("smek").unwrap_err().to_string();
    assert!(e.contains("smec, mrl"), "{e}");
}

#[test]
fn the_embedding_cache_detects_damage() {
    let _g = serial(); // draws from libtorch's global RNG
    let d = tempfile::tempdir().unwrap();
    let c = EmbeddingCache {
        dir: d.path().to_path_buf(),
    };
    let e = |n: i64| Embeddings {
        ids: (0..n).map(|i| i.to_string()).collect(),
        x: Tensor::randn([n, 4], (Kind::Float, tch::Device::Cpu)),
    };
    let (corpus, queries) = (e(5), e(3));
    assert!(c.get("k").is_none(), "miss");
    c.put("k", &corpus, &queries).unwrap();
    let (hc, hq) = c.get("k").expect("hit");
    assert!(hc.x.equal(&corpus.x) && hq.x.equal(&queries.x) && hc.ids == corpus.ids);
    let st = d.path().join("k.safetensors");
    let mut bytes = std::fs::read(&st).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    std::fs::write(&st, &bytes).unwrap();
    assert!(
        c.get("k").is_none(),
        "a flipped byte is a miss, not garbage"
    );
    std::fs::write(&st, &bytes[..n / 2]).unwrap();
    assert!(c.get("k").is_none(), "a truncated file is a miss");
    c.put("k", &corpus, &queries).unwrap();
    assert!(c.get("k").is_some(), "rebuilt");
}

#[test]
fn split_is_seeded_and_disjoint() {
    let q: Qrels = (0..50)
        .map(|i| (format!("q{i}"), HashMap::from([("d".to_string(), 1)])))
        .collect::<BTreeMap<_, _>>();
    let (a, b) = split(&q, 0.2, 1);
    assert_eq!((a.len(), b.len()), (40, 10));
    assert!(a.keys().all(|k| !b.contains_key(k)));
    assert_eq!(
        split(&q, 0.2, 1).1.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>()
    );
}
