//! `POST /v1/retrievers/langchain`: recall in the shape LangChain's
//! `RemoteLangChainRetriever` reads (`{"response": [{"page_content", "metadata"}]}`).
//!
//! Invariants: a thin adapter over `POST /v1/recall` (same grant, scope, ranking, audit);
//! `page_content` is the hit's evidence block, so a RAG prompt receives memory framed as
//! evidence, never as instructions; metadata carries provenance and the score breakdown.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::extract::{Auth, JsonBody};
use super::openapi::{AuthErrors, BodyErrors, ProblemDoc, Unavailable};
use super::AppState;
use crate::auth::roles;
use crate::error::{FieldError, Invalid};
use crate::retrieve::evidence::render_one;
use crate::retrieve::{Hit, RecallRequest};
use crate::wire::Problem;

/// Request body: the retriever's input key is `message`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"message": "How does Dana want renewal notices?", "limit": 5, "scope": {"actorIds": ["user:dana"]}}))]
pub struct LangChainQuery {
    /// The query text.
    #[schema(min_length = 1, max_length = 4096, pattern = "\\S")]
    pub message: String,
    /// Documents to return, 1–100 (default 10).
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Scope filters, as in `POST /v1/recall`.
    pub scope: Option<crate::retrieve::Scope>,
}

/// One LangChain document.
#[derive(Debug, Serialize, ToSchema)]
pub struct LangChainDocument {
    /// The evidence block of the event.
    pub page_content: String,
    /// Provenance: eventId, eventType, occurredAt, recordedAt, actorId, sourceRefs,
    /// sourceTrust, confidence, score, scoreBreakdown.
    #[schema(value_type = Object)]
    pub metadata: Value,
}

/// Response body.
#[derive(Debug, Serialize, ToSchema)]
pub struct LangChainResponse {
    /// Documents, best first.
    pub response: Vec<LangChainDocument>,
}

/// `POST /v1/retrievers/langchain`.
#[utoipa::path(
    post,
    path = "/v1/retrievers/langchain",
    operation_id = "langchain_retrieve",
    tag = "recall",
    summary = "Recall shaped for LangChain's RemoteLangChainRetriever",
    request_body = LangChainQuery,
    responses(
        (status = 200, description = "documents", body = LangChainResponse),
        (status = 422, description = "validation failed", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn retrieve(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::READER)?;
    let req = parse(&body)?;
    let resp = state.engine(&grant)?.recall(&grant, req).await?;
    let docs: Vec<Value> = resp.results.iter().map(document).collect();
    Ok(Json(json!({ "response": docs })))
}

fn parse(body: &Value) -> Result<RecallRequest, Problem> {
    let Value::Object(obj) = body else {
        return Err(Problem::validation(vec![FieldError::new(
            "",
            "body must be a JSON object",
        )]));
    };
    let mut errors: Vec<FieldError> = obj
        .keys()
        .filter(|k| !["message", "limit", "scope"].contains(&k.as_str()))
        .map(|k| FieldError::unknown(k.clone(), &["message", "limit", "scope"]))
        .collect();
    let mut recall = Map::new();
    for (from, to) in [("message", "query"), ("limit", "limit"), ("scope", "scope")] {
        if let Some(v) = obj.get(from) {
            recall.insert(to.into(), v.clone());
        }
    }
    if !recall.contains_key("query") {
        errors.push(FieldError::new("message", "is required"));
    }
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    RecallRequest::parse(&Value::Object(recall)).map_err(|Invalid(mut errors)| {
        for e in &mut errors {
            if e.field == "query" {
                e.field = "message".into();
            }
        }
        Problem::validation(errors)
    })
}

fn document(hit: &Hit) -> Value {
    let e = &hit.event;
    json!({
        "page_content": render_one(e),
        "metadata": {
            "eventId": e.event_id,
            "eventType": e.event_type,
            "occurredAt": e.occurred_at,
            "recordedAt": e.recorded_at,
            "actorId": e.actor_id,
            "projectId": e.project_id,
            "sourceRefs": e.source_refs,
            "sourceTrust": e.source_trust,
            "confidence": e.confidence,
            "score": hit.score,
            "scoreBreakdown": hit.score_breakdown,
        }
    })
}
