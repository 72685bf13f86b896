//! Tenant isolation under an adversarial, randomized workload: shared actor names, guessed
//! and foreign event ids, crafted scopes, foreign supersede and delete attempts; every
//! response is scanned for the other tenants' canary strings.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::common::{event, with, App};

const TENANTS: [&str; 3] = ["acme", "globex", "initech"];
const ACTORS: [&str; 4] = ["john", "mary", "admin", "system"];

fn canary(tenant: &str) -> String {
    format!("canary{tenant}zq")
}

#[tokio::test]
async fn randomized_cross_tenant_attacks_never_leak() {
    let app = App::new();
    let mut keys = Vec::new();
    for t in TENANTS {
        keys.push(app.key(t).await);
    }
    let mut rng = StdRng::seed_from_u64(0x150_1a7e);
    let mut ids: Vec<Vec<String>> = vec![Vec::new(); TENANTS.len()];
    for i in 0..36 {
        let t = i % TENANTS.len();
        let actor = ACTORS[rng.gen_range(0..ACTORS.len())];
        let summary = format!("{} invoice {i} for {actor} shipped", canary(TENANTS[t]));
        let body = with(
            event(actor, &summary, "2026-06-17T09:20:00Z"),
            "resourceRefs",
            json!([format!("r{i}")]),
        );
        ids[t].push(app.write_ok(&keys[t], body).await);
    }
    let mut queries = 0;
    for round in 0..150 {
        let me = round % TENANTS.len();
        let other = (me + 1 + rng.gen_range(0..TENANTS.len() - 1)) % TENANTS.len();
        let foreign = ids[other][rng.gen_range(0..ids[other].len())].clone();
        let responses = attack(&app, &keys[me], &foreign, &mut rng).await;
        queries += responses.len();
        for (what, status, body) in responses {
            let text = body.to_string();
            for (t, name) in TENANTS.iter().enumerate() {
                if t != me {
                    assert!(
                        !text.contains(&canary(name)),
                        "{what}: {name}'s data leaked to {}: {text}",
                        TENANTS[me]
                    );
                }
            }
            if what.starts_with("foreign") {
                assert_eq!(status, 404, "{what} must look absent: {text}");
            }
        }
    }
    eprintln!("tenant isolation: {queries} adversarial requests, 0 foreign events");
    for (t, key) in keys.iter().enumerate() {
        for id in &ids[t] {
            assert_eq!(
                app.call("GET", &format!("/v1/events/{id}"), Some(key), None)
                    .await
                    .0
                    .as_u16(),
                200,
                "owner still sees it"
            );
        }
    }
}

async fn attack(
    app: &App,
    key: &str,
    foreign: &str,
    rng: &mut StdRng,
) -> Vec<(String, u16, Value)> {
    let actor = ACTORS[rng.gen_range(0..ACTORS.len())];
    let mut out = Vec::new();
    let mut push = |what: &str, r: (axum::http::StatusCode, Value)| {
        out.push((what.to_string(), r.0.as_u16(), r.1))
    };
    push(
        "foreign get",
        app.call("GET", &format!("/v1/events/{foreign}"), Some(key), None)
            .await,
    );
    push(
        "foreign history",
        app.call(
            "GET",
            &format!("/v1/events/{foreign}/history"),
            Some(key),
            None,
        )
        .await,
    );
    push(
        "foreign delete",
        app.call("DELETE", &format!("/v1/events/{foreign}"), Some(key), None)
            .await,
    );
    push(
        "foreign approve",
        app.call(
            "POST",
            &format!("/v1/reviews/{foreign}/approve"),
            Some(key),
            None,
        )
        .await,
    );
    let fix = with(
        event(actor, "correction attempt", "2026-06-18T00:00:00Z"),
        "supersedesEventIds",
        json!([foreign]),
    );
    push(
        "foreign supersede",
        app.call("POST", "/v1/events", Some(key), Some(fix)).await,
    );
    let scope = json!({"actorIds": [actor, "john", "mary"], "resourceRefs": ["r1", "r2", "r3"]});
    push(
        "recall",
        app.call(
            "POST",
            "/v1/recall",
            Some(key),
            Some(json!({"query": "invoice shipped canary", "scope": scope, "limit": 100})),
        )
        .await,
    );
    push("recall all", app.call("POST", "/v1/recall", Some(key), Some(json!({"query": foreign, "limit": 100, "includeSuperseded": true, "includeStale": true}))).await);
    push(
        "timeline",
        app.call(
            "GET",
            &format!("/v1/timeline?actorId={actor}&limit=500"),
            Some(key),
            None,
        )
        .await,
    );
    push(
        "audit",
        app.call(
            "GET",
            &format!("/v1/audit?eventId={foreign}"),
            Some(key),
            None,
        )
        .await,
    );
    push(
        "erasure",
        app.call(
            "POST",
            "/v1/erasure",
            Some(key),
            Some(json!({"actorId": "nobody-here"})),
        )
        .await,
    );
    out
}
