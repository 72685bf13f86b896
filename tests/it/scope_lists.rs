//! Scopes of several lists (actors, projects, types) or a list and a time range: the index
//! lists the narrowest list's events and each is checked on its head, and the result must
//! be exactly the scope's events, committed or fresh, never a deleted one, never another
//! tenant's (the tenants share every actor, project and type name).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::model::Timestamp;
use episodic::retrieve::{Scope, TimelineQuery};

const DIM: usize = 384;
const KINDS: [&str; 3] = ["task_milestone", "human_approval", "tool_observed_event"];

/// One written event's scope.
struct Written {
    tenant: &'static str,
    id: String,
    actor: String,
    project: String,
    kind: String,
    day: u32,
}

impl Written {
    fn in_scope(&self, tenant: &str, scope: &Scope) -> bool {
        let any = |list: &[String], v: &String| list.is_empty() || list.contains(v);
        let at = Timestamp::parse(&occurred(self.day)).expect("time");
        self.tenant == tenant
            && any(&scope.actor_ids, &self.actor)
            && any(&scope.project_ids, &self.project)
            && any(&scope.event_types, &self.kind)
            && scope.occurred_after.is_none_or(|t| at >= t)
            && scope.occurred_before.is_none_or(|t| at < t)
    }
}

fn occurred(day: u32) -> String {
    format!("2026-06-{day:02}T09:20:00Z")
}

/// Writes `n` events in acme (three quarters) and beta over four actors, three projects,
/// three types and ten days.
async fn write(e: &Engine, rng: &mut StdRng, n: usize, written: &mut Vec<Written>) {
    for _ in 0..n {
        let tenant = if rng.gen_range(0..4) == 0 {
            "beta"
        } else {
            "acme"
        };
        let (actor, project, kind, day) = (
            format!("a{}", rng.gen_range(0..4)),
            format!("p{}", rng.gen_range(0..3)),
            KINDS[rng.gen_range(0..3)].to_string(),
            rng.gen_range(10..20),
        );
        let body = json!({
            "eventType": kind, "occurredAt": occurred(day), "actorId": actor,
            "projectId": project, "summary": format!("event {}", written.len()),
            "resourceRefs": [format!("r{}", written.len())],
            "sourceRefs": ["s"], "sourceTrust": "tool_result", "confidence": "medium",
            "privacyClass": "internal", "retention": {"deleteOnRequest": true}
        });
        let vector: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let grant = TenantGrant::internal(tenant, "test");
        let out = e
            .write_embedded(&grant, crate::common::input(&body), vector, false)
            .await
            .expect("write");
        written.push(Written {
            tenant,
            id: out.event.event_id,
            actor,
            project,
            kind,
            day,
        });
    }
}

/// A random scope narrowing by at least two of: actors, projects, types, a time range.
fn scope(rng: &mut StdRng) -> Scope {
    let mut pick = |mut all: Vec<String>| -> Vec<String> {
        all.shuffle(rng);
        let take = rng.gen_range(0..all.len());
        all.truncate(take);
        all
    };
    let names = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect();
    let mut s = Scope {
        actor_ids: pick(names("a", 4)),
        project_ids: pick(names("p", 3)),
        event_types: pick(KINDS.iter().map(|k| k.to_string()).collect()),
        ..Scope::default()
    };
    if rng.gen_bool(0.5) {
        let from = rng.gen_range(10..19);
        s.occurred_after = Some(Timestamp::parse(&occurred(from)).expect("time"));
        s.occurred_before = Some(Timestamp::parse(&occurred(from + 3)).expect("time"));
    }
    s
}

/// The ids a timeline of `acme` returns for one actor, project and type.
async fn timeline(e: &Engine, actor: &str, project: &str, kind: &str) -> HashSet<String> {
    let params: HashMap<String, String> = [
        ("actorId", actor),
        ("projectId", project),
        ("eventType", kind),
        ("limit", "500"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let q = TimelineQuery::parse(&params).expect("timeline query");
    let acme = TenantGrant::internal("acme", "test");
    let page = e.timeline(&acme, q).await.expect("timeline");
    assert!(page.next_cursor.is_none());
    page.events.into_iter().map(|ev| ev.event_id).collect()
}

#[tokio::test]
async fn a_scope_of_several_lists_holds_exactly_its_events() {
    let dir = tempfile::tempdir().expect("tmp");
    let e = Engine::open(
        EngineConfig::new(dir.path().to_path_buf()),
        Arc::new(HashingEmbedder::new()),
    )
    .expect("engine");
    let mut rng = StdRng::seed_from_u64(41);
    let mut written = Vec::new();
    write(&e, &mut rng, 600, &mut written).await;
    let acme = TenantGrant::internal("acme", "test");
    let mut deleted = HashSet::new();
    for w in written.iter().filter(|w| w.tenant == "acme").step_by(7) {
        e.delete(&acme, &w.id).await.expect("delete");
        deleted.insert(w.id.clone());
    }
    e.refresh().await.expect("refresh");
    // Fresh events, which the index may not hold yet.
    write(&e, &mut rng, 40, &mut written).await;
    let live: Vec<&Written> = written
        .iter()
        .filter(|w| !deleted.contains(&w.id))
        .collect();

    for (actor, project, kind) in [
        ("a0", "p0", KINDS[0]),
        ("a1", "p2", KINDS[1]),
        ("a3", "p1", KINDS[2]),
    ] {
        let one = |l: &str| vec![l.to_string()];
        let s = Scope {
            actor_ids: one(actor),
            project_ids: one(project),
            event_types: one(kind),
            ..Scope::default()
        };
        let want: HashSet<String> = live
            .iter()
            .filter(|w| w.in_scope("acme", &s))
            .map(|w| w.id.clone())
            .collect();
        assert!(!want.is_empty());
        assert_eq!(timeline(&e, actor, project, kind).await, want, "{s:?}");
    }

    let mut checked = 0;
    for _ in 0..80 {
        let s = scope(&mut rng);
        let want: HashSet<&str> = live
            .iter()
            .filter(|w| w.in_scope("acme", &s))
            .map(|w| w.id.as_str())
            .collect();
        let mut req = crate::common::recall_request(s.clone(), 100);
        req.include_stale = true;
        let r = e
            .recall_with_vector(&acme, &req, &vec![1.0; DIM])
            .expect("recall");
        let got: HashSet<&str> = r
            .results
            .iter()
            .map(|h| h.event.event_id.as_str())
            .collect();
        assert_eq!(got.len(), want.len().min(100), "{s:?}");
        assert!(got.is_subset(&want), "{s:?}: {:?}", got.difference(&want));
        checked += usize::from(!want.is_empty());
    }
    assert!(checked > 40, "most scopes hold events ({checked})");
    e.shutdown().await;
}
