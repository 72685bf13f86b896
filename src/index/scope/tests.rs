//! The scope index against its in-memory twin and tantivy's own answers.

use super::*;
use proptest::prelude::*;
use std::time::Instant;

/// Owned test event.
#[derive(Debug, Clone)]
struct Ev {
    doc: u32,
    tenant: String,
    actor: String,
    project: Option<String>,
    event_type: String,
    resources: Vec<String>,
    at: i64,
    text: String,
    metadata: Metadata,
}

impl Ev {
    fn as_doc(&self) -> ScopeDoc<'_> {
        ScopeDoc {
            doc: self.doc,
            tenant: &self.tenant,
            actor: &self.actor,
            project: self.project.as_deref(),
            event_type: &self.event_type,
            resource_refs: &self.resources,
            occurred_at_ms: self.at,
            text: &self.text,
            metadata: &self.metadata,
        }
    }
}

fn ev(doc: u32, tenant: &str, actor: &str, project: Option<&str>, ty: &str, at: i64) -> Ev {
    Ev {
        doc,
        tenant: tenant.into(),
        actor: actor.into(),
        project: project.map(Into::into),
        event_type: ty.into(),
        resources: Vec::new(),
        at,
        text: String::new(),
        metadata: Metadata::default(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn tenant(t: &str) -> ScopeFilter {
    ScopeFilter {
        tenant: t.into(),
        ..ScopeFilter::default()
    }
}

fn open_tmp() -> (tempfile::TempDir, ScopeIndex) {
    let dir = tempfile::tempdir().unwrap();
    let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
    assert_eq!(seq, None);
    (dir, index)
}

fn add_all(index: &ScopeIndex, evs: &[Ev]) {
    for e in evs {
        index.add(&e.as_doc()).unwrap();
    }
}

/// Fixture: two tenants sharing actor names.
fn fixture() -> Vec<Ev> {
    let mut evs = vec![
        ev(1, "t1", "alice", Some("p1"), "note", 100),
        ev(2, "t1", "bob", Some("p2"), "commit", 200),
        ev(3, "t1", "alice", None, "commit", 300),
        ev(4, "t1", "carol", Some("p1"), "deploy", 400),
        ev(5, "t2", "alice", Some("p1"), "note", 100),
        ev(6, "t2", "bob", None, "commit", 500),
    ];
    evs[0].resources = strings(&["file:a", "file:b"]);
    evs[1].resources = strings(&["file:b"]);
    evs[3].resources = strings(&["svc:x"]);
    evs[4].resources = strings(&["file:a"]);
    evs
}

fn fixture_index() -> (tempfile::TempDir, ScopeIndex, Vec<Ev>) {
    let (dir, index) = open_tmp();
    let evs = fixture();
    add_all(&index, &evs);
    index.commit(6).unwrap();
    (dir, index, evs)
}

/// Asserts search == expected, count agrees, and `matches` agrees.
fn check(index: &ScopeIndex, evs: &[Ev], filter: &ScopeFilter, expected: &[u32]) {
    assert_eq!(index.view().search(filter).unwrap(), expected, "{filter:?}");
    assert_eq!(index.view().count(filter).unwrap(), expected.len());
    let by_pred: Vec<u32> = evs
        .iter()
        .filter(|e| matches(filter, &e.as_doc()))
        .map(|e| e.doc)
        .collect();
    assert_eq!(by_pred, expected, "matches() disagrees for {filter:?}");
}

#[test]
fn index_is_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ScopeIndex>();
}

#[test]
fn each_dimension_and_combinations() {
    let (_d, index, evs) = fixture_index();
    check(&index, &evs, &tenant("t1"), &[1, 2, 3, 4]);
    check(&index, &evs, &tenant("t2"), &[5, 6]);
    check(&index, &evs, &tenant("nobody"), &[]);
    let mut f = tenant("t1");
    f.actor_ids = strings(&["alice", "carol"]);
    check(&index, &evs, &f, &[1, 3, 4]);
    let mut f = tenant("t1");
    f.event_types = strings(&["commit"]);
    check(&index, &evs, &f, &[2, 3]);
    let mut f = tenant("t1");
    f.project_ids = strings(&["p1"]);
    check(&index, &evs, &f, &[1, 4]);
    let mut f = tenant("t1");
    f.actor_ids = strings(&["alice"]);
    f.event_types = strings(&["commit", "note"]);
    f.project_ids = strings(&["p1", "p2"]);
    check(&index, &evs, &f, &[1]);
}

#[test]
fn the_narrowest_list_alone_holds_the_whole_scope() {
    let (_d, index, evs) = fixture_index();
    let mut one = tenant("t1");
    one.actor_ids = strings(&["alice"]);
    assert_eq!(
        index.view().narrowest(&tenant("t1")),
        None,
        "the tenant alone"
    );
    assert_eq!(
        index.view().narrowest(&one),
        None,
        "a single list is the whole filter"
    );
    let mut resources = one.clone();
    resources.event_types = strings(&["commit"]);
    resources.resource_refs = strings(&["file:a"]);
    assert_eq!(
        index.view().narrowest(&resources),
        None,
        "heads cannot check resources"
    );

    let fields = index.fields;
    let of = |f: &ScopeFilter| {
        let n = index.view().narrowest(f).expect("a narrowest clause");
        let ids = index.view().search_narrowest(&n).unwrap();
        (n.field, ids)
    };
    let mut f = tenant("t1");
    f.actor_ids = strings(&["alice", "bob"]);
    f.event_types = strings(&["deploy", "note"]);
    assert_eq!(
        of(&f),
        (fields.pair, vec![1]),
        "1 event, by its actor and type"
    );
    f.event_types = strings(&["commit", "note", "deploy"]);
    // A pair is never wider than either of its lists, so lists in a pair are not sized.
    assert_eq!(
        of(&f),
        (fields.pair, vec![1, 2, 3]),
        "3 events, by the pairs of their actors and types"
    );
    f.project_ids = strings(&["p2"]);
    assert_eq!(of(&f).1.len(), 1, "1 event, by a pair with its project");
    // Its two narrowest clauses are intersected, which only the scope's event carries.
    let both = index.view().narrowest(&f).expect("a narrowest clause");
    assert!(both.and.is_some(), "{both:?}");
    assert_eq!(
        index.view().search_narrowest(&both).unwrap(),
        index.view().search(&f).unwrap()
    );
    // A list in no pair read here (too many pairs) is sized on its own.
    let mut wide = tenant("t1");
    wide.actor_ids = (0..5)
        .map(|i| format!("a{i}"))
        .chain(["alice".into()])
        .collect();
    wide.event_types = (0..4)
        .map(|i| format!("t{i}"))
        .chain(["commit".into()])
        .collect();
    assert_eq!(of(&wide).0, fields.actor, "{wide:?}");
    let mut timed = one.clone();
    timed.occurred_after_ms = Some(150);
    assert_eq!(of(&timed), (fields.actor, vec![1, 3]));
    for filter in [f, timed] {
        let narrow = of(&filter).1;
        let all = index.view().search(&filter).unwrap();
        assert!(all.iter().all(|d| narrow.contains(d)), "{filter:?}");
        assert!(narrow.iter().all(|d| evs[*d as usize - 1].tenant == "t1"));
    }
}

#[test]
fn tenant_isolation() {
    let (_d, index, evs) = fixture_index();
    let mut f = tenant("t2");
    f.actor_ids = strings(&["alice", "bob"]);
    check(&index, &evs, &f, &[5, 6]);
    f.tenant = "t1".into();
    check(&index, &evs, &f, &[1, 2, 3]);
}

#[test]
fn time_range_edges() {
    let (_d, index, evs) = fixture_index();
    let mut f = tenant("t1");
    f.occurred_after_ms = Some(200);
    check(&index, &evs, &f, &[2, 3, 4]);
    f.occurred_before_ms = Some(400);
    check(&index, &evs, &f, &[2, 3]);
    f.occurred_after_ms = None;
    check(&index, &evs, &f, &[1, 2, 3]);
    f.occurred_after_ms = Some(300);
    f.occurred_before_ms = Some(300);
    check(&index, &evs, &f, &[]);
    f.occurred_after_ms = Some(301);
    f.occurred_before_ms = Some(300);
    check(&index, &evs, &f, &[]);
    f.occurred_after_ms = Some(i64::MIN);
    f.occurred_before_ms = Some(i64::MAX);
    check(&index, &evs, &f, &[1, 2, 3, 4]);
}

#[test]
fn resources_any_of() {
    let (_d, index, evs) = fixture_index();
    let mut f = tenant("t1");
    f.resource_refs = strings(&["file:b"]);
    check(&index, &evs, &f, &[1, 2]);
    f.resource_refs = strings(&["file:a", "svc:x"]);
    check(&index, &evs, &f, &[1, 4]);
    f.resource_refs = strings(&["none"]);
    check(&index, &evs, &f, &[]);
}

#[test]
fn project_list_excludes_projectless() {
    let (_d, index, evs) = fixture_index();
    let mut f = tenant("t2");
    f.project_ids = strings(&["p1", "p2"]);
    check(&index, &evs, &f, &[5]);
    let mut f = tenant("t1");
    f.actor_ids = strings(&["alice"]);
    check(&index, &evs, &f, &[1, 3]);
    f.project_ids = strings(&["p1", "p2", ""]);
    check(&index, &evs, &f, &[1]);
}

#[test]
fn payload_round_trip_and_visibility() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
        assert_eq!(seq, None);
        assert!(!index.has_uncommitted());
        index.add(&fixture()[0].as_doc()).unwrap();
        assert!(index.has_uncommitted());
        assert_eq!(
            index.view().search(&tenant("t1")).unwrap(),
            Vec::<u32>::new()
        );
        assert_eq!(index.num_docs(), 0);
        index.commit(41).unwrap();
        assert!(!index.has_uncommitted());
        assert_eq!(index.view().search(&tenant("t1")).unwrap(), vec![1]);
        index.commit(42).unwrap();
    }
    let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
    assert_eq!(seq, Some(42));
    assert_eq!(index.view().search(&tenant("t1")).unwrap(), vec![1]);
    assert_eq!(index.num_docs(), 1);
}

