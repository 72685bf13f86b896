//! Tests of `classify`.

use super::*;
use crate::embed::HashingEmbedder;

fn cue_types(text: &str) -> Vec<&'static str> {
    let (_, votes) = cues(text);
    EVENT_TYPES
        .iter()
        .zip(votes)
        .filter(|(_, v)| *v > 0.0)
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn all_patterns_compile() {
    assert_eq!(CUES.len(), CUE_SPEC.len());
    assert!(NOT_APPROVAL.is_match("submitted for your approval"));
    assert!(CHATTER_PHRASES.is_match("thank you so much"));
}

#[test]
fn content_free_and_pure_chatter_have_no_content_words() {
    assert!(lexical("...").content_free);
    assert!(lexical("👍").content_free);
    assert!(lexical("hmm").content_free);
    assert_eq!(lexical("ok thanks, have a great day!").content_words, 0);
    assert_eq!(lexical("Hi there, how are you doing?").content_words, 0);
    assert!(lexical("thanks, and please switch my invoices to email").content_words > 0);
}

#[test]
fn politeness_does_not_hide_a_preference() {
    let lex = lexical("thanks, and please switch my invoices to email from now on");
    assert!(lex.cues.contains(&"preference_going_forward"), "{lex:?}");
    assert!(lex.cues.contains(&"preference_request"));
}

#[test]
fn no_problem_is_not_an_incident() {
    assert!(cue_types("No problem at all, thank you!").is_empty());
    assert!(cue_types("no worries, have a nice day").is_empty());
}

#[test]
fn cues_vote_for_the_expected_types() {
    assert!(cue_types("Actually, I meant the Berlin office, not Munich")
        .contains(&"correction_received"));
    assert!(cue_types("The budget is approved, go ahead").contains(&"human_approval"));
    assert!(cue_types("checkout fails with a 502 error").contains(&"incident_or_failure"));
    assert!(cue_types("We finally migrated the billing service").contains(&"task_milestone"));
    assert!(
        cue_types("I'd prefer a window seat on long flights").contains(&"user_preference_stated")
    );
}

fn verdict(text: &str, role: Role) -> Verdict {
    let e = HashingEmbedder::new();
    let protos = Prototypes::build(&e).expect("prototypes");
    let v = e.embed(&[text]).expect("embed").remove(0);
    decide(
        &lexical(text),
        &protos.similarities(&v),
        role,
        &Thresholds::default(),
    )
}

#[test]
fn decide_ignores_chatter_and_stores_cued_events() {
    assert_eq!(
        verdict("thanks so much, have a good one", Role::User).ignore,
        Some(IgnoreReason::RoutineChatter)
    );
    assert_eq!(
        verdict("?!", Role::User).ignore,
        Some(IgnoreReason::ContentFree)
    );
    let v = verdict(
        "thanks, and please switch my invoices to email from now on",
        Role::User,
    );
    assert_eq!(v.ignore, None);
    assert_eq!(v.event_type, "user_preference_stated");
    let v = verdict("status: order 7781 delivered to locker", Role::Tool);
    assert_eq!(v.ignore, None);
    assert_eq!(v.event_type, "tool_observed_event");
}

#[test]
fn routine_tool_chatter_is_ignored_but_tool_observations_are_kept() {
    for text in ["ping", "pong", "ack", "200", "OK", "heartbeat", "ok, done"] {
        assert!(
            verdict(text, Role::Tool).ignore.is_some(),
            "{text}: {:?}",
            verdict(text, Role::Tool)
        );
    }
    for text in [
        "deploy of build 4812 failed: migration 0042 timed out",
        "queue depth 1200, consumer lag 35 s",
        "invoice 7781 paid in full",
    ] {
        assert_eq!(verdict(text, Role::Tool).ignore, None, "{text}");
    }
}
