//! Inside a tenant, an event outside a key's grant (another actor's, or of a privacy class
//! above the key's ceiling) is indistinguishable from one that never existed, on every
//! route: REST, MCP tools and the LangChain retriever; and an expired event is never
//! returned. Each case is one of the leaks a key limited to `actorIds: ["user-1"]` with the
//! default ceiling (internal) found in a tenant that also holds private events and other
//! actors' events.

use std::collections::HashSet;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{event, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

/// A tenant with an event the limited key may see (`a`), a private one of the same actor
/// (`p`) and another actor's (`o`), all read once by the full key so that the trail holds
/// other keys' reads naming all three.
struct World {
    app: App,
    /// Every role, every privacy class.
    full: String,
    /// Every role but limited to `user-1`, ceiling internal.
    limited: String,
    /// Every role, no actor limit, ceiling internal (the default).
    default: String,
    a: String,
    p: String,
    o: String,
}

async fn key(app: &App, body: Value) -> String {
    let (status, created) = app
        .call("POST", "/v1/admin/keys", Some(ADMIN), Some(body))
        .await;
    assert_eq!(status, 201, "{created}");
    created["key"].as_str().expect("key").to_string()
}

async fn world() -> World {
    let app = App::new();
    let full = app.key_full("acme").await;
    let roles = json!(["writer", "reader", "operator", "memory_reviewer"]);
    let limited = key(
        &app,
        json!({"tenantId": "acme", "roles": roles, "actorIds": ["user-1"]}),
    )
    .await;
    let default = app.key("acme").await;
    let a = app
        .write_ok(
            &full,
            event(
                "user-1",
                "The customer asked for renewal notices by email",
                T,
            ),
        )
        .await;
    let p = app
        .write_ok(
            &full,
            with(
                event(
                    "user-1",
                    "The customer's renewal notices go to her home at 5 Elm Street",
                    T,
                ),
                "privacyClass",
                json!("private"),
            ),
        )
        .await;
    let o = app
        .write_ok(
            &full,
            event(
                "user-2",
                "Another customer wants renewal notices by post",
                T,
            ),
        )
        .await;
    app.recall(&full, json!({"query": "renewal notices", "limit": 10}))
        .await;
    for id in [&a, &p, &o] {
        let (status, _) = app
            .call("GET", &format!("/v1/events/{id}"), Some(&full), None)
            .await;
        assert_eq!(status, 200);
    }
    World {
        app,
        full,
        limited,
        default,
        a,
        p,
        o,
    }
}

fn mentions(v: &Value, id: &str) -> bool {
    v.to_string().contains(id)
}

/// Every audit entry of a page, with the key it acted as.
fn entries(page: &Value) -> &Vec<Value> {
    page["entries"]
        .as_array()
        .or_else(|| page["history"].as_array())
        .expect("entries")
}

fn limited_key_id(w: &World) -> String {
    // The limited key's id is the middle part of `epi_<id>_<secret>`.
    w.limited.split('_').nth(1).expect("key id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_and_audit_name_only_what_the_key_may_see() {
    let w = world().await;
    let me = limited_key_id(&w);
    // The limited key reads its event, then looks at its history and the trail.
    w.app
        .recall(&w.limited, json!({"query": "renewal notices"}))
        .await;
    let (status, history) = w
        .app
        .call(
            "GET",
            &format!("/v1/events/{}/history", w.a),
            Some(&w.limited),
            None,
        )
        .await;
    assert_eq!(status, 200, "{history}");
    let (status, audit) = w
        .app
        .call("GET", "/v1/audit?limit=1000", Some(&w.limited), None)
        .await;
    assert_eq!(status, 200, "{audit}");
    for (what, page) in [("history", &history), ("audit", &audit)] {
        assert!(!entries(page).is_empty(), "{what}: {page}");
        assert!(
            !mentions(page, &w.p) && !mentions(page, &w.o),
            "{what} names an out-of-grant event: {page}"
        );
        for e in entries(page) {
            let own = e["keyId"] == me.as_str();
            let ids: Vec<&str> = e["eventIds"]
                .as_array()
                .expect("ids")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert!(own || ids == [w.a.as_str()], "{what}: {e}");
            if !own {
                for request_detail in ["scope", "queryHash", "limit", "asOf"] {
                    assert!(
                        e["detail"].get(request_detail).is_none(),
                        "{what}: another key's {request_detail}: {e}"
                    );
                }
            }
        }
    }
    // Filtering on an out-of-grant id finds exactly what an unknown id finds.
    for id in [&w.p, &w.o] {
        let (_, by_id) = w
            .app
            .call(
                "GET",
                &format!("/v1/audit?eventId={id}"),
                Some(&w.limited),
                None,
            )
            .await;
        let (_, unknown) = w
            .app
            .call(
                "GET",
                "/v1/audit?eventId=01000000-0000-7000-8000-000000000000",
                Some(&w.limited),
                None,
            )
            .await;
        assert_eq!(by_id, unknown);
        assert_eq!(by_id["entries"], json!([]));
        let (status, h) = w
            .app
            .call(
                "GET",
                &format!("/v1/events/{id}/history"),
                Some(&w.limited),
                None,
            )
            .await;
        assert_eq!(status, 404, "{h}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_and_query_hashes_are_keyed() {
    let w = world().await;
    let (_, audit) = w
        .app
        .call("GET", "/v1/audit?limit=1000", Some(&w.full), None)
        .await;
    let plain = |s: &str| hex::encode(Sha256::digest(s.as_bytes()));
    let mut seen = 0;
    for e in entries(&audit) {
        for field in ["contentHash", "queryHash"] {
            if let Some(h) = e["detail"][field].as_str() {
                seen += 1;
                assert!(h.starts_with("hmac:"), "{e}");
                for text in [
                    "The customer asked for renewal notices by email",
                    "renewal notices",
                ] {
                    assert!(!h.contains(&plain(text)), "a guessable hash: {e}");
                }
            }
        }
    }
    assert!(seen >= 4, "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_id_answers_the_same_whether_an_unseen_event_holds_it_or_not() {
    let w = world().await;
    let app = &w.app;
    // An id held by another actor's event, against one nobody holds.
    for (taken, free) in [(&w.o, "01000000-0000-7000-8000-00000000beef")] {
        let mut answers = Vec::new();
        for id in [taken.as_str(), free] {
            let body = with(
                event("user-1", "renewal by email, again", T),
                "eventId",
                json!(id),
            );
            let (status, written) = app.write(&w.limited, body).await;
            let keys: Vec<String> = written
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            answers.push((status, keys));
            // Its own id, namespaced: GET by the chosen id finds it.
            let stored = written["eventId"].as_str().expect("id");
            assert!(stored.starts_with(id) && stored.contains('~'), "{written}");
            let (status, got) = app
                .call("GET", &format!("/v1/events/{id}"), Some(&w.limited), None)
                .await;
            assert_eq!(status, 200, "{got}");
            assert_eq!(got["eventId"], stored);
        }
        assert_eq!(answers[0], answers[1]);
    }
    // A key without an actor limit: a chosen id a private event was written with.
    let private = with(
        with(
            event("user-1", "medical note", T),
            "privacyClass",
            json!("private"),
        ),
        "eventId",
        json!("medical-1"),
    );
    let stored = app.write_ok(&w.full, private).await;
    assert_ne!(
        stored, "medical-1",
        "a private event's chosen id is namespaced"
    );
    let gone = with(
        with(
            event("user-1", "old medical note", T),
            "privacyClass",
            json!("private"),
        ),
        "eventId",
        json!("medical-0"),
    );
    let gone = app.write_ok(&w.full, gone).await;
    let (status, _) = app
        .call("DELETE", &format!("/v1/events/{gone}"), Some(&w.full), None)
        .await;
    assert_eq!(status, 200);
    for id in ["medical-1", "medical-0", "medical-9"] {
        let body = with(event("user-1", "a note", T), "eventId", json!(id));
        let (status, written) = app.write(&w.default, body).await;
        assert_eq!(status, 201, "{id}: {written}");
        assert_eq!(written["eventId"], id);
    }
    // The namespace mark itself is refused in every chosen id, held or not.
    for id in [w.p.as_str(), "x~0011223344556677"] {
        let body = with(event("user-1", "a note", T), "eventId", json!(id));
        let (status, body) = app.write(&w.default, body).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["errors"][0]["field"], "eventId");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_the_key_cannot_see_leaves_the_event_active_for_it() {
    let w = world().await;
    let app = &w.app;
    let fix = with(
        with(
            event(
                "user-1",
                "The customer wants renewal notices by email to her private address",
                T,
            ),
            "privacyClass",
            json!("private"),
        ),
        "supersedesEventIds",
        json!([w.a]),
    );
    let c = app.write_ok(&w.full, fix).await;
    let (_, seen_full) = app
        .call("GET", &format!("/v1/events/{}", w.a), Some(&w.full), None)
        .await;
    assert_eq!(seen_full["status"], "superseded");
    assert_eq!(seen_full["supersededBy"], c.as_str());
    let (status, got) = app
        .call(
            "GET",
            &format!("/v1/events/{}", w.a),
            Some(&w.limited),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(got["status"], "active", "{got}");
    assert!(got.get("supersededBy").is_none(), "{got}");
    let recall = app
        .recall(
            &w.limited,
            json!({"query": "renewal notices by email", "limit": 10}),
        )
        .await;
    assert!(mentions(&recall, &w.a), "still recalled: {recall}");
    assert!(!mentions(&recall, &c), "{recall}");
    let (_, page) = app
        .call("GET", "/v1/timeline", Some(&w.limited), None)
        .await;
    assert!(mentions(&page, &w.a) && !mentions(&page, &c), "{page}");
    let (_, history) = app
        .call(
            "GET",
            &format!("/v1/events/{}/history", w.a),
            Some(&w.limited),
            None,
        )
        .await;
    assert!(!mentions(&history, &c), "{history}");
    assert!(
        entries(&history).iter().all(|e| e["action"] != "correct"),
        "{history}"
    );
    let (status, lc) = app
        .call(
            "POST",
            "/v1/retrievers/langchain",
            Some(&w.limited),
            Some(json!({"message": "renewal notices by email"})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(mentions(&lc, &w.a) && !mentions(&lc, &c), "{lc}");
    // As far as the key knows, the event is active: it may correct it.
    let own_fix = with(
        event(
            "user-1",
            "The customer wants renewal notices by email weekly",
            T,
        ),
        "supersedesEventIds",
        json!([w.a]),
    );
    let (status, body) = app.write(&w.limited, own_fix).await;
    assert_eq!(status, 201, "{body}");
}

/// The key's grant as the engine sees it.
fn grant_of(w: &World, key: &str) -> episodic::auth::TenantGrant {
    let (keys, _) = episodic::auth::KeyStore::open(w.app.dir.path(), Some(ADMIN)).expect("keys");
    keys.authenticate(key)
        .expect("key")
        .tenant_grant()
        .expect("grant")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unseen_actor_name_is_an_ordinary_word_of_the_query() {
    let w = world().await;
    let app = &w.app;
    // `vip` has private events only.
    app.write_ok(
        &w.full,
        with(
            event("vip", "The VIP asked for renewal notices by courier", T),
            "privacyClass",
            json!("private"),
        ),
    )
    .await;
    let rank = &app.engine.config().rank;
    let text = "What did user-2 and vip say about renewal notices?";
    let full = app
        .engine
        .semantic_query(&grant_of(&w, &w.full), text, rank);
    assert!(
        !full.contains("user-2") && !full.contains("vip"),
        "the full key's query names both: {full}"
    );
    for key in [&w.limited, &w.default] {
        let limited = app.engine.semantic_query(&grant_of(&w, key), text, rank);
        let unknown = app.engine.semantic_query(
            &grant_of(&w, key),
            "What did nobody-7 and zzq say about renewal notices?",
            rank,
        );
        assert!(
            limited.contains("vip") && unknown.contains("zzq"),
            "names outside the grant stay words, like unknown ones: {limited}"
        );
    }
    assert!(app
        .engine
        .semantic_query(&grant_of(&w, &w.limited), text, rank)
        .contains("user-2"));
    // Over HTTP: the cosine of the key's event moves with an unseen name exactly as it
    // moves with an unknown word.
    let cosine = |v: &Value| {
        v["results"][0]["scoreBreakdown"]["cosine"]
            .as_f64()
            .expect("cosine")
    };
    let base = app
        .recall(&w.limited, json!({"query": "renewal notices by email"}))
        .await;
    let named = app
        .recall(
            &w.limited,
            json!({"query": "renewal notices by email user-2"}),
        )
        .await;
    assert!((cosine(&base) - cosine(&named)).abs() > 1e-5, "{named}");
    let full_named = app
        .recall(
            &w.full,
            json!({"query": "renewal notices by email user-2", "scope": {"actorIds": ["user-1"]}}),
        )
        .await;
    let full_base = app
        .recall(
            &w.full,
            json!({"query": "renewal notices by email", "scope": {"actorIds": ["user-1"]}}),
        )
        .await;
    assert!((cosine(&full_base) - cosine(&full_named)).abs() < 1e-5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_needs_a_key_that_sees_every_class() {
    let w = world().await;
    let (status, body) = w
        .app
        .call(
            "POST",
            "/v1/erasure",
            Some(&w.limited),
            Some(json!({"actorId": "user-1"})),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["missingGrant"]["maxPrivacyClass"], "sensitive");
    assert!(!mentions(&body, &w.p) && !mentions(&body, &w.a), "{body}");
    for id in [&w.a, &w.p] {
        let (status, _) = w
            .app
            .call("GET", &format!("/v1/events/{id}"), Some(&w.full), None)
            .await;
        assert_eq!(status, 200, "nothing was erased");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_of_an_unseen_event_is_unknown_to_the_key() {
    let w = world().await;
    let app = &w.app;
    let unknown = "01000000-0000-7000-8000-000000000001";
    let (_, not_found) = app
        .call(
            "DELETE",
            &format!("/v1/events/{unknown}"),
            Some(&w.limited),
            None,
        )
        .await;
    for id in [&w.p, &w.o] {
        let (status, body) = app
            .call(
                "DELETE",
                &format!("/v1/events/{id}"),
                Some(&w.limited),
                None,
            )
            .await;
        assert_eq!(status, 404);
        assert_eq!(body["code"], not_found["code"]);
        // Deleted by a key that could see it: still unknown to the limited key.
        let (status, _) = app
            .call("DELETE", &format!("/v1/events/{id}"), Some(&w.full), None)
            .await;
        assert_eq!(status, 200);
        for route in [
            format!("/v1/events/{id}"),
            format!("/v1/events/{id}/history"),
        ] {
            let (status, _) = app.call("GET", &route, Some(&w.limited), None).await;
            assert_eq!(status, 404, "{route}");
        }
        let (status, _) = app
            .call(
                "DELETE",
                &format!("/v1/events/{id}"),
                Some(&w.limited),
                None,
            )
            .await;
        assert_eq!(status, 404);
    }
    let (_, audit) = app
        .call("GET", "/v1/audit?limit=1000", Some(&w.default), None)
        .await;
    assert!(!mentions(&audit, &w.p), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_event_is_never_returned() {
    let w = world().await;
    let app = &w.app;
    let soon = episodic::model::Timestamp::now().plus_millis(1500);
    let e = app
        .write_ok(
            &w.full,
            with(
                event("user-1", "A renewal reminder that expires soon", T),
                "retention",
                json!({"deleteOnRequest": true, "expiresAt": soon}),
            ),
        )
        .await;
    let (status, _) = app
        .call(
            "GET",
            &format!("/v1/events/{e}/history"),
            Some(&w.full),
            None,
        )
        .await;
    assert_eq!(status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1800)).await;
    for key in [&w.full, &w.limited] {
        for route in [format!("/v1/events/{e}"), format!("/v1/events/{e}/history")] {
            let (status, body) = app.call("GET", &route, Some(key), None).await;
            assert_eq!(status, 404, "{route}: {body}");
        }
        let recall = app
            .recall(
                key,
                json!({"query": "renewal reminder that expires", "limit": 20}),
            )
            .await;
        assert!(!mentions(&recall, &e), "{recall}");
        let (_, page) = app.call("GET", "/v1/timeline", Some(key), None).await;
        assert!(!mentions(&page, &e), "{page}");
    }
    let (_, audit) = app
        .call("GET", "/v1/audit?limit=1000", Some(&w.limited), None)
        .await;
    assert!(!mentions(&audit, &e), "{audit}");
}

/// The same answers through the MCP tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_see_what_the_key_may_see() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let w = world().await;
    let fix = with(
        with(
            event("user-1", "private correction", T),
            "privacyClass",
            json!("private"),
        ),
        "supersedesEventIds",
        json!([w.a]),
    );
    let c = w.app.write_ok(&w.full, fix).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = w.app.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
            .auth_header(w.limited.clone()),
    );
    let client = ().serve(transport).await.expect("mcp client");
    let call = |name: &str, args: Value| {
        let Value::Object(args) = args else {
            panic!("object")
        };
        client.call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
    };
    let code = |r: &rmcp::model::CallToolResult| {
        r.structured_content
            .as_ref()
            .and_then(|v| v["code"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let unknown = call(
        "get_event",
        json!({"eventId": "01000000-0000-7000-8000-000000000002"}),
    )
    .await
    .expect("call");
    for id in [&w.p, &w.o, &c] {
        let r = call("get_event", json!({"eventId": id}))
            .await
            .expect("call");
        assert_eq!(code(&r), code(&unknown), "{id}");
        let r = call("forget_event", json!({"eventId": id}))
            .await
            .expect("call");
        assert_eq!(code(&r), "not_found");
    }
    let a = call("get_event", json!({"eventId": w.a}))
        .await
        .expect("call");
    let a = a.structured_content.expect("event");
    assert_eq!(a["status"], "active", "{a}");
    let r = call("recall", json!({"query": "renewal notices", "limit": 10}))
        .await
        .expect("call");
    let got = r.structured_content.expect("recall");
    let ids: HashSet<String> = got["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["event"]["eventId"].as_str().expect("id").to_string())
        .collect();
    assert!(ids.contains(&w.a) && !ids.contains(&w.p) && !ids.contains(&w.o) && !ids.contains(&c));
    let r = call("get_timeline", json!({})).await.expect("call");
    let page = r.structured_content.expect("page");
    assert!(mentions(&page, &w.a) && !mentions(&page, &c) && !mentions(&page, &w.o));
    let r = call(
        "record_event",
        with(
            event("user-1", "renewal by email", T),
            "eventId",
            json!(w.o),
        ),
    )
    .await
    .expect("call");
    assert_eq!(r.is_error, Some(false), "{r:?}");
    client.cancel().await.expect("close");
}
