use anyhow::{Context, Result};
use nest_index::{Collection, Filter, Funnel, Index};
use nest_model::EncodeOptions;

use crate::args_search::{Engine, ExportCommand, SearchArgs};

/// The model and layer that embed queries: `--model` or what the index records.
fn query_model(
    a: &SearchArgs,
    source: &serde_json::Value,
) -> Result<(nest_model::ElasticEncoder, usize)> {
    let name = a
        .model
        .clone()
        .or_else(|| {
            source
                .get("model")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .with_context(|| match source.is_null() {
            true => {
                "no --index to read the model from: pass --index DIR (its model and layer \
                     embed the queries) or --model"
            }
            false => "the index records no model (it was built from --embeddings); pass --model",
        })?;
    let max_len = source
        .get("max_length")
        .and_then(|m| m.as_u64())
        .map(|m| m as usize);
    let recorded = source.get("model").and_then(|m| m.as_str());
    if recorded.is_some_and(|r| nest_core::data::same_model(r, &name)) {
        if let Some(note) = nest_core::data::weights_note(source) {
            eprintln!("warning: {note}");
        }
    }
    let model = super::load_model_path(&name, max_len)?;
    let layer = source
        .get("layer")
        .and_then(|l| l.as_u64())
        .map_or(model.num_layers(), |l| l as usize);
    Ok((model, layer))
}

/// The queries: each `--query`, then the `--queries` file's, with their ids where the file
/// has them (`.jsonl`: `_id` / `id`, as BEIR's queries.jsonl), which each answer line repeats
/// as `query_id` so that hits can be joined with qrels.
struct Queries {
    texts: Vec<String>,
    ids: Vec<Option<String>>,
}

impl Queries {
    /// The start of query `i`'s answer line.
    fn line(&self, i: usize) -> serde_json::Value {
        let mut v = serde_json::json!({"query": self.texts[i]});
        if let Some(id) = &self.ids[i] {
            v["query_id"] = id.clone().into();
        }
        v
    }
}

fn read_queries(a: &SearchArgs) -> Result<Queries> {
    // as the server's /v1/search refuses "" (an empty query ranked documents by nothing)
    anyhow::ensure!(
        a.query.iter().all(|q| !q.is_empty()),
        "--query is empty: give the words to search for"
    );
    let mut q = Queries {
        texts: a.query.clone(),
        ids: vec![None; a.query.len()],
    };
    match &a.queries {
        Some(p)
            if p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("jsonl")) =>
        {
            for d in nest_core::data::read_documents(p)? {
                q.texts.push(d.text);
                q.ids.push(Some(d.id));
            }
        }
        Some(p) => {
            let texts = nest_core::data::read_sentences(p)?;
            q.ids.extend(texts.iter().map(|_| None));
            q.texts.extend(texts);
        }
        None => {}
    }
    anyhow::ensure!(
        !q.texts.is_empty(),
        "no query: pass --query TEXT or --queries FILE"
    );
    Ok(q)
}

/// The queries' vectors, with `--prompt-name` / `--prompt`, else the model's query prompt.
fn embed(
    a: &SearchArgs,
    model: &nest_model::ElasticEncoder,
    layer: usize,
    texts: &[String],
) -> Result<Vec<Vec<f32>>> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let prompt = a
        .prompt
        .resolve_side(model, nest_model::prompt::Side::Query)?;
    let (opts, prompt) = (EncodeOptions::default(), prompt.filter(|p| !p.is_empty()));
    let pooled = model.embed_prompted(&refs, &[layer], opts, prompt, &mut |_| {})?;
    let d = model.output_dim();
    let flat = nest_model::pooling::to_vec_f32(&pooled[0]);
    Ok(flat.chunks(d).map(<[f32]>::to_vec).collect())
}

pub fn run(a: SearchArgs) -> Result<()> {
    let queries = read_queries(&a)?;
    match a.engine {
        Engine::Nest => run_nest(&a, &queries),
        Engine::Pgvector => run_pgvector(&a, &queries),
    }
}

