//! Shared fixtures: the real model (loaded once), an in-process app over a temp data dir,
//! and small request helpers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use episodic::api::auth_limit::{AuthFailureLimit, AuthLimiter};
use episodic::api::{router, AppState};
use episodic::auth::KeyStore;
use episodic::embed::{EmbedError, Embedder, FastEmbedder};
use episodic::engine::{Engine, EngineConfig};

/// The in-process apps' admin key (it must pass the start-up strength rule).
pub const ADMIN: &str = "test-admin-Kq8vZ2xLp9Wm4Rt7Yb3Nc6Hd";

pub fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

/// The real model, loaded once per test binary.
pub fn real_model() -> Arc<FastEmbedder> {
    static MODEL: OnceLock<Arc<FastEmbedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(
                FastEmbedder::load(&model_dir())
                    .expect("model files present: run bash models/fetch.sh"),
            )
        })
        .clone()
}

/// Counts how many texts pass through the wrapped embedder.
pub struct Counting {
    pub inner: Arc<FastEmbedder>,
    pub texts: AtomicUsize,
}

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

/// An in-process server over a temp dir.
pub struct App {
    pub dir: tempfile::TempDir,
    pub router: Router,
    pub engine: Engine,
    pub embedder: Arc<Counting>,
}

pub fn config(dir: &Path) -> EngineConfig {
    EngineConfig::new(dir.to_path_buf())
}

impl App {
    pub fn new() -> App {
        let dir = tempfile::tempdir().expect("tmp");
        Self::open_in(dir, config)
    }

    pub fn open_in(dir: tempfile::TempDir, cfg: fn(&Path) -> EngineConfig) -> App {
        let embedder = Arc::new(Counting {
            inner: real_model(),
            texts: AtomicUsize::new(0),
        });
        let engine = Engine::open(cfg(dir.path()), embedder.clone()).expect("engine opens");
        let (keys, _) = KeyStore::open(dir.path(), Some(ADMIN)).expect("keys");
        let state = AppState {
            engines: episodic::serving::Engines::of(engine.clone()),
            forward: None,
            keys: Arc::new(keys),
            body_limit: episodic::api::DEFAULT_BODY_LIMIT,
            import_limit: episodic::api::DEFAULT_IMPORT_LIMIT,
            auth_limit: Arc::new(AuthLimiter::new(AuthFailureLimit::default())),
        };
        App {
            dir,
            router: router(state),
            engine,
            embedder,
        }
    }

    /// Stops the engine and opens a fresh one over the same data dir.
    pub async fn restart(self) -> App {
        self.engine.shutdown().await;
        let App { dir, .. } = self;
        tokio::task::spawn_blocking(move || App::open_in(dir, config))
            .await
            .expect("reopen")
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let body = match body {
            Some(v) => {
                req = req.header("content-type", "application/json");
                Body::from(serde_json::to_vec(&v).expect("json"))
            }
            None => Body::empty(),
        };
        self.send(req.body(body).expect("request")).await
    }

    pub async fn send(&self, req: Request<Body>) -> (StatusCode, Value) {
        let resp = self.router.clone().oneshot(req).await.expect("response");
        let status = resp.status();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.as_u16() >= 400 {
            assert_eq!(
                ct, "application/problem+json",
                "error without problem+json: {value}"
            );
            assert_eq!(value["status"].as_u64(), Some(u64::from(status.as_u16())));
            assert!(
                value["requestId"].as_str().is_some_and(|r| !r.is_empty()),
                "error without requestId: {value}"
            );
        }
        (status, value)
    }

    /// Creates a key for `tenant` with every tenant role.
    pub async fn key(&self, tenant: &str) -> String {
        self.key_with(tenant, &["writer", "reader", "memory_reviewer", "operator"])
            .await
    }

