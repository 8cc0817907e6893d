//! `nest bench search`: recall relative to exact search and QPS of funnels, in Nest's index
//! and in pgvector; in-process search at batch 1 (`--end-to-end`), and paired with a server's
//! `POST /v1/search` (`--paired-url`).

use std::time::Instant;

use anyhow::{Context, Result};
use nest_index::{Funnel, Index, IndexBuilder};
use tch::{Kind, Tensor};

use crate::args_search::BenchSearchArgs;

/// Recall of `got` against `want` (ids of the exact top-k), averaged over queries.
fn recall(got: &[Vec<u32>], want: &[Vec<u32>]) -> f64 {
    let mut s = 0.0;
    for (g, w) in got.iter().zip(want) {
        let hit = g.iter().filter(|r| w.contains(r)).count();
        s += hit as f64 / w.len().max(1) as f64;
    }
    s / want.len().max(1) as f64
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed().as_secs_f64()))
}

/// Writes `n` Gaussian vectors with `idx`'s full-dim float32 mean and covariance.
fn synthesize(idx: &Index, n: usize, out: &std::path::Path) -> Result<()> {
    let d = idx.full_dim();
    let full = nest_index::Level {
        precision: nest_index::Precision::Float32,
        dim: d,
    };
    let rows: Vec<f32> = (0..idx.len())
        .flat_map(|r| idx.vector(full, r).unwrap_or(&[]).to_vec())
        .collect();
    anyhow::ensure!(
        rows.len() == idx.len() * d,
        "the index needs its full float32 level ({full})"
    );
    let x = Tensor::from_slice(&rows)
        .view([idx.len() as i64, d as i64])
        .to_kind(Kind::Double);
    let mu = x.mean_dim(0, false, Kind::Double);
    let xc = &x - &mu;
    let cov = xc.tr().matmul(&xc) / (idx.len() as f64 - 1.0)
        + Tensor::eye(d as i64, (Kind::Double, tch::Device::Cpu)) * 1e-6;
    let l = cov.linalg_cholesky(false);
    tch::manual_seed(42);
    let levels = idx.levels();
    let source = serde_json::json!({"synthetic": {"like": idx.dir().display().to_string(), "count": n, "seed": 42,
        "law": "Gaussian with the source index's mean and covariance (full-dim float32 rows)"},
        "model": idx.manifest().source.get("model"), "layer": idx.manifest().source.get("layer")});
    let mut b = IndexBuilder::create(out, d, &levels, false, source, true)?;
    let chunk = 65536usize;
    let mut done = 0;
    while done < n {
        let m = chunk.min(n - done);
        let z = Tensor::randn([m as i64, d as i64], (Kind::Double, tch::Device::Cpu));
        let y = (z.matmul(&l.tr()) + &mu).to_kind(Kind::Float);
        let flat = nest_model::pooling::to_vec_f32(&y);
        for i in 0..m {
            b.push(&format!("s{}", done + i), None, &flat[i * d..(i + 1) * d])?;
        }
        done += m;
        eprintln!("synthetic: {done}/{n}");
    }
    b.finish()?;
    Ok(())
}

pub fn search(a: BenchSearchArgs) -> Result<()> {
    let idx = Index::open(&a.index)?;
    let BenchQueries {
        texts,
        vectors: q,
        model,
        layer,
    } = bench_queries(&idx, &a)?;
    let d = q.first().map_or(0, Vec::len);
    eprintln!("{} queries, index of {} vectors", q.len(), idx.len());
    eprintln!("machine: {}", nest_model::machine::Machine::here());
    let funnels: Vec<Funnel> = a
        .funnels
        .split(';')
        .filter(|s| !s.trim().is_empty())
        .map(Funnel::parse)
        .collect::<Result<_, _>>()?;
    let mut targets = vec![(a.index.clone(), "real")];
    if let Some(n) = a.synthetic {
        let out = a
            .synthetic_out
            .clone()
            .context("--synthetic needs --synthetic-out")?;
        let fresh = Index::open(&out).map(|i| i.len() == n).unwrap_or(false);
        if !fresh {
            synthesize(&idx, n, &out)?;
        }
        targets.push((out, "synthetic"));
    }
    if a.end_to_end {
        end_to_end(&idx, &model, layer, &texts, &funnels, a.k)?;
        if let Some(url) = &a.paired_url {
            let job = nest_bench::paired::Paired {
                idx: &idx,
                model: &model,
                layer,
                k: a.k,
            };
            for f in job.run(&texts, &funnels, url, a.client_cpu)? {
                println!("{}", serde_json::to_string(&f)?);
            }
        }
    }
    for (path, kind) in targets {
        let ix = Index::open(&path)?;
        let want = bench_funnels(&ix, kind, &q, &funnels, a.k, d)?;
        if a.kernels {
            kernels(&ix)?;
        }
        if let (Some(dsn), "real") = (&a.dsn, kind) {
            bench_pgvector(&ix, dsn, &a.table, &q, &funnels, a.k, &want)?;
        }
    }
    Ok(())
}