#[test]
fn commit_marks_round_trip_and_older_payloads_read() {
    let mark = CommitMark {
        last_seq: 7,
        audit_seq: Some(9),
    };
    assert_eq!(CommitMark::parse(&mark.payload()), Some(mark));
    let bare = CommitMark {
        last_seq: 7,
        audit_seq: None,
    };
    assert_eq!(CommitMark::parse(&bare.payload()), Some(bare));
    assert_eq!(
        CommitMark::parse(" 12 "),
        Some(CommitMark {
            last_seq: 12,
            audit_seq: None
        })
    );
    assert_eq!(CommitMark::parse("{\"auditSeq\":1}"), None);
    let dir = tempfile::tempdir().unwrap();
    let (index, _) = ScopeIndex::open(dir.path()).unwrap();
    index.commit_marked(mark).unwrap();
    assert_eq!(index.commit_mark().unwrap(), Some(mark));
}

/// A commit that fails (its directory vanished) closes the writer instead of leaving one
/// that indexes nothing; a reopened writer commits what is added again, and the
/// fingerprint shows exactly the committed ids.
#[test]
fn a_failed_commit_closes_the_writer_until_reopened() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("scope");
    let moved = parent.path().join("moved");
    let (index, _) = ScopeIndex::open(&dir).unwrap();
    let evs = fixture();
    index.add(&evs[0].as_doc()).unwrap();
    index.commit(1).unwrap();
    assert_eq!(index.fingerprint(), fingerprint_of([evs[0].doc]));
    std::fs::rename(&dir, &moved).unwrap();
    let failed = index.add(&evs[1].as_doc()).and_then(|()| index.commit(2));
    assert!(failed.is_err(), "a commit into a missing directory fails");
    assert!(!index.writer_ready());
    assert!(index.add(&evs[1].as_doc()).is_err(), "no silent adds");
    std::fs::rename(&moved, &dir).unwrap();
    index.reopen_writer().unwrap();
    assert!(index.writer_ready());
    assert_eq!(index.fingerprint(), fingerprint_of([evs[0].doc]));
    index.delete(evs[1].doc).unwrap();
    index.add(&evs[1].as_doc()).unwrap();
    index.commit(2).unwrap();
    assert_eq!(
        index.fingerprint(),
        fingerprint_of([evs[0].doc, evs[1].doc])
    );
    assert_ne!(
        index.fingerprint(),
        fingerprint_of([evs[0].doc, evs[2].doc])
    );
}

