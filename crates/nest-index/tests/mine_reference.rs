//! Hard-negative mining against an independent brute-force numpy reference of
//! sentence-transformers 6.2.0's `mine_hard_negatives` (`tests/reference/mine_reference.py`,
//! fixture `tests/fixtures/mine_reference.json`; the script also checked the reference against
//! ST's own function on the same vectors): the same corpus deduplication, windows, ranks,
//! margins, score bounds, scores (1e-5), output rows of every format, refused option sets, and
//! for `random` sampling draws of the recorded size from the recorded window, seeded.

use nest_index::mine::{self, MineOptions, MineSet, OutputFormat, QueryRows, Sampling};
use nest_index::{Level, MemoryLevel, Precision};
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/mine_reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn rows_f32(v: &Value) -> Vec<Vec<f32>> {
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

fn opt_f32(o: &Value, k: &str) -> Option<f32> {
    o[k].as_f64().map(|x| x as f32)
}

/// The fixture's options as `nest mine`'s; `None` where the CLI refuses them before (a negative
/// --range-min does not parse as a count).
fn options(o: &Value, seed: u64) -> Option<MineOptions> {
    Some(MineOptions {
        num_negatives: o["num_negatives"].as_u64().unwrap() as usize,
        range_min: usize::try_from(o["range_min"].as_i64().unwrap()).ok()?,
        range_max: o["range_max"].as_u64().map(|x| x as usize),
        min_score: opt_f32(o, "min_score"),
        max_score: opt_f32(o, "max_score"),
        absolute_margin: opt_f32(o, "absolute_margin"),
        relative_margin: opt_f32(o, "relative_margin"),
        sampling: Sampling::parse(o["sampling_strategy"].as_str().unwrap()).unwrap(),
        include_positives: o["include_positives"].as_bool().unwrap(),
        seed,
    })
}

struct Data {
    set: MineSet,
    corpus: MemoryLevel,
    queries: Vec<nest_index::level::Prepared>,
}

/// The texts ST was given (c0..c28 with c5 twice, c29 missing: a positive ST appends) through
/// [`MineSet`], and the fixture's vectors for them.
fn data(f: &Value) -> Data {
    let (qv, cv) = (rows_f32(&f["queries"]), rows_f32(&f["corpus"]));
    let pairs: Vec<(String, String)> = f["dataset_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (format!("q{}", r["query"]), format!("c{}", r["positive"])))
        .collect();
    let mut given: Vec<String> = (0..29).map(|i| format!("c{i}")).collect();
    given.insert(11, "c5".into());
    let set = MineSet::new(&pairs, Some(&given));
    let want: Vec<String> = (0..cv.len()).map(|i| format!("c{i}")).collect();
    assert_eq!(set.corpus, want, "dict.fromkeys(corpus + positives)");
    assert_eq!((set.duplicate_corpus, set.positives_added), (1, 1));
    let mut corpus = MemoryLevel::new(Level {
        precision: Precision::Float32,
        dim: f["dim"].as_u64().unwrap() as usize,
    });
    for t in &set.corpus {
        corpus.push(&cv[t[1..].parse::<usize>().unwrap()]).unwrap();
    }
    let queries = set
        .queries
        .iter()
        .map(|t| corpus.prepare(&qv[t[1..].parse::<usize>().unwrap()]))
        .collect();
    Data {
        set,
        corpus,
        queries,
    }
}

fn idx(t: &str) -> u64 {
    t[1..].parse().unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5
}

#[test]
fn every_option_set_matches_the_reference() {
    let f = fixture();
    let d = data(&f);
    for (name, want) in f["option_sets"].as_object().unwrap() {
        let o = options(&want["options"], 0).unwrap();
        let w = o.window(d.set.max_positives()).unwrap();
        assert_eq!(
            d.set.max_positives() as u64,
            want["max_positives"].as_u64().unwrap()
        );
        assert_eq!(
            w.range_max as u64,
            want["range_max"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            w.retrieve as u64,
            want["retrieve"].as_u64().unwrap(),
            "{name}"
        );
        for seed in [0u64, 1, 2, 3, 4] {
            let o = MineOptions { seed, ..o.clone() };
            let mined = mine::mine_queries(&d.corpus, &d.queries, 0, &d.set.positives, &o, w);
            for (m, e) in mined.iter().zip(want["per_query"].as_array().unwrap()) {
                let ps = e["positive_scores"].as_array().unwrap();
                assert!(m
                    .positive_scores
                    .iter()
                    .zip(ps)
                    .all(|(a, b)| close(*a as f64, b.as_f64().unwrap())));
                let got: Vec<u64> = m.picked.negatives.iter().map(|n| n.0 as u64).collect();
                if let Some(negs) = e.get("negatives") {
                    let negs: Vec<u64> = negs
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect();
                    assert_eq!(got, negs, "{name}, query {}", e["query"]);
                    let ns = e["negative_scores"].as_array().unwrap();
                    assert!(m
                        .picked
                        .negatives
                        .iter()
                        .zip(ns)
                        .all(|(a, b)| close(a.1 as f64, b.as_f64().unwrap())));
                } else {
                    let win: Vec<u64> = e["window"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect();
                    assert_eq!(
                        got.len() as u64,
                        e["count"].as_u64().unwrap(),
                        "{name} seed {seed}"
                    );
                    assert!(
                        got.iter().all(|g| win.contains(g)),
                        "{name}: {got:?} outside {win:?}"
                    );
                    let s: Vec<f32> = m.picked.negatives.iter().map(|n| n.1).collect();
                    assert!(s.windows(2).all(|x| x[0] >= x[1]), "best first");
                }
            }
            if let Some(formats) = want.get("formats") {
                check_formats(name, &d, &mined, formats, o.num_negatives);
            }
        }
    }
}

/// Each format's rows, keyed back to the fixture's indices.
fn check_formats(name: &str, d: &Data, mined: &[mine::Mined], formats: &Value, n: usize) {
    for (fname, want) in formats.as_object().unwrap() {
        let fmt = OutputFormat::parse(fname).unwrap();
        let mut text = String::new();
        for (q, m) in mined.iter().enumerate() {
            let pos: Vec<(&str, f32)> = d.set.positives[q]
                .iter()
                .zip(&m.positive_scores)
                .map(|(&r, &s)| (d.set.corpus[r as usize].as_str(), s))
                .collect();
            let neg: Vec<(&str, f32)> = m
                .picked
                .negatives
                .iter()
                .map(|&(r, s)| (d.set.corpus[r as usize].as_str(), s))
                .collect();
            let qr = QueryRows {
                anchor: &d.set.queries[q],
                positives: &pos,
                negatives: &neg,
                num_negatives: n,
            };
            mine::write_rows(fmt, true, &qr, &mut text);
        }
        let got: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let want = want.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name} {fname}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(
                idx(g["anchor"].as_str().unwrap()),
                w["query"].as_u64().unwrap()
            );
            let scores = |v: &Value| -> Vec<f64> {
                match v {
                    Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap()).collect(),
                    x => vec![x.as_f64().unwrap()],
                }
            };
            let (gs, ws) = match fmt {
                OutputFormat::LabeledPair => (scores(&g["score"]), scores(&w["score"])),
                _ => (scores(&g["scores"]), scores(&w["scores"])),
            };
            assert!(
                gs.iter().zip(&ws).all(|(a, b)| close(*a, *b)) && gs.len() == ws.len(),
                "{name} {fname}"
            );
            let docs = |keys: &[&str]| -> Vec<u64> {
                keys.iter().map(|k| idx(g[*k].as_str().unwrap())).collect()
            };
            match fmt {
                OutputFormat::Triplet => {
                    assert_eq!(
                        docs(&["positive", "negative"]),
                        [
                            w["positive"].as_u64().unwrap(),
                            w["negative"].as_u64().unwrap()
                        ]
                    );
                }
                OutputFormat::NTuple => {
                    let mut want_docs = vec![w["positive"].as_u64().unwrap()];
                    want_docs.extend(
                        w["negatives"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_u64().unwrap()),
                    );
                    let keys: Vec<String> = (1..want_docs.len())
                        .map(|i| format!("negative_{i}"))
                        .collect();
                    let mut all = vec!["positive"];
                    all.extend(keys.iter().map(String::as_str));
                    assert_eq!(docs(&all), want_docs, "{name} n-tuple");
                }
                OutputFormat::LabeledPair => {
                    assert_eq!(docs(&["positive"]), [w["doc"].as_u64().unwrap()])
                }
                OutputFormat::LabeledList => {
                    let got_docs: Vec<u64> = g["positive"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| idx(t.as_str().unwrap()))
                        .collect();
                    let want_docs: Vec<u64> = w["docs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect();
                    assert_eq!(got_docs, want_docs, "{name} labeled-list");
                }
            }
        }
    }
}

#[test]
fn refused_option_sets_are_refused() {
    let f = fixture();
    for (name, o) in f["invalid_option_sets"].as_object().unwrap() {
        match options(o, 0) {
            None => assert!(o["range_min"].as_i64().unwrap() < 0, "{name}"),
            Some(o) => assert!(o.window(2).is_err(), "{name} accepted"),
        }
    }
}
