//! Where a recipe's paths point: relative to the recipe file (so recipes can live anywhere),
//! recorded absolute (so `--resume` works from any folder).
//!
//! A relative path in a recipe file is looked for beside the recipe first, then (for recipes
//! written before this rule, such as the checkout's `recipes/`, whose paths start at the
//! checkout root) in the current folder; when it exists in neither, the recipe-relative
//! location is kept, so the error names the folder it was looked for in. Paths given as flags
//! are relative to the current folder. A model value that exists nowhere locally stays a hub
//! id only when it has the form `org/name` (`nest_model::hub::looks_like_repo_id`).

use std::path::{Path, PathBuf};

use super::Recipe;

use nest_core::fsutil::absolute_in;

/// A file path of a recipe file whose folder is `base`.
pub(crate) fn resolve_file(value: &str, base: &Path) -> String {
    let p = Path::new(value);
    if value.is_empty() || p.is_absolute() {
        return value.to_string();
    }
    let beside = absolute_in(base, p);
    let here = absolute_in(Path::new("."), p);
    let chosen = match (beside.exists(), here.exists()) {
        (false, true) => here,
        _ => beside,
    };
    chosen.display().to_string()
}

/// A model value of a recipe file whose folder is `base`: a local folder (absolute), or a hub
/// id `org/name` that exists nowhere locally.
pub(crate) fn resolve_model(value: &str, base: &Path) -> String {
    let p = Path::new(value);
    if value.is_empty() || p.is_absolute() {
        return value.to_string();
    }
    let here = Path::new(".");
    for dir in [base, here] {
        if dir.join(p).exists() {
            return absolute_in(dir, p).display().to_string();
        }
    }
    let first_is_local = |dir: &Path| {
        value
            .split('/')
            .next()
            .is_some_and(|f| dir.join(f).is_dir())
    };
    if nest_model::hub::looks_like_repo_id(value) && !first_is_local(base) && !first_is_local(here)
    {
        return value.to_string();
    }
    absolute_in(base, p).display().to_string()
}

/// Resolves the paths of a recipe table read from a file in `base` (the keys `model`,
/// `data[].path`, `eval_data`), before flag overrides are applied.
pub(crate) fn resolve_table(table: &mut toml::Table, base: &Path) {
    let set = |v: &mut toml::Value, f: &dyn Fn(&str, &Path) -> String| {
        if let Some(s) = v.as_str() {
            *v = toml::Value::String(f(s, base));
        }
    };
    if let Some(v) = table.get_mut("model") {
        set(v, &resolve_model);
    }
    if let Some(v) = table.get_mut("eval_data") {
        set(v, &resolve_file);
    }
    if let Some(mine) = table.get_mut("mine").and_then(|m| m.as_table_mut()) {
        for key in ["queries", "corpus"] {
            if let Some(v) = mine.get_mut(key) {
                set(v, &resolve_file);
            }
        }
    }
    if let Some(toml::Value::Array(items)) = table.get_mut("data") {
        for item in items {
            if let Some(v) = item.as_table_mut().and_then(|t| t.get_mut("path")) {
                set(v, &resolve_file);
            }
        }
    }
}

impl Recipe {
    /// The files and folders the run reads, each with its recipe key: what `--overwrite` of a
    /// run folder must not delete with the run it replaces.
    pub(crate) fn input_paths(&self) -> Vec<(&'static str, PathBuf)> {
        let mut out = vec![("model", PathBuf::from(&self.model))];
        out.extend(self.data.iter().map(|d| ("data", d.path.clone())));
        if !self.eval_data.is_empty() {
            out.push(("eval_data", PathBuf::from(&self.eval_data)));
        }
        if let Some(m) = &self.mine {
            out.push(("mine.queries", m.queries.clone()));
            out.extend(m.corpus.iter().map(|c| ("mine.corpus", c.clone())));
        }
        out
    }

    /// Makes the paths still relative (those given as flags) absolute against the current
    /// folder, so that the run records absolute paths.
    pub(crate) fn absolutize_paths(&mut self) {
        let here = Path::new(".");
        self.model = resolve_model(&self.model, here);
        self.eval_data = resolve_file(&self.eval_data, here);
        for d in &mut self.data {
            d.path = PathBuf::from(resolve_file(&d.path.display().to_string(), here));
        }
        if let Some(m) = &mut self.mine {
            m.queries = PathBuf::from(resolve_file(&m.queries.display().to_string(), here));
            if let Some(c) = &mut m.corpus {
                *c = PathBuf::from(resolve_file(&c.display().to_string(), here));
            }
        }
    }

    /// This recipe with the paths spelled as `recorded` (a run's saved recipe, read verbatim)
    /// spells them where they name the same files: runs saved before paths were recorded
    /// absolute keep their identity (their checkpoints hash the recipe as it was written).
    pub(crate) fn with_recorded_paths(&self, recorded: &Recipe) -> Recipe {
        let mut out = self.clone();
        let mut abs = recorded.clone();
        abs.absolutize_paths();
        if abs.model == self.model {
            out.model = recorded.model.clone();
        }
        if abs.eval_data == self.eval_data {
            out.eval_data = recorded.eval_data.clone();
        }
        if abs.data.len() == self.data.len() {
            for ((o, a), r) in out.data.iter_mut().zip(&abs.data).zip(&recorded.data) {
                if a.path == o.path {
                    o.path = r.path.clone();
                }
            }
        }
        out
    }
}