#[test]
fn corrupt_index_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (index, _) = ScopeIndex::open(dir.path()).unwrap();
        index.add(&fixture()[0].as_doc()).unwrap();
        index.commit(1).unwrap();
    }
    std::fs::write(dir.path().join("meta.json"), b"{not json").unwrap();
    let err = ScopeIndex::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("scope index at"), "{err}");
}

#[test]
fn an_index_of_another_schema_is_an_error() {
    // The layout before pair terms: every field but the pairs.
    let dir = tempfile::tempdir().unwrap();
    let (schema, _) = build_schema();
    let mut older = Schema::builder();
    for (_, entry) in schema.fields().filter(|(_, e)| e.name() != "tenant_pair") {
        older.add_field(entry.clone());
    }
    let index = Index::create_in_dir(dir.path(), older.build()).unwrap();
    index
        .writer::<TantivyDocument>(15_000_000)
        .unwrap()
        .commit()
        .unwrap();
    let err = ScopeIndex::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("scope index at"), "{err}");
}

#[test]
fn delete_after_commit() {
    let (_d, index, _) = fixture_index();
    index.delete(3).unwrap();
    assert!(index.has_uncommitted());
    assert_eq!(
        index.view().search(&tenant("t1")).unwrap(),
        vec![1, 2, 3, 4]
    );
    index.commit(7).unwrap();
    assert_eq!(index.view().search(&tenant("t1")).unwrap(), vec![1, 2, 4]);
    assert_eq!(index.view().count(&tenant("t1")).unwrap(), 3);
    assert_eq!(index.num_docs(), 5);
}

