//! JSON request bodies whose rejections are [`ApiError`]s (`bad_json`, `unknown_field`,
//! `body_too_large`) instead of axum's plain-text ones.
//!
//! A number with a zero fraction (`8192.0`) is read as the integer it is, as JSON Schema
//! counts it: an integer field takes it. No string may hold U+0000 (`400 invalid_input`), as
//! the document says.

use aide::OperationInput;
use aide::generate::GenContext;
use aide::openapi::Operation;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, ErrorCode};

/// A JSON body of type `T` (request types deny unknown fields).
#[derive(Debug, Clone, Copy, Default)]
pub struct Body<T>(pub T);

impl<T, S> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let json = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let media = v.split(';').next().unwrap_or_default().trim();
                media.eq_ignore_ascii_case("application/json") || media.ends_with("+json")
            });
        if !json {
            return Err(ApiError::new(
                ErrorCode::BadJson,
                "expected a JSON body (Content-Type: application/json)",
            ));
        }
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::BodyTooLarge, e.body_text())
            } else {
                ApiError::new(ErrorCode::BadJson, e.body_text())
            }
        })?;
        let mut value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::new(ErrorCode::BadJson, format!("the body is not JSON: {e}")))?;
        whole_numbers(&mut value);
        if let Some(path) = nul_at(&value, "") {
            return Err(ApiError::new(
                ErrorCode::InvalidInput,
                format!(
                    "{}: contains U+0000, which no store holds; remove it or encode the data first",
                    if path.is_empty() { "." } else { &path }
                ),
            ));
        }
        match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(value) => Ok(Body(value)),
            Err(e) => {
                let path = e.path().to_string();
                let inner = e.into_inner().to_string();
                let code = if inner.contains("unknown field") {
                    ErrorCode::UnknownField
                } else {
                    ErrorCode::BadJson
                };
                let message = if path == "." {
                    inner
                } else {
                    format!("{path}: {inner}")
                };
                Err(ApiError::new(code, message))
            }
        }
    }
}

/// Where the first string value holding U+0000 is, if any (keys are names the route knows or
/// ignores).
fn nul_at(value: &Value, path: &str) -> Option<String> {
    match value {
        Value::String(text) if text.contains('\0') => Some(path.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_at(item, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            nul_at(item, &at)
        }),
        _ => None,
    }
}

/// Every number with a zero fraction, as an integer.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

impl<T: JsonSchema> OperationInput for Body<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        Json::<T>::operation_input(ctx, operation);
    }
}
