//! Hybrid recall with the real model: BM25, a named actor and episode context each show in
//! the score breakdown, lift the event they should, and a deleted event stops lending its
//! neighbours relevance at once. A turn that asks ranks below the turn that answers it.

use std::path::Path;

use episodic::engine::EngineConfig;
use serde_json::{json, Value};

use crate::common::{assert_parts_sum_to_score, config, event, with, App};

const T0: &str = "2026-05-08T13:56:00Z";

/// A conversation turn: its own resource (so no turn makes another stale) and its session as
/// the source.
fn turn(actor: &str, summary: &str, at: &str, session: &str) -> Value {
    let e = with(event(actor, summary, at), "sourceRefs", json!([session]));
    with(e, "resourceRefs", json!([format!("turn-{at}")]))
}

/// Writes each `(actor, summary, occurredAt, session)` row as a [`turn`].
async fn write_turns(app: &App, key: &str, rows: &[(&str, &str, &str, &str)]) {
    for &(actor, summary, at, session) in rows {
        app.write_ok(key, turn(actor, summary, at, session)).await;
    }
}

fn hit<'a>(recall: &'a Value, summary: &str) -> &'a Value {
    recall["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|h| h["event"]["summary"] == summary)
        .unwrap_or_else(|| panic!("{summary:?} not recalled: {recall}"))
}

fn part(hit: &Value, name: &str) -> f64 {
    hit["scoreBreakdown"][name].as_f64().expect("number")
}

#[tokio::test]
async fn breakdown_shows_lexical_actor_and_context_and_sums_to_score() {
    let app = App::new();
    let key = app.key("acme").await;
    let rows = [
        (
            "Caroline",
            "I signed up for a pottery class at the Zephyrine studio",
            "2026-05-08T13:56:00Z",
            "s1",
        ),
        (
            "Melanie",
            "That sounds lovely, what will you make first?",
            "2026-05-08T13:56:01Z",
            "s1",
        ),
        (
            "Melanie",
            "I went hiking in the mountains with my kids",
            "2026-06-01T10:00:00Z",
            "s2",
        ),
        (
            "Caroline",
            "The weather was terrible all week",
            "2026-06-01T10:00:01Z",
            "s2",
        ),
    ];
    write_turns(&app, &key, &rows).await;
    app.engine.refresh().await.expect("refresh");
    let recall = app
        .recall(
            &key,
            json!({"query": "Where does Caroline take Zephyrine lessons?", "limit": 4}),
        )
        .await;
    let first = &recall["results"][0];
    assert_eq!(
        first["event"]["summary"],
        "I signed up for a pottery class at the Zephyrine studio"
    );
    assert!(
        part(first, "bm25") > 0.0 && part(first, "lexical") > 0.0,
        "{first}"
    );
    assert!(part(first, "actor") > 0.0, "Caroline is named: {first}");
    let reply = hit(&recall, "That sounds lovely, what will you make first?");
    assert_eq!(part(reply, "actor"), 0.0, "Melanie is not named");
    assert!(
        part(reply, "context") > 0.0,
        "its neighbour matches: {reply}"
    );
    let other = hit(&recall, "I went hiking in the mountains with my kids");
    assert!(
        part(reply, "context") > 2.0 * part(other, "context"),
        "a neighbour of the match gains more than a turn of another session: {reply} {other}"
    );
    for h in recall["results"].as_array().expect("results") {
        assert_parts_sum_to_score(h);
    }
}

#[tokio::test]
async fn a_date_the_query_names_lifts_the_event_of_that_date_and_shows_in_the_breakdown() {
    let app = App::new();
    let key = app.key("acme").await;
    let summary = "Melanie painted a lake at sunrise with her kids";
    let dates = [
        "2023-05-20T10:00:00Z",
        "2023-07-14T10:00:00Z",
        "2023-10-02T10:00:00Z",
    ];
    for (i, at) in dates.iter().enumerate() {
        app.write_ok(&key, turn("Melanie", summary, at, &format!("s{i}")))
            .await;
    }
    app.engine.refresh().await.expect("refresh");
    let ask = |query: &'static str| {
        let (app, key) = (&app, &key);
        async move { app.recall(key, json!({"query": query, "limit": 3})).await }
    };
    for (query, want) in [
        (
            "What did Melanie paint in July 2023?",
            "2023-07-14T10:00:00Z",
        ),
        (
            "What did Melanie paint on 20 May, 2023?",
            "2023-05-20T10:00:00Z",
        ),
        ("What did Melanie paint in October?", "2023-10-02T10:00:00Z"),
    ] {
        let recall = ask(query).await;
        let results = recall["results"].as_array().expect("results");
        assert_eq!(results[0]["event"]["occurredAt"], want, "{query}: {recall}");
        assert!(part(&results[0], "date") > 0.0, "{query}: {recall}");
        for other in &results[1..] {
            assert_eq!(part(other, "date"), 0.0, "{query}: {other}");
        }
        for h in results {
            assert_parts_sum_to_score(h);
        }
    }
    // No date named: no event gains one.
    let recall = ask("What did Melanie paint?").await;
    for h in recall["results"].as_array().expect("results") {
        assert_eq!(part(h, "date"), 0.0, "{h}");
    }
}

