//! The OpenAPI 3.1 description of the HTTP API, generated from the handlers' annotations.
//!
//! Invariants: every JSON route is registered through `utoipa_axum::routes!`, so a route
//! cannot exist without its operation in the spec; the few non-JSON routes (the docs and
//! operator pages, the MCP endpoint) are added here by hand and a test checks the whole
//! route list against the spec. Request bodies that handlers validate by hand (to report
//! every field error at once) are described by the schema-only types below, which mirror
//! the validators' accepted fields exactly.

use serde::Serialize;
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::HttpMethod;
use utoipa::{Modify, OpenApi, ToSchema};

use crate::error::FieldError;
use crate::model::{Decision, EventStatus, PrivacyClass, StoredEvent, Timestamp};

/// Static document metadata; paths come from the router.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Episodic",
        description = "Long-term episodic memory server: events with provenance, scope-first \
                       hybrid recall returned as evidence, corrections, deletion and audit.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "events", description = "Write, read, correct and delete events"),
        (name = "recall", description = "Scope-first retrieval and timelines"),
        (name = "governance", description = "Reviews, erasure, audit"),
        (name = "admin", description = "Keys, policy, compaction"),
        (name = "ops", description = "Health, readiness, metrics, documentation"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key created by an admin (`POST /v1/admin/keys`)",
                    ))
                    .build(),
            ),
        );
    }
}

/// An RFC 9457 problem: every error response has this shape.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProblemDoc {
    /// `urn:episodic:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short human title of the code.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// What went wrong in this request.
    pub detail: String,
    /// Stable snake_case error code (clients match on it).
    pub code: String,
    /// Every field-level problem, for `validation_failed`.
    pub errors: Option<Vec<FieldError>>,
    /// The request's `X-Request-ID`.
    pub request_id: Option<String>,
    /// Role the key lacks, for `forbidden`.
    pub missing_role: Option<String>,
}

/// The authentication failures every `/v1` route can answer.
#[derive(utoipa::IntoResponses)]
pub enum AuthErrors {
    /// 401.
    #[response(
        status = 401,
        description = "missing, malformed or revoked key",
        content_type = "application/problem+json"
    )]
    Unauthenticated(ProblemDoc),
    /// 403.
    #[response(
        status = 403,
        description = "the key lacks a role (`missingRole`)",
        content_type = "application/problem+json"
    )]
    Forbidden(ProblemDoc),
    /// 429.
    #[response(
        status = 429,
        description = "too many failed authentications from this address; the key is not \
                       checked until `Retry-After` seconds have passed",
        content_type = "application/problem+json"
    )]
    TooManyFailures(ProblemDoc),
}

/// The body failures every route with a JSON body can answer.
#[derive(utoipa::IntoResponses)]
pub enum BodyErrors {
    /// 400.
    #[response(
        status = 400,
        description = "malformed JSON",
        content_type = "application/problem+json"
    )]
    Malformed(ProblemDoc),
    /// 408.
    #[response(
        status = 408,
        description = "the body did not arrive within the body timeout (the connection closes)",
        content_type = "application/problem+json"
    )]
    Timeout(ProblemDoc),
    /// 413.
    #[response(
        status = 413,
        description = "body too large",
        content_type = "application/problem+json"
    )]
    TooLarge(ProblemDoc),
    /// 415.
    #[response(
        status = 415,
        description = "body is not JSON",
        content_type = "application/problem+json"
    )]
    NotJson(ProblemDoc),
}

/// The engine is loading or storage cannot take writes.
#[derive(utoipa::IntoResponses)]
pub enum Unavailable {
    /// 503.
    #[response(
        status = 503,
        description = "not ready, or storage unavailable",
        content_type = "application/problem+json"
    )]
    Unavailable(ProblemDoc),
}

/// `GET /healthz` and `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` (liveness), `ready`, or `degraded` (ready, but an index is behind the log after a
    /// failed commit: answers stay complete, fresh events are matched in memory meanwhile).
    pub status: String,
    /// Readiness only: each index's state, `ok` or `degraded` (`{"scope": "ok"}`).
    #[schema(value_type = Option<Object>)]
    pub indexes: Option<serde_json::Value>,
}

/// The answer to an accepted write.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteResponse {
    /// The event's id.
    pub event_id: String,
    /// `active`, or `pending_review` for a 202.
    pub status: EventStatus,
    /// The write policy's decision.
    pub decision: Decision,
    /// The stored event (201 only).
    pub event: Option<StoredEvent>,
    /// Present when the write omitted derivable fields: each field the server filled in or
    /// changed (a privacy class raised to what the detectors found), its value and why.
    pub derived: Option<Vec<crate::model::Derived>>,
    /// `false` when the writing key will not see the stored event (its privacy class is
    /// above the key's `maxPrivacyClass`); absent otherwise.
    pub visible_to_writer: Option<bool>,
    /// Why the writing key will not see it, with the class a key needs to.
    pub visibility: Option<String>,
}