/// Nest's own index (and the documents added to it since: `Collection`), with `--filter`.
fn run_nest(a: &SearchArgs, queries: &Queries) -> Result<()> {
    let path = a
        .index
        .as_ref()
        .context("--index is required with --engine nest")?;
    anyhow::ensure!(
        !path.is_file(),
        "--index {}: a file; --index takes the index folder (the one holding index.json)",
        path.display()
    );
    let col = Collection::open(path)?;
    let idx = col.index();
    let funnel = match &a.funnel {
        Some(f) => Funnel::parse(f)?,
        None => Funnel::exact(idx.full_dim()),
    };
    idx.check_funnel(&funnel, a.k)?;
    if let Some(w) = funnel.reversed_stage() {
        eprintln!("warning: {w}");
    }
    let (model, layer) = query_model(a, &idx.manifest().source)?;
    anyhow::ensure!(
        model.output_dim() == idx.full_dim(),
        "the query model gives {} dims, the index holds {}",
        model.output_dim(),
        idx.full_dim()
    );
    let q = embed(a, &model, layer, &queries.texts)?;
    let filter = match &a.filter {
        Some(f) => Some(Filter::parse(
            &serde_json::from_str(f).context("--filter is not JSON")?,
        )?),
        None => None,
    };
    if filter.is_some() && idx.manifest().payload.is_none() {
        eprintln!(
            "warning: the index stores no payloads (`nest index build` without --payload): only \
             documents added since through `nest serve` can match --filter"
        );
    }
    let hits = col.search(&q, &funnel, a.k, filter.as_ref())?;
    if let (Some(f), true) = (&filter, hits.iter().all(Vec::is_empty)) {
        // (helper trial D: an empty answer, exit 0, and no hint why)
        if let Some(why) = f.why_nothing(col.payloads()) {
            eprintln!("warning: --filter matched no document: {why}");
        }
    }
    for (i, h) in hits.into_iter().enumerate() {
        let hits: Vec<serde_json::Value> = h
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                let mut v = serde_json::json!({"rank": rank + 1, "id": h.id, "score": h.score});
                if let Some(p) = h.payload {
                    v["payload"] = p;
                }
                v
            })
            .collect();
        let mut line = queries.line(i);
        line["funnel"] = funnel.to_string().into();
        line["hits"] = hits.into();
        println!("{line}");
    }
    Ok(())
}

/// The same funnel in PostgreSQL + pgvector.
fn run_pgvector(a: &SearchArgs, queries: &Queries) -> Result<()> {
    anyhow::ensure!(
        a.filter.is_none(),
        "--filter works with --engine nest (pgvector: filter with SQL on the table)"
    );
    let dsn = a
        .dsn
        .as_deref()
        .context("--dsn (or NEST_PG_DSN) is required with --engine pgvector")?;
    let mut client = nest_index::pgvector::connect(dsn)?;
    let source = pg_source(a, &mut client)?;
    let (model, layer) = query_model(a, &source)?;
    // as the nest engine refuses a query model of another width than the index's
    if let Some(d) = nest_index::pgvector::table_dim(&mut client, &a.table)? {
        anyhow::ensure!(
            model.output_dim() == d,
            "the query model gives {} dims, the table '{}' holds {d}: its queries would not \
             match the documents (search with the model the table was exported from)",
            model.output_dim(),
            a.table
        );
    }
    let funnel = match &a.funnel {
        Some(f) => Funnel::parse(f)?,
        None => Funnel::exact(model.output_dim()),
    };
    if let Some(w) = funnel.reversed_stage() {
        eprintln!("warning: {w}");
    }
    let q = embed(a, &model, layer, &queries.texts)?;
    let hits = nest_index::pgvector::search(&mut client, &a.table, &q, &funnel, a.k)?;
    for (i, h) in hits.into_iter().enumerate() {
        let hits: Vec<serde_json::Value> = h
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                let mut v = serde_json::json!({"rank": rank + 1, "id": h.id, "score": h.score});
                if let Some(p) = h.payload {
                    v["payload"] = p;
                }
                v
            })
            .collect();
        let mut line = queries.line(i);
        line["funnel"] = funnel.to_string().into();
        line["engine"] = "pgvector".into();
        line["hits"] = hits.into();
        println!("{line}");
    }
    Ok(())
}