fn without_question_penalty(dir: &Path) -> EngineConfig {
    let mut c = config(dir);
    c.rank.question_penalty = 0.0;
    c
}

const ASKS: &str = "Wow, that's so cool! Which lake did you camp at with the kids?";
const TELLS: &str = "We camped at Lake Tahoe with the kids, roasting marshmallows by the fire.";

/// A question turn and the turn that answers it, recalled with the question's own words.
async fn question_and_answer(cfg: fn(&Path) -> EngineConfig) -> Value {
    let app = App::open_in(tempfile::tempdir().expect("tempdir"), cfg);
    let key = app.key("acme").await;
    let rows = [
        ("Caroline", ASKS, "2026-05-08T13:56:00Z", "s1"),
        ("Melanie", TELLS, "2026-05-08T13:56:30Z", "s1"),
    ];
    write_turns(&app, &key, &rows).await;
    app.engine.refresh().await.expect("refresh");
    let query = json!({"query": "Which lake did they camp at with the kids?", "limit": 2});
    app.recall(&key, query).await
}

#[tokio::test]
async fn a_turn_that_asks_ranks_below_the_turn_that_answers_and_shows_why() {
    // Without the penalty the question, which repeats the query's words, ranks first.
    let off = question_and_answer(without_question_penalty).await;
    assert_eq!(off["results"][0]["event"]["summary"], ASKS, "{off}");
    assert_eq!(part(hit(&off, ASKS), "question"), 0.0, "{off}");

    let on = question_and_answer(config).await;
    assert_eq!(on["results"][0]["event"]["summary"], TELLS, "{on}");
    let asked = hit(&on, ASKS);
    assert!(part(asked, "question") < 0.0, "{asked}");
    assert_eq!(part(hit(&on, TELLS), "question"), 0.0, "{on}");
    for h in on["results"].as_array().expect("results") {
        assert_parts_sum_to_score(h);
    }
}

#[tokio::test]
async fn a_deleted_event_lends_its_neighbours_no_relevance() {
    let app = App::new();
    let key = app.key("acme").await;
    let matching = app
        .write_ok(
            &key,
            turn(
                "Ana",
                "Our router firmware update bricked the office modem",
                T0,
                "chat-9",
            ),
        )
        .await;
    app.write_ok(
        &key,
        turn(
            "Ben",
            "Oh no, that is annoying",
            "2026-05-08T13:56:05Z",
            "chat-9",
        ),
    )
    .await;
    app.engine.refresh().await.expect("refresh");
    let query = json!({"query": "router firmware bricked modem", "limit": 5});
    let before = app.recall(&key, query.clone()).await;
    let reply = hit(&before, "Oh no, that is annoying");
    assert!(part(reply, "context") > 0.0, "{reply}");
    let own = part(reply, "relevance") + part(reply, "lexical");
    assert!(
        part(reply, "episode") > own,
        "the episode's best match is the router turn's: {reply}"
    );

    let (status, _) = app
        .call(
            "DELETE",
            &format!("/v1/events/{matching}"),
            Some(&key),
            None,
        )
        .await;
    assert!(status.is_success(), "delete: {status}");
    let after = app.recall(&key, query).await;
    let reply = hit(&after, "Oh no, that is annoying");
    assert_eq!(part(reply, "context"), 0.0, "{reply}");
    assert_eq!(part(reply, "lexical"), 0.0, "{reply}");
    // Alone in its episode now, its best is its own match (episode weight 0.5).
    let own = part(reply, "relevance") + part(reply, "lexical");
    assert!((part(reply, "episode") - 0.5 * own).abs() < 1e-5, "{reply}");
}

#[tokio::test]
async fn every_turn_of_the_best_matching_session_shares_its_episode_part() {
    let app = App::new();
    let key = app.key("acme").await;
    let rows = [
        (
            "Caroline",
            "I adopted a rescue greyhound named Biscuit",
            "2026-05-08T13:56:00Z",
            "s1",
        ),
        (
            "Melanie",
            "Congratulations, that is wonderful news!",
            "2026-05-08T13:56:01Z",
            "s1",
        ),
        (
            "Caroline",
            "We walk along the river every morning now",
            "2026-05-08T13:56:02Z",
            "s1",
        ),
        (
            "Melanie",
            "My car broke down on the highway",
            "2026-06-01T10:00:00Z",
            "s2",
        ),
        (
            "Caroline",
            "Sorry to hear that, I hope it is fixed soon",
            "2026-06-01T10:00:01Z",
            "s2",
        ),
    ];
    write_turns(&app, &key, &rows).await;
    app.engine.refresh().await.expect("refresh");
    let recall = app
        .recall(
            &key,
            json!({"query": "Which dog did Caroline adopt?", "limit": 5}),
        )
        .await;
    assert_eq!(
        recall["results"][0]["event"]["summary"],
        "I adopted a rescue greyhound named Biscuit"
    );
    let best = hit(&recall, "I adopted a rescue greyhound named Biscuit");
    let walk = hit(&recall, "We walk along the river every morning now");
    let other = hit(&recall, "Sorry to hear that, I hope it is fixed soon");
    let own = part(best, "relevance") + part(best, "lexical");
    assert!(
        (part(best, "episode") - 0.5 * own).abs() < 1e-5,
        "the best turn's episode part is its own match: {best}"
    );
    assert!(
        (part(walk, "episode") - part(best, "episode")).abs() < 1e-6,
        "a turn two away shares the episode's best: {walk}"
    );
    assert!(
        part(walk, "episode") > part(other, "episode"),
        "a turn of the other session does not: {other}"
    );
}

