//! Errors, and the one place they become HTTP statuses and OpenAI-shaped bodies
//! (`{"error": {"message", "type", "param", "code"}}`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Errors of `nest-serve`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or asks for something the model does not offer.
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<&'static str>,
    },
    /// Too many inputs, tokens or bytes in one request.
    #[error("{message}")]
    TooLarge {
        message: String,
        param: Option<&'static str>,
    },
    /// No API key, or not one of the server's (`--api-key`).
    #[error("{0}")]
    Unauthorized(String),
    /// A bad server setting (startup only, never an HTTP answer).
    #[error("{0}")]
    Config(String),
    /// The request (its body included) took longer than `--request-timeout`.
    #[error("the request took longer than {0} s (--request-timeout)")]
    Timeout(u64),
    /// No route at this path, or not with this method (`405`).
    #[error("{message}")]
    NoRoute { message: String, method: bool },
    /// The queue is full.
    #[error("the server is at capacity ({queued} inputs queued, limit {limit}); retry later")]
    Overloaded { queued: usize, limit: usize },
    /// The model is still loading (or failed to load).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else (a failed forward pass, a dropped worker).
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Model(#[from] nest_model::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    pub fn bad(param: Option<&'static str>, message: impl Into<String>) -> Self {
        Error::BadRequest {
            message: message.into(),
            param,
        }
    }
    pub fn too_large(param: Option<&'static str>, message: impl Into<String>) -> Self {
        Error::TooLarge {
            message: message.into(),
            param,
        }
    }

    /// Status, OpenAI error `type`, `param` and `code`.
    fn parts(&self) -> (StatusCode, &'static str, Option<&'static str>, &'static str) {
        match self {
            Error::BadRequest { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                *param,
                "invalid_value",
            ),
            Error::TooLarge { param, .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                *param,
                "too_large",
            ),
            Error::Unauthorized(_) => (
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                None,
                "invalid_api_key",
            ),
            Error::Timeout(_) => (
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                None,
                "timeout",
            ),
            Error::NoRoute { method: false, .. } => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                None,
                "not_found",
            ),
            Error::NoRoute { method: true, .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                None,
                "method_not_allowed",
            ),
            Error::Overloaded { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                None,
                "queue_full",
            ),
            Error::Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                None,
                "model_loading",
            ),
            Error::Internal(_) | Error::Config(_) | Error::Model(_) | Error::Io(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                None,
                "internal_error",
            ),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.parts().0
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let (status, kind, param, code) = self.parts();
        let body = crate::response::ErrorBody {
            error: crate::response::ErrorDetail {
                message: self.to_string(),
                kind,
                param,
                code,
            },
        };
        crate::metrics::METRICS.errors(status.as_u16());
        let mut r = (status, axum::Json(body)).into_response();
        let header = match status {
            StatusCode::UNAUTHORIZED => Some((axum::http::header::WWW_AUTHENTICATE, "Bearer")),
            // a full queue drains within a batch or two: when to try again (OpenAI's clients
            // and most HTTP retry policies read it)
            StatusCode::TOO_MANY_REQUESTS => Some((axum::http::header::RETRY_AFTER, "1")),
            _ => None,
        };
        if let Some((name, value)) = header {
            r.headers_mut()
                .insert(name, axum::http::HeaderValue::from_static(value));
        }
        r
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A full queue says when to come back (helper trial D: a 429 without Retry-After, which
    /// OpenAI's clients retry on their own schedule); a refused key says how to authenticate.
    #[test]
    fn statuses_carry_the_headers_clients_read() {
        let r = Error::Overloaded {
            queued: 10,
            limit: 10,
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["retry-after"], "1");
        let r = Error::bad(None, "x").into_response();
        assert!(r.headers().get("retry-after").is_none());
    }
}
