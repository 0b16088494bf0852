//! Errors: starting the server ([`Error`]) and answering a request ([`ApiError`], sent as JSON
//! `{error, detail}` with its status).

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why the server could not start (or stop cleanly).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {listen} without a token: anyone who can reach it could watch and pause goals; pass --token-file PATH, or listen on 127.0.0.1"
    )]
    PublicWithoutToken {
        /// The address asked for.
        listen: SocketAddr,
    },
    /// The token file could not be used.
    #[error("token file {}: {detail}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// Binding the address failed.
    #[error("cannot listen on {listen}: {source}")]
    Bind {
        /// The address.
        listen: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] greenlight_store::Error),
    /// The runtime or a thread could not start.
    #[error("cannot start the server's runtime: {0}")]
    Runtime(std::io::Error),
}

/// A request that cannot be answered as asked.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A short kebab-case name of the error.
    pub error: &'static str,
    /// What happened and what to do.
    pub detail: String,
}

impl ApiError {
    /// 404.
    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            error: "not-found",
            detail: detail.into(),
        }
    }

    /// 400.
    pub fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            error: "bad-request",
            detail: detail.into(),
        }
    }

    /// 403.
    pub fn forbidden(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::FORBIDDEN,
            error: "forbidden",
            detail: detail.into(),
        }
    }

    /// 401.
    pub fn unauthorized(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            error: "unauthorized",
            detail: detail.into(),
        }
    }

    /// 409.
    pub fn conflict(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::CONFLICT,
            error: "conflict",
            detail: detail.into(),
        }
    }

    /// 503: the server holds as much as its limits allow; retrying later may succeed.
    pub fn unavailable(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            error: "unavailable",
            detail: detail.into(),
        }
    }

    /// 500.
    pub fn internal(detail: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error: "internal",
            detail: detail.into(),
        }
    }
}

impl From<greenlight_store::Error> for ApiError {
    fn from(e: greenlight_store::Error) -> ApiError {
        use greenlight_store::Error as E;
        match &e {
            E::NoSuchGoal(_) => ApiError::not_found(e.to_string()),
            E::InvalidTransition { .. } => ApiError::conflict(e.to_string()),
            _ => ApiError::internal(e.to_string()),
        }
    }
}

impl From<greenlight_run::goal_control::Error> for ApiError {
    fn from(e: greenlight_run::goal_control::Error) -> ApiError {
        use greenlight_run::goal_control::Error as E;
        match e {
            E::NoSuchGoal(id) => crate::summary::no_goal(id.0),
            E::NoGoalIn(_) => ApiError::not_found(e.to_string()),
            E::Store(e) => ApiError::from(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": self.error, "detail": self.detail});
        (self.status, axum::Json(body)).into_response()
    }
}
