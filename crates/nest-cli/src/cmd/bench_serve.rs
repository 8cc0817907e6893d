//! `nest bench serve` (a load run against any OpenAI-compatible server) and `nest bench soak`.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::args_search::BenchServeArgs;

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

pub fn serve(a: BenchServeArgs) -> Result<()> {
    let texts = nest_core::data::read_sentences(&a.texts)?;
    let texts: Vec<String> = texts.into_iter().filter(|t| !t.is_empty()).collect();
    let mut extra = serde_json::Map::new();
    if let Some(d) = a.dimensions {
        extra.insert("dimensions".into(), d.into());
    }
    if let Some(l) = a.layers {
        extra.insert("layers".into(), l.into());
    }
    if let Some(m) = &a.model {
        extra.insert("model".into(), m.clone().into());
    }
    for f in &a.field {
        let (k, v) = f
            .split_once('=')
            .with_context(|| format!("--field {f}: expected KEY=JSON"))?;
        let v: serde_json::Value = serde_json::from_str(v)
            .or_else(|_| serde_json::from_str(&format!("{v:?}")))
            .with_context(|| format!("--field {f}: the value is not JSON"))?;
        extra.insert(k.to_string(), v);
    }
    let search = a.path.trim_end_matches('/').ends_with("/search");
    let cfg = nest_bench::load::LoadConfig {
        url: a.url.clone(),
        path: a.path.clone(),
        input_key: if search { "query" } else { "input" }.into(),
        clients: a.clients,
        seconds: a.seconds,
        texts,
        inputs_per_request: a.inputs_per_request,
        extra,
        timeout: Duration::from_secs_f64(a.timeout),
    };
    let before = a.pid.and_then(rss_kib);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(nest_bench::load::run(cfg))?;
    let after = a.pid.and_then(rss_kib);
    let mut v = serde_json::to_value(&r)?;
    v["label"] = a.label.clone().into();
    v["clients"] = a.clients.into();
    v["inputs_per_request"] = a.inputs_per_request.into();
    v["dimensions"] = a.dimensions.into();
    v["layers"] = a.layers.into();
    v["path"] = a.path.clone().into();
    v["fields"] = a.field.clone().into();
    v["rss_mib_before"] = before.map(|k| k as f64 / 1024.0).into();
    v["rss_mib_after"] = after.map(|k| k as f64 / 1024.0).into();
    // the load generator's machine (the server's own is in its log: `nest serve: on ...`)
    let client = nest_model::machine::Machine::this(tch::Device::Cpu);
    v["client_machine"] = serde_json::to_value(&client)?;
    println!("{v}");
    Ok(())
}

/// `nest bench soak`: one JSON line with the soak's report; fails when an answer had an
/// unexpected status or the server did not recover from the burst.
pub fn soak(a: crate::args_search::BenchSoakArgs) -> Result<()> {
    let texts = nest_core::data::read_sentences(&a.texts)?;
    let texts: Vec<String> = texts.into_iter().filter(|t| !t.is_empty()).collect();
    let cfg = nest_bench::soak::SoakConfig {
        url: a.url,
        clients: a.clients,
        seconds: a.seconds,
        sample_every: a.sample_every,
        key: a.key.filter(|k| !k.is_empty()),
        max_inputs: a.max_client_batch_size,
        burst: a.burst,
        pid: a.pid,
        texts,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(nest_bench::soak::run(cfg))?;
    println!("{}", serde_json::to_string(&r)?);
    anyhow::ensure!(
        r.unexpected == 0,
        "{} answers with an unexpected status; the first: {}",
        r.unexpected,
        r.first_unexpected.unwrap_or_default()
    );
    anyhow::ensure!(
        r.recovered,
        "the server did not answer within 10 s after the burst"
    );
    Ok(())
}
