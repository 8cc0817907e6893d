//! A distillation recipe ([`DistillRecipe`]): the two models, the teacher cache, and each
//! stage's trainer recipe, read from one TOML file with its relative paths resolved and
//! `stageN.KEY` overrides routed to their stage.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::recipe::{Overrides, Recipe};
use crate::{Error, Result};

fn d_teacher_len() -> usize {
    128
}
fn d_cache() -> PathBuf {
    PathBuf::from(".nest-cache/teacher")
}
fn d_batch() -> usize {
    64
}

/// The top-level keys of a distillation recipe (the rest are a stage's).
const TOP_KEYS: [&str; 7] = [
    "teacher",
    "student",
    "teacher_max_length",
    "teacher_batch_size",
    "cache_dir",
    "stage1",
    "stage2",
];

/// A distillation recipe: the two models, the teacher cache, and each stage's trainer recipe
/// (`[stage1]`, `[stage2]`: every key of `nest train`'s recipes except `model`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistillRecipe {
    pub(super) teacher: String,
    pub(super) student: String,
    /// Max tokens per text when the teacher encodes.
    #[serde(default = "d_teacher_len")]
    pub(super) teacher_max_length: usize,
    /// Texts per teacher forward pass when the cache is filled.
    #[serde(default = "d_batch")]
    pub(super) teacher_batch_size: usize,
    #[serde(default = "d_cache")]
    pub(super) cache_dir: PathBuf,
    /// Whether the recipe (or a flag) set `cache_dir`: when not, a resumed run uses the cache
    /// its first start used (`teacher::run_cache_dir`).
    #[serde(skip)]
    pub(super) cache_set: bool,
    #[serde(default)]
    pub(super) stage1: Option<toml::Table>,
    #[serde(default)]
    pub(super) stage2: Option<toml::Table>,
    /// The recipe file's name and text, for the line of a wrong-typed key in a stage.
    #[serde(skip)]
    file: Option<(String, String)>,
}

impl DistillRecipe {
    /// Reads `path` and applies `overrides`: top-level keys (`teacher`, `student`, ...) and
    /// stage keys `stage1.KEY` / `stage2.KEY` (a key as `nest train` takes it), which are
    /// returned, prefix off, for [`super::run`].
    pub fn load(path: &Path, overrides: &Overrides) -> Result<(Self, Overrides, Overrides)> {
        let name = path.display().to_string();
        let bad = |message: String| Error::Recipe {
            source_name: name.clone(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| nest_core::Error::io(path, e))?;
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        resolve_paths(&mut table, path);
        let (s1, rest) = overrides.split_prefix("stage1.");
        let (s2, top) = rest.split_prefix("stage2.");
        if let Some(o) = top.iter().find(|o| !TOP_KEYS.contains(&o.key.as_str())) {
            let key = o.key.replace('_', "-");
            // `--stage3.lr`: a stage that does not exist, not a key to put in one
            let hint = match key.split_once('.') {
                Some((stage, k)) if stage.starts_with("stage") => {
                    format!("a distillation has stages 1 and 2: --stage1.{k} / --stage2.{k}")
                }
                _ => format!(
                    "a stage's training key goes to its stage: --stage1.{key} / --stage2.{key}"
                ),
            };
            return Err(bad(format!(
                "{}: not a key of a distillation recipe (those are {}); {hint}",
                o.origin,
                TOP_KEYS.join(", ")
            )));
        }
        for o in top.iter() {
            table.insert(o.key.clone(), o.value.clone());
        }
        let mut r: DistillRecipe =
            toml::Value::Table(table.clone())
                .try_into()
                .map_err(|e: toml::de::Error| {
                    let explain = crate::recipe::located::explain::<DistillRecipe>;
                    bad(explain(&table, e.message(), Some(&text), overrides))
                })?;
        if r.stage1.is_none() && r.stage2.is_none() {
            return Err(bad("neither [stage1] nor [stage2]: nothing to run".into()));
        }
        r.cache_set = table.contains_key("cache_dir");
        r.file = Some((name, text));
        Ok((r, s1, s2))
    }

    /// A stage's trainer recipe, starting from `model`.
    pub(crate) fn stage(
        &self,
        which: usize,
        model: &Path,
        overrides: &Overrides,
    ) -> Result<Recipe> {
        let table = if which == 1 {
            &self.stage1
        } else {
            &self.stage2
        };
        let source_name = match &self.file {
            Some((name, _)) => format!("{name} [stage{which}]"),
            None => format!("[stage{which}]"),
        };
        let mut table = table.clone().ok_or_else(|| Error::Recipe {
            source_name: source_name.clone(),
            message: "the recipe has no such stage".into(),
        })?;
        if table.contains_key("model") {
            return Err(Error::Recipe {
                source_name,
                message: "`model` is set by nest distill (the student, or stage 1's result)".into(),
            });
        }
        table.insert(
            "model".into(),
            toml::Value::String(model.display().to_string()),
        );
        let section = self.file.as_ref().map(|(_, text)| stage_lines(text, which));
        Recipe::from_table(table, &source_name, overrides, section.as_deref())
    }
}

/// `text` with every line outside `[stageN]` (and its sub-tables) blanked: the stage's keys
/// keep their line numbers, and a key that both stages set is found in the right one.
fn stage_lines(text: &str, which: usize) -> String {
    let own = format!("stage{which}");
    let mut inside = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        // a table header (`[stage1]`, `[[stage1.data]]`), not a line of a multi-line array
        let name = line
            .trim_start()
            .strip_prefix('[')
            .map(|h| h.trim_start_matches('['));
        if let Some(name) = name.filter(|h| h.starts_with(|c: char| c.is_alphabetic())) {
            inside = name.split([']', '.']).next().map(str::trim) == Some(own.as_str());
        }
        if inside {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The relative paths of a distillation recipe file resolve against its folder (as a train
/// recipe's: `crate::recipe::paths`): the models, the cache and each stage's data.
fn resolve_paths(table: &mut toml::Table, path: &Path) {
    use crate::recipe::paths::{resolve_file, resolve_model, resolve_table};
    let base = path.parent().filter(|b| !b.as_os_str().is_empty());
    let base = base.unwrap_or(Path::new("."));
    for (key, model) in [("teacher", true), ("student", true), ("cache_dir", false)] {
        if let Some(toml::Value::String(v)) = table.get_mut(key) {
            *v = match model {
                true => resolve_model(v, base),
                false => resolve_file(v, base),
            };
        }
    }
    for stage in ["stage1", "stage2"] {
        if let Some(toml::Value::Table(t)) = table.get_mut(stage) {
            resolve_table(t, base);
        }
    }
}