#[test]
fn count_bounds_hold_the_count_and_are_exact_without_deletions() {
    let (_d, index, _) = fixture_index();
    let mut f = tenant("t1");
    assert_eq!(index.view().count_bounds(&f), Some((4, 4)));
    f.actor_ids = strings(&["alice", "carol", "alice", "nobody"]);
    assert_eq!(index.view().count_bounds(&f), Some((3, 3)));
    f.actor_ids.clear();
    f.event_types = strings(&["commit"]);
    assert_eq!(index.view().count_bounds(&f), Some((2, 2)));
    f.project_ids = strings(&["p1"]);
    assert_eq!(
        index.view().count_bounds(&f),
        Some((0, 0)),
        "two lists, by pairs"
    );
    f.project_ids = strings(&["p1", "p2", "p1"]);
    assert_eq!(index.view().count_bounds(&f), Some((1, 1)), "event 2");
    f.actor_ids = strings(&["alice", "bob"]);
    assert_eq!(index.view().count_bounds(&f), None, "three lists");
    f.event_types.clear();
    assert_eq!(
        index.view().count_bounds(&f),
        Some((2, 2)),
        "events 1 and 2"
    );
    f.actor_ids = (0..9).map(|i| format!("a{i}")).collect();
    assert_eq!(index.view().count_bounds(&f), None, "more pairs than read");
    f.actor_ids.clear();
    f.project_ids.clear();
    f.occurred_after_ms = Some(150);
    assert_eq!(index.view().count_bounds(&f), None, "time range");
    f.occurred_after_ms = None;
    f.resource_refs = strings(&["file:a"]);
    assert_eq!(index.view().count_bounds(&f), None, "resources");
    assert_eq!(index.view().count_bounds(&tenant("nope")), Some((0, 0)));

    index.delete(3).unwrap();
    index.commit(7).unwrap();
    let f = tenant("t1");
    let (lower, upper) = index.view().count_bounds(&f).unwrap();
    let count = index.view().count(&f).unwrap();
    assert!(
        lower <= count && count <= upper,
        "{lower} <= {count} <= {upper}"
    );
}

