//! Who may ask: API keys (`nest serve --api-key`, `--api-key-file`, `NEST_API_KEY`).
//!
//! With keys set, every route but `/health` and `/openapi.json` (and `/metrics` with `--open-metrics`) needs
//! `Authorization: Bearer <key>`; anything else gets 401 in OpenAI's error shape before the
//! body is read. Keys are kept as SHA-256 digests and compared in constant time
//! ([`subtle::ConstantTimeEq`]) against every key, so neither a key's content nor which key
//! matched shows in the timing. No keys = open (the default, as text-embeddings-inference).
//! TLS is a reverse proxy's job (docs/SERVING.md).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{Error, Result};

/// The keys a server accepts, as digests.
#[derive(Clone, Default)]
pub struct Access {
    digests: Vec<[u8; 32]>,
    open_metrics: bool,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("keys", &self.digests.len())
            .field("open_metrics", &self.open_metrics)
            .finish()
    }
}

fn digest(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

impl Access {
    /// Every route open to everyone.
    pub fn open() -> Self {
        Access::default()
    }

    /// Accepts exactly `keys` (none = open). A key must be printable ASCII without spaces
    /// (it travels in a header), 16 to 512 bytes; `source` names where it came from in errors.
    pub fn new(keys: &[(String, String)], open_metrics: bool) -> Result<Self> {
        let mut digests = Vec::with_capacity(keys.len());
        for (source, key) in keys {
            let ok_chars = key.bytes().all(|b| b.is_ascii_graphic());
            if !ok_chars || !(16..=512).contains(&key.len()) {
                return Err(Error::Config(format!(
                    "{source}: an API key must be 16 to 512 printable ASCII characters without spaces (got {} bytes{})",
                    key.len(),
                    if ok_chars { "" } else { " with other characters" }
                )));
            }
            digests.push(digest(key.as_bytes()));
        }
        Ok(Access {
            digests,
            open_metrics,
        })
    }

    /// The keys of a file, one per line; blank lines and lines starting with `#` are skipped.
    /// Returns `(source, key)` with the source `FILE:LINE`.
    pub fn read_file(path: &Path) -> Result<Vec<(String, String)>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("--api-key-file {}: {e}", path.display())))?;
        Ok(text
            .lines()
            .enumerate()
            .map(|(i, l)| (i, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
            .map(|(i, l)| (format!("{}:{}", path.display(), i + 1), l.to_string()))
            .collect())
    }

    pub fn is_open(&self) -> bool {
        self.digests.is_empty()
    }

    /// By the route table's guard ([`crate::routes::ROUTES`]); an unknown path needs a key
    /// (its 404 is for callers with one).
    fn needs_key(&self, path: &str) -> bool {
        use crate::routes::{Guard, ROUTES};
        let guard = ROUTES
            .iter()
            .find(|r| r.path == path)
            .map_or(Guard::Key, |r| r.guard);
        !(self.is_open() || guard == Guard::Open || (self.open_metrics && guard == Guard::Metrics))
    }

    /// Whether `authorization` (the header's value) carries one of the keys.
    fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        // the scheme's name is case-insensitive (RFC 9110, 11.1): `bearer` is `Bearer`
        let token = authorization
            .filter(|v| v.len() >= 7 && v[..7].eq_ignore_ascii_case(b"Bearer "))
            .map(|v| &v[7..]);
        let Some(token) = token else {
            return false;
        };
        let d = digest(token);
        let mut hit = subtle::Choice::from(0u8);
        for k in &self.digests {
            hit |= k.ct_eq(&d);
        }
        hit.into()
    }
}

/// The middleware: 401 unless the route is open or the request carries a key.
pub async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    if access.needs_key(req.uri().path()) {
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !access.accepts(auth) {
            let message = if auth.is_none() {
                "no API key: send `Authorization: Bearer <key>`"
            } else {
                "incorrect API key"
            };
            return Error::Unauthorized(message.into()).into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<(String, String)> {
        k.iter()
            .map(|k| ("--api-key".into(), k.to_string()))
            .collect()
    }

    #[test]
    fn keys_are_checked() {
        let a = Access::new(
            &keys(&["0123456789abcdef", "another-key-0123456789"]),
            false,
        )
        .unwrap();
        assert!(a.accepts(Some(b"Bearer 0123456789abcdef")));
        assert!(a.accepts(Some(b"Bearer another-key-0123456789")));
        assert!(!a.accepts(Some(b"Bearer 0123456789abcdeF")));
        assert!(a.accepts(Some(b"bearer 0123456789abcdef")));
        assert!(a.accepts(Some(b"BEARER 0123456789abcdef")));
        assert!(!a.accepts(Some(b"Bearer0123456789abcdef")));
        assert!(!a.accepts(Some(b"0123456789abcdef")));
        assert!(!a.accepts(Some(b"Bearer ")));
        assert!(!a.accepts(None));
        assert!(!a.needs_key("/health") && a.needs_key("/metrics") && a.needs_key("/v1/models"));
        let m = Access::new(&keys(&["0123456789abcdef"]), true).unwrap();
        assert!(!m.needs_key("/metrics") && m.needs_key("/v1/embeddings"));
        assert!(!Access::open().needs_key("/v1/embeddings"));
    }

    #[test]
    fn bad_keys_are_refused_with_their_source() {
        let e = Access::new(&keys(&["short"]), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--api-key") && e.contains("16 to 512"), "{e}");
        let e = Access::new(&keys(&["has a space in the key"]), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("other characters"), "{e}");
    }

    #[test]
    fn key_files_name_their_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("keys");
        std::fs::write(&p, "# team keys\n\n0123456789abcdef\n  x  \n").unwrap();
        let k = Access::read_file(&p).unwrap();
        assert_eq!(k.len(), 2);
        let e = Access::new(&k, false).unwrap_err().to_string();
        assert!(e.ends_with("keys:4: an API key must be 16 to 512 printable ASCII characters without spaces (got 1 bytes)") || e.contains("keys:4:"), "{e}");
    }
}