/// What embeds the queries of a pgvector search: the table's recorded source (its export's
/// index: model, layer, max length, document prompt), else `--index`'s; both must agree where
/// both are there.
fn pg_source(
    a: &SearchArgs,
    client: &mut nest_index::pgvector::Client,
) -> Result<serde_json::Value> {
    let table = nest_index::pgvector::table_source(client, &a.table)?;
    let Some(p) = &a.index else {
        return Ok(table);
    };
    let index = Index::open(p)?.manifest().source.clone();
    let differ = nest_core::data::point_differences(&table, &index);
    anyhow::ensure!(
        table.is_null() || differ.is_empty(),
        "the table '{}' was exported from an index embedded otherwise than --index {} embeds \
         ({}, table -> --index): the queries would not match its documents; leave out --index \
         (the table's record is used) or export this index",
        a.table,
        p.display(),
        differ.join(", ")
    );
    Ok(index)
}

pub fn export(c: ExportCommand) -> Result<()> {
    match c {
        ExportCommand::Checkpoint(a) => super::train::export_checkpoint(&a),
        ExportCommand::Pgvector(a) => {
            let idx = Index::open(&a.index)?;
            let hnsw = a
                .hnsw
                .as_deref()
                .map(|s| {
                    s.split(',')
                        .map(nest_index::Level::parse)
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            let what = || format!("exporting {} to table {}", a.index.display(), a.table);
            if let Some(launch) = nest_dist::Launch::from_env()? {
                let g = nest_dist::Group::join(&launch, std::time::Duration::from_secs(300))?;
                return export_by_rank(&idx, &a, hnsw.as_deref(), &g).with_context(what);
            }
            let r =
                nest_index::pgvector::export(&idx, &a.dsn, &a.table, a.overwrite, hnsw.as_deref())
                    .with_context(what)?;
            eprintln!(
                "exported {} rows to {} in {:.1} s; HNSW indexes: {}",
                r.rows,
                a.table,
                r.seconds,
                if r.indexes.is_empty() {
                    "none".to_string()
                } else {
                    r.indexes.join(", ")
                }
            );
            Ok(())
        }
    }
}

/// `nest export pgvector` under a multi-process launch: rank 0 creates the table, every rank
/// copies its contiguous share of the rows in its own transaction, rank 0 builds the HNSW
/// indexes once all have committed.
fn export_by_rank(
    idx: &Index,
    a: &crate::args_search::ExportPgvectorArgs,
    hnsw: Option<&[nest_index::Level]>,
    g: &nest_dist::Group,
) -> Result<()> {
    use nest_index::pgvector::{export_phase, Export};
    let t0 = std::time::Instant::now();
    if g.rank() == 0 {
        export_phase(
            idx,
            &a.dsn,
            &a.table,
            Export::Create {
                overwrite: a.overwrite,
            },
        )?;
    }
    g.barrier()?;
    let n = idx.len();
    let rows = n * g.rank() / g.world()..n * (g.rank() + 1) / g.world();
    let mine = rows.len();
    export_phase(idx, &a.dsn, &a.table, Export::Rows(rows))?;
    g.barrier()?;
    if g.rank() != 0 {
        return Ok(());
    }
    let made = export_phase(idx, &a.dsn, &a.table, Export::Finish { hnsw })?;
    eprintln!(
        "exported {n} rows to {} from {} processes ({mine} by rank 0) in {:.1} s; HNSW indexes: {}",
        a.table,
        g.world(),
        t0.elapsed().as_secs_f64(),
        if made.is_empty() {
            "none".to_string()
        } else {
            made.join(", ")
        }
    );
    Ok(())
}
