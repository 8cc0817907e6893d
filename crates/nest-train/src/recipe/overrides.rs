//! Recipe keys set from outside the recipe file, already typed: the CLI turns its flags into
//! [`Overrides`] (`nest-cli`'s `flags.rs`), the Python package its `overrides` dict; no
//! library here reads argv. Each value remembers how its key was written (`--learning-rate`,
//! `overrides["lr"]`), so that an error names what the user typed.

/// One key set from outside the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The recipe key, `snake_case` (`-` in what the user wrote becomes `_`); a `nest distill`
    /// stage key keeps its `stageN.` prefix.
    pub key: String,
    pub value: toml::Value,
    /// How the user wrote it, for error messages: `--matryoshka-dims`, `overrides["lr"]`.
    pub origin: String,
}

/// Recipe keys set from outside the file, in the order given (a later one wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides(Vec<Override>);

impl Overrides {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key = value`, written by the user as `origin`.
    pub fn push(&mut self, key: &str, value: toml::Value, origin: impl Into<String>) {
        self.0.push(Override {
            key: key.replace('-', "_"),
            value,
            origin: origin.into(),
        });
    }

    /// `self` with `key = value` added, as the flag `--key` would set it (for callers that
    /// build a recipe in code: benchmarks, `--seeds`).
    pub fn with(mut self, key: &str, value: impl Into<toml::Value>) -> Self {
        let origin = format!("--{}", key.replace('_', "-"));
        self.push(key, value.into(), origin);
        self
    }

    /// Keys with values written as text, each read by [`parse_value`] (a command line's pairs,
    /// after its own flags are taken out), as the flag `--key` would set them.
    pub fn from_text<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut ov = Self::new();
        for (key, raw) in pairs {
            ov.push(
                key,
                parse_value(raw),
                format!("--{}", key.replace('_', "-")),
            );
        }
        ov
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Override> {
        self.0.iter()
    }

    /// How the user wrote the last override of top-level `key`, if one set it.
    pub(crate) fn origin_of(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|o| o.key == key)
            .map(|o| o.origin.as_str())
    }

    /// The overrides whose key starts with `prefix` (e.g. `stage1.`), the prefix taken off, and
    /// the rest.
    pub(crate) fn split_prefix(&self, prefix: &str) -> (Overrides, Overrides) {
        let (mut with, mut rest) = (Overrides::new(), Overrides::new());
        for o in &self.0 {
            match o.key.strip_prefix(prefix) {
                Some(k) => with.0.push(Override {
                    key: k.to_string(),
                    ..o.clone()
                }),
                None => rest.0.push(o.clone()),
            }
        }
        (with, rest)
    }

    /// Sets each key in `table`. `data` written as a string is the flag's shorthand
    /// `path:format[:weight][,path:format...]` (format inferred from the file's columns when
    /// left out: `data::infer_format`).
    pub(crate) fn apply(&self, table: &mut toml::Table) {
        for o in &self.0 {
            let value = match (o.key.as_str(), &o.value) {
                ("data", toml::Value::String(s)) => data_shorthand(s),
                _ => o.value.clone(),
            };
            table.insert(o.key.clone(), value);
        }
    }
}

/// `path:format[:weight][,path:format...]` as the recipe's `[[data]]` array.
fn data_shorthand(s: &str) -> toml::Value {
    let sources = s.split(',').map(|item| {
        let parts: Vec<&str> = item.split(':').collect();
        let mut t = toml::Table::new();
        t.insert("path".into(), parts[0].into());
        // a path without `:FORMAT`: the format its columns say (pairs when unreadable: the
        // reader's error names the file)
        let inferred = || {
            let f = crate::data::infer_format(std::path::Path::new(parts[0]));
            let f = f.unwrap_or(crate::recipe::DataFormat::Pairs);
            toml::Value::try_from(f).unwrap_or_else(|_| "pairs".into())
        };
        let format = parts.get(1).map_or_else(inferred, |f| (*f).into());
        t.insert("format".into(), format);
        if let Some(w) = parts.get(2) {
            t.insert("weight".into(), parse_value(w));
        }
        toml::Value::Table(t)
    });
    toml::Value::Array(sources.collect())
}

/// A value written on a command line: TOML where it reads as TOML (numbers, booleans, arrays,
/// inline tables), numbers separated by commas as an array (`64,384` is `[64, 384]`, as the
/// commands' own list flags take it), else the text itself (paths, model ids). The CLI's rule
/// for every flag value.
pub fn parse_value(raw: &str) -> toml::Value {
    let toml = |text: &str| {
        let doc = format!("v = {text}");
        doc.parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
    };
    if let Some(v) = toml(raw) {
        return v;
    }
    let number = |part: &str| toml(part.trim()).filter(|v| v.is_integer() || v.is_float());
    let parts: Option<Vec<toml::Value>> = raw.split(',').map(number).collect();
    match parts {
        Some(items) if raw.contains(',') => toml::Value::Array(items),
        _ => toml::Value::String(raw.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_as_a_string_is_the_flag_shorthand() {
        let mut t = toml::Table::new();
        Overrides::new()
            .with("data", "a.tsv:scored:2,b.tsv")
            .apply(&mut t);
        let want: toml::Table = r#"data = [{path = "a.tsv", format = "scored", weight = 2},
                                          {path = "b.tsv", format = "pairs"}]"#
            .parse()
            .unwrap();
        assert_eq!(t, want);
    }

    #[test]
    fn keys_are_snake_case_and_the_last_one_wins() {
        let mut ov = Overrides::new();
        ov.push("max-steps", 3.into(), "--max-steps");
        ov.push("max_steps", 5.into(), "overrides[\"max_steps\"]");
        let mut t = toml::Table::new();
        ov.apply(&mut t);
        assert_eq!(t["max_steps"], toml::Value::Integer(5));
        assert_eq!(ov.origin_of("max_steps"), Some("overrides[\"max_steps\"]"));
        assert_eq!(ov.origin_of("lr"), None);
    }

    #[test]
    fn flag_values_are_toml_where_they_read_as_toml() {
        assert_eq!(parse_value("2e-5"), toml::Value::Float(2e-5));
        assert_eq!(
            parse_value("[64, 384]"),
            toml::Value::Array(vec![64.into(), 384.into()])
        );
        assert_eq!(
            parse_value("models/x"),
            toml::Value::String("models/x".into())
        );
        // numbers separated by commas are a list, as the commands' list flags take them
        assert_eq!(
            parse_value("64, 384"),
            toml::Value::Array(vec![64.into(), 384.into()])
        );
        assert_eq!(
            parse_value("a.tsv,b.tsv"),
            toml::Value::String("a.tsv,b.tsv".into())
        );
        assert_eq!(parse_value("16,abc"), toml::Value::String("16,abc".into()));
    }

    #[test]
    fn a_stage_prefix_splits_off() {
        let ov = Overrides::new()
            .with("stage1.lr", 1e-4)
            .with("teacher", "t");
        let (s1, rest) = ov.split_prefix("stage1.");
        assert_eq!(
            s1.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
            ["lr"]
        );
        assert_eq!(s1.origin_of("lr"), Some("--stage1.lr"));
        assert_eq!(rest.origin_of("teacher"), Some("--teacher"));
    }
}
