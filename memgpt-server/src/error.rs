//! Errors as the API reports them: an HTTP status and a JSON body with a stable `code`.
//!
//! ```json
//! {"error": {"code": "block_over_limit", "message": "edit rejected: block `human` would hold ..."}}
//! ```
//!
//! Clients branch on `code` (the list is [`ErrorCode`]); `message` is for people and may change.

use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{Operation, Response};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response as HttpResponse};
use memgpt_core::Error as CoreError;
use memgpt_core::memory::MemoryError;
use memgpt_core::store::StoreError;
use schemars::JsonSchema;
use serde::Serialize;

use crate::tenants::TenantsError;

/// The stable machine-readable reason of an error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The body is not JSON, or not the JSON the route takes (missing or mistyped field).
    BadJson,
    /// The body has a field the route does not know.
    UnknownField,
    /// A value is out of range or malformed (an id, a date, a page size, an empty text).
    InvalidInput,
    /// The body is larger than the server accepts.
    BodyTooLarge,
    /// No API key, or one that is unknown or revoked.
    Unauthorized,
    /// The admin key is missing or wrong, or the server has none.
    AdminOnly,
    /// No such agent, passage, block, tenant or key (or it belongs to another tenant), or no
    /// such route.
    NotFound,
    /// The route does not take this HTTP method.
    MethodNotAllowed,
    /// The name is taken.
    AlreadyExists,
    /// A memory block edit would exceed the block's character limit.
    BlockOverLimit,
    /// The block is read-only, or the text to replace is not in it.
    BlockEditRejected,
    /// A function (tool) name is not registered.
    UnknownTool,
    /// A page-replacement policy name is not registered.
    UnknownPolicy,
    /// A message or document is larger than the agent accepts.
    TooLarge,
    /// Another step of the agent committed first (retry), or an approval names a call the
    /// agent is not waiting on.
    Conflict,
    /// The agent waits for a function call's approval: approve or deny it first (a message of
    /// `type` `approval`).
    ApprovalPending,
    /// An `Idempotency-Key` was sent again with another request.
    IdempotencyKeyReused,
    /// The agent cannot be configured that way (window too small, model unknown...).
    InvalidConfig,
    /// The LLM provider failed (after its retries).
    LlmError,
    /// A dependency is unavailable for now (database, embedder); retry later.
    Unavailable,
    /// The request took longer than the server allows.
    Timeout,
    /// A bug or a broken store; the server log has details.
    Internal,
}

