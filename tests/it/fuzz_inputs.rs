//! Malformed and random input: every JSON body and query string, on every route, never gets
//! a 5xx, and every rejection is problem+json with a stable code.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::common::{event, App, ADMIN};

const KEYS: [&str; 20] = [
    "eventType",
    "occurredAt",
    "actorId",
    "summary",
    "sourceRefs",
    "sourceTrust",
    "confidence",
    "privacyClass",
    "retention",
    "resourceRefs",
    "query",
    "scope",
    "limit",
    "actorId",
    "policy",
    "dryRun",
    "tenantId",
    "roles",
    "note",
    "asOf",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::String),
        Just(json!("2026-06-17T09:20:00Z")),
        Just(json!("user_provided")),
        Just(json!("x".repeat(5000))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..8).prop_map(
                |kv| {
                    let map: Map<String, Value> =
                        kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                    Value::Object(map)
                }
            ),
        ]
    })
}

fn mutated_event() -> impl Strategy<Value = Value> {
    (prop::sample::select(KEYS.to_vec()), value()).prop_map(|(k, v)| {
        let mut e = event("fuzz", "fuzzed summary", "2026-06-17T09:20:00Z");
        e[k] = v;
        e
    })
}

const POSTS: [&str; 6] = [
    "/v1/events",
    "/v1/recall",
    "/v1/erasure",
    "/v1/reviews/some-id/approve",
    "/v1/admin/policy/replay",
    "/v1/observe",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn random_bodies_never_cause_a_server_error(bodies in prop::collection::vec(prop_oneof![value(), mutated_event()], 6)) {
        let rt = runtime();
        rt.block_on(async {
            let app = App::new();
            let key = app.key("acme").await;
            for (path, body) in POSTS.iter().zip(bodies.iter()) {
                for k in [key.as_str(), ADMIN] {
                    let (status, resp) = app.call("POST", path, Some(k), Some(body.clone())).await;
                    assert!(status.as_u16() < 500, "{path} {body} -> {status} {resp}");
                    if status.as_u16() >= 400 {
                        assert!(resp["code"].as_str().is_some_and(|c| !c.is_empty()), "{resp}");
                    }
                }
            }
        });
    }

    #[test]
    fn random_query_strings_never_cause_a_server_error(
        params in prop::collection::vec((prop::sample::select(vec!["actorId", "from", "to", "limit", "cursor", "asOf", "eventId", "action", "status", "x"]), "[ -~]{0,12}"), 0..5)
    ) {
        let rt = runtime();
        rt.block_on(async {
            let app = App::new();
            let key = app.key("acme").await;
            let qs: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{k}={}", v.bytes().map(|b| format!("%{b:02X}")).collect::<String>()))
                .collect();
            for path in ["/v1/timeline", "/v1/audit", "/v1/reviews"] {
                let uri = format!("{path}?{}", qs.join("&"));
                let (status, resp) = app.call("GET", &uri, Some(&key), None).await;
                assert!(status.as_u16() < 500, "{uri} -> {status} {resp}");
            }
        });
    }
}
