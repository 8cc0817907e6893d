//! Payload filters of a search (`--filter`, `/v1/search`'s `filter`, Python's `filter=`), and
//! what a filter that matched nothing says.

use serde_json::Value;

use crate::{Error, Result};

/// Payload equality filter: every key must be present in the row's payload (a JSON object) and
/// equal the given value, or be one of the values of `{"$in": [...]}`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    terms: Vec<(String, Vec<Value>)>,
}

impl Filter {
    /// Parses `{"key": value, "other": {"$in": [a, b]}}`.
    pub fn parse(v: &Value) -> Result<Self> {
        let Value::Object(obj) = v else {
            return Err(Error::invalid(
                "filter",
                format!("must be a JSON object of payload keys, got {v}"),
            ));
        };
        let mut terms = Vec::with_capacity(obj.len());
        for (k, want) in obj {
            let any = match want {
                Value::Object(o) if o.len() == 1 && o.contains_key("$in") => match &o["$in"] {
                    Value::Array(a) if !a.is_empty() => a.clone(),
                    other => {
                        return Err(Error::invalid(
                            "filter",
                            format!("{k}: $in takes a non-empty array, got {other}"),
                        ))
                    }
                },
                Value::Object(_) => {
                    return Err(Error::invalid(
                        "filter",
                        format!("{k}: the only operator is {{\"$in\": [...]}}, got {want}"),
                    ))
                }
                v => vec![v.clone()],
            };
            terms.push((k.clone(), any));
        }
        Ok(Filter { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether a payload passes. Numbers compare by value (`1` is `1.0`, as in JSON itself,
    /// which has one number type; a payload's `1` would otherwise never match a filter's `1.0`).
    pub fn matches(&self, payload: Option<&Value>) -> bool {
        let same = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        };
        self.terms.iter().all(|(k, any)| {
            payload
                .and_then(|p| p.get(k))
                .is_some_and(|v| any.iter().any(|w| same(w, v)))
        })
    }

    /// Why no payload of `payloads` passes (`None`: some does): a key no payload has, a value
    /// of another JSON type than the payloads hold under that key (`"2001"` against `2001`), or
    /// the values they do hold (a few). What `nest search` says when a filter found nothing.
    pub fn why_nothing(&self, payloads: impl Iterator<Item = Option<Value>>) -> Option<String> {
        let payloads: Vec<Value> = payloads.flatten().collect();
        if payloads.iter().any(|p| self.matches(Some(p))) {
            return None;
        }
        let kind = |v: &Value| match v {
            Value::String(_) => "strings",
            Value::Number(_) => "numbers",
            Value::Bool(_) => "booleans",
            Value::Null => "nulls",
            Value::Array(_) => "arrays",
            Value::Object(_) => "objects",
        };
        for (k, any) in &self.terms {
            let held: Vec<&Value> = payloads.iter().filter_map(|p| p.get(k)).collect();
            if held.is_empty() {
                return Some(format!("no document's payload has the key '{k}'"));
            }
            let loose = |a: &Value, b: &Value| {
                a.to_string().trim_matches('"') == b.to_string().trim_matches('"')
            };
            if any.iter().all(|w| held.iter().all(|v| kind(v) != kind(w)))
                && any.iter().any(|w| held.iter().any(|v| loose(v, w)))
            {
                let (v, w) = (held[0], &any[0]);
                return Some(format!(
                    "the payloads hold {} under '{k}' ({v}, ...), the filter gives {} ({w}): \
                     JSON's types differ, so nothing matches; write the filter's value as the \
                     payloads hold it",
                    kind(v),
                    kind(w)
                ));
            }
        }
        let (k, _) = self.terms.first()?;
        let mut seen: Vec<String> = Vec::new();
        for v in payloads.iter().filter_map(|p| p.get(k)) {
            let s = v.to_string();
            if seen.len() < 5 && !seen.contains(&s) {
                seen.push(s);
            }
        }
        Some(format!(
            "no document passes every term; '{k}' holds {} among others",
            seen.join(", ")
        ))
    }
}