/// In-process search at batch 1, what `POST /v1/search` does without HTTP: each query
/// embedded alone (tokenised, one forward pass), then the funnel; queries per second, latency
/// percentiles, and the mean time of each part (embedding, search).
fn end_to_end(
    idx: &Index,
    model: &nest_model::ElasticEncoder,
    layer: usize,
    texts: &[String],
    funnels: &[Funnel],
    k: usize,
) -> Result<()> {
    let d = model.output_dim();
    let exact = Funnel::exact(idx.full_dim());
    for f in std::iter::once(&exact).chain(funnels) {
        let mut lat = Vec::with_capacity(texts.len());
        let (mut embed_s, mut search_s) = (0.0, 0.0);
        let t0 = Instant::now();
        for t in texts {
            let t1 = Instant::now();
            let pooled =
                model.embed_layers(&[t.as_str()], &[layer], Default::default(), &mut |_| {})?;
            let v = nest_model::pooling::to_vec_f32(&pooled[0]);
            let t2 = Instant::now();
            idx.search(&[v[..d].to_vec()], f, k)?;
            embed_s += (t2 - t1).as_secs_f64();
            search_s += t2.elapsed().as_secs_f64();
            lat.push(t1.elapsed().as_secs_f64() * 1e3);
        }
        let secs = t0.elapsed().as_secs_f64();
        let n = texts.len() as f64;
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
        println!(
            "{}",
            serde_json::json!({"data": "end-to-end", "batch": 1, "queries": texts.len(), "funnel": f.to_string(), "qps": texts.len() as f64 / secs, "p50_ms": pct(0.5), "p99_ms": pct(0.99), "embed_ms_mean": 1e3 * embed_s / n, "search_ms_mean": 1e3 * search_s / n})
        );
    }
    Ok(())
}

/// The benchmark's queries as texts and as vectors, and the model and layer that embedded them.
struct BenchQueries {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
    model: nest_model::ElasticEncoder,
    layer: usize,
}

/// The queries, embedded with the model and layer the index records: every non-empty line of
/// `--queries`, deduplicated, a seeded subset of `--max-queries` when there are more.
fn bench_queries(idx: &Index, a: &BenchSearchArgs) -> Result<BenchQueries> {
    let source = idx.manifest().source.clone();
    let model_name = source
        .get("model")
        .and_then(|m| m.as_str())
        .context("the index records no model")?;
    let model = super::load_model_path(model_name, None)?;
    let layer = source
        .get("layer")
        .and_then(|l| l.as_u64())
        .map_or(model.num_layers(), |l| l as usize);
    let mut texts = Vec::new();
    for p in &a.queries {
        texts.extend(
            nest_core::data::read_sentences(p)?
                .into_iter()
                .filter(|t| !t.is_empty()),
        );
    }
    texts.sort();
    texts.dedup();
    if texts.len() > a.max_queries {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        texts.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(7));
        texts.truncate(a.max_queries);
    }
    anyhow::ensure!(!texts.is_empty(), "no queries: pass --queries FILE");
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = nest_model::EncodeOptions::default();
    let pooled = model.embed_layers(&refs, &[layer], opts, &mut |_| {})?;
    let d = model.output_dim();
    let vectors = nest_model::pooling::to_vec_f32(&pooled[0])
        .chunks(d)
        .map(<[f32]>::to_vec)
        .collect();
    Ok(BenchQueries {
        texts,
        vectors,
        model,
        layer,
    })
}