/// `POST /v1/events:batch` body.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchRequest {
    /// Write bodies (at most `--max-batch-events`, default 256), each as `POST /v1/events`
    /// takes it.
    pub events: Vec<crate::model::draft::EventWrite>,
}

/// `POST /v1/events:batch` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResponse {
    /// One per input event, in input order.
    pub results: Vec<BatchResult>,
}

/// One batch item's result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    /// As a single write would have answered: 201, 202, 403, 409, 422 or 503.
    pub status: u16,
    /// The stored event's id (201 and 202).
    pub event_id: Option<String>,
    /// The stored event's status (`active`, `pending_review`).
    pub event_status: Option<EventStatus>,
    /// The write policy's decision.
    pub decision: Option<Decision>,
    /// The stored event (201).
    pub event: Option<StoredEvent>,
    /// What the server derived.
    pub derived: Option<Vec<crate::model::Derived>>,
    /// The problem a single write would have answered (failures).
    pub error: Option<ProblemDoc>,
}

/// `POST /v1/observe` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ObserveResponse {
    /// `ignored` (nothing stored) or `candidate` (written through the policy).
    pub outcome: String,
    /// Why it was ignored.
    pub reason: Option<String>,
    /// The event candidate built from the interaction.
    #[schema(value_type = Option<Object>)]
    pub candidate: Option<Value>,
    /// The classifier's evidence (rules and prototype similarities).
    #[schema(value_type = Object)]
    pub classification: Value,
    /// The write's answer, as `POST /v1/events` gives it.
    pub result: Option<WriteResponse>,
}

/// `POST /v1/erasure` body.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"actorId": "user:dana"}))]
pub struct ErasureBody {
    /// The actor whose events marked `deleteOnRequest` are erased.
    #[schema(min_length = 1, max_length = 512, pattern = "\\S")]
    pub actor_id: String,
}

/// Optional body of a review decision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"note": "Confirmed with the customer by phone"}))]
pub struct ReviewNote {
    /// Reviewer's note (at most 4096 bytes of UTF-8; the schema states 1024 characters,
    /// which always fit).
    #[schema(max_length = 1024)]
    pub note: Option<String>,
}

/// One pending review.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewItem {
    /// The pending event.
    pub event: StoredEvent,
    /// The decision that sent it to review.
    pub decision: Decision,
}

/// `GET /v1/reviews` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewList {
    /// Oldest first.
    pub reviews: Vec<ReviewItem>,
}

/// `GET /v1/audit` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// Entries in sequence order.
    pub entries: Vec<crate::audit::AuditEntry>,
    /// Pass as `cursor` for the next page.
    pub next_cursor: Option<String>,
}

/// `GET /v1/events/{eventId}/history` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryResponse {
    /// The event asked about.
    pub event_id: String,
    /// Its current state, if it still exists.
    pub event: Option<StoredEvent>,
    /// Every audit entry that mentions it.
    pub history: Vec<crate::audit::AuditEntry>,
}

/// `POST /v1/admin/keys` body.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tenantId": "acme", "roles": ["writer", "reader"], "label": "support agent", "defaultSourceTrust": "tool_result"}))]
pub struct NewKeyBody {
    /// The tenant the key is bound to.
    pub tenant_id: String,
    /// Roles: `reader`, `writer`, `operator`, `memory_reviewer`, the policy's approver role,
    /// or an approver role an event awaiting review names (never `admin` or `metrics`); any
    /// other role is refused with the list of known ones.
    pub roles: Vec<String>,
    /// Limit the key to these actors.
    pub actor_ids: Option<Vec<String>>,
    /// Highest privacy class the key may read (default `internal`).
    pub max_privacy_class: Option<PrivacyClass>,
    /// What the key is for (1-128 characters, no control characters).
    #[schema(min_length = 1, max_length = 128)]
    pub label: Option<String>,
    /// The `sourceTrust` writes with this key get when they name none (default: none, so
    /// they are `agent_inferred`).
    pub default_source_trust: Option<crate::model::SourceTrust>,
}

/// A key record (never the secret, except once at creation).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRecordDoc {
    /// The secret, shown only in the creation answer.
    pub key: Option<String>,
    /// Key id.
    pub key_id: String,
    /// Bound tenant.
    pub tenant_id: String,
    /// Roles.
    pub roles: Vec<String>,
    /// Actor limit.
    pub actor_ids: Option<Vec<String>>,
    /// Privacy limit.
    pub max_privacy_class: PrivacyClass,
    /// What the key is for, if the admin said.
    pub label: Option<String>,
    /// The `sourceTrust` writes with this key get when they name none.
    pub default_source_trust: Option<crate::model::SourceTrust>,
    /// Creation time (listing only).
    pub created_at: Option<Timestamp>,
    /// Revocation time (listing only).
    pub revoked_at: Option<Timestamp>,
}

