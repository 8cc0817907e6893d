//! Which key a recipe's deserialisation error is about, and where it was written: serde
//! reports a wrong-typed value without its key when it reads a `toml::Value`, so the table is
//! written out as TOML and read again, and the error's span in that text gives the key; the
//! key then gives the line of the recipe file, or the flag that set it. An unknown key gets a
//! "did you mean": the names sentence-transformers and Hugging Face's trainer use for the same
//! setting first (`learning_rate` is `lr`), then the closest key by spelling.

use serde::de::DeserializeOwned;

/// `message` (an error deserialising `table` as `T`) prefixed with where it is: how the user
/// wrote the override that set the key (`--flag`, `overrides["key"]`), else `line N, key K`
/// (the line in `file`, the recipe file's text, when there is one).
pub(crate) fn explain<T: DeserializeOwned>(
    table: &toml::Table,
    message: &str,
    file: Option<&str>,
    overrides: &super::Overrides,
) -> String {
    // the advice before serde's list of every key, where it is read (it came after 40 names)
    let hint = did_you_mean(message);
    let message = &match (hint.is_empty(), message.split_once(", expected ")) {
        (false, Some((head, rest))) => format!("{head}{hint} (expected {rest})"),
        _ => format!("{message}{hint}"),
    };
    let Some(key) = failing_key::<T>(table) else {
        return message.to_string();
    };
    // a key the recipe lacks: serde's span covers the whole table, so the first key (a flag the
    // user did give) would be blamed
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next());
    if let Some(field) = missing.filter(|_| !key.contains(['.', '['])) {
        return format!(
            "the recipe sets no `{field}`: add `{field} = ...` to the recipe file, or pass \
             --{} VALUE",
            field.replace('_', "-")
        );
    }
    let top = key.split(['.', '[']).next().unwrap_or(&key);
    if let Some(origin) = overrides.origin_of(top) {
        // `--quantization int8,binary`: a list of words is a TOML list of strings (numbers
        // separated by commas are read as a list already, `overrides::parse_value`)
        let hint = match (message.contains("expected a sequence"), table.get(top)) {
            (true, Some(toml::Value::String(v))) if origin.starts_with("--") => {
                // `objective` is a list of tables, each named by its `kind`
                let item = |i: &str| match top {
                    "objective" => format!("{{kind = {:?}}}", i.trim()),
                    _ => format!("{:?}", i.trim()),
                };
                let items: Vec<String> = v.split(',').map(item).collect();
                format!(
                    "; a list is written as TOML: {origin} '[{}]'",
                    items.join(", ")
                )
            }
            _ => String::new(),
        };
        return format!("{origin}: {message}{hint}");
    }
    let leaf = key.rsplit('.').next().unwrap_or(&key);
    match file.and_then(|t| line_of(t, leaf)) {
        Some(line) => format!("line {line}, key {key}: {message}"),
        None => format!("key {key}: {message}"),
    }
}

/// Nest's names for settings that sentence-transformers' and Hugging Face's trainers (and
/// other tools) spell differently: (their name, Nest's key or flag).
const ALIASES: &[(&str, &str)] = &[
    ("learning_rate", "lr"),
    ("num_train_epochs", "epochs"),
    ("num_epochs", "epochs"),
    ("per_device_train_batch_size", "batch_size"),
    ("train_batch_size", "batch_size"),
    ("gradient_accumulation_steps", "grad_accum"),
    ("steps", "max_steps"),
    ("num_steps", "max_steps"),
    ("total_steps", "max_steps"),
    ("max_train_steps", "max_steps"),
    (
        "warmup_steps",
        "warmup_ratio (a share of the run's steps: warmup steps / all steps)",
    ),
    (
        "temperature",
        "scale (1 / temperature: 20 is a temperature of 0.05)",
    ),
    ("loss_fn", "loss"),
    ("loss_function", "loss"),
    ("max_len", "max_length"),
    ("max_seq_length", "max_length"),
    ("model_name_or_path", "model"),
    ("model_name", "model"),
    ("base_model", "model"),
    ("matryoshka_dimensions", "matryoshka_dims"),
    ("dims", "matryoshka_dims"),
    ("lr_scheduler_type", "decay"),
    ("scheduler", "decay"),
    ("warmup", "warmup_ratio"),
    ("eval_steps", "eval_every"),
    ("save_steps", "save_every"),
    ("save_total_limit", "keep_last"),
    ("max_grad_norm_clip", "max_grad_norm"),
    ("train_data", "data"),
    ("train_file", "data"),
    ("eval_file", "eval_data"),
    (
        "output_dir",
        "--run-dir (a flag of the command, not a recipe key)",
    ),
    ("bf16", "dtype (\"bf16\", \"float32\" or \"auto\")"),
    ("fp16", "dtype (\"bf16\", \"float32\" or \"auto\")"),
];

