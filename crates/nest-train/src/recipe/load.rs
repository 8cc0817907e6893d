//! Reading a recipe: a TOML file or table, then the typed [`Overrides`], then the value checks.

use std::path::Path;

use super::{located, paths, Overrides, Recipe};
use crate::{Error, Result};

/// A recipe file's TOML table and text; syntax errors name the file and line.
fn read_table(p: &Path) -> Result<(toml::Table, String)> {
    let text = std::fs::read_to_string(p).map_err(|e| nest_core::Error::io(p, e))?;
    let table = text.parse().map_err(|e: toml::de::Error| Error::Recipe {
        source_name: p.display().to_string(),
        message: e.to_string(),
    })?;
    Ok((table, text))
}

impl Recipe {
    /// Reads a recipe file (or none: the overrides are the whole recipe) and applies
    /// `overrides`. The file's relative paths resolve against its folder, the overrides'
    /// against the current one; the recipe holds them absolute (see `paths.rs`).
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Self> {
        let source_name = path
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(flags)".into());
        let Some(p) = path else {
            return Self::from_table(toml::Table::new(), &source_name, overrides, None);
        };
        let (mut table, text) = read_table(p)?;
        let base = p.parent().filter(|b| !b.as_os_str().is_empty());
        paths::resolve_table(&mut table, base.unwrap_or(Path::new(".")));
        let mut r = Self::parse_table(table, &source_name, overrides, Some(&text))?;
        r.absolutize_paths();
        Ok(r)
    }

    /// A run's saved recipe exactly as written, its paths unresolved (see
    /// [`Recipe::with_recorded_paths`]).
    pub(crate) fn load_verbatim(path: &Path) -> Result<Self> {
        let (table, text) = read_table(path)?;
        Self::parse_table(
            table,
            &path.display().to_string(),
            &Overrides::new(),
            Some(&text),
        )
    }

    /// A recipe from a TOML table (e.g. a `[stage1]` of `nest distill`) and overrides; `source_name` names it in errors, and `file` (the text the table was read
    /// from, lines outside it blank) gives the line of a wrong-typed key. Paths still relative
    /// are made absolute against the current folder.
    pub(crate) fn from_table(
        table: toml::Table,
        source_name: &str,
        overrides: &Overrides,
        file: Option<&str>,
    ) -> Result<Self> {
        let mut r = Self::parse_table(table, source_name, overrides, file)?;
        r.absolutize_paths();
        Ok(r)
    }

    /// The table with the overrides applied, deserialised and value-checked; `file` is the
    /// recipe file's text, for the line of a wrong-typed key.
    fn parse_table(
        mut table: toml::Table,
        source_name: &str,
        overrides: &Overrides,
        file: Option<&str>,
    ) -> Result<Self> {
        let source_name = source_name.to_string();
        overrides.apply(&mut table);
        let recipe: Recipe =
            toml::Value::Table(table.clone())
                .try_into()
                .map_err(|e: toml::de::Error| Error::Recipe {
                    source_name: source_name.clone(),
                    message: located::explain::<Recipe>(&table, e.message(), file, overrides),
                })?;
        recipe.validate().map_err(|message| Error::Recipe {
            source_name,
            message,
        })?;
        Ok(recipe)
    }
}
