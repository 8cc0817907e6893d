//! Reading a recipe: a TOML file or table, then `--key value` overrides, then the value checks.

use std::path::Path;

use super::{located, paths, Recipe};
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

/// Parses a flag value as TOML (number, bool, array), falling back to a string.
fn parse_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.into()),
    }
}

impl Recipe {
    /// Reads a recipe file and applies `--key value` / `--key=value` overrides. The file's
    /// relative paths resolve against its folder, the flags' against the current one; the
    /// recipe holds them absolute (see `paths.rs`).
    pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<Self> {
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
        Self::parse_table(table, &path.display().to_string(), &[], Some(&text))
    }

    /// A recipe from a TOML table (e.g. a `[stage1]` of `nest distill`) and `--key value`
    /// overrides; `source_name` names it in errors, and `file` (the text the table was read
    /// from, lines outside it blank) gives the line of a wrong-typed key. Paths still relative
    /// are made absolute against the current folder.
    pub(crate) fn from_table(
        table: toml::Table,
        source_name: &str,
        overrides: &[String],
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
        overrides: &[String],
        file: Option<&str>,
    ) -> Result<Self> {
        let source_name = source_name.to_string();
        let mut i = 0;
        while i < overrides.len() {
            let flag = &overrides[i];
            let Some(body) = flag.strip_prefix("--") else {
                return Err(Error::Recipe {
                    source_name,
                    message: format!("expected a --key flag, got '{flag}'"),
                });
            };
            let (key, value) = match body.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => {
                    let v = overrides.get(i + 1).ok_or_else(|| Error::Recipe {
                        source_name: source_name.clone(),
                        message: format!("flag --{body} needs a value"),
                    })?;
                    i += 1;
                    (body.to_string(), v.clone())
                }
            };
            let key = key.replace('-', "_");
            if key == "data" {
                // --data path:format[:weight][,path:format...]
                let mut arr = Vec::new();
                for item in value.split(',') {
                    let parts: Vec<&str> = item.split(':').collect();
                    let mut t = toml::Table::new();
                    t.insert("path".into(), toml::Value::String(parts[0].into()));
                    t.insert(
                        "format".into(),
                        toml::Value::String(parts.get(1).copied().unwrap_or("pairs").into()),
                    );
                    if let Some(w) = parts.get(2) {
                        t.insert("weight".into(), parse_value(w));
                    }
                    arr.push(toml::Value::Table(t));
                }
                table.insert(key, toml::Value::Array(arr));
            } else {
                table.insert(key, parse_value(&value));
            }
            i += 1;
        }
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