#[test]
fn delete_then_add_replaces() {
    let (_d, index, evs) = fixture_index();
    index.delete(1).unwrap();
    let mut moved = evs[0].clone();
    moved.actor = "zed".into();
    index.add(&moved.as_doc()).unwrap();
    index.commit(8).unwrap();
    let mut f = tenant("t1");
    f.actor_ids = strings(&["alice"]);
    assert_eq!(index.view().search(&f).unwrap(), vec![3]);
    f.actor_ids = strings(&["zed"]);
    assert_eq!(index.view().search(&f).unwrap(), vec![1]);
    assert_eq!(
        index.view().search(&tenant("t1")).unwrap(),
        vec![1, 2, 3, 4]
    );
}

#[test]
fn merge_all_keeps_results_and_payload() {
    let dir = tempfile::tempdir().unwrap();
    let evs = fixture();
    {
        let (index, _) = ScopeIndex::open(dir.path()).unwrap();
        for (i, e) in evs.iter().enumerate() {
            index.add(&e.as_doc()).unwrap();
            index.commit(i as u64).unwrap();
        }
        index.delete(2).unwrap();
        index.commit(99).unwrap();
        index.merge_all().unwrap();
        let metas = index.index.searchable_segment_metas().unwrap();
        assert_eq!(metas.len(), 1);
        assert!(!metas[0].has_deletes());
        assert_eq!(index.view().search(&tenant("t1")).unwrap(), vec![1, 3, 4]);
        assert_eq!(index.num_docs(), 5);
        let mut f = tenant("t1");
        f.resource_refs = strings(&["file:b"]);
        assert_eq!(index.view().search(&f).unwrap(), vec![1]);
        index.merge_all().unwrap();
    }
    let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
    assert_eq!(seq, Some(99));
    assert_eq!(index.view().search(&tenant("t2")).unwrap(), vec![5, 6]);
}

fn text_fixture() -> (tempfile::TempDir, ScopeIndex) {
    let (dir, index) = open_tmp();
    let texts = [
        (1, "t1", "Deployed the billing service to production"),
        (2, "t1", "Reviewed pull request for search ranking"),
        (3, "t1", "Billing invoice failed; retried billing job twice"),
        (4, "t2", "Billing billing billing billing"),
        (5, "t1", "Lunch with the team"),
    ];
    for (doc, t, text) in texts {
        let mut e = ev(doc, t, "a", None, "note", 0);
        e.text = text.into();
        index.add(&e.as_doc()).unwrap();
    }
    index.commit(5).unwrap();
    (dir, index)
}

#[test]
fn fresh_documents_score_as_they_will_once_committed() {
    let (_d, index) = text_fixture();
    let fresh = [
        (10u32, "Billing digest emails go out weekly for billing"),
        (11, "Erin wants weekly digest emails"),
        (12, "Nothing in common here"),
    ];
    for query in ["billing digest", "When does Erin want digests?", "weekly"] {
        let scored = index.view().lexical_fresh(query, &fresh).unwrap();
        for &(doc, text) in &fresh {
            let mut e = ev(doc, "t1", "a", None, "note", 0);
            e.text = text.into();
            index.add(&e.as_doc()).unwrap();
        }
        index.commit(6).unwrap();
        let committed = index.view().lexical_all(&tenant("t1"), query).unwrap();
        for &(doc, _) in &fresh {
            let before = scored.iter().find(|h| h.0 == doc).map(|h| h.1);
            let after = committed.iter().find(|h| h.0 == doc).map(|h| h.1);
            match (before, after) {
                (Some(b), Some(a)) => assert!((a - b).abs() < 1e-5, "{query}: {doc} {b} vs {a}"),
                (None, None) => {}
                other => panic!("{query}: doc {doc} scored {other:?} before/after commit"),
            }
        }
        assert!(scored.iter().any(|h| h.1 > 0.0), "{query}: {scored:?}");
        for &(doc, _) in &fresh {
            index.delete(doc).unwrap();
        }
        index.commit(7).unwrap();
        index.merge_all().unwrap();
    }
}

