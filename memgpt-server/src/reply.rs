//! Success responses whose status the OpenAPI document states: `201 Created` with a JSON body,
//! `204 No Content`.

use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{Operation, Response, StatusCode as ApiStatus};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response as HttpResponse};
use schemars::JsonSchema;
use serde::Serialize;

/// `201 Created` with `T` as JSON.
#[derive(Debug, Clone)]
pub struct Created<T>(pub T);

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> HttpResponse {
        (StatusCode::CREATED, Json(self.0)).into_response()
    }
}

impl<T: JsonSchema> OperationOutput for Created<T> {
    type Inner = T;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        Json::<T>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<ApiStatus>, Response)> {
        Self::operation_response(ctx, operation)
            .map(|mut response| {
                response.description = "Created".to_owned();
                vec![(Some(ApiStatus::Code(201)), response)]
            })
            .unwrap_or_default()
    }
}

/// `204 No Content`.
#[derive(Debug, Clone, Copy)]
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> HttpResponse {
        StatusCode::NO_CONTENT.into_response()
    }
}

impl OperationOutput for NoContent {
    type Inner = ();

    fn operation_response(_: &mut GenContext, _: &mut Operation) -> Option<Response> {
        Some(Response {
            description: "Done (no content)".to_owned(),
            ..Response::default()
        })
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<ApiStatus>, Response)> {
        Self::operation_response(ctx, operation)
            .map(|response| vec![(Some(ApiStatus::Code(204)), response)])
            .unwrap_or_default()
    }
}
