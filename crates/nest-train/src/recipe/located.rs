//! Which key a recipe's deserialisation error is about, and where it was written: serde
//! reports a wrong-typed value without its key when it reads a `toml::Value`, so the table is
//! written out as TOML and read again, and the error's span in that text gives the key; the
//! key then gives the line of the recipe file, or the flag that set it.

use serde::de::DeserializeOwned;

/// `message` (an error deserialising `table` as `T`) prefixed with where it is: `--flag` for a
/// key set by a flag in `flags`, else `line N, key K` (the line in `file`, the recipe file's
/// text, when there is one).
pub(crate) fn explain<T: DeserializeOwned>(
    table: &toml::Table,
    message: &str,
    file: Option<&str>,
    flags: &[String],
) -> String {
    let Some(key) = failing_key::<T>(table) else {
        return message.to_string();
    };
    let top = key.split(['.', '[']).next().unwrap_or(&key);
    if flags.iter().any(|f| flag_key(f).as_deref() == Some(top)) {
        let flag = top.replace('_', "-");
        // `--matryoshka-dims 64,384`: a list flag takes a TOML list
        let hint = match (message.contains("expected a sequence"), table.get(top)) {
            (true, Some(toml::Value::String(v))) => {
                let items: Vec<&str> = v.split(',').map(str::trim).collect();
                format!(
                    "; a list is written as TOML: --{flag} \"[{}]\"",
                    items.join(", ")
                )
            }
            _ => String::new(),
        };
        return format!("--{flag}: {message}{hint}");
    }
    let leaf = key.rsplit('.').next().unwrap_or(&key);
    match file.and_then(|t| line_of(t, leaf)) {
        Some(line) => format!("line {line}, key {key}: {message}"),
        None => format!("key {key}: {message}"),
    }
}

/// The recipe key of a `--key value` / `--key=value` flag (dashes as underscores).
fn flag_key(flag: &str) -> Option<String> {
    let body = flag.strip_prefix("--")?;
    let key = body.split('=').next()?;
    Some(key.replace('-', "_"))
}

/// The dotted key (`lr`, `data.weight`) whose value `T` refuses.
fn failing_key<T: DeserializeOwned>(table: &toml::Table) -> Option<String> {
    let text = toml::to_string(table).ok()?;
    let err = toml::from_str::<T>(&text).err()?;
    let at = err.span()?.start.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split_once('=')?.0.trim().trim_matches('"').to_string();
    let header = text[..start]
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('['));
    Some(match header {
        Some(h) => format!("{}.{key}", h.trim().trim_matches(['[', ']'])),
        None => key,
    })
}

/// The first line (1-based) of `text` that sets `key` (`key =`, also inside an inline table).
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.match_indices(key).any(|(i, _)| {
                let before = l[..i].chars().next_back();
                let after = l[i + key.len()..].trim_start();
                before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) && after.starts_with('=')
            })
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct R {
        lr: f64,
        data: Vec<D>,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct D {
        path: String,
        weight: f64,
    }

    #[test]
    fn names_the_key_its_line_or_its_flag() {
        let file = "lr = \"abc\"\ndata = [{ path = \"a\", weight = 1.0 }]\n";
        let t: toml::Table = file.parse().unwrap();
        let m = explain::<R>(&t, "invalid type", Some(file), &[]);
        assert_eq!(m, "line 1, key lr: invalid type");
        let m = explain::<R>(
            &t,
            "invalid type",
            Some(file),
            &["--lr".into(), "abc".into()],
        );
        assert_eq!(m, "--lr: invalid type");
        let file = "lr = 1.0\n[[data]]\npath = \"a\"\nweight = \"heavy\"\n";
        let t: toml::Table = file.parse().unwrap();
        let m = explain::<R>(&t, "invalid type", Some(file), &[]);
        assert_eq!(m, "line 4, key data.weight: invalid type");
    }
}