#[test]
fn lexical_ranks_and_is_scoped() {
    let (_d, index) = text_fixture();
    let hits = index.view().lexical(&tenant("t1"), "billing", 10).unwrap();
    let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
    assert_eq!(ids, vec![3, 1], "{hits:?}");
    assert!(hits[0].1 > hits[1].1 && hits[1].1 > 0.0);
    // stemming: "deploying" matches "Deployed"
    let hits = index
        .view()
        .lexical(&tenant("t1"), "deploying", 10)
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1]);
    let hits = index.view().lexical(&tenant("t2"), "billing", 10).unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![4]);
    let hits = index
        .view()
        .lexical(&tenant("t1"), "search ranking", 1)
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
    let mut f = tenant("t1");
    f.occurred_after_ms = Some(1);
    assert!(index.view().lexical(&f, "billing", 10).unwrap().is_empty());
    assert!(index
        .view()
        .lexical(&tenant("t1"), "billing", 0)
        .unwrap()
        .is_empty());
}

#[test]
fn lexical_all_scores_every_match_as_top_k_does() {
    let (_d, index) = text_fixture();
    for (t, q) in [
        ("t1", "billing"),
        ("t1", "search ranking deploying"),
        ("t2", "billing"),
    ] {
        let mut all = index.view().lexical_all(&tenant(t), q).unwrap();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut top = index.view().lexical(&tenant(t), q, 100).unwrap();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        assert_eq!(all, top, "{t} {q}");
        assert!(!all.is_empty());
    }
    assert!(index
        .view()
        .lexical_all(&tenant("t1"), "?!")
        .unwrap()
        .is_empty());
}

#[test]
fn lexical_never_errors_on_operators() {
    let (_d, index) = text_fixture();
    for q in [
        "\"AND OR ( : * -",
        "billing AND (",
        "title:billing",
        "\"unterminated",
        "-billing +* ~2 ^3 [a TO b} {}",
        "",
        "   ",
        "ünïcödé 日本語 🚀",
        "\\ / ? ! @ # $ % & | < > =",
    ] {
        let hits = index.view().lexical(&tenant("t1"), q, 5);
        assert!(hits.is_ok(), "{q:?}: {hits:?}");
    }
    let hits = index
        .view()
        .lexical(&tenant("t1"), "billing AND (", 5)
        .unwrap();
    assert_eq!(hits[0].0, 3);
}

fn pick(alphabet: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(alphabet).prop_map(String::from)
}

fn subset(alphabet: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(pick(alphabet), 0..3)
}

/// Metadata the generated events carry (the empty object most often).
const META_DOCS: [&str; 6] = [
    "{}",
    "{}",
    r#"{"k": "v1"}"#,
    r#"{"k": "v2", "n": 1}"#,
    r#"{"n": 1.0, "o": {"b": true}}"#,
    r#"{"k": "1", "o": {"b": false}}"#,
];

/// Metadata filters the generated filters carry (none most often).
const META_FILTERS: [&str; 7] = [
    "{}",
    "{}",
    "{}",
    r#"{"k": "v1"}"#,
    r#"{"k": ["v2", "1"]}"#,
    r#"{"n": 1}"#,
    r#"{"o.b": true, "k": "v1"}"#,
];

fn arb_ev() -> impl Strategy<Value = Ev> {
    (
        pick(&["t0", "t1"]),
        pick(&["a0", "a1", "a2"]),
        proptest::option::of(pick(&["p0", "p1"])),
        pick(&["x", "y", "z"]),
        subset(&["r0", "r1", "r2", "r3"]),
        -5i64..100,
        0usize..META_DOCS.len(),
    )
        .prop_map(
            |(tenant, actor, project, event_type, resources, at, m)| Ev {
                doc: 0,
                tenant,
                actor,
                project,
                event_type,
                resources,
                at,
                text: String::new(),
                metadata: Metadata::parse("metadata", &serde_json::from_str(META_DOCS[m]).unwrap())
                    .unwrap(),
            },
        )
}

