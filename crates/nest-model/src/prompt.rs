//! Prompts (instructions) prepended to the texts, as sentence-transformers does: the named ones
//! of `config_sentence_transformers.json` (`prompts`, `default_prompt_name`), chosen by name
//! (`--prompt-name query`) or given as text (`--prompt "Instruct: ...\nQuery: "`). The default
//! prompt, when the model names one, applies whenever none is asked for
//! (`SentenceTransformer.encode`'s rule).
//!
//! Whether the pooled vector includes the prompt's tokens is the pooling's `include_prompt`
//! (`1_Pooling/config.json`); the encoder reads it ([`crate::ElasticEncoder::embed_prompted`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::read_json;
use crate::Result;

/// A model's named prompts and its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    named: BTreeMap<String, String>,
    default_name: Option<String>,
}

#[derive(Deserialize)]
struct StConfig {
    #[serde(default)]
    prompts: BTreeMap<String, String>,
    #[serde(default)]
    default_prompt_name: Option<String>,
}

/// What a caller asked for: a prompt by name, or its text (not both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptChoice<'a> {
    pub name: Option<&'a str>,
    pub text: Option<&'a str>,
}

impl Prompts {
    /// Reads `config_sentence_transformers.json` (none: no prompts). A `default_prompt_name`
    /// that names no prompt is refused, naming the file and the key.
    pub fn read(path: Option<&Path>) -> Result<Prompts> {
        let Some(path) = path else {
            return Ok(Prompts::default());
        };
        let c: StConfig = read_json(path)?;
        let p = Prompts {
            named: c.prompts,
            default_name: c.default_prompt_name.filter(|n| !n.is_empty()),
        };
        if let Some(n) = &p.default_name {
            if !p.named.contains_key(n) {
                return Err(crate::Error::Config {
                    path: path.to_path_buf(),
                    message: format!(
                        "default_prompt_name '{n}' is not one of prompts ({})",
                        p.names()
                    ),
                });
            }
        }
        Ok(p)
    }

    /// Prompts from a name -> text map and an optional default name (tests, tools).
    pub fn new(named: BTreeMap<String, String>, default_name: Option<String>) -> Prompts {
        Prompts {
            named,
            default_name,
        }
    }

    /// The prompt names, comma-separated (for messages).
    pub fn names(&self) -> String {
        let v: Vec<&str> = self.named.keys().map(String::as_str).collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }

    /// Every named prompt (name -> text).
    pub fn named(&self) -> &BTreeMap<String, String> {
        &self.named
    }

    /// The name of the prompt applied by default, if any.
    pub fn default_name(&self) -> Option<&str> {
        self.default_name.as_deref()
    }

    /// The named prompt's text.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.named.get(name).map(String::as_str)
    }

    /// The prompt applied when none is asked for, if the model names one.
    pub fn default_prompt(&self) -> Option<&str> {
        self.default_name.as_deref().and_then(|n| self.get(n))
    }

    /// The prompt text for `choice`: its text, the named prompt, else the default (`None`: no
    /// prompt). An unknown name is an error naming `name_key` (the flag or field the user wrote)
    /// and the prompts the model has; a name and a text together are refused.
    pub fn resolve<'a>(
        &'a self,
        choice: PromptChoice<'a>,
        name_key: &str,
    ) -> std::result::Result<Option<&'a str>, nest_core::Error> {
        match (choice.name, choice.text) {
            (Some(_), Some(_)) => Err(nest_core::Error::value(
                name_key,
                "give a prompt name or a prompt text, not both",
            )),
            (None, Some(t)) => Ok(Some(t)),
            (Some(n), None) => self.get(n).map(Some).ok_or_else(|| {
                nest_core::Error::value(
                    name_key,
                    format!(
                        "the model has no prompt '{n}' (its prompts: {})",
                        self.names()
                    ),
                )
            }),
            (None, None) => Ok(self.default_prompt()),
        }
    }
}

/// The prompt of each side of an evaluation: symmetric texts (STS, pairs, classification),
/// retrieval queries and retrieval documents (`None`: no prompt).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct TaskPrompts {
    pub text: Option<String>,
    pub query: Option<String>,
    pub document: Option<String>,
}

/// What a caller asked for on each side, and the flag or field that names each side's prompt
/// name (for errors).
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskPromptChoice<'a> {
    pub text: PromptChoice<'a>,
    pub query: PromptChoice<'a>,
    pub document: PromptChoice<'a>,
    pub keys: [&'a str; 3],
}

/// The names sentence-transformers' `encode_document` looks for, in its order.
const DOCUMENT_NAMES: [&str; 3] = ["document", "passage", "corpus"];

/// Which side of a search a text is on: the prompt each gets by default differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Any text (`encode`): the model's default prompt.
    Text,
    /// A search query (`encode_query`): the model's `query` prompt, else its default.
    Query,
    /// A searched document (`encode_document`): the model's `document`, `passage` or `corpus`
    /// prompt, else its default.
    Document,
}

impl Prompts {
    /// The prompt of a text on `side`: the one `choice` asks for (an unknown name is an error
    /// naming `name_key`), else the side's default as sentence-transformers chooses it.
    pub fn for_side<'a>(
        &'a self,
        choice: PromptChoice<'a>,
        name_key: &str,
        side: Side,
    ) -> std::result::Result<Option<&'a str>, nest_core::Error> {
        if choice.name.is_some() || choice.text.is_some() {
            return self.resolve(choice, name_key);
        }
        let own = match side {
            Side::Text => None,
            Side::Query => self.get("query"),
            Side::Document => DOCUMENT_NAMES.iter().find_map(|n| self.get(n)),
        };
        Ok(own.or(self.default_prompt()))
    }
}

