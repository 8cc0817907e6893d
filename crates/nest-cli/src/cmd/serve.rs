use anyhow::{Context, Result};

use crate::args_search::ServeArgs;

pub fn run(a: ServeArgs) -> Result<()> {
    anyhow::ensure!(a.workers >= 1, "--workers must be at least 1");
    anyhow::ensure!(
        a.max_client_batch_size >= 1,
        "--max-client-batch-size must be at least 1"
    );
    // a request of the largest size taken must fit an empty queue, or it is refused as "retry
    // later" for ever (trial D: 16 inputs against a queue of 10)
    anyhow::ensure!(
        a.max_queued_inputs >= a.max_client_batch_size,
        "--max-queued-inputs {} is below --max-client-batch-size {}: a request of {} inputs \
         would never fit the queue; raise --max-queued-inputs or lower --max-client-batch-size",
        a.max_queued_inputs,
        a.max_client_batch_size,
        a.max_client_batch_size
    );
    anyhow::ensure!(
        a.request_timeout >= 1,
        "--request-timeout must be at least 1 (seconds)"
    );
    anyhow::ensure!(
        a.max_batch_tokens >= 1,
        "--max-batch-tokens must be at least 1"
    );
    anyhow::ensure!(
        a.http_threads != Some(0),
        "--http-threads must be at least 1"
    );
    let device = nest_model::default_device();
    let dtype = nest_model::dtype::resolve(a.dtype, device);
    eprintln!(
        "nest serve: on {}",
        nest_model::machine::Machine::this(device)
    );
    let configs = a
        .model
        .iter()
        .enumerate()
        .map(|(i, spec)| engine_config(&a, spec, i == 0, &dtype))
        .collect::<Result<Vec<_>>>()?;
    let limits = nest_serve::Limits {
        max_inputs: a.max_client_batch_size,
        max_tokens: a.max_batch_tokens,
        max_body_bytes: a.max_body_bytes,
        request_timeout: std::time::Duration::from_secs(a.request_timeout),
        cors_origins: a.cors_allow_origin.clone(),
        unknown_fields: match a.ignore_unknown_fields {
            true => nest_serve::request::UnknownFields::Ignore,
            false => nest_serve::request::UnknownFields::Reject,
        },
    };
    let access = access(&a)?;
    anyhow::ensure!(
        a.mmap_threshold_mib <= 32,
        "--mmap-threshold-mib must be at most 32 (glibc's limit), or 0 for glibc's default"
    );
    if let Some(line) = nest_core::heap::fix_mmap_threshold(a.mmap_threshold_mib) {
        eprintln!("nest serve: {line}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(http_threads(a.http_threads, device, a.workers))
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let addr = format!("{}:{}", a.host, a.port);
    rt.block_on(nest_serve::serve(configs, limits, access, a.index.as_deref(), &addr, |bound| {
        eprintln!("nest serve: listening on http://{bound} (model loading in the background; /health is 200 once ready)");
    }))
    .map_err(|e| match e {
        // a setting refused (an index of another model, names that clash): its own words first
        nest_serve::Error::Config(m) => anyhow::anyhow!(m),
        other => anyhow::Error::new(other).context(format!("serving on {addr}")),
    })?;
    eprintln!("nest serve: stopped");
    Ok(())
}

/// `--http-threads`, or its default: 2 on the CPU (the forward passes need its cores); on a GPU
/// the cores left after one per worker, from 2 to 16 (the workers' passes run on the device).
fn http_threads(asked: Option<usize>, device: tch::Device, workers: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    asked.unwrap_or(match device.is_cuda() {
        true => cores.saturating_sub(workers).clamp(2, 16),
        false => 2,
    })
}

/// One `--model [NAME=]PATH[#ADAPTOR]`: `--served-name` and `--adaptor` name the first
/// model's (and may not be given twice).
fn engine_config(
    a: &ServeArgs,
    spec: &str,
    first: bool,
    dtype: &nest_model::dtype::Resolved,
) -> Result<nest_serve::EngineConfig> {
    let (name, rest) = match spec.split_once('=') {
        Some((n, r)) if !n.is_empty() && !n.contains('/') => (Some(n.to_string()), r),
        _ => (None, spec),
    };
    let (path, adaptor) = match rest.split_once('#') {
        Some((p, ad)) => (p, Some(std::path::PathBuf::from(ad))),
        None => (rest, None),
    };
    let clash = |flag: &str| format!("--model {spec}: gives its own {flag}; drop --{flag}");
    let name = match (first.then_some(a.served_name.clone()).flatten(), name) {
        (Some(_), Some(_)) => anyhow::bail!(clash("served-name")),
        (n, m) => n.or(m),
    };
    let adaptor = match (first.then_some(a.adaptor.clone()).flatten(), adaptor) {
        (Some(_), Some(_)) => anyhow::bail!(clash("adaptor")),
        (x, y) => x.or(y),
    };
    let dir = nest_model::hub::resolve(path).with_context(|| format!("--model {spec}"))?;
    Ok(nest_serve::EngineConfig {
        served_name: name.unwrap_or_else(|| default_served_name(&dir, path)),
        model: dir,
        adaptor,
        allow_any_point: a.allow_any_point,
        max_length: a.max_length,
        max_batch_tokens: a.max_batch_tokens,
        max_batch_inputs: a.max_batch_inputs.max(1),
        max_queued_inputs: a.max_queued_inputs,
        workers: a.workers,
        dtype: dtype.clone(),
        trim_interval: (a.trim_interval_ms > 0)
            .then(|| std::time::Duration::from_millis(a.trim_interval_ms)),
    })
}

/// The API keys of `--api-key` / `NEST_API_KEY` and `--api-key-file`.
fn access(a: &ServeArgs) -> Result<nest_serve::auth::Access> {
    let mut keys: Vec<(String, String)> = a
        .api_keys
        .iter()
        .filter(|k| !k.trim().is_empty())
        .map(|k| ("--api-key / NEST_API_KEY".to_string(), k.trim().to_string()))
        .collect();
    if let Some(f) = &a.api_key_file {
        keys.extend(nest_serve::auth::Access::read_file(f)?);
        anyhow::ensure!(
            !keys.is_empty(),
            "--api-key-file {}: no keys in it",
            f.display()
        );
    }
    anyhow::ensure!(
        !a.open_metrics || !keys.is_empty(),
        "--open-metrics only means something with --api-key or --api-key-file"
    );
    let access = nest_serve::auth::Access::new(&keys, a.open_metrics)?;
    let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(&a.host.as_str());
    if access.is_open() && !loopback {
        eprintln!(
            "nest serve: warning: --host {} without --api-key: anyone who reaches this port \
             can use the server (and, with --index, add documents); pass --api-key or \
             --api-key-file, or keep --host 127.0.0.1 behind a reverse proxy",
            a.host
        );
    }
    if !access.is_open() {
        eprintln!(
            "nest serve: {} API key(s); /health{} open",
            keys.len(),
            if a.open_metrics { " and /metrics" } else { "" }
        );
    }
    Ok(access)
}

/// The name a model is served under without `--served-name`: its folder's name, or for a
/// training run's `final/` (or a checkpoint's folder) the run's name, so that every trained run
/// is not served as "final".
fn default_served_name(dir: &std::path::Path, model: &str) -> String {
    let name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let own = name(dir);
    let run = match own.as_deref() {
        Some("final") => dir.parent().and_then(name),
        Some(n) if n.starts_with("step-") => dir.parent().and_then(|c| c.parent()).and_then(name),
        _ => None,
    };
    run.or(own).unwrap_or_else(|| model.to_string())
}

#[cfg(test)]
mod tests {
    use super::{default_served_name, http_threads};
    use std::path::Path;
    use tch::Device::{Cpu, Cuda};

    /// Two HTTP threads on the CPU; on a GPU the cores left after the workers, 2 to 16; as
    /// asked when asked.
    #[test]
    fn http_threads_follow_the_device() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        assert_eq!(http_threads(None, Cpu, 1), 2);
        assert_eq!(http_threads(Some(7), Cpu, 1), 7);
        assert_eq!(http_threads(Some(3), Cuda(0), 1), 3);
        let gpu = http_threads(None, Cuda(0), 1);
        assert_eq!(gpu, (cores - 1).clamp(2, 16));
        assert_eq!(http_threads(None, Cuda(0), 1000), 2);
    }

    #[test]
    fn a_run_is_served_under_its_own_name() {
        let n = |p: &str| default_served_name(Path::new(p), "m");
        assert_eq!(n("models/all-MiniLM-L6-v2"), "all-MiniLM-L6-v2");
        assert_eq!(n("runs/mrl-stsb/final"), "mrl-stsb");
        assert_eq!(n("runs/x/checkpoints/step-00000100"), "x");
        assert_eq!(n("final"), "final");
    }
}
