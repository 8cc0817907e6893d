//! Resolving `--model`: a local directory; or `org/name`, found in the Hugging Face cache that
//! `huggingface_hub` and sentence-transformers fill (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`: `models--org--name/refs/main` names the snapshot), else
//! downloaded from the hub.
//!
//! Downloads go to `$NEST_CACHE` (default `~/.cache/nest/hub/<org>--<name>`), file by file, each
//! written to a temporary name and renamed when complete: the model's files, then the files of
//! every module folder `modules.json` names (EmbeddingGemma's `2_Dense`, `3_Dense`), then a
//! `.complete` marker; only a folder with the marker is reused. The endpoint is `$HF_ENDPOINT`
//! (default `https://huggingface.co`); `$HF_TOKEN` is sent when set. Connections time out after
//! 15 s, so a machine without internet gets a clear error instead of a hang.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Error, Result};

/// Files fetched from the hub: required ones first, then sentence-transformers' optional ones.
const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
const OPTIONAL: [&str; 6] = [
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "nest.json",
];

/// The files of a module folder other than `1_Pooling` (a Dense module's; Normalize has none).
const MODULE_FILES: [&str; 2] = ["config.json", "model.safetensors"];

/// Marks a download as complete.
const COMPLETE: &str = ".complete";

/// Returns a local model directory for `model`: the path itself if it exists, else a hub
/// download of the repository `org/name` (only that form goes to the hub: exactly one slash,
/// no part starting with `.`, and a first part that is no local folder). A missing local
/// path comes back as it is; loading it names the absolute folder it was looked for in.
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
    if let Some(snapshot) = hf_cache_snapshot(model) {
        return Ok(snapshot);
    }
    download(model).map_err(|e| match e {
        Error::Hub(m) => {
            let here = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            Error::Hub(format!(
                "{m} ('{model}' has the form of a hub id org/name; no local folder {} exists \
                 either)",
                here.display()
            ))
        }
        other => other,
    })
}

/// The Hugging Face cache's snapshot of `repo` at `refs/main`, if it holds the required files.
pub fn hf_cache_snapshot(repo: &str) -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = env("HF_HUB_CACHE")
        .or_else(|| env("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| env("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))?;
    let repo_dir = base.join(format!("models--{}", repo.replace('/', "--")));
    let rev = std::fs::read_to_string(repo_dir.join("refs").join("main")).ok()?;
    let snapshot = repo_dir.join("snapshots").join(rev.trim());
    REQUIRED
        .iter()
        .all(|f| snapshot.join(f).is_file())
        .then_some(snapshot)
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
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    let hub = Hub::new(repo);
    for (i, file) in REQUIRED.iter().chain(OPTIONAL.iter()).enumerate() {
        hub.fetch(file, i < REQUIRED.len(), &dir)?;
    }
    for folder in module_folders(&dir)? {
        for file in MODULE_FILES {
            hub.fetch(&format!("{folder}/{file}"), false, &dir)?;
        }
    }
    let done = dir.join(COMPLETE);
    std::fs::write(&done, b"").map_err(|e| nest_core::Error::io(&done, e))?;
    Ok(dir)
}

/// The module folders `modules.json` names beyond the transformer (`""`) and `1_Pooling`.
fn module_folders(dir: &Path) -> Result<Vec<String>> {
    let p = dir.join("modules.json");
    if !p.is_file() {
        return Ok(Vec::new());
    }
    let mods: Vec<serde_json::Value> = crate::config::read_json(&p)?;
    Ok(mods
        .iter()
        .filter_map(|m| m.get("path")?.as_str())
        .filter(|f| !f.is_empty() && *f != "1_Pooling")
        .filter(|f| !f.contains("..") && !f.starts_with('/'))
        .map(str::to_string)
        .collect())
}

/// One repository on the hub endpoint.
struct Hub {
    agent: ureq::Agent,
    endpoint: String,
    repo: String,
    token: Option<String>,
}

impl Hub {
    fn new(repo: &str) -> Hub {
        Hub {
            agent: ureq::Agent::config_builder()
                .timeout_connect(Some(Duration::from_secs(15)))
                .timeout_resolve(Some(Duration::from_secs(15)))
                .timeout_recv_response(Some(Duration::from_secs(60)))
                .http_status_as_error(false)
                .build()
                .into(),
            endpoint: std::env::var("HF_ENDPOINT")
                .unwrap_or_else(|_| "https://huggingface.co".into()),
            repo: repo.to_string(),
            token: std::env::var("HF_TOKEN").ok(),
        }
    }

    /// Downloads `file` into `dir` (temporary name, then renamed); a missing optional file
    /// (404) is skipped.
    fn fetch(&self, file: &str, required: bool, dir: &Path) -> Result<()> {
        let url = format!("{}/{}/resolve/main/{file}", self.endpoint, self.repo);
        let mut req = self.agent.get(&url);
        if let Some(t) = &self.token {
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
            return Ok(());
        }
        if status != 200 {
            return Err(Error::Hub(format!("{url}: HTTP {status}")));
        }
        let target = dir.join(file);
        let parent = target.parent().unwrap_or(dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| nest_core::Error::io(&parent, e))?;
        let tmp = target.with_extension("partial");
        let mut body = resp.into_body();
        let mut reader = body.as_reader();
        let mut out = std::fs::File::create(&tmp).map_err(|e| nest_core::Error::io(&tmp, e))?;
        std::io::copy(&mut reader, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| Error::Hub(format!("{url}: download broke off: {e}")))?;
        std::fs::rename(&tmp, &target).map_err(|e| nest_core::Error::io(&target, e))?;
        Ok(())
    }
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