impl Prompts {
    /// Each side's prompt, chosen as sentence-transformers' `encode`, `encode_query` and
    /// `encode_document` choose theirs: texts get `choice.text` (else the model's default
    /// prompt); queries get `choice.query`, else the model's `query` prompt, else the texts'
    /// prompt; documents get `choice.document`, else the model's `document`, `passage` or
    /// `corpus` prompt, else the texts' prompt.
    pub fn for_tasks(
        &self,
        choice: TaskPromptChoice,
    ) -> std::result::Result<TaskPrompts, nest_core::Error> {
        let [text_key, query_key, document_key] = choice.keys;
        let text = self.resolve(choice.text, text_key)?.map(str::to_string);
        let asked = |c: PromptChoice| c.name.is_some() || c.text.is_some();
        let query = match asked(choice.query) {
            true => self.resolve(choice.query, query_key)?.map(str::to_string),
            false => self.get("query").map(str::to_string).or(text.clone()),
        };
        let document = match asked(choice.document) {
            true => self
                .resolve(choice.document, document_key)?
                .map(str::to_string),
            false => DOCUMENT_NAMES
                .iter()
                .find_map(|n| self.get(n))
                .map(str::to_string)
                .or(text.clone()),
        };
        Ok(TaskPrompts {
            text,
            query,
            document,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_text_and_default() {
        let named: BTreeMap<String, String> = [("query", "query: "), ("document", "passage: ")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let p = Prompts::new(named.clone(), Some("query".into()));
        let ask = |name, text| PromptChoice { name, text };
        assert_eq!(
            p.resolve(ask(None, None), "--prompt-name").unwrap(),
            Some("query: ")
        );
        assert_eq!(
            p.resolve(ask(Some("document"), None), "--prompt-name")
                .unwrap(),
            Some("passage: ")
        );
        assert_eq!(p.resolve(ask(None, Some("x: ")), "k").unwrap(), Some("x: "));
        let e = p
            .resolve(ask(Some("other"), None), "prompt_name")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("prompt_name") && e.contains("document, query"),
            "{e}"
        );
        assert!(p.resolve(ask(Some("query"), Some("x")), "k").is_err());
        assert_eq!(
            Prompts::new(named, None)
                .resolve(ask(None, None), "k")
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_side_takes_its_own_prompt_else_the_default() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let none = PromptChoice::default();
        let p = Prompts::new(
            map(&[("query", "q: "), ("passage", "p: "), ("s", "s: ")]),
            Some("s".into()),
        );
        let side = |c, s| p.for_side(c, "k", s).unwrap();
        assert_eq!(side(none, Side::Query), Some("q: "));
        assert_eq!(side(none, Side::Document), Some("p: "));
        assert_eq!(side(none, Side::Text), Some("s: "));
        let asked = PromptChoice {
            name: None,
            text: Some(""),
        };
        assert_eq!(side(asked, Side::Query), Some(""), "an empty text: none");
        let only_default = Prompts::new(map(&[("s", "s: ")]), Some("s".into()));
        assert_eq!(
            only_default.for_side(none, "k", Side::Document).unwrap(),
            Some("s: ")
        );
        let e = p.for_side(
            PromptChoice {
                name: Some("x"),
                text: None,
            },
            "--prompt-name",
            Side::Query,
        );
        assert!(e.unwrap_err().to_string().contains("--prompt-name"));
    }

    #[test]
    fn task_sides_follow_sentence_transformers() {
        let named: BTreeMap<String, String> =
            [("query", "q: "), ("passage", "p: "), ("sts", "s: ")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let p = Prompts::new(named, None);
        let keys = [
            "--prompt-name",
            "--query-prompt-name",
            "--document-prompt-name",
        ];
        let none = p
            .for_tasks(TaskPromptChoice {
                keys,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(none.text, None);
        assert_eq!(none.query.as_deref(), Some("q: "));
        assert_eq!(none.document.as_deref(), Some("p: "));
        let sts = PromptChoice {
            name: Some("sts"),
            text: None,
        };
        let asked = p
            .for_tasks(TaskPromptChoice {
                text: sts,
                document: PromptChoice {
                    name: None,
                    text: Some("d: "),
                },
                keys,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(asked.text.as_deref(), Some("s: "));
        assert_eq!(asked.query.as_deref(), Some("q: "));
        assert_eq!(asked.document.as_deref(), Some("d: "));
        // no named query / document prompts: both sides take the texts' prompt
        let plain = Prompts::new(BTreeMap::new(), None);
        let t = PromptChoice {
            name: None,
            text: Some("x: "),
        };
        let r = plain
            .for_tasks(TaskPromptChoice {
                text: t,
                keys,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            (r.query.as_deref(), r.document.as_deref()),
            (Some("x: "), Some("x: "))
        );
        let e = p
            .for_tasks(TaskPromptChoice {
                query: PromptChoice {
                    name: Some("nope"),
                    text: None,
                },
                keys,
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--query-prompt-name") && e.contains("nope"),
            "{e}"
        );
    }
}
