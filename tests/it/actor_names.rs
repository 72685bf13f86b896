//! Names events give their actors (`actorNames`): validated, stored and returned with the
//! event, and a query that uses one ranks the actor's events as a query naming the id does
//! (the `actor` part of the breakdown), only for keys that can see an event giving the name.

use serde_json::{json, Value};

use crate::common::{event, rt, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

async fn write(app: &App, key: &str, body: Value) -> (u16, Value) {
    let (status, body) = app.call("POST", "/v1/events", Some(key), Some(body)).await;
    (status.as_u16(), body)
}

/// The actor part of each hit of a recall of `query`, by actor id.
async fn actor_parts(app: &App, key: &str, query: &str) -> Vec<(String, f64)> {
    let (status, body) = app
        .call(
            "POST",
            "/v1/recall",
            Some(key),
            Some(json!({"query": query, "limit": 10})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| {
            (
                h["event"]["actorId"].as_str().expect("actor").to_string(),
                h["scoreBreakdown"]["actor"].as_f64().expect("actor part"),
            )
        })
        .collect()
}

#[test]
fn a_name_given_on_an_event_names_its_actor_for_keys_that_see_it() {
    rt().block_on(async {
        let app = App::new();
        let key = app.key_full("acme").await;
        let dana = with(
            event(
                "user:u-7f3a",
                "Asked for renewal notices by email instead of post",
                T,
            ),
            "actorNames",
            json!(["Dana Smith", "dana smith", "Dee"]),
        );
        let (status, body) = write(&app, &key, dana).await;
        assert_eq!(status, 201, "{body}");
        // A repeat (ignoring case) is kept once.
        assert_eq!(body["event"]["actorNames"], json!(["Dana Smith", "Dee"]));
        let id = body["event"]["eventId"].as_str().expect("id").to_string();
        let (_, got) = app
            .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
        assert_eq!(got["actorNames"], json!(["Dana Smith", "Dee"]));
        // Another actor, whose name is given only on a private event.
        let ravi = with(
            with(
                event(
                    "user:u-91c2",
                    "Wants the renewal notices sent to the office",
                    T,
                ),
                "actorNames",
                json!(["Ravi"]),
            ),
            "privacyClass",
            json!("private"),
        );
        assert_eq!(write(&app, &key, ravi).await.0, 201);
        let plain = event("user:u-91c2", "Asked about renewal notice dates", T);
        assert_eq!(write(&app, &key, plain).await.0, 201);

        let parts = actor_parts(&app, &key, "What did Dana Smith ask about renewal notices?").await;
        let dana_part = parts
            .iter()
            .find(|(a, _)| a == "user:u-7f3a")
            .expect("Dana's event")
            .1;
        assert!(dana_part > 0.0, "{parts:?}");
        assert!(
            parts
                .iter()
                .filter(|(a, _)| a != "user:u-7f3a")
                .all(|(_, p)| *p == 0.0),
            "{parts:?}"
        );
        // A name is matched by all its words, in any case.
        let parts = actor_parts(&app, &key, "what did dee want").await;
        assert!(
            parts.iter().any(|(a, p)| a == "user:u-7f3a" && *p > 0.0),
            "{parts:?}"
        );

        // Ravi is given on a private event only: a key that may read it is ranked by it...
        let parts = actor_parts(&app, &key, "What does Ravi want for renewal notices?").await;
        assert!(
            parts.iter().any(|(a, p)| a == "user:u-91c2" && *p > 0.0),
            "{parts:?}"
        );
        // ...a key limited to internal events is not: the name is an unknown word to it.
        let (status, made) = app
            .call(
                "POST",
                "/v1/admin/keys",
                Some(ADMIN),
                Some(
                    json!({"tenantId": "acme", "roles": ["reader"], "maxPrivacyClass": "internal"}),
                ),
            )
            .await;
        assert_eq!(status, 201, "{made}");
        let internal = made["key"].as_str().expect("key");
        let parts = actor_parts(&app, internal, "What does Ravi want for renewal notices?").await;
        assert!(!parts.is_empty());
        assert!(parts.iter().all(|(_, p)| *p == 0.0), "{parts:?}");
    });
}

#[test]
fn bad_actor_names_are_refused_field_by_field() {
    rt().block_on(async {
        let app = App::new();
        let key = app.key("acme").await;
        let base = event("user:dana", "Asked for renewal notices by email", T);
        for (names, field) in [
            (json!(["a", "b", "c", "d", "e"]), "actorNames"),
            (json!(["Dana", "--"]), "actorNames[1]"),
            (json!(["x".repeat(65)]), "actorNames[0]"),
            (json!(["Dana\u{7}"]), "actorNames[0]"),
            (json!("Dana"), "actorNames"),
            (json!([" Dana"]), "actorNames[0]"),
        ] {
            let (status, body) =
                write(&app, &key, with(base.clone(), "actorNames", names.clone())).await;
            assert_eq!(status, 422, "{names}: {body}");
            assert!(body.to_string().contains(field), "{names}: {body}");
        }
        // A credential in a name is denied like one in the summary.
        let token = with(
            base,
            "actorNames",
            json!(["ghp_16C7e42F292c6912E7710c838347Ae178B4a"]),
        );
        let (status, body) = write(&app, &key, token).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["code"], "policy_denied", "{body}");
        assert!(body.to_string().contains("contains_credential"), "{body}");
        assert!(!body.to_string().contains("ghp_16C7"), "{body}");
    });
}