    /// A key for `tenant` with every tenant role that sees every event of the tenant
    /// (`maxPrivacyClass: sensitive`), as erasure needs.
    pub async fn key_full(&self, tenant: &str) -> String {
        let body = json!({
            "tenantId": tenant,
            "roles": ["writer", "reader", "memory_reviewer", "operator"],
            "maxPrivacyClass": "sensitive",
        });
        let (status, created) = self
            .call("POST", "/v1/admin/keys", Some(ADMIN), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        created["key"].as_str().expect("key").to_string()
    }

    pub async fn key_with(&self, tenant: &str, roles: &[&str]) -> String {
        let (status, body) = self
            .call(
                "POST",
                "/v1/admin/keys",
                Some(ADMIN),
                Some(json!({"tenantId": tenant, "roles": roles})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["key"].as_str().expect("key").to_string()
    }

    pub async fn write(&self, key: &str, event: Value) -> (StatusCode, Value) {
        self.call("POST", "/v1/events", Some(key), Some(event))
            .await
    }

    pub async fn write_ok(&self, key: &str, event: Value) -> String {
        let (status, body) = self.write(key, event).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["eventId"].as_str().expect("id").to_string()
    }

    pub async fn recall(&self, key: &str, body: Value) -> Value {
        let (status, v) = self.call("POST", "/v1/recall", Some(key), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        v
    }

    pub fn texts_embedded(&self) -> usize {
        self.embedder.texts.load(Ordering::SeqCst)
    }
}

/// A valid event body; override fields with `with`.
/// A two-worker runtime for tests that drive the engine's async methods from a plain test.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A write body parsed as the API would before handing it to the engine (default limits;
/// panics on a body the test meant to be valid).
pub fn input(body: &Value) -> episodic::model::EventInput {
    let limits = episodic::model::validate::Limits::default();
    episodic::model::validate::validate_event(body, &limits, episodic::model::Timestamp::now())
        .unwrap_or_else(|errors| panic!("invalid test event: {errors:?}"))
}

pub fn event(actor: &str, summary: &str, occurred_at: &str) -> Value {
    json!({
        "eventType": "user_preference_stated",
        "occurredAt": occurred_at,
        "actorId": actor,
        "resourceRefs": ["renewal-notices"],
        "summary": summary,
        "sourceRefs": ["support-ticket-1842"],
        "sourceTrust": "user_provided",
        "confidence": "high",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    })
}

/// The weighted parts of a recall hit's `scoreBreakdown`, which sum to its `score`.
pub const BREAKDOWN_PARTS: [&str; 10] = [
    "relevance",
    "lexical",
    "context",
    "episode",
    "actor",
    "date",
    "question",
    "recency",
    "trust",
    "confidence",
];

/// Asserts that the weighted parts of a recall hit's breakdown sum to its score.
pub fn assert_parts_sum_to_score(hit: &Value) {
    let b = &hit["scoreBreakdown"];
    let sum: f64 = BREAKDOWN_PARTS
        .iter()
        .map(|k| b[k].as_f64().expect("part"))
        .sum();
    assert!(
        (sum - hit["score"].as_f64().expect("score")).abs() < 1e-4,
        "{hit}"
    );
}

pub fn with(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

pub fn result_ids(recall: &Value) -> Vec<String> {
    recall["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["event"]["eventId"].as_str().expect("id").to_string())
        .collect()
}

pub fn summaries(recall: &Value) -> Vec<String> {
    recall["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["event"]["summary"].as_str().expect("summary").to_string())
        .collect()
}

/// An in-process recall of `scope` for the query text "q", with the visibility defaults.
pub fn recall_request(
    scope: episodic::retrieve::Scope,
    limit: usize,
) -> episodic::retrieve::RecallRequest {
    episodic::retrieve::RecallRequest {
        query: "q".into(),
        scope,
        limit,
        include_superseded: false,
        include_stale: false,
        exact: false,
        as_of: None,
    }
}

/// Every item of a paged list route (`/v1/timeline` → `events`, `/v1/audit` → `entries`)
/// over a real server, following `nextCursor` with pages of `limit`.
pub fn all_pages(
    http: &reqwest::blocking::Client,
    url: &str,
    key: &str,
    field: &str,
    limit: usize,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = http
            .get(url)
            .bearer_auth(key)
            .query(&[("limit", limit.to_string())]);
        if let Some(c) = &cursor {
            req = req.query(&[("cursor", c.as_str())]);
        }
        let page: Value = req.send().expect("page").json().expect("json");
        out.extend(page[field].as_array().expect("list").iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}