impl ErrorCode {
    /// The HTTP status of this code.
    pub fn status(self) -> StatusCode {
        use ErrorCode::*;
        match self {
            BadJson | InvalidInput => StatusCode::BAD_REQUEST,
            UnknownField | BlockOverLimit | BlockEditRejected | UnknownTool | UnknownPolicy
            | InvalidConfig | IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            BodyTooLarge | TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Unauthorized => StatusCode::UNAUTHORIZED,
            AdminOnly => StatusCode::FORBIDDEN,
            NotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AlreadyExists | Conflict | ApprovalPending => StatusCode::CONFLICT,
            LlmError => StatusCode::BAD_GATEWAY,
            Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Timeout => StatusCode::GATEWAY_TIMEOUT,
            Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error response: a [`ErrorCode`] and a message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ApiError {
    /// What kind of error.
    pub code: ErrorCode,
    /// What happened, for people.
    pub message: String,
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The error inside [`ErrorBody`].
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// The stable reason.
    pub code: ErrorCode,
    /// A description for people.
    pub message: String,
}

impl ApiError {
    /// An error of `code` saying `message`; addresses in it (`http://...`) are left out: an
    /// error a tenant reads never names what stands behind the server.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: redact_addresses(&message.into()),
        }
    }

    /// `404 not_found` for `what` (also what another tenant's resource looks like).
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    /// `400 invalid_input`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    /// `500 internal`, logging the cause (the response does not carry internals).
    pub fn internal(context: &str, error: impl std::fmt::Display) -> Self {
        tracing::error!(error = %error, "{context}");
        Self::new(ErrorCode::Internal, format!("{context} failed"))
    }
}

/// The step's LLM failure, if the model could not be reached: an error for the client, as
/// OpenAI's API reports one (`502 llm_error`; in a stream, an error event). The tenant reads
/// what kind of failure it was; the provider's own message (its address, its words) goes to
/// the operator's log.
pub(crate) fn llm_failure(record: &memgpt_core::StepRecord) -> Option<ApiError> {
    match &record.stop_reason {
        memgpt_core::StopReason::ProviderError {
            message, failure, ..
        } => {
            tracing::warn!(error = %message, "the model failed");
            Some(ApiError::new(
                ErrorCode::LlmError,
                format!(
                    "the model failed: {failure}. The message was kept: retry this request (the \
                     same Idempotency-Key) to have the agent answer it, not a new request"
                ),
            ))
        }
        _ => None,
    }
}

/// `text` with every `http://` or `https://` address replaced by `<address>`.
pub(crate) fn redact_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = ["http://", "https://"]
            .iter()
            .filter_map(|scheme| rest.find(scheme))
            .min();
        let Some(start) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        let address = &rest[start..];
        let end = address
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '>' | ']' | '`'))
            .unwrap_or(address.len());
        out.push_str("<address>");
        rest = &address[end..];
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> HttpResponse {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut response = (self.code.status(), Json(body)).into_response();
        // For the metrics layer, which counts errors by code.
        response.extensions_mut().insert(self.code);
        response
    }
}

impl OperationOutput for ApiError {
    type Inner = ErrorBody;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        Json::<ErrorBody>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<aide::openapi::StatusCode>, Response)> {
        let Some(mut response) = Self::operation_response(ctx, operation) else {
            return Vec::new();
        };
        response.description =
            "An error: `{\"error\": {\"code\", \"message\"}}` with a stable code".to_owned();
        vec![
            (Some(aide::openapi::StatusCode::Range(4)), response.clone()),
            (Some(aide::openapi::StatusCode::Range(5)), response),
        ]
    }
}

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        let message = error.to_string();
        let code = match &error {
            CoreError::Store(e) => return Self::from_store(e, message),
            CoreError::Memory(e) => memory_code(e),
            CoreError::Registry(_) => ErrorCode::UnknownTool,
            CoreError::Policy(_) => ErrorCode::UnknownPolicy,
            CoreError::DocumentTooLarge { .. } | CoreError::MessageTooLarge { .. } => {
                ErrorCode::TooLarge
            }
            CoreError::EmptyDocument { .. } | CoreError::ForeignMessage { .. } => {
                ErrorCode::InvalidInput
            }
            CoreError::Config(_) | CoreError::ContextFull { .. } => ErrorCode::InvalidConfig,
            CoreError::ApprovalPending { .. } => ErrorCode::ApprovalPending,
            // The agent is there; its state does not match the request.
            CoreError::NoPendingApproval { .. } => ErrorCode::Conflict,
            CoreError::PassageNotFound(_) => ErrorCode::NotFound,
            // The passage is there, but no longer a current fact.
            CoreError::PassageRetired { .. } => ErrorCode::Conflict,
            _ => match error.kind() {
                memgpt_core::ErrorKind::Unavailable => ErrorCode::Unavailable,
                memgpt_core::ErrorKind::InvalidInput => ErrorCode::InvalidInput,
                _ => ErrorCode::Internal,
            },
        };
        match code {
            ErrorCode::Internal => Self::hidden(code, &message, "the server failed"),
            ErrorCode::Unavailable => {
                let what = match &error {
                    CoreError::Embed(_) => "the embedding model is unavailable for now",
                    _ => "a service the server depends on is unavailable for now",
                };
                Self::hidden(code, &message, what)
            }
            _ => Self::new(code, message),
        }
    }
}