#[tokio::test]
async fn a_name_the_query_gives_selects_the_actor_not_the_events_that_mention_it() {
    let app = App::new();
    let key = app.key("acme").await;
    let rows = [
        (
            "Caroline",
            "I painted a sunset over the lake",
            "2026-05-08T13:56:00Z",
            "s1",
        ),
        (
            "Melanie",
            "Hey Caroline! Caroline, how are you?",
            "2026-06-01T10:00:00Z",
            "s2",
        ),
        (
            "Melanie",
            "I baked bread with the kids",
            "2026-06-01T10:00:01Z",
            "s2",
        ),
    ];
    write_turns(&app, &key, &rows).await;
    // Another tenant where nobody is called Caroline: there the name stays a word.
    let other_key = app.key("globex").await;
    write_turns(&app, &other_key, &rows[1..]).await;
    app.engine.refresh().await.expect("refresh");
    let query = json!({"query": "What did Caroline paint?", "limit": 3});
    let recall = app.recall(&key, query.clone()).await;
    assert_eq!(
        recall["results"][0]["event"]["summary"], "I painted a sunset over the lake",
        "{recall}"
    );
    let greeting = hit(&recall, "Hey Caroline! Caroline, how are you?");
    assert_eq!(
        part(greeting, "bm25"),
        0.0,
        "the name is not searched: {greeting}"
    );
    let grant = |tenant: &str| episodic::auth::TenantGrant::internal(tenant, "test");
    let rank = &app.engine.config().rank;
    let text = app
        .engine
        .semantic_query(&grant("acme"), "What did Caroline's sister paint?", rank);
    assert_eq!(text, "What did sister paint?", "nor embedded");

    let recall = app.recall(&other_key, query).await;
    let greeting = hit(&recall, "Hey Caroline! Caroline, how are you?");
    assert!(part(greeting, "bm25") > 0.0, "{greeting}");
    let text = app
        .engine
        .semantic_query(&grant("globex"), "What did Caroline paint?", rank);
    assert_eq!(text, "What did Caroline paint?");
}

/// Index refreshes far apart: every write stays in the fresh tail until the test refreshes.
fn slow_refresh(dir: &Path) -> EngineConfig {
    let mut c = config(dir);
    c.writer.refresh_interval = std::time::Duration::from_secs(3600);
    c
}

#[tokio::test]
async fn a_fresh_write_ranks_lexically_as_it_will_once_committed() {
    let app = App::open_in(tempfile::tempdir().expect("tempdir"), slow_refresh);
    let key = app.key("acme").await;
    for (actor, summary) in [
        (
            "user:dana",
            "Dana asked for the quarterly invoice to be resent",
        ),
        ("user:erin", "Erin moved the team standup to Tuesdays"),
        ("user:sam", "Sam wants the weekly report as a PDF"),
        ("user:erin", "Erin reported the VPN dropping twice an hour"),
    ] {
        app.write_ok(&key, event(actor, summary, "2026-06-01T09:00:00Z"))
            .await;
    }
    app.engine.refresh().await.expect("refresh");
    let fresh = "Erin wants weekly digest emails";
    app.write_ok(&key, event("user:erin", fresh, "2026-06-02T09:00:00Z"))
        .await;
    let query = json!({"query": "When does Erin want digests?", "limit": 5});
    let before = app.recall(&key, query.clone()).await;
    assert_eq!(before["results"][0]["event"]["summary"], fresh, "{before}");
    let bm25_before = part(hit(&before, fresh), "bm25");
    assert!(
        bm25_before > 0.0,
        "the fresh event matched no word: {before}"
    );
    assert_parts_sum_to_score(hit(&before, fresh));

    app.engine.refresh().await.expect("refresh");
    let after = app.recall(&key, query).await;
    let order = |r: &Value| -> Vec<String> {
        r["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|h| h["event"]["summary"].as_str().expect("summary").to_string())
            .collect()
    };
    assert_eq!(order(&before), order(&after), "{before}\n{after}");
    let bm25_after = part(hit(&after, fresh), "bm25");
    assert!(
        (bm25_before - bm25_after).abs() < 1e-4,
        "fresh {bm25_before} vs committed {bm25_after}"
    );
}