/// `GET /v1/admin/keys` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    /// Every key.
    pub keys: Vec<KeyRecordDoc>,
}

/// `DELETE /v1/admin/keys/{keyId}` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revoked {
    /// The key.
    pub key_id: String,
    /// Always true.
    pub revoked: bool,
}

/// `POST /v1/admin/keys/admin/rotate` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedAdminKey {
    /// The new admin key, shown only in this answer.
    pub key: String,
    /// Always `admin`.
    pub key_id: String,
    /// Its roles.
    pub roles: Vec<String>,
    /// When the new secret was made.
    pub created_at: Timestamp,
}

/// `POST /v1/admin/policy/replay` body.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"policy": {"version": "v2", "reviewEventTypes": ["human_approval"]}, "dryRun": true}))]
pub struct ReplayBody {
    /// A candidate write policy (same format as the `--policy` file).
    #[schema(value_type = Object)]
    pub policy: Value,
    /// True to report only, false to apply.
    pub dry_run: bool,
}

/// `POST /v1/admin/backup` body: nothing; the server names the backup and its place (the
/// body may be absent).
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupBody {}

/// The document with its version and the hand-described (non-JSON) routes added.
pub fn finish(mut api: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    api.info.version = env!("CARGO_PKG_VERSION").to_string();
    api.paths.add_path_operation(
        "/ui",
        vec![HttpMethod::Get],
        static_page(
            "operator_page",
            "Operator page (timeline, history, recall breakdown, audit, reviews); also at /ui/",
            None,
        ),
    );
    api.paths.add_path_operation(
        "/ui/{file}",
        vec![HttpMethod::Get],
        static_page(
            "operator_page_file",
            "Static files of the operator page",
            Some(("file", "index.html, app.js, style.css or favicon.svg")),
        ),
    );
    api.paths
        .add_path_operation("/mcp", vec![HttpMethod::Post], mcp_operation());
    api
}

fn mcp_operation() -> utoipa::openapi::path::Operation {
    use utoipa::openapi::path::OperationBuilder;
    use utoipa::openapi::{ContentBuilder, ResponseBuilder};
    let json_rpc = || ContentBuilder::new().build();
    OperationBuilder::new()
        .operation_id(Some("mcp_json_rpc"))
        .summary(Some(
            "MCP (Model Context Protocol) streamable HTTP transport: JSON-RPC messages for the \
             tools record_event, observe_interaction, recall, get_timeline, get_event, \
             correct_event, forget_event, current_datetime",
        ))
        .tag("ops")
        .response(
            "200",
            ResponseBuilder::new()
                .description("a JSON-RPC response")
                .content("application/json", json_rpc())
                .build(),
        )
        .response("401", problem("missing, malformed or revoked key"))
        .response(
            "406",
            problem("`Accept` must allow application/json and text/event-stream"),
        )
        .response("415", problem("the body must be application/json"))
        .response(
            "429",
            problem("too many failed authentications from this address (`Retry-After`)"),
        )
        .build()
}

/// A problem+json response with `description`.
fn problem(description: &str) -> utoipa::openapi::Response {
    use utoipa::openapi::{ContentBuilder, ResponseBuilder};
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(utoipa::openapi::Ref::from_schema_name("ProblemDoc")))
                .build(),
        )
        .build()
}

fn static_page(
    id: &str,
    summary: &str,
    param: Option<(&str, &str)>,
) -> utoipa::openapi::path::Operation {
    use utoipa::openapi::path::{OperationBuilder, ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ContentBuilder, Required, ResponseBuilder};
    let ok = ResponseBuilder::new()
        .description("the file (text/html, text/javascript, text/css or image/svg+xml)")
        .content("text/html", ContentBuilder::new().build())
        .content("text/javascript", ContentBuilder::new().build())
        .content("text/css", ContentBuilder::new().build())
        .content("image/svg+xml", ContentBuilder::new().build())
        .build();
    let missing = ResponseBuilder::new()
        .description("no such file")
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(utoipa::openapi::Ref::from_schema_name("ProblemDoc")))
                .build(),
        )
        .build();
    let mut op = OperationBuilder::new()
        .operation_id(Some(id))
        .summary(Some(summary))
        .tag("ops")
        .security(utoipa::openapi::security::SecurityRequirement::default())
        .response("200", ok)
        .response("404", missing);
    if let Some((name, description)) = param {
        op = op.parameter(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::schema::Type::String)
                        .pattern(Some("^(index\\.html|app\\.js|style\\.css|favicon\\.svg)$")),
                ))
                .description(Some(description)),
        );
    }
    op.build()
}