/// `; did you mean `KEY`?` for serde's ``unknown field `x`, expected one of `a`, `b` `` when
/// an alias or a close spelling names one of the expected keys; else nothing.
fn did_you_mean(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return String::new();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let expected: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let key = unknown.trim_start_matches('-').replace('-', "_");
    let alias = ALIASES
        .iter()
        .find(|(theirs, _)| *theirs == key)
        .map(|a| a.1);
    // an alias only where its target is a key here (or names a flag), so that a table with
    // other keys (a data source, an objective component) gets no wrong advice
    let alias = alias.filter(|a| a.starts_with("--") || expected.iter().any(|e| a.starts_with(e)));
    let close = || nest_core::spelling::closest(&key, expected.iter().copied());
    match alias.or_else(close) {
        Some(k) if k.starts_with(|c: char| c.is_ascii_lowercase()) && !k.contains(' ') => {
            format!("; did you mean `{k}`?")
        }
        Some(k) => format!("; did you mean {k}?"),
        None => String::new(),
    }
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
    fn an_unknown_key_gets_its_nest_name_or_its_closest_spelling() {
        let expected = "expected one of `model`, `lr`, `epochs`, `batch_size`, `max_length`";
        let m = |k: &str| did_you_mean(&format!("unknown field `{k}`, {expected}"));
        assert_eq!(m("learning_rate"), "; did you mean `lr`?");
        assert_eq!(m("learning-rate"), "; did you mean `lr`?");
        assert_eq!(m("max_seq_length"), "; did you mean `max_length`?");
        assert_eq!(m("epoch"), "; did you mean `epochs`?");
        assert_eq!(m("batchsize"), "; did you mean `batch_size`?");
        assert_eq!(
            m("output_dir"),
            "; did you mean --run-dir (a flag of the command, not a recipe key)?"
        );
        assert_eq!(m("temperature"), "", "nothing close: no advice");
        // an alias whose target is not a key of this table gives none
        let m = did_you_mean("unknown field `learning_rate`, expected one of `path`, `format`");
        assert_eq!(m, "");
        assert_eq!(did_you_mean("invalid type: string"), "");
    }

    #[test]
    fn names_the_key_its_line_or_its_flag() {
        let file = "lr = \"abc\"\ndata = [{ path = \"a\", weight = 1.0 }]\n";
        let t: toml::Table = file.parse().unwrap();
        let none = crate::recipe::Overrides::new();
        let m = explain::<R>(&t, "invalid type", Some(file), &none);
        assert_eq!(m, "line 1, key lr: invalid type");
        let flag = crate::recipe::Overrides::new().with("lr", "abc");
        let m = explain::<R>(&t, "invalid type", Some(file), &flag);
        assert_eq!(m, "--lr: invalid type");
        let file = "lr = 1.0\n[[data]]\npath = \"a\"\nweight = \"heavy\"\n";
        let t: toml::Table = file.parse().unwrap();
        let m = explain::<R>(&t, "invalid type", Some(file), &none);
        assert_eq!(m, "line 4, key data.weight: invalid type");
    }
}