impl ApiError {
    /// An error whose details stay in the operator's log: the tenant reads `public` and how
    /// to go on.
    fn hidden(code: ErrorCode, details: &str, public: &str) -> Self {
        tracing::error!(error = %details, code = ?code, "request failed");
        let next = if code == ErrorCode::Unavailable {
            "retry later"
        } else {
            "the operator's log has the details"
        };
        Self::new(code, format!("{public}; {next}"))
    }
}

/// The code of a refused memory-block edit.
fn memory_code(error: &MemoryError) -> ErrorCode {
    match error {
        MemoryError::OverLimit { .. } => ErrorCode::BlockOverLimit,
        MemoryError::UnknownBlock { .. } => ErrorCode::NotFound,
        MemoryError::DuplicateLabel { .. } => ErrorCode::AlreadyExists,
        // Another writer changed the shared block since the version the edit was based on.
        MemoryError::Changed { .. } => ErrorCode::Conflict,
        _ => ErrorCode::BlockEditRejected,
    }
}

impl ApiError {
    fn from_store(error: &StoreError, message: String) -> Self {
        use memgpt_core::ErrorKind;
        let code = match error.kind() {
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::AlreadyExists => ErrorCode::AlreadyExists,
            ErrorKind::Conflict => ErrorCode::Conflict,
            ErrorKind::InvalidInput => ErrorCode::InvalidInput,
            ErrorKind::Unavailable => ErrorCode::Unavailable,
            ErrorKind::Config => ErrorCode::InvalidConfig,
            _ => ErrorCode::Internal,
        };
        match code {
            ErrorCode::Internal => Self::hidden(code, &message, "the store failed"),
            ErrorCode::Unavailable => {
                Self::hidden(code, &message, "the store is busy or unreachable for now")
            }
            _ => Self::new(code, message),
        }
    }
}

impl From<StoreError> for ApiError {
    /// As the core reports it (a refused shared-block edit is a memory error).
    fn from(error: StoreError) -> Self {
        CoreError::from(error).into()
    }
}

impl From<TenantsError> for ApiError {
    fn from(error: TenantsError) -> Self {
        match error {
            TenantsError::NotFound(what) => Self::not_found(what),
            other => Self::internal("the tenant store", other),
        }
    }
}

/// `Result` of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_client_or_server_status() {
        for code in [
            ErrorCode::BadJson,
            ErrorCode::UnknownField,
            ErrorCode::BlockOverLimit,
            ErrorCode::NotFound,
            ErrorCode::Internal,
        ] {
            let status = code.status();
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{code:?}"
            );
        }
        let json = serde_json::to_value(ErrorCode::BlockOverLimit).unwrap();
        assert_eq!(json, "block_over_limit");
    }

    #[test]
    fn addresses_never_reach_a_tenant() {
        let e = ApiError::new(
            ErrorCode::LlmError,
            "error sending request for url (http://127.0.0.1:41234/v1/chat/completions) via https://proxy.internal:8443/x",
        );
        assert_eq!(
            e.message,
            "error sending request for url (<address>) via <address>"
        );
        assert_eq!(redact_addresses("no address here"), "no address here");
    }

    #[test]
    fn internal_and_unavailable_errors_hide_their_details() {
        let store = StoreError::Backend {
            message: "database at /srv/memgpt/memgpt.db is locked".into(),
            transient: true,
            source: None,
        };
        let e = ApiError::from(store);
        assert_eq!(e.code, ErrorCode::Unavailable);
        assert!(!e.message.contains("/srv"), "{}", e.message);
        let broken = StoreError::Backend {
            message: "SELECT failed on host db.internal".into(),
            transient: false,
            source: None,
        };
        let e = ApiError::from(broken);
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(!e.message.contains("db.internal"), "{}", e.message);
    }
}
