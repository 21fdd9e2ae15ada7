//! JSON request bodies whose rejections are [`ApiError`]s (`bad_json`, `unknown_field`,
//! `body_too_large`) instead of axum's plain-text ones.

use aide::OperationInput;
use aide::generate::GenContext;
use aide::openapi::Operation;
use axum::Json;
use axum::extract::{FromRequest, Request};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

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
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

impl<T: JsonSchema> OperationInput for Body<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        Json::<T>::operation_input(ctx, operation);
    }
}
