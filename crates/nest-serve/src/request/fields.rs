//! Fields a body holds that its endpoint does not read. OpenAI's API answers them with a 400
//! ("Unrecognized request argument supplied"), and so does Nest by default: a misspelt
//! `"layer": 3` ignored would serve the full depth at the full cost without a word, the very
//! mistake per-request points invite. `nest serve --ignore-unknown-fields` ignores them instead,
//! as text-embeddings-inference and vLLM do, for clients written for servers that read more.

use serde_json::{Map, Value};

use super::Field;
use crate::{Error, Result};

/// What a body's fields outside its endpoint's table get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownFields {
    /// A 400 naming the field, the nearest field the endpoint reads and the switch.
    #[default]
    Reject,
    /// Silence.
    Ignore,
}

/// Other servers' and libraries' names for what a Nest field holds: (theirs, Nest's). A name may
/// stand for several fields (`input`: the embeddings' input, a search's query): the first that
/// the endpoint reads is named.
const ALIASES: &[(&str, &str)] = &[
    ("inputs", "input"),
    ("text", "input"),
    ("texts", "input"),
    ("sentences", "input"),
    ("layer", "layers"),
    ("num_layers", "layers"),
    ("n_layers", "layers"),
    ("exit_layer", "layers"),
    ("dim", "dimensions"),
    ("dims", "dimensions"),
    ("dimension", "dimensions"),
    ("output_dimension", "dimensions"),
    ("output_dimensionality", "dimensions"),
    ("truncate_dim", "dimensions"),
    ("queries", "query"),
    ("input", "query"),
    ("text", "query"),
    ("q", "query"),
    ("top_k", "k"),
    ("limit", "k"),
    ("docs", "documents"),
    ("metadata", "payload"),
];

/// Checks that `obj` (the body, or a part of it that `what` names, e.g. `documents[3]`) holds
/// only `fields`, as `policy` says.
pub(crate) fn check(
    obj: &Map<String, Value>,
    fields: &[&str],
    what: &str,
    policy: UnknownFields,
) -> Result<()> {
    if policy == UnknownFields::Ignore {
        return Ok(());
    }
    let Some(unknown) = obj.keys().find(|k| !fields.contains(&k.as_str())) else {
        return Ok(());
    };
    let hint =
        nearest(unknown, fields).map_or(String::new(), |f| format!(" (did you mean '{f}'?)"));
    Err(Error::bad(
        None,
        format!(
            "unrecognized request argument supplied: '{unknown}'{hint}; {what} reads {}; \
             `nest serve --ignore-unknown-fields` ignores fields it does not read",
            fields.join(", ")
        ),
    ))
}

/// The names of a table's fields.
pub(crate) fn names<const N: usize>(table: &[Field; N]) -> [&'static str; N] {
    table.map(|f| f.name)
}

/// The field `key` most likely meant: another server's name for it, the same name in another
/// case or separator (`promptName`, `prompt-name`), or a close spelling.
fn nearest<'a>(key: &str, fields: &[&'a str]) -> Option<&'a str> {
    let plain = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    let k = plain(key);
    let alias = ALIASES
        .iter()
        .filter(|(theirs, _)| plain(theirs) == k)
        .find_map(|(_, ours)| fields.iter().find(|f| *f == ours));
    let same = || fields.iter().find(|f| plain(f) == k);
    let plains: Vec<String> = fields.iter().map(|f| plain(f)).collect();
    let close = || {
        let c = nest_core::spelling::closest(&k, plains.iter().map(String::as_str))?;
        fields.get(plains.iter().position(|p| p == c)?)
    };
    alias.or_else(same).or_else(close).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(s: &str) -> Map<String, Value> {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn the_nearest_field_is_named() {
        let fields = [
            "input",
            "model",
            "dimensions",
            "layers",
            "prompt_name",
            "prompt",
        ];
        for (key, want) in [
            ("layer", Some("layers")),
            ("num_layers", Some("layers")),
            ("dims", Some("dimensions")),
            ("dimension", Some("dimensions")),
            ("output_dimensionality", Some("dimensions")),
            ("promptName", Some("prompt_name")),
            ("prompt-name", Some("prompt_name")),
            ("inputs", Some("input")),
            ("modle", Some("model")),
            ("texts", Some("input")),
            ("temperature", None),
            // an alias whose target this endpoint does not read names nothing
            ("top_k", None),
        ] {
            assert_eq!(nearest(key, &fields), want, "{key}");
        }
        // a search's query under the embeddings' name (and others')
        let search = [
            "query",
            "k",
            "funnel",
            "filter",
            "model",
            "layers",
            "dimensions",
        ];
        for key in ["input", "text", "queries", "q"] {
            assert_eq!(nearest(key, &search), Some("query"), "{key}");
        }
    }

    #[test]
    fn rejects_by_default_and_ignores_when_asked() {
        let fields = ["input", "layers"];
        let body = obj(r#"{"input":"a","layer":3}"#);
        let e = check(&body, &fields, "this endpoint", UnknownFields::Reject).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("'layer' (did you mean 'layers'?)"), "{m}");
        assert!(m.contains("reads input, layers"), "{m}");
        assert!(m.contains("--ignore-unknown-fields"), "{m}");
        assert!(e.status().is_client_error());
        check(&body, &fields, "this endpoint", UnknownFields::Ignore).unwrap();
        check(
            &obj(r#"{"input":"a"}"#),
            &fields,
            "x",
            UnknownFields::Reject,
        )
        .unwrap();
    }
}
