//! Resolving `--model`: a local directory, or `org/name` downloaded from the Hugging Face hub.
//!
//! Downloads go to `$NEST_CACHE` (default `~/.cache/nest/hub/<org>--<name>`), file by file, each
//! written to a temporary name and renamed when complete. The endpoint is `$HF_ENDPOINT`
//! (default `https://huggingface.co`); `$HF_TOKEN` is sent when set. Connections time out after
//! 15 s, so a machine without internet gets a clear error instead of a hang.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Error, Result};

/// Files fetched from the hub: required ones first, then sentence-transformers' optional ones.
const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
const OPTIONAL: [&str; 5] = [
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    "nest.json",
];

/// Returns a local model directory for `model`: the path itself if it exists, else a hub
/// download of the repository `org/name`.
pub fn resolve(model: &str) -> Result<PathBuf> {
    let p = Path::new(model);
    // `models/x` where `models/` is a local folder is a (missing) local path, not a hub id.
    let first_is_local_dir = model
        .split('/')
        .next()
        .is_some_and(|f| Path::new(f).is_dir());
    if p.exists() || !looks_like_repo_id(model) || first_is_local_dir {
        return Ok(p.to_path_buf());
    }
    download(model)
}

/// `org/name` with no path-like parts: what the hub accepts as a repository id.
pub fn looks_like_repo_id(s: &str) -> bool {
    let mut parts = s.split('/');
    let ok = |p: Option<&str>| {
        p.is_some_and(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

fn cache_dir(repo: &str) -> PathBuf {
    let base = std::env::var_os("NEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache").join("nest").join("hub")
        });
    base.join(repo.replace('/', "--"))
}

/// Downloads `repo` (or reuses a complete earlier download).
pub fn download(repo: &str) -> Result<PathBuf> {
    let dir = cache_dir(repo);
    if REQUIRED.iter().all(|f| dir.join(f).is_file()) {
        return Ok(dir);
    }
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_resolve(Some(Duration::from_secs(15)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let token = std::env::var("HF_TOKEN").ok();
    for (i, file) in REQUIRED.iter().chain(OPTIONAL.iter()).enumerate() {
        let required = i < REQUIRED.len();
        let url = format!("{endpoint}/{repo}/resolve/main/{file}");
        let mut req = agent.get(&url);
        if let Some(t) = &token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let resp = req.call().map_err(|e| {
            Error::Hub(format!(
                "cannot download {url}: {e}. Without internet, pass a local model directory \
                 (see scripts/setup.sh for the default models)"
            ))
        })?;
        let status = resp.status().as_u16();
        if status == 404 && !required {
            continue;
        }
        if status != 200 {
            return Err(Error::Hub(format!("{url}: HTTP {status}")));
        }
        let target = dir.join(file);
        let parent = target.parent().unwrap_or(&dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| nest_core::Error::io(&parent, e))?;
        let tmp = target.with_extension("partial");
        let mut body = resp.into_body();
        let mut reader = body.as_reader();
        let mut out = std::fs::File::create(&tmp).map_err(|e| nest_core::Error::io(&tmp, e))?;
        std::io::copy(&mut reader, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| Error::Hub(format!("{url}: download broke off: {e}")))?;
        std::fs::rename(&tmp, &target).map_err(|e| nest_core::Error::io(&target, e))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids() {
        assert!(looks_like_repo_id("sentence-transformers/all-MiniLM-L6-v2"));
        assert!(!looks_like_repo_id("models/x/y"));
        assert!(!looks_like_repo_id("./x"));
        assert!(!looks_like_repo_id("../x/y"));
        assert!(!looks_like_repo_id("/abs/path"));
        assert!(!looks_like_repo_id("single"));
    }
}
