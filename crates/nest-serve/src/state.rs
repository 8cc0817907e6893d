//! What every handler shares: the served models, the per-request limits, the keys and the
//! index ([`AppState`]).

use std::sync::Arc;

use crate::engine::Engine;
use crate::{Error, Result};

/// Per-request limits (`413` beyond them, `408` past the timeout) and who may call from a
/// browser.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_inputs: usize,
    pub max_tokens: usize,
    pub max_body_bytes: usize,
    /// The longest a request may take, reading its body included (a slow client is cut off).
    pub request_timeout: std::time::Duration,
    /// Origins allowed cross-origin (CORS); empty = no CORS headers, `*` = any origin.
    pub cors_origins: Vec<String>,
    /// A body's fields its endpoint does not read: refused (OpenAI's answer) or ignored.
    pub unknown_fields: crate::request::UnknownFields,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_inputs: 32,
            max_tokens: 16384,
            max_body_bytes: 2 * 1024 * 1024,
            request_timeout: std::time::Duration::from_secs(60),
            cors_origins: Vec::new(),
            unknown_fields: Default::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct AppState {
    /// Every served model; a request's `model` picks one, the first when it names none.
    pub engines: Arc<Vec<Arc<Engine>>>,
    pub limits: Limits,
    pub access: Arc<crate::auth::Access>,
    /// The index of `/v1/search` and `/v1/documents` (`--index`), when there is one.
    pub search: Option<Arc<crate::search::Searcher>>,
}

impl AppState {
    /// The engine a request names (`model`: a served name), the first when it names none.
    pub fn engine(&self, name: Option<&str>) -> Result<&Arc<Engine>> {
        let first = &self.engines[0];
        match name {
            None | Some("") => Ok(first),
            Some(n) => self
                .engines
                .iter()
                .find(|e| e.config.served_name == n)
                .ok_or_else(|| {
                    let names: Vec<&str> = self
                        .engines
                        .iter()
                        .map(|e| e.config.served_name.as_str())
                        .collect();
                    Error::bad(
                        Some("model"),
                        format!("model '{n}' is not served here; this server serves {names:?}"),
                    )
                }),
        }
    }
}
