//! The grid runner: every distinct text of every task is embedded once (all requested layers in
//! one forward pass), then each (layer, dim, precision) cell of each task is derived from those
//! cached pooled vectors: prefix -> L2-normalise -> quantise -> task protocol.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use nest_model::pooling::truncate_normalize;
use nest_model::prompt::TaskPrompts;
use nest_model::{ElasticEncoder, EncodeOptions};
use tch::{Kind, Tensor};

use crate::items::Items;
use crate::metrics::classify::{accuracy_macro_f1, LogReg, LogRegConfig};
use crate::metrics::pair::pair_scores;
use crate::metrics::retrieval::{mean, query_scores, rank_docs};
use crate::metrics::spearman;
use crate::quantize::{quantize, scoring_rows, Calibration, Precision};
use crate::report::{Cell, FileRef, TaskResult};
use crate::tasks::{Task, TaskData};
use crate::Result;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct GridSpec {
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    pub precisions: Vec<Precision>,
    /// Binary retrieval: re-rank the top `10 * rescore` Hamming candidates by float query x ±1
    /// document (sentence-transformers' `rescore_multiplier`); 0 turns rescoring off.
    pub rescore: usize,
    pub logreg: LogRegConfig,
    /// An adaptor applied to every pooled vector (`nest eval --adaptor`); `dims` must be dims
    /// it serves.
    pub adaptor: Option<std::rc::Rc<nest_model::Adaptor>>,
    /// Keep per-item scores in the report for significance tests (`nest eval --no-items`
    /// leaves them out).
    pub items: bool,
    /// The prompt of each side (texts of symmetric tasks, retrieval queries, documents).
    pub prompts: TaskPrompts,
}

/// The L2-normalised `dim`-vectors of the given rows: the prefix, or the adaptor's output.
fn rows_at(pooled: &Tensor, rows: &Tensor, dim: usize, g: &GridSpec) -> Tensor {
    let x = pooled.index_select(0, rows);
    match &g.adaptor {
        Some(a) => a
            .apply(&x, dim)
            .expect("dims checked against the adaptor before the run"),
        None => truncate_normalize(&x, dim),
    }
}

/// Progress events.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// `done` of `total` distinct texts embedded.
    Embed { done: usize, total: usize },
    /// `done` of `total` cells of `task` scored.
    Cells {
        task: &'a str,
        done: usize,
        total: usize,
    },
}

/// Distinct (prompt, text) pairs across tasks: a text embedded once per prompt it is read with.
#[derive(Debug, Default)]
struct TextIndex {
    ids: HashMap<(Option<String>, String), i64>,
    texts: Vec<(Option<String>, String)>,
}

impl TextIndex {
    fn id(&mut self, prompt: Option<&str>, s: &str) -> i64 {
        let key = (prompt.map(str::to_string), s.to_string());
        if let Some(&i) = self.ids.get(&key) {
            return i;
        }
        let i = self.texts.len() as i64;
        self.texts.push(key.clone());
        self.ids.insert(key, i);
        i
    }
    fn ids<'a>(&mut self, prompt: &Option<String>, it: impl Iterator<Item = &'a str>) -> Tensor {
        let v: Vec<i64> = it.map(|s| self.id(prompt.as_deref(), s)).collect();
        Tensor::from_slice(&v)
    }

    /// Every text's pooled vectors at each of `layers`, one pass per distinct prompt, rows in
    /// index order.
    fn embed(
        &self,
        encoder: &ElasticEncoder,
        layers: &[usize],
        opts: EncodeOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Tensor>> {
        let mut prompts: Vec<Option<&str>> = self.texts.iter().map(|t| t.0.as_deref()).collect();
        prompts.sort_unstable();
        prompts.dedup();
        let total = self.texts.len();
        let mut out: Vec<Option<Tensor>> = layers.iter().map(|_| None).collect();
        let mut done_before = 0;
        for prompt in prompts {
            let (rows, texts): (Vec<i64>, Vec<&str>) = (0..total as i64)
                .zip(&self.texts)
                .filter(|(_, t)| t.0.as_deref() == prompt)
                .map(|(i, t)| (i, t.1.as_str()))
                .unzip();
            let pooled = encoder.embed_prompted(&texts, layers, opts, prompt, &mut |done| {
                progress(Progress::Embed {
                    done: done_before + done,
                    total,
                })
            })?;
            done_before += texts.len();
            let rows = Tensor::from_slice(&rows);
            for (slot, p) in out.iter_mut().zip(pooled) {
                let all = slot.get_or_insert_with(|| {
                    Tensor::zeros([total as i64, p.size()[1]], (p.kind(), p.device()))
                });
                let _ = all.index_copy_(0, &rows, &p);
            }
        }
        Ok(out
            .into_iter()
            .map(|t| t.unwrap_or_else(|| Tensor::zeros([0, 0], tch::kind::FLOAT_CPU)))
            .collect())
    }
}