fn arb_filter() -> impl Strategy<Value = ScopeFilter> {
    (
        pick(&["t0", "t1", "t9"]),
        subset(&["a0", "a1", "a2", "a9"]),
        subset(&["p0", "p1", "p9"]),
        subset(&["x", "y", "z", "w"]),
        subset(&["r0", "r1", "r2", "r3", "r9"]),
        proptest::option::of(-10i64..110),
        proptest::option::of(-10i64..110),
        0usize..META_FILTERS.len(),
    )
        .prop_map(|(tenant, a, p, t, r, after, before, m)| ScopeFilter {
            tenant,
            actor_ids: a,
            project_ids: p,
            event_types: t,
            resource_refs: r,
            occurred_after_ms: after,
            occurred_before_ms: before,
            metadata: MetaFilter::parse(
                "scope.metadata",
                &serde_json::from_str(META_FILTERS[m]).unwrap(),
                &mut Vec::new(),
            ),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn search_equals_matches(
        mut evs in proptest::collection::vec(arb_ev(), 0..60),
        filters in proptest::collection::vec(arb_filter(), 1..12),
        deleted in proptest::collection::vec(0u32..60, 0..5),
        merge in any::<bool>(),
    ) {
        for (i, e) in evs.iter_mut().enumerate() {
            e.doc = (i as u32) * 3 + 7; // sparse, unordered relative to segments
        }
        let (_dir, index) = open_tmp();
        let half = evs.len() / 2;
        add_all(&index, &evs[half..]);
        index.commit(1).unwrap();
        add_all(&index, &evs[..half]);
        for d in &deleted {
            index.delete(d * 3 + 7).unwrap();
        }
        index.commit(2).unwrap();
        if merge {
            index.merge_all().unwrap();
        }
        let alive: Vec<&Ev> = evs
            .iter()
            .filter(|e| !deleted.iter().any(|d| d * 3 + 7 == e.doc))
            .collect();
        for f in &filters {
            let expected: Vec<u32> = alive
                .iter()
                .filter(|e| matches(f, &e.as_doc()))
                .map(|e| e.doc)
                .collect();
            prop_assert_eq!(&index.view().search(f).unwrap(), &expected, "filter {:?}", f);
            prop_assert_eq!(index.view().count(f).unwrap(), expected.len());
            if let Some(narrowest) = index.view().narrowest(f) {
                // A superset of the scope, within the tenant.
                let narrow = index.view().search_narrowest(&narrowest).unwrap();
                prop_assert!(expected.iter().all(|d| narrow.binary_search(d).is_ok()));
                // Read from the term infos it kept, as through a query of its terms.
                prop_assert_eq!(
                    narrowest.infos.len(),
                    index.view().searcher.segment_readers().len()
                );
                let unsized_clause = Narrowest {
                    infos: Vec::new(),
                    ..narrowest.clone()
                };
                prop_assert_eq!(
                    &narrow,
                    &index.view().search_narrowest(&unsized_clause).unwrap()
                );
                let tenant_of = |d: &u32| evs.iter().find(|e| e.doc == *d).map(|e| &e.tenant);
                prop_assert!(narrow.iter().all(|d| tenant_of(d) == Some(&f.tenant)));
            }
        }
    }
}

/// Latency measurement at 100k docs; run with
/// `cargo test --release -- --ignored --nocapture measure_latency`.
#[test]
#[ignore]
fn measure_latency() {
    let (_d, index) = open_tmp();
    let n: u32 = 100_000;
    let start = Instant::now();
    for i in 0..n {
        // 80% in one big tenant, the rest spread over 50 small tenants.
        let tenant = if i % 5 != 0 {
            "big".to_string()
        } else {
            format!("small{}", i % 50)
        };
        let actor = format!("actor{}", i % 200);
        let project = format!("p{}", i % 20);
        let res = vec![format!("file:{}", i % 1000)];
        let text = format!("event number {i} about topic{} and billing", i % 100);
        let no_metadata = Metadata::default();
        let doc = ScopeDoc {
            doc: i,
            tenant: &tenant,
            actor: &actor,
            project: Some(&project),
            event_type: ["note", "commit", "deploy"][(i % 3) as usize],
            resource_refs: &res,
            occurred_at_ms: i64::from(i) * 1000,
            text: &text,
            metadata: &no_metadata,
        };
        index.add(&doc).unwrap();
        if i % 10_000 == 9_999 {
            index.commit(u64::from(i)).unwrap();
        }
    }
    index.commit(u64::from(n)).unwrap();
    println!("indexed {n} docs in {:?}", start.elapsed());
    let mut f = tenant("big");
    f.actor_ids = vec!["actor7".into()];
    time("tenant∧actor", 200, || {
        index.view().search(&f).unwrap().len()
    });
    time("big tenant (80k)", 50, || {
        index.view().search(&tenant("big")).unwrap().len()
    });
    time("big tenant count", 200, || {
        index.view().count(&tenant("big")).unwrap()
    });
    let mut f = tenant("big");
    f.occurred_after_ms = Some(10_000_000);
    f.occurred_before_ms = Some(20_000_000);
    f.event_types = vec!["note".into(), "commit".into()];
    time("big tenant∧type∧time", 100, || {
        index.view().search(&f).unwrap().len()
    });
    time("lexical big tenant k=20", 100, || {
        index
            .view()
            .lexical(&tenant("big"), "billing topic7", 20)
            .unwrap()
            .len()
    });
    index.merge_all().unwrap();
    time("big tenant after merge_all", 50, || {
        index.view().search(&tenant("big")).unwrap().len()
    });
}

fn time(label: &str, iters: u32, mut f: impl FnMut() -> usize) {
    let hits = f();
    let start = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(f());
    }
    let per = start.elapsed() / iters;
    println!("{label}: {hits} hits, {per:?}/query");
}

/// What metadata costs the index per event: run with
/// `cargo test --release --lib metadata_index_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn metadata_index_cost() {
    fn dir_bytes(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    }
    let n = 100_000u32;
    let mut sizes = Vec::new();
    for with_metadata in [false, true] {
        let (dir, index) = open_tmp();
        for i in 0..n {
            let tenant = format!("t{}", i % 10);
            let actor = format!("actor{}", i % 200);
            let text = format!("event number {i} about topic{} and billing", i % 100);
            let metadata = if with_metadata {
                let v = json_metadata(i);
                Metadata::parse("metadata", &v).unwrap()
            } else {
                Metadata::default()
            };
            let doc = ScopeDoc {
                doc: i,
                tenant: &tenant,
                actor: &actor,
                project: None,
                event_type: "note",
                resource_refs: &[],
                occurred_at_ms: i64::from(i) * 1000,
                text: &text,
                metadata: &metadata,
            };
            index.add(&doc).unwrap();
        }
        index.commit(u64::from(n)).unwrap();
        index.merge_all().unwrap();
        sizes.push(dir_bytes(dir.path()));
    }
    let per_event = (sizes[1] as f64 - sizes[0] as f64) / f64::from(n);
    println!(
        "index bytes: {} without metadata, {} with 4 leaves per event: +{per_event:.1} bytes/event",
        sizes[0], sizes[1]
    );
    // Memory: each live event holds its metadata's compact JSON text (plus a 16-byte pointer
    // in every event, and the allocator's rounding).
    let text: usize = (0..n)
        .map(|i| {
            let m = Metadata::parse("metadata", &json_metadata(i)).unwrap();
            m.text().map_or(0, str::len)
        })
        .sum();
    println!(
        "memory: {:.1} bytes/event of metadata text",
        text as f64 / f64::from(n)
    );
}

/// Four leaves: a channel of 3 values, a ticket number unique per event, a priority of 5
/// values and a flag.
fn json_metadata(i: u32) -> serde_json::Value {
    let channel = ["email", "sms", "chat"][(i % 3) as usize];
    serde_json::json!({
        "channel": channel,
        "ticket": {"id": format!("T-{i}"), "priority": i % 5},
        "open": i.is_multiple_of(2),
    })
}
