//! Tests of `listener`.

use super::*;

fn timeouts() -> Timeouts {
    Timeouts {
        header: Duration::from_secs(10),
        body: Duration::from_secs(30),
        idle: Duration::from_secs(60),
        write: Duration::from_secs(30),
        tls_handshake: Duration::from_secs(10),
        shutdown_grace: Duration::from_secs(10),
    }
}

#[test]
fn each_phase_has_its_deadline() {
    let t = timeouts();
    let reason = |a: &Activity| a.deadline(&t).map(|(_, r)| r);
    let before = Instant::now();
    let a = Arc::new(Activity::new());
    let (head, _) = a.deadline(&t).expect("a new connection has one");
    assert!(head >= before + t.header && head <= Instant::now() + t.header);
    assert_eq!(reason(&a), Some("header_timeout"));
    assert!(a.untouched());
    a.read();
    assert_eq!(
        a.deadline(&t).map(|(at, _)| at),
        Some(head),
        "bytes do not extend the head deadline"
    );
    let in_flight = a.request_started();
    assert_eq!(a.deadline(&t), None, "a request being handled has none");
    let blocked = Instant::now();
    a.write_blocked();
    let (at, why) = a.deadline(&t).expect("a stalled write has one");
    assert_eq!(why, "write_timeout");
    assert!(at >= blocked + t.write && at <= Instant::now() + t.write);
    a.wrote();
    assert_eq!(a.deadline(&t), None);
    let done = Instant::now();
    drop(in_flight);
    let (at, why) = a.deadline(&t).expect("an idle connection has one");
    assert_eq!(why, "idle_timeout");
    assert!(at >= done + t.idle && at <= Instant::now() + t.idle);
    std::thread::sleep(Duration::from_millis(5));
    a.flushed();
    assert_eq!(
        a.deadline(&t).map(|(at, _)| at),
        Some(at),
        "a flush moving no bytes is not activity"
    );
    let sending = Instant::now();
    a.wrote();
    let (later, _) = a.deadline(&t).expect("still idle");
    assert!(
        later > at && later >= sending + t.idle,
        "bytes still leaving are not idle"
    );
    let next = Instant::now();
    a.read();
    let (at, why) = a.deadline(&t).expect("the next request's head has one");
    assert_eq!(why, "header_timeout");
    assert!(at >= next + t.header && at <= Instant::now() + t.header);
    assert!(!a.untouched());
}

#[test]
fn the_refusal_is_a_complete_problem_response() {
    let bytes = refusal_response();
    let text = String::from_utf8(bytes).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    assert!(
        head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{head}"
    );
    assert!(head.contains("content-type: application/problem+json"));
    assert!(head.contains("retry-after: 1"));
    assert!(head.contains("connection: close"));
    assert!(head.contains(&format!("content-length: {}", body.len())));
    let json: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(json["code"], "too_many_connections");
    assert_eq!(json["status"], 503);
    assert!(json["requestId"].is_string());
}

#[test]
fn the_cap_fits_the_open_file_limit() {
    let fitted = fit_descriptor_limit(64).expect("a small cap fits");
    assert_eq!(fitted, 64);
    let huge = fit_descriptor_limit(usize::MAX / 2).expect("lowered, not refused");
    assert!(huge < usize::MAX / 2);
}
