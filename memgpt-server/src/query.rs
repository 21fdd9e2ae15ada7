//! Query strings whose rejections are [`ApiError`]s (`invalid_input`, `unknown_field`) instead
//! of axum's plain-text ones.

use aide::OperationInput;
use aide::generate::GenContext;
use aide::openapi::Operation;
use axum::extract::FromRequestParts;
use axum::extract::rejection::QueryRejection;
use axum::http::request::Parts;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};

/// The query string as `T` (query types deny unknown fields).
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        if query.to_ascii_lowercase().contains("%00") {
            return Err(ApiError::invalid(
                "query string: contains U+0000, which no parameter takes",
            ));
        }
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(query_error(&rejection)),
        }
    }
}

/// `422 unknown_field` for a parameter the route does not take, `400 invalid_input` for a
/// malformed one.
fn query_error(rejection: &QueryRejection) -> ApiError {
    let message = match rejection {
        QueryRejection::FailedToDeserializeQueryString(e) => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                text = cause.to_string();
                source = cause.source();
            }
            format!("query string: {text}")
        }
        other => other.body_text(),
    };
    let code = if message.contains("unknown field") {
        ErrorCode::UnknownField
    } else {
        ErrorCode::InvalidInput
    };
    ApiError::new(code, message)
}

impl<T: JsonSchema> OperationInput for Query<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        axum::extract::Query::<T>::operation_input(ctx, operation);
    }
}