/// A task's rows as indices into the text cache.
enum Rows {
    Scored {
        a: Tensor,
        b: Tensor,
        gold: Vec<f64>,
    },
    Labelled {
        a: Tensor,
        b: Tensor,
        labels: Vec<bool>,
    },
    Classes {
        train: Tensor,
        test: Tensor,
        ytr: Vec<i64>,
        yte: Vec<i64>,
        classes: usize,
    },
    Search {
        docs: Tensor,
        doc_ids: Vec<String>,
        queries: Tensor,
        qrels: Vec<HashMap<String, i64>>,
    },
}

fn rows_of(task: &Task, index: &mut TextIndex, prompts: &TaskPrompts) -> Rows {
    let text = &prompts.text;
    match &task.data {
        TaskData::Sts(p) => Rows::Scored {
            a: index.ids(text, p.iter().map(|x| x.sentence1.as_str())),
            b: index.ids(text, p.iter().map(|x| x.sentence2.as_str())),
            gold: p.iter().map(|x| x.score).collect(),
        },
        TaskData::Pair(p) => Rows::Labelled {
            a: index.ids(text, p.iter().map(|x| x.sentence1.as_str())),
            b: index.ids(text, p.iter().map(|x| x.sentence2.as_str())),
            labels: p.iter().map(|x| x.label).collect(),
        },
        TaskData::Cls { train, test } => {
            let mut names: Vec<&str> = train
                .iter()
                .chain(test.iter())
                .map(|t| t.label.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            let cls = |l: &str| names.binary_search(&l).map(|i| i as i64).unwrap_or(0);
            Rows::Classes {
                train: index.ids(text, train.iter().map(|t| t.text.as_str())),
                test: index.ids(text, test.iter().map(|t| t.text.as_str())),
                ytr: train.iter().map(|t| cls(&t.label)).collect(),
                yte: test.iter().map(|t| cls(&t.label)).collect(),
                classes: names.len(),
            }
        }
        TaskData::Retrieval(b) => Rows::Search {
            docs: index.ids(&prompts.document, b.corpus.iter().map(|d| d.1.as_str())),
            doc_ids: b.corpus.iter().map(|d| d.0.clone()).collect(),
            queries: index.ids(&prompts.query, b.queries.iter().map(|q| q.1.as_str())),
            qrels: b
                .queries
                .iter()
                .map(|q| b.qrels.get(&q.0).cloned().unwrap_or_default())
                .collect(),
        },
    }
}

/// Normalised `dim`-prefix of the given rows, quantised with ranges from `calib_rows`.
fn space(
    pooled: &Tensor,
    rows: &Tensor,
    calib_rows: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> Tensor {
    let e = rows_at(pooled, rows, dim, g);
    if p == Precision::Float32 {
        return e;
    }
    let c = rows_at(pooled, calib_rows, dim, g);
    quantize(&e, p, &Calibration::from(&c))
}

/// Each row pair's similarity at precision `p` (cosine; int8: the index's estimate).
fn row_sim(a: &Tensor, b: &Tensor, p: Precision) -> Vec<f64> {
    let c = (scoring_rows(a, p) * scoring_rows(b, p)).sum_dim_intlist(1, false, Kind::Double);
    Vec::<f64>::try_from(&c).unwrap_or_default()
}

/// The per-item gold a significance test needs beside the cells' items (see [`crate::items`]).
fn gold_of(rows: &Rows) -> Option<Items> {
    match rows {
        Rows::Scored { gold, .. } => Some(Items::from_f64(gold)),
        Rows::Labelled { labels, .. } => Some(Items(
            labels.iter().map(|&l| if l { 1.0 } else { 0.0 }).collect(),
        )),
        Rows::Classes { yte, .. } => Some(Items(yte.iter().map(|&c| c as f32).collect())),
        Rows::Search { .. } => None,
    }
}

/// The metrics of one cell and its per-item scores (see [`crate::items`]).
fn cell_metrics(
    rows: &Rows,
    pooled: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> (BTreeMap<String, f64>, Items) {
    let mut m = BTreeMap::new();
    let items;
    match rows {
        Rows::Scored { a, b, gold } => {
            let all = Tensor::cat(&[a, b], 0);
            let cos = row_sim(
                &space(pooled, a, &all, dim, p, g),
                &space(pooled, b, &all, dim, p, g),
                p,
            );
            m.insert("spearman".into(), 100.0 * spearman(&cos, gold));
            m.insert(
                "pearson".into(),
                100.0 * crate::metrics::pearson(&cos, gold),
            );
            items = Items::from_f64(&cos);
        }
        Rows::Labelled { a, b, labels } => {
            let all = Tensor::cat(&[a, b], 0);
            let cos = row_sim(
                &space(pooled, a, &all, dim, p, g),
                &space(pooled, b, &all, dim, p, g),
                p,
            );
            let s = pair_scores(&cos, labels);
            m.insert("accuracy".into(), 100.0 * s.accuracy);
            m.insert("f1".into(), 100.0 * s.f1);
            m.insert("ap".into(), 100.0 * s.ap);
            m.insert("accuracy_threshold".into(), s.accuracy_threshold);
            m.insert("f1_threshold".into(), s.f1_threshold);
            items = Items::from_f64(&cos);
        }
        Rows::Classes {
            train,
            test,
            ytr,
            yte,
            classes,
        } => {
            let xtr = space(pooled, train, train, dim, p, g);
            let xte = space(pooled, test, train, dim, p, g);
            let model = LogReg::fit(&xtr, ytr, *classes, g.logreg);
            let pred = model.predict(&xte);
            let (acc, f1) = accuracy_macro_f1(yte, &pred, *classes);
            items = Items(pred.iter().map(|&c| c as f32).collect());
            m.insert("accuracy".into(), 100.0 * acc);
            m.insert("macro_f1".into(), 100.0 * f1);
            m.insert("logreg_iterations".into(), model.iterations as f64);
        }
        Rows::Search {
            docs,
            doc_ids,
            queries,
            qrels,
        } => {
            let corpus = Corpus {
                docs,
                doc_ids,
                queries,
                qrels,
            };
            (m, items) = search_metrics(&corpus, pooled, dim, p, g);
        }
    }
    (m, items)
}

/// A retrieval task's rows, borrowed from [`Rows::Search`].
struct Corpus<'a> {
    docs: &'a Tensor,
    doc_ids: &'a [String],
    queries: &'a Tensor,
    qrels: &'a [HashMap<String, i64>],
}

/// The retrieval metrics of one cell (nDCG@10, MRR@10, recall, MAP; with binary rescoring also
/// the unrescored nDCG@10) and each query's nDCG@10.
fn search_metrics(
    c: &Corpus,
    pooled: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> (BTreeMap<String, f64>, Items) {
    let (docs, doc_ids, queries, qrels) = (c.docs, c.doc_ids, c.queries, c.qrels);
    let mut m = BTreeMap::new();
    let d = scoring_rows(&space(pooled, docs, docs, dim, p, g), p);
    let q = scoring_rows(&space(pooled, queries, docs, dim, p, g), p);
    let scores = q.matmul(&d.transpose(0, 1)).to_kind(Kind::Double); // [nq, nd]
    let rescore = (p == Precision::Binary && g.rescore > 0).then(|| {
        let qf = rows_at(pooled, queries, dim, g);
        qf.matmul(&d.transpose(0, 1)).to_kind(Kind::Double) // float query x ±1 doc
    });
    let depth = 1000.min(doc_ids.len());
    let nq = qrels.len();
    let mut per_query = Vec::with_capacity(nq);
    let mut plain = Vec::new();
    for (qi, rel) in qrels.iter().enumerate() {
        let s: Vec<f64> = Vec::try_from(&scores.get(qi as i64)).unwrap_or_default();
        let mut scored: Vec<(f64, &str)> = s
            .iter()
            .copied()
            .zip(doc_ids.iter().map(String::as_str))
            .collect();
        rank_docs(&mut scored);
        let ranked: Vec<&str> = scored.iter().take(depth).map(|x| x.1).collect();
        if let Some(rs) = &rescore {
            plain.push(query_scores(&ranked, rel));
            let head = (10 * g.rescore).min(ranked.len());
            let pos: HashMap<&str, usize> = doc_ids
                .iter()
                .enumerate()
                .map(|(i, d)| (d.as_str(), i))
                .collect();
            let fs: Vec<f64> = Vec::try_from(&rs.get(qi as i64)).unwrap_or_default();
            let mut top: Vec<(f64, &str)> =
                ranked[..head].iter().map(|d| (fs[pos[d]], *d)).collect();
            rank_docs(&mut top);
            let reranked: Vec<&str> = top
                .iter()
                .map(|x| x.1)
                .chain(ranked[head..].iter().copied())
                .collect();
            per_query.push(query_scores(&reranked, rel));
        } else {
            per_query.push(query_scores(&ranked, rel));
        }
    }
    let s = mean(&per_query);
    let items = Items(per_query.iter().map(|q| q.ndcg_at_10 as f32).collect());
    m.insert("ndcg_at_10".into(), 100.0 * s.ndcg_at_10);
    m.insert("mrr_at_10".into(), 100.0 * s.mrr_at_10);
    m.insert("recall_at_100".into(), 100.0 * s.recall_at_100);
    m.insert("recall_at_1000".into(), 100.0 * s.recall_at_1000);
    m.insert("map_at_100".into(), 100.0 * s.map_at_100);
    if !plain.is_empty() {
        m.insert(
            "ndcg_at_10_no_rescore".into(),
            100.0 * mean(&plain).ndcg_at_10,
        );
    }
    (m, items)
}

fn n_examples(rows: &Rows) -> usize {
    match rows {
        Rows::Scored { gold, .. } => gold.len(),
        Rows::Labelled { labels, .. } => labels.len(),
        Rows::Classes { yte, .. } => yte.len(),
        Rows::Search { qrels, .. } => qrels.len(),
    }
}

/// Runs every task over the grid.
pub fn run(
    encoder: &ElasticEncoder,
    tasks: &[Task],
    g: &GridSpec,
    opts: EncodeOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<TaskResult>> {
    encoder.check(&g.layers, &g.dims)?;
    let mut index = TextIndex::default();
    let rows: Vec<Rows> = tasks
        .iter()
        .map(|t| rows_of(t, &mut index, &g.prompts))
        .collect();
    let pooled = index.embed(encoder, &g.layers, opts, progress)?;
    let _guard = tch::no_grad_guard();
    let mut out = Vec::with_capacity(tasks.len());
    for (task, r) in tasks.iter().zip(&rows) {
        let start = Instant::now();
        let n_cells = g.layers.len() * g.dims.len() * g.precisions.len();
        let mut cells = Vec::with_capacity(n_cells);
        for (li, &layer) in g.layers.iter().enumerate() {
            for &dim in &g.dims {
                for &precision in &g.precisions {
                    let (metrics, items) = cell_metrics(r, &pooled[li], dim, precision, g);
                    cells.push(Cell {
                        layer,
                        dim,
                        precision,
                        metrics,
                        items: g.items.then_some(items),
                    });
                    progress(Progress::Cells {
                        task: &task.name,
                        done: cells.len(),
                        total: n_cells,
                    });
                }
            }
        }
        let files = task
            .files
            .iter()
            .map(|p| FileRef {
                path: p.display().to_string(),
                sha256: nest_core::fsutil::sha256_file(p).unwrap_or_default(),
            })
            .collect();
        out.push(TaskResult {
            task: task.name.clone(),
            kind: task.kind,
            main_metric: task.kind.main_metric().into(),
            files,
            n_examples: n_examples(r),
            warnings: task.warnings.clone(),
            seconds: start.elapsed().as_secs_f64(),
            cells,
            gold: if g.items { gold_of(r) } else { None },
        });
    }
    Ok(out)
}