/// Exact search, then every funnel, on one index: one JSON line each (recall against exact,
/// queries per second). Returns the exact top-k rows.
fn bench_funnels(
    ix: &Index,
    kind: &str,
    q: &[Vec<f32>],
    funnels: &[Funnel],
    k: usize,
    d: usize,
) -> Result<Vec<Vec<u32>>> {
    timed(|| Ok(ix.search(&q[..1], &Funnel::exact(d), k).map(|_| ())?))?; // warm-up
    let (exact, t_exact) = timed(|| Ok(ix.search(q, &Funnel::exact(d), k)?))?;
    let rows = |hits: &[Vec<nest_index::Hit>]| -> Vec<Vec<u32>> {
        hits.iter()
            .map(|h| h.iter().map(|h| h.row).collect())
            .collect()
    };
    let want = rows(&exact);
    let qps_exact = q.len() as f64 / t_exact;
    println!(
        "{}",
        serde_json::json!({"data": kind, "vectors": ix.len(), "queries": q.len(), "funnel": format!("exact float32:{d}"), "recall": 1.0, "qps": qps_exact, "speedup": 1.0, "threads": rayon_threads()})
    );
    for f in funnels {
        let (hits, t) = timed(|| Ok(ix.search(q, f, k)?))?;
        let qps = q.len() as f64 / t;
        println!(
            "{}",
            serde_json::json!({"data": kind, "vectors": ix.len(), "queries": q.len(), "funnel": f.to_string(), "keeps": f.keeps(k), "recall": recall(&rows(&hits), &want), "qps": qps, "speedup": qps / qps_exact, "threads": rayon_threads()})
        );
    }
    Ok(want)
}

/// The same funnels in PostgreSQL + pgvector (the table `nest export pgvector` wrote), recall
/// against Nest's exact search.
fn bench_pgvector(
    ix: &Index,
    dsn: &str,
    table: &str,
    q: &[Vec<f32>],
    funnels: &[Funnel],
    k: usize,
    want: &[Vec<u32>],
) -> Result<()> {
    let d = q.first().map_or(0, Vec::len);
    let mut client = nest_index::pgvector::connect(dsn)?;
    let id_of: std::collections::HashMap<&str, u32> =
        (0..ix.len()).map(|r| (ix.id(r), r as u32)).collect();
    for f in std::iter::once(Funnel::exact(d)).chain(funnels.iter().cloned()) {
        let (hits, t) = timed(|| Ok(nest_index::pgvector::search(&mut client, table, q, &f, k)?))?;
        let got: Vec<Vec<u32>> = hits
            .iter()
            .map(|h| {
                h.iter()
                    .filter_map(|h| id_of.get(h.id.as_str()).copied())
                    .collect()
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"data": "real", "engine": "pgvector", "vectors": ix.len(), "queries": q.len(), "funnel": f.to_string(), "recall": recall(&got, want), "qps": q.len() as f64 / t, "ms_per_query": 1e3 * t / q.len() as f64})
        );
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One pass over every row of each level with the SIMD kernel and with the plain loop.
fn kernels(ix: &Index) -> Result<()> {
    use nest_index::kernels as k;
    use nest_index::reader::Rows;
    for level in ix.levels() {
        let dim = level.dim;
        let rows = ix.rows(level)?;
        let n = ix.len();
        let report = |name: &str, f: &dyn Fn() -> f64| {
            f(); // warm: page the map in
            let t = Instant::now();
            let s = f();
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"kernel": name, "level": level.to_string(), "rows": n, "ns_per_row": 1e9 * secs / n as f64, "checksum": s})
            );
        };
        match rows {
            Rows::Float32(v) => {
                let q = &v[..dim];
                report("simsimd", &|| {
                    (0..n)
                        .map(|r| k::dot_f32_simsimd(q, &v[r * dim..(r + 1) * dim]) as f64)
                        .sum()
                });
                report("plain", &|| {
                    (0..n)
                        .map(|r| k::plain::dot_f32(q, &v[r * dim..(r + 1) * dim]) as f64)
                        .sum()
                });
            }
            Rows::Int8(v, _) => {
                let q = &v[..dim];
                report("simsimd", &|| {
                    (0..n)
                        .map(|r| k::dot_i8(q, &v[r * dim..(r + 1) * dim]) as f64)
                        .sum()
                });
                report("plain", &|| {
                    (0..n)
                        .map(|r| k::plain::dot_i8(q, &v[r * dim..(r + 1) * dim]) as f64)
                        .sum()
                });
            }
            Rows::Binary(v) => {
                let w = dim.div_ceil(8);
                let q = &v[..w];
                report("simsimd", &|| {
                    (0..n)
                        .map(|r| k::hamming_simsimd(q, &v[r * w..(r + 1) * w]) as f64)
                        .sum()
                });
                report("plain", &|| {
                    (0..n)
                        .map(|r| k::plain::hamming(q, &v[r * w..(r + 1) * w]) as f64)
                        .sum()
                });
            }
        }
    }
    Ok(())
}
