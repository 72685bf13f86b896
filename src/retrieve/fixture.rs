//! A small world to run recall stages on: a table, a real tantivy scope index in a temporary
//! directory, vectors and the hashing secret, and snapshots of them (unit tests only).

use std::sync::Arc;

use parking_lot::RwLock;
use tempfile::TempDir;

use crate::audit::Keyed;
use crate::auth::{Limits, Principal, TenantGrant};
use crate::index::scope::ScopeIndex;
use crate::index::vector::{HnswIndex, HnswParams, VectorStore};
use crate::model::request::Scope;
use crate::model::{PrivacyClass, StoredEvent, Timestamp};
use crate::read::table::tests::{entry, event};
use crate::read::{Snapshot, SubjectRule, Table};

/// Events, their vectors and a committed scope index.
pub(super) struct World {
    _dir: TempDir,
    table: RwLock<Table>,
    scope: ScopeIndex,
    vectors: Arc<VectorStore>,
    hnsw: Arc<HnswIndex>,
    keyed: Keyed,
    watermark: usize,
}

/// The dimension of the world's vectors.
pub(super) const DIM: usize = 4;

impl World {
    /// An empty world whose table uses `rule` for subjects.
    pub(super) fn new(rule: SubjectRule) -> Self {
        let dir = TempDir::new().expect("temp dir");
        let (scope, _) = ScopeIndex::open(&dir.path().join("scope")).expect("scope index");
        let keyed = Keyed::open_or_create(&dir.path().join("hash.key")).expect("hash key");
        let params = HnswParams {
            m: 8,
            ef_construction: 32,
            ef_search: 32,
            max_elements: 1_000,
        };
        World {
            _dir: dir,
            table: RwLock::new(Table::new(rule)),
            scope,
            vectors: Arc::new(VectorStore::new(DIM)),
            hnsw: Arc::new(HnswIndex::new(params)),
            keyed,
            watermark: 0,
        }
    }

    /// Adds `e` with `vector` (normalised here); in the index only after [`World::commit`].
    pub(super) fn add(&mut self, e: StoredEvent, vector: [f32; DIM]) -> u32 {
        let mut table = self.table.write();
        let doc = table.next_doc();
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let unit: Vec<f32> = vector.iter().map(|x| x / norm).collect();
        self.vectors.push(doc, &unit).expect("vector");
        table.push(entry(doc, e));
        let added = table.get(doc).expect("pushed");
        self.scope.add(&added.scope_doc()).expect("indexed");
        doc
    }

    /// Deletes `acme`'s event `id`: a tombstone in the table, the document gone from the index
    /// (at the next [`World::commit`]), as the engine's delete does.
    pub(super) fn delete(&mut self, id: &str) {
        let at = Timestamp::parse("2026-06-20T00:00:00Z").expect("time");
        let gone = self.table.write().delete("acme", id, at).expect("live");
        self.scope.delete(gone.doc).expect("deleted");
    }

    /// How many events were added.
    pub(super) fn len(&self) -> usize {
        self.table.read().next_doc() as usize
    }

    /// Commits the scope index: every event added so far is below the watermark.
    pub(super) fn commit(&mut self) {
        self.scope
            .commit(u64::from(self.table.read().next_doc()))
            .expect("commit");
        self.watermark = self.table.read().next_doc() as usize;
    }

    /// A snapshot of everything, as the engine takes one.
    pub(super) fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            scope: self.scope.view(),
            table: self.table.read(),
            watermark: self.watermark,
            vectors: Arc::clone(&self.vectors),
            hnsw: Arc::clone(&self.hnsw),
            partition: None,
            graphs: Default::default(),
            keyed: &self.keyed,
        }
    }
}

/// An event of tenant `acme` (see [`event`]) with its time, summary and type.
pub(super) fn ev(id: &str, actor: &str, source: &str, at: &str, summary: &str) -> StoredEvent {
    let mut e = event(id, actor, source);
    e.occurred_at = Timestamp::parse(at).expect("time");
    e.summary = summary.to_string();
    e
}

/// Scopes heads decide, for tests that compare two ways of listing a scope: everything,
/// two actors, a type and a project, `actor` between `after` and `before`, from `after`
/// on, and an actor no event has.
pub(super) fn head_scopes(actor: &str, after: &str, before: &str) -> Vec<Scope> {
    let at = |day: &str| Some(Timestamp::parse(day).expect("timestamp"));
    vec![
        Scope::default(),
        Scope {
            actor_ids: vec!["bob".into(), "cy".into()],
            ..Scope::default()
        },
        Scope {
            event_types: vec!["note".into()],
            project_ids: vec!["p1".into()],
            ..Scope::default()
        },
        Scope {
            actor_ids: vec![actor.into()],
            occurred_after: at(after),
            occurred_before: at(before),
            ..Scope::default()
        },
        Scope {
            occurred_after: at(after),
            ..Scope::default()
        },
        Scope {
            actor_ids: vec!["nobody".into()],
            ..Scope::default()
        },
    ]
}

/// The whole of tenant `acme`.
pub(super) fn whole() -> TenantGrant {
    TenantGrant::internal("acme", "test")
}

/// A reader of tenant `acme` limited to `actors` and the `internal` class.
pub(super) fn limited(actors: &[&str]) -> TenantGrant {
    let limits = Limits {
        actor_ids: Some(actors.iter().map(|a| a.to_string()).collect()),
        max_privacy_class: PrivacyClass::Internal,
    };
    Principal::from_parts(
        "k".into(),
        Some("acme".into()),
        vec!["reader".into()],
        limits,
    )
    .grant("reader")
    .expect("grant")
}

/// Two events of ann's on one subject (the same resources), the older `old` and the newer
/// `new`, and bob's newer `bob` on the same resources.
pub(super) fn stale_world() -> World {
    let mut w = World::new(SubjectRule::default());
    for (id, actor, at) in [
        ("old", "ann", "2026-06-01T00:00:00Z"),
        ("new", "ann", "2026-06-02T00:00:00Z"),
        ("bob", "bob", "2026-06-03T00:00:00Z"),
    ] {
        let mut e = ev(id, actor, "s1", at, "the invoice format");
        e.resource_refs = vec!["invoice".into()];
        w.add(e, [1.0, 0.0, 0.0, 0.0]);
    }
    w.commit();
    w
}
