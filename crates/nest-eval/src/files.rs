//! Writing a report to a folder: `report.json`, `report.md` and the plots. Its own module so
//! that the report (data) and the plots (which read it) do not import each other. Also the
//! check that a folder does not hold another model's report, made before an evaluation starts
//! so that a pasted command (the last one, with another model) does not replace a report that
//! took an hour.

use std::path::{Path, PathBuf};

use crate::report::Report;
use crate::{Error, Result};

impl Report {
    /// Writes `report.json`, `report.md` and the plots into `dir`; returns the paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Report(e.to_string()))?;
        let mut written = Vec::new();
        let p = dir.join("report.json");
        nest_core::fsutil::write_atomic(&p, json.as_bytes())?;
        written.push(p);
        let p = dir.join("report.md");
        nest_core::fsutil::write_atomic(&p, self.markdown().as_bytes())?;
        written.push(p);
        written.extend(crate::plots::write_all(self, dir)?);
        remove_stale_plots(dir, &written);
        Ok(written)
    }
}

/// Removes the plots an earlier report left in `dir` that this one did not write (another
/// task, precision or no latency figures): a folder's plots are its report's. Only files named
/// as [`crate::plots::write_all`] names them go.
fn remove_stale_plots(dir: &Path, written: &[PathBuf]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let plot = |name: &str| {
        let kinds = ["heatmap-", "curve-", "cost-"];
        name.ends_with(".svg") && kinds.iter().any(|k| name.starts_with(k))
    };
    for e in entries.flatten() {
        let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if plot(&name) && path.is_file() && !written.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// What a report.json says about its evaluation (the rest of the file is not read).
#[derive(serde::Deserialize)]
struct Head {
    model: HeadModel,
    command: String,
}

#[derive(serde::Deserialize)]
struct HeadModel {
    path: String,
}

/// Refuses, naming the key `keys.0` (the folder: `--out`) and `keys.1` (what replaces anyway:
/// `--overwrite`), when `dir` or a folder in it (`nest eval --dtype a,b` writes one per dtype)
/// holds the report of another model than `model`. A folder of the same model (however its
/// path is written) or without a report passes.
pub fn check_replaces_own(dir: &Path, model: &str, keys: (&str, &str)) -> Result<()> {
    let mut files = vec![dir.join("report.json")];
    if let Ok(entries) = std::fs::read_dir(dir) {
        files.extend(entries.flatten().map(|e| e.path().join("report.json")));
    }
    for f in files.iter().filter(|f| f.is_file()) {
        // a file that is not a report is not this check's to judge
        let Some(head) = std::fs::read_to_string(f)
            .ok()
            .and_then(|t| serde_json::from_str::<Head>(&t).ok())
        else {
            continue;
        };
        if !same_model(&head.model.path, model) {
            return Err(nest_core::Error::Value {
                key: keys.0.to_string(),
                message: format!(
                    "{} holds the report of another model ({}, by `{}`), which this \
                     evaluation would replace: choose another {}, or pass {} to replace it",
                    f.display(),
                    head.model.path,
                    head.command,
                    keys.0,
                    keys.1
                ),
            }
            .into());
        }
    }
    Ok(())
}

pub use nest_core::data::same_model;

#[cfg(test)]
mod tests {
    use super::*;

    fn report(dir: &Path, model: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let r = serde_json::json!({"model": {"path": model}, "command": "nest eval", "x": 1});
        std::fs::write(dir.join("report.json"), r.to_string()).unwrap();
    }

    #[test]
    fn another_models_report_is_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let out = d.path().join("out");
        let a_str = a.display().to_string();
        report(&out, &a_str);
        let keys = ("--out", "--overwrite");
        // the same model, written another way, may replace it
        check_replaces_own(&out, &format!("{}/../a", b.display()), keys).unwrap();
        let e = check_replaces_own(&out, &b.display().to_string(), keys).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("--out: ") && msg.contains(&a_str), "{msg}");
        assert!(msg.contains("pass --overwrite"), "{msg}");
        // a per-dtype folder of `--dtype float32,bf16` too
        let multi = d.path().join("multi");
        report(&multi.join("bf16"), "org/other");
        assert!(check_replaces_own(&multi, "org/model", keys).is_err());
        check_replaces_own(&multi, "org/other", keys).unwrap();
        // a new folder, and one holding something else than a report
        check_replaces_own(&d.path().join("new"), "org/model", keys).unwrap();
        std::fs::write(a.join("report.json"), "not json").unwrap();
        check_replaces_own(&a, "org/model", keys).unwrap();
    }
}
