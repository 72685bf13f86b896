//! The in-memory event table: every logged event by internal id, with a per-tenant id
//! lookup, a subject index for stale suppression and the list of expiring events. Rebuilt
//! from the log on start.
//!
//! Invariants: internal ids are assigned once, in log order, and never reused (compaction
//! keeps them); `(tenant, eventId)` is unique and stays reserved after deletion (a tombstone),
//! so a deleted event is never resurrected by a retry; each tenant gets a number once, never
//! reused, and equal numbers mean equal tenant ids; a deleted event keeps no content in
//! memory; entries are immutable `Arc`s replaced whole on a status change, so readers holding
//! one see a consistent event.
//!
//! Next to every slot the table keeps a [`Head`]: the few facts recall filters and ranks by,
//! copied into one dense array, so that a broad scope reads 72 bytes per candidate from
//! contiguous memory instead of following a pointer to each entry. `heads[doc]` always
//! describes `slots[doc]` (both change only in `place`); actor and project strings are
//! numbered once (per table, never reused), so equal numbers mean equal strings. Sources are
//! often unique per event, so numbering them would cost a map entry per event: a head holds
//! a 64-bit hash of its source instead (equal sources, equal hashes; two different sources
//! share one with probability 2⁻⁶⁴).

use std::sync::{Arc, Weak};

use ahash::RandomState;

use super::actors::{Names, TenantIds};
use super::entry::{Entry, Lookup, Slot, Tombstone};
use super::head::{source_hash, Changed, Head, HeadFilter, Marks, NONE, NO_SOURCE};
use super::subject::SubjectRule;
use super::words::ActorNames;
use super::Map;
use crate::index::scope::ScopeFilter;
use crate::model::{Decision, EventStatus, PrivacyClass, StoredEvent, Timestamp};
use crate::rank::asks;

/// All events, by internal id.
#[derive(Debug, Default)]
pub struct Table {
    slots: Vec<Slot>,
    heads: Vec<Head>,
    actors: Names,
    /// The names events give their actors (`actorNames`), numbered.
    given_names: Names,
    projects: Names,
    kinds: Names,
    /// tenant → its number and eventId → internal id (live or deleted).
    by_id: Map<Box<str>, TenantIds>,
    subject_ids: Map<String, u32>,
    subjects: Vec<Vec<u32>>,
    /// Topic → live events that their subject stated itself ([`SubjectRule::voices`]).
    voices: Map<u32, Vec<u32>>,
    /// Hashes topics, randomly seeded per table so that no one can aim for collisions.
    topics: RandomState,
    expiring: Vec<u32>,
    rule: SubjectRule,
    live: usize,
    /// Copies of the heads still in use: every change of a head is marked in each.
    watchers: parking_lot::Mutex<Vec<Weak<Changed>>>,
}

impl Table {
    /// An empty table using `rule` for subjects.
    pub fn new(rule: SubjectRule) -> Self {
        Table {
            rule,
            ..Table::default()
        }
    }

    /// Next unused internal id.
    pub fn next_doc(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Number of live events.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Every slot, by internal id.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The live entry with internal id `doc`.
    pub fn get(&self, doc: u32) -> Option<&Arc<Entry>> {
        match self.slots.get(doc as usize) {
            Some(Slot::Live(e)) => Some(e),
            Some(Slot::Empty | Slot::Deleted(_)) | None => None,
        }
    }

    /// Looks `(tenant, event_id)` up, live or deleted.
    pub fn lookup(&self, tenant: &str, event_id: &str) -> Lookup<'_> {
        let Some(doc) = self.by_id.get(tenant).and_then(|t| t.ids.get(event_id)) else {
            return Lookup::Missing;
        };
        match self.slots.get(*doc as usize) {
            Some(Slot::Live(e)) => Lookup::Live(e),
            Some(Slot::Deleted(t)) => Lookup::Deleted(t),
            Some(Slot::Empty) | None => Lookup::Missing,
        }
    }

    /// The live entry for `(tenant, event_id)`.
    pub fn find(&self, tenant: &str, event_id: &str) -> Option<&Arc<Entry>> {
        match self.lookup(tenant, event_id) {
            Lookup::Live(e) => Some(e),
            Lookup::Missing | Lookup::Deleted(_) => None,
        }
    }

    fn place(&mut self, doc: u32, slot: Slot) {
        let i = doc as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Slot::Empty);
            let from = self.heads.len() as u32;
            self.heads.extend((from..=doc).map(Head::gone));
        }
        self.heads[i] = match &slot {
            Slot::Live(e) => self.head_of(e),
            Slot::Empty | Slot::Deleted(_) => Head::gone(doc),
        };
        self.slots[i] = slot;
        self.watchers.get_mut().retain(|w| match w.upgrade() {
            Some(changed) => {
                changed.mark(doc);
                true
            }
            None => false,
        });
    }

    fn head_of(&mut self, e: &Entry) -> Head {
        let ev = &e.event;
        Head {
            doc: e.doc,
            tenant: e.tenant,
            actor: self.actors.number(&ev.actor_id),
            project: ev
                .project_id
                .as_deref()
                .map_or(NONE, |p| self.projects.number(p)),
            kind: self.kinds.number(&ev.event_type),
            source: ev.source_refs.first().map_or(NO_SOURCE, |s| source_hash(s)),
            subject: e.subject.unwrap_or(NONE),
            topic: e.topic,
            status: ev.status,
            trust: ev.source_trust,
            confidence: ev.confidence,
            marks: Marks::new(ev.privacy_class, asks(&ev.summary)),
            occurred_ms: e.occurred_ms,
            recorded_ns: ev.recorded_at.unix_nanos_saturating(),
            expires_ns: ev
                .retention
                .expires_at
                .map_or(i64::MAX, Timestamp::unix_nanos_saturating),
            superseded_ns: ev
                .superseded_at
                .map_or(i64::MIN, Timestamp::unix_nanos_saturating),
        }
    }

    /// The head of internal id `doc` in place, `None` out of range (where [`Table::head`]
    /// gives an empty slot's, which belongs to no tenant). Checks read heads through it:
    /// copying each head out first cost more than the check.
    #[inline]
    pub fn head_at(&self, doc: u32) -> Option<&Head> {
        self.heads.get(doc as usize)
    }

    /// The head of internal id `doc` (an empty slot's when out of range).
    pub fn head(&self, doc: u32) -> Head {
        self.heads
            .get(doc as usize)
            .copied()
            .unwrap_or_else(|| Head::gone(doc))
    }

    /// The actor id numbered `n` in heads.
    pub fn actor_name(&self, n: u32) -> Option<&str> {
        self.actors.names.get(n as usize).map(|s| &**s)
    }

    /// `(number, name)` of the actors of `tenant` that `names`' query names, by their id or
    /// by a name an event gave them, and that are in reach of class `ceiling`: the actor has a
    /// live event of that class or below, and for a given name such an event gives it.
    /// `allowed` further limits the actor ids (a grant's actor limit). `name` is the id or
    /// the given name the query used (an actor named both ways comes twice), sorted by
    /// number. Any other name is an ordinary word of the query, exactly like a name no
    /// event ever had. Reads only what is filed under the query's words (`TenantActors`),
    /// not every actor of the tenant.
    pub fn actors_named(
        &self,
        tenant: &str,
        names: &ActorNames,
        ceiling: PrivacyClass,
        allowed: impl Fn(&str) -> bool,
    ) -> Vec<(u32, &str)> {
        let Some(t) = self.by_id.get(tenant) else {
            return Vec::new();
        };
        let mut out: Vec<(u32, &str)> = t
            .actors
            .filed_under(names)
            .filter(|&f| t.actors.in_reach(f, ceiling))
            .filter_map(|f| {
                let id = self.actor_name(f.actor)?;
                let name = match f.name {
                    super::actors::BY_ID => id,
                    m => self.given_names.names.get(m as usize).map(|s| &**s)?,
                };
                (names.names(name) && allowed(id)).then_some((f.actor, name))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether an event the table held could match `filter` by its names: `false` when the
    /// tenant never had an event, or none of the filter's actors, or none of its projects,
    /// was ever seen. Names are numbered once and never forgotten, so `false` proves that no
    /// event matches.
    pub fn may_match(&self, filter: &ScopeFilter) -> bool {
        let seen = |names: &Names, list: &[String]| {
            list.is_empty() || list.iter().any(|n| names.numbers.contains_key(n.as_str()))
        };
        self.tenant_number(&filter.tenant).is_some()
            && seen(&self.actors, &filter.actor_ids)
            && seen(&self.projects, &filter.project_ids)
    }

    /// The number heads give actor id `actor`, if any event had it.
    pub fn actor_number(&self, actor: &str) -> Option<u32> {
        self.actors.numbers.get(actor).copied()
    }

    /// The number heads give event type `kind`, if any event had it.
    pub fn kind_number(&self, kind: &str) -> Option<u32> {
        self.kinds.numbers.get(kind).copied()
    }

    /// `filter` in the numbers of heads, so that it can be checked on a head without the
    /// scope index; `None` when heads cannot decide it (it names resources or metadata,
    /// which heads do not hold) or its tenant never had an event. Names never seen match
    /// nothing, as in the index.
    pub fn head_filter(&self, filter: &ScopeFilter) -> Option<HeadFilter> {
        if !filter.resource_refs.is_empty() || !filter.metadata.is_empty() {
            return None;
        }
        let numbers = |names: &Names, list: &[String]| {
            (!list.is_empty()).then(|| {
                let mut n: Vec<u32> = list
                    .iter()
                    .filter_map(|name| names.numbers.get(name.as_str()).copied())
                    .collect();
                n.sort_unstable();
                n.dedup();
                n
            })
        };
        Some(HeadFilter {
            tenant: self.tenant_number(&filter.tenant)?,
            actors: numbers(&self.actors, &filter.actor_ids),
            projects: numbers(&self.projects, &filter.project_ids),
            kinds: numbers(&self.kinds, &filter.event_types),
            after_ms: filter.occurred_after_ms,
            before_ms: filter.occurred_before_ms,
        })
    }

    /// A copy of every head, by internal id, and the set in which every later change of a
    /// head is marked (for as long as the set is held).
    pub fn watched_heads(&self) -> (Vec<Head>, Arc<Changed>) {
        let changed = Arc::new(Changed::new(self.heads.len() as u32));
        let mut watchers = self.watchers.lock();
        watchers.retain(|w| w.strong_count() > 0);
        watchers.push(Arc::downgrade(&changed));
        (self.heads.clone(), changed)
    }

    /// The numbers of `event`'s actor and of the names it gives the actor.
    fn actor_numbers(&mut self, event: &StoredEvent) -> (u32, Vec<u32>) {
        let actor = self.actors.number(&event.actor_id);
        let given = event
            .actor_names
            .iter()
            .map(|n| self.given_names.number(n))
            .collect();
        (actor, given)
    }

    /// Adds a live entry at its internal id.
    pub fn push(&mut self, mut entry: Entry) {
        let doc = entry.doc;
        entry.tenant = self.index_id(&entry.event.tenant_id, &entry.event.event_id, doc);
        let (actor, given) = self.actor_numbers(&entry.event);
        if let Some(t) = self.by_id.get_mut(&*entry.event.tenant_id) {
            t.actors.add(actor, &entry.event.actor_id);
            for (&m, name) in given.iter().zip(&entry.event.actor_names) {
                t.actors.add_given(actor, m, name);
            }
            t.actors
                .count_event(actor, &given, entry.event.privacy_class, 1);
        }
        entry.subject = self.rule.key(&entry.event).map(|k| self.subject_id(k));
        if let Some(s) = entry.subject {
            self.subjects[s as usize].push(doc);
        }
        entry.topic = self.rule.topic(&entry.event, &self.topics);
        if entry.topic != NONE && entry.self_stated() {
            self.voices.entry(entry.topic).or_default().push(doc);
        }
        if entry.event.retention.expires_at.is_some() {
            self.expiring.push(doc);
        }
        self.place(doc, Slot::Live(Arc::new(entry)));
        self.live += 1;
    }

    /// Records `(tenant, event_id) → doc`, allocating the tenant key only for a new tenant;
    /// returns the tenant's number.
    fn index_id(&mut self, tenant: &str, event_id: &str, doc: u32) -> u32 {
        let next = self.by_id.len() as u32;
        let t = match self.by_id.get_mut(tenant) {
            Some(t) => t,
            None => self.by_id.entry(tenant.into()).or_insert(TenantIds {
                number: next,
                ids: Map::default(),
                docs: Vec::new(),
                actors: Default::default(),
            }),
        };
        match t.ids.insert(event_id.into(), doc) {
            Some(old) if old == doc => {}
            old => {
                // An event id keeps its internal id for good; should one ever move, the
                // list follows it.
                if let Some(old) = old {
                    if let Ok(at) = t.docs.binary_search(&old) {
                        t.docs.remove(at);
                    }
                }
                // Internal ids come in ascending order but for rare exceptions.
                match t.docs.last() {
                    Some(&last) if last > doc => {
                        let at = t.docs.partition_point(|&d| d < doc);
                        t.docs.insert(at, doc);
                    }
                    _ => t.docs.push(doc),
                }
            }
        }
        t.number
    }

    /// The tenant [`Table::push`] numbered `number`, if any.
    pub fn tenant_name(&self, number: u32) -> Option<&str> {
        self.by_id
            .iter()
            .find(|(_, t)| t.number == number)
            .map(|(name, _)| &**name)
    }

    /// How many internal ids `tenant`'s events were given (live, deleted or purged; 0 for a
    /// tenant the table never held).
    pub fn tenant_ids(&self, tenant: &str) -> usize {
        self.by_id.get(tenant).map_or(0, |t| t.ids.len())
    }

    /// Every internal id `tenant`'s events were given (live, deleted or purged; one per event
    /// id, each event id keeping its one id for good), sorted, when there are at most `max`
    /// of them; `None` when there are more or the table never held an event of `tenant`.
    /// Every live event of the tenant is among them, so checking these ids on their heads
    /// lists a small tenant's scope without the scope index.
    pub fn tenant_docs_up_to(&self, tenant: &str, max: usize) -> Option<&[u32]> {
        let t = self.by_id.get(tenant)?;
        (t.docs.len() <= max).then_some(t.docs.as_slice())
    }

    /// The number [`Table::push`] gave `tenant`'s entries (`None`: the table has never held
    /// an event of that tenant). Numbers are never reused.
    pub fn tenant_number(&self, tenant: &str) -> Option<u32> {
        self.by_id.get(tenant).map(|t| t.number)
    }

    fn subject_id(&mut self, key: String) -> u32 {
        let next = self.subjects.len() as u32;
        let id = *self.subject_ids.entry(key).or_insert(next);
        if id == next {
            self.subjects.push(Vec::new());
        }
        id
    }

    /// Adds a tombstone at its internal id.
    pub fn push_tombstone(&mut self, t: Tombstone) {
        self.index_id(&t.tenant_id, &t.event_id, t.doc);
        let doc = t.doc;
        self.place(doc, Slot::Deleted(Arc::new(t)));
    }

    /// Marks `(tenant, event_id)` superseded by `by` at `at`; returns whether it was live.
    pub fn mark_superseded(
        &mut self,
        tenant: &str,
        event_id: &str,
        by: &str,
        at: Timestamp,
    ) -> bool {
        let Some(entry) = self.find(tenant, event_id) else {
            return false;
        };
        let mut entry = Entry::clone(entry);
        let event = Arc::make_mut(&mut entry.event);
        event.status = EventStatus::Superseded;
        event.superseded_by = Some(by.to_string());
        event.superseded_at = Some(at);
        let doc = entry.doc;
        self.place(doc, Slot::Live(Arc::new(entry)));
        true
    }

    /// Replaces a live entry's event (status changes).
    pub fn replace_event(&mut self, doc: u32, event: StoredEvent) {
        if let Some(entry) = self.get(doc) {
            let mut entry = Entry::clone(entry);
            entry.event = Arc::new(event);
            self.place(doc, Slot::Live(Arc::new(entry)));
        }
    }

    /// Replaces a live entry's event and decision (policy replay).
    pub fn replace_entry(&mut self, doc: u32, event: StoredEvent, decision: Decision) {
        if let Some(entry) = self.get(doc) {
            let mut entry = Entry::clone(entry);
            entry.event = Arc::new(event);
            entry.decision = decision;
            self.place(doc, Slot::Live(Arc::new(entry)));
        }
    }

    /// Deletes a live event, keeping only a tombstone; returns the removed entry.
    pub fn delete(&mut self, tenant: &str, event_id: &str, at: Timestamp) -> Option<Arc<Entry>> {
        let entry = Arc::clone(self.find(tenant, event_id)?);
        if let Some(list) = entry
            .subject
            .and_then(|s| self.subjects.get_mut(s as usize))
        {
            list.retain(|d| *d != entry.doc);
        }
        if let Some(list) = self.voices.get_mut(&entry.topic) {
            list.retain(|d| *d != entry.doc);
            if list.is_empty() {
                self.voices.remove(&entry.topic);
            }
        }
        self.expiring.retain(|d| *d != entry.doc);
        let (actor, given) = self.actor_numbers(&entry.event);
        if let Some(t) = self.by_id.get_mut(tenant) {
            t.actors
                .count_event(actor, &given, entry.event.privacy_class, -1);
        }
        self.push_tombstone(Tombstone {
            doc: entry.doc,
            seq: entry.seq,
            tenant_id: entry.event.tenant_id.clone(),
            event_id: entry.event.event_id.clone(),
            deleted_at: at,
            unpurged: true,
            audience: Some(entry.event.audience()),
            writer: Some(entry.key_id.clone()),
        });
        self.live -= 1;
        Some(entry)
    }

    /// Live docs that their subject stated itself under `topic` ([`Head::topic`]), or none;
    /// a topic may collide with another's ([`Table::same_topic`]).
    pub fn voice_docs(&self, topic: u32) -> &[u32] {
        self.voices.get(&topic).map_or(&[], Vec::as_slice)
    }

    /// Whether live events `a` and `b` have the same key without the actor (confirms a
    /// [`Head::topic`] match).
    pub fn same_topic(&self, a: u32, b: u32) -> bool {
        let rule = self.rule.without_actor();
        match (self.get(a), self.get(b)) {
            (Some(a), Some(b)) => rule
                .key(&a.event)
                .is_some_and(|k| rule.key(&b.event) == Some(k)),
            _ => false,
        }
    }

    /// Live docs of subject list `subject` ([`Head::subject`]), or none.
    pub fn subject_docs(&self, subject: u32) -> &[u32] {
        self.subjects
            .get(subject as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// Live docs with an expiry.
    pub fn expiring(&self) -> &[u32] {
        &self.expiring
    }

    /// Live entries with internal id ≥ `from`.
    pub fn live_from(&self, from: usize) -> impl Iterator<Item = &Arc<Entry>> {
        self.slots
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .filter_map(|s| match s {
                Slot::Live(e) => Some(e),
                Slot::Empty | Slot::Deleted(_) => None,
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn event(id: &str, actor: &str, source: &str) -> StoredEvent {
        serde_json::from_value(serde_json::json!({
            "eventId": id, "eventType": "task_milestone", "occurredAt": "2026-06-17T09:20:00Z",
            "recordedAt": "2026-06-17T09:21:00Z", "actorId": actor, "tenantId": "acme",
            "projectId": "p1", "resourceRefs": [], "summary": "s", "sourceRefs": [source],
            "sourceTrust": "tool_result", "confidence": "high", "privacyClass": "internal",
            "retention": {"deleteOnRequest": true}, "policyVersion": "v1", "status": "active",
            "supersedesEventIds": [], "contentWarnings": [], "correctionPath": ""
        }))
        .expect("event")
    }

    pub(crate) fn entry(doc: u32, e: StoredEvent) -> Entry {
        Entry {
            doc,
            seq: u64::from(doc),
            occurred_ms: e.occurred_at.unix_millis(),
            event: Arc::new(e),
            input_hash: String::new(),
            key_id: "k".into(),
            decision: Decision::Allow {
                reason: "ok".into(),
            },
            subject: None,
            topic: NONE,
            tenant: 0,
        }
    }

    /// The ids of the actors of tenant `acme` that `query` names.
    fn named(t: &Table, query: &str) -> Vec<String> {
        let names = ActorNames::new(query);
        let mut ids: Vec<String> = t
            .actors_named("acme", &names, PrivacyClass::Sensitive, |_| true)
            .into_iter()
            .map(|(_, id)| id.to_string())
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn the_actors_a_query_names_are_found_from_its_words() {
        let mut t = Table::new(SubjectRule::OFF);
        let mut actors: Vec<String> = (0..500).map(|i| format!("user-{i}")).collect();
        actors.extend(
            [
                "Caroline",
                "alice@example.com",
                "bob@example.com",
                "--",
                "42-user",
            ]
            .map(String::from),
        );
        for (doc, actor) in actors.iter().enumerate() {
            t.push(entry(doc as u32, event(&format!("e{doc}"), actor, "s")));
        }
        // Every actor is filed under one word; "user" holds few of the 500 user ids.
        let filed = &t.by_id["acme"].actors;
        assert_eq!(
            filed.by_word.values().map(Vec::len).sum::<usize>(),
            actors.len() - 1
        );
        assert!(filed.by_word.get("user").map_or(0, Vec::len) <= 2);

        assert_eq!(
            named(&t, "What did user 42 and Caroline say?"),
            ["42-user", "Caroline", "user-42"],
            "words in any order name an actor"
        );
        assert_eq!(
            named(&t, "and what did 42-user say?"),
            ["42-user", "user-42"]
        );
        assert_eq!(named(&t, "notes of the user"), Vec::<String>::new());
        assert_eq!(named(&t, "mail from BOB@example.com"), ["bob@example.com"]);
        assert_eq!(
            named(&t, "-- anyone?"),
            Vec::<String>::new(),
            "an id without words"
        );
        // The same answer as reading every actor.
        for q in [
            "user 7 user 300 and 499",
            "example com alice bob",
            "caroline's user-0",
        ] {
            let names = ActorNames::new(q);
            let mut all: Vec<String> = actors.iter().filter(|a| names.names(a)).cloned().collect();
            all.sort();
            assert_eq!(named(&t, q), all, "{q}");
        }
        // Another tenant names none of them.
        assert!(t
            .actors_named(
                "globex",
                &ActorNames::new("Caroline"),
                PrivacyClass::Sensitive,
                |_| true
            )
            .is_empty());
    }

    /// A name an event gives its actor names the actor like its id does, for a grant that
    /// can see an event giving it: not once that event is deleted, nor above its class.
    #[test]
    fn names_events_give_their_actors_name_them_within_reach() {
        let mut t = Table::new(SubjectRule::OFF);
        let mut named_event = event("e0", "user:u-7f3a", "s");
        named_event.actor_names = vec!["Dana Smith".into(), "Dee".into()];
        t.push(entry(0, named_event));
        let mut private = event("e1", "user:u-91c2", "s");
        private.actor_names = vec!["Ravi".into()];
        private.privacy_class = PrivacyClass::Private;
        t.push(entry(1, private));
        t.push(entry(2, event("e2", "user:u-91c2", "s")));
        let found = |t: &Table, q: &str, ceiling| {
            t.actors_named("acme", &ActorNames::new(q), ceiling, |_| true)
                .into_iter()
                .map(|(_, name)| name.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found(&t, "what did dana smith ask?", PrivacyClass::Sensitive),
            ["Dana Smith"]
        );
        assert_eq!(
            found(&t, "what did Dee ask?", PrivacyClass::Sensitive),
            ["Dee"]
        );
        assert!(
            found(&t, "what did Dana ask?", PrivacyClass::Sensitive).is_empty(),
            "every word of a name"
        );
        // Ravi is given only on a private event: out of an internal grant's reach, although
        // the actor has an internal event.
        assert_eq!(found(&t, "Ravi's plan", PrivacyClass::Private), ["Ravi"]);
        assert!(found(&t, "Ravi's plan", PrivacyClass::Internal).is_empty());
        // Deleting the event that gave the names takes them away.
        t.delete("acme", "e0", crate::model::Timestamp::now());
        assert!(found(&t, "what did Dee ask?", PrivacyClass::Sensitive).is_empty());
        assert!(found(&t, "what did user u-7f3a ask?", PrivacyClass::Sensitive).is_empty());
    }

    /// Only actors with a live event the grant could see are named: not one whose events
    /// are all above the ceiling, outside the actor limit, or deleted.
    #[test]
    fn only_actors_with_an_event_in_reach_are_named() {
        let mut t = Table::new(SubjectRule::OFF);
        let mut private = event("e0", "Caroline", "s");
        private.privacy_class = PrivacyClass::Private;
        t.push(entry(0, private));
        t.push(entry(1, event("e1", "Melanie", "s")));
        t.push(entry(2, event("e2", "Dana", "s")));
        let names = ActorNames::new("Did Caroline, Melanie or Dana call?");
        let named = |t: &Table, ceiling, allowed: &dyn Fn(&str) -> bool| {
            let mut v: Vec<String> = t
                .actors_named("acme", &names, ceiling, allowed)
                .into_iter()
                .map(|(_, id)| id.to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            named(&t, PrivacyClass::Sensitive, &|_| true),
            ["Caroline", "Dana", "Melanie"]
        );
        assert_eq!(
            named(&t, PrivacyClass::Internal, &|_| true),
            ["Dana", "Melanie"]
        );
        assert_eq!(
            named(&t, PrivacyClass::Internal, &|a| a == "Dana"),
            ["Dana"]
        );
        t.delete("acme", "e2", Timestamp::now());
        assert_eq!(
            named(&t, PrivacyClass::Sensitive, &|_| true),
            ["Caroline", "Melanie"]
        );
    }

    /// An event of tenant `t{tenant}` by actor `a{actor}`, type `k{kind}`, project
    /// `p{project}` (none when `project` is 3), at minute `minute`.
    fn varied(doc: u32, tenant: u8, actor: u8, kind: u8, project: u8, minute: u8) -> Entry {
        let mut e = event(&format!("e{doc}"), &format!("a{actor}"), "s");
        e.tenant_id = format!("t{tenant}");
        e.event_type = format!("k{kind}");
        e.project_id = (project < 3).then(|| format!("p{project}"));
        e.occurred_at = Timestamp::from_unix_millis(i64::from(minute) * 60_000).expect("time");
        entry(doc, e)
    }

    proptest::proptest! {
        /// Heads decide a filter exactly as the scope index's predicate does, names never
        /// seen included; a gone slot never matches.
        #[test]
        fn head_filters_agree_with_the_index_predicate(
            events in proptest::collection::vec((0u8..3, 0u8..4, 0u8..3, 0u8..4, 0u8..10), 1..40),
            tenant in 0u8..4,
            actors in proptest::collection::vec(0u8..6, 0..3),
            kinds in proptest::collection::vec(0u8..5, 0..3),
            projects in proptest::collection::vec(0u8..5, 0..3),
            after in proptest::option::of(0u8..10),
            before in proptest::option::of(0u8..10),
        ) {
            let mut t = Table::new(SubjectRule::OFF);
            for (i, &(te, a, k, p, m)) in events.iter().enumerate() {
                t.push(varied(i as u32, te, a, k, p, m));
            }
            let names = |prefix: &str, l: &[u8]| l.iter().map(|n| format!("{prefix}{n}")).collect();
            let filter = ScopeFilter {
                tenant: format!("t{tenant}"),
                actor_ids: names("a", &actors),
                project_ids: names("p", &projects),
                event_types: names("k", &kinds),
                resource_refs: Vec::new(),
                occurred_after_ms: after.map(|m| i64::from(m) * 60_000),
                occurred_before_ms: before.map(|m| i64::from(m) * 60_000),
                metadata: Default::default(),
            };
            let Some(hf) = t.head_filter(&filter) else {
                proptest::prop_assert!(t.tenant_number(&filter.tenant).is_none());
                return Ok(());
            };
            for doc in 0..events.len() as u32 {
                let entry = t.get(doc).expect("live");
                let want = crate::index::scope::matches(&filter, &entry.scope_doc());
                proptest::prop_assert_eq!(hf.matches(&t.head(doc)), want, "doc {}", doc);
            }
            proptest::prop_assert!(!hf.matches(&t.head(events.len() as u32 + 5)));
            let with_resources = ScopeFilter { resource_refs: vec!["r".into()], ..filter };
            proptest::prop_assert!(t.head_filter(&with_resources).is_none());
        }
    }

    #[test]
    fn a_tenants_ids_are_listed_ascending_once_each() {
        let mut t = Table::new(SubjectRule::OFF);
        for (doc, id) in [(3, "c"), (1, "a"), (7, "d"), (2, "b")] {
            t.push(entry(doc, event(id, "Caroline", "s1")));
        }
        let at = Timestamp::parse("2026-06-18T00:00:00Z").unwrap();
        t.delete("acme", "d", at).expect("deleted");
        assert_eq!(t.tenant_docs_up_to("acme", 4), Some(&[1, 2, 3, 7][..]));
        assert_eq!(t.tenant_docs_up_to("acme", 3), None);
        assert_eq!(t.tenant_ids("acme"), 4);
    }

    #[test]
    fn heads_follow_their_slots() {
        let mut t = Table::new(SubjectRule::OFF);
        t.push(entry(0, event("a", "Caroline", "s1")));
        t.push(entry(2, event("b", "Melanie", "s1")));
        let (a, gap, b) = (t.head(0), t.head(1), t.head(2));
        assert_eq!(a.tenant, t.tenant_number("acme").unwrap());
        assert_eq!(gap.tenant, NONE, "a gap belongs to no tenant");
        assert_eq!(t.actor_name(a.actor), Some("Caroline"));
        assert_eq!(t.actor_number("Melanie"), Some(b.actor));
        assert_eq!((a.project, a.source), (b.project, b.source));
        assert_ne!(a.source, NO_SOURCE);
        assert_eq!(a.status, EventStatus::Active);

        let at = Timestamp::parse("2026-06-18T00:00:00Z").unwrap();
        assert!(t.mark_superseded("acme", "a", "b", at));
        assert_eq!(t.head(0).status, EventStatus::Superseded);
        assert_eq!(t.head(0).superseded_ns, at.unix_nanos_saturating());

        t.delete("acme", "b", at).expect("deleted");
        assert_eq!(
            t.head(2).tenant,
            NONE,
            "a deleted event belongs to no tenant"
        );
        assert_eq!(t.head(99).tenant, NONE);
    }

    #[test]
    fn a_watched_copy_learns_of_every_later_change_of_a_head() {
        let mut t = Table::new(SubjectRule::OFF);
        for (doc, id) in ["a", "b", "c", "d"].iter().enumerate() {
            t.push(entry(doc as u32, event(id, "Caroline", "s1")));
        }
        let (copy, changed) = t.watched_heads();
        let (_, dropped) = t.watched_heads();
        drop(dropped);
        assert!((0..4).all(|doc| !changed.has(doc)), "nothing changed yet");

        let at = Timestamp::parse("2026-06-18T00:00:00Z").unwrap();
        assert!(t.mark_superseded("acme", "a", "b", at));
        t.delete("acme", "c", at).expect("deleted");
        t.push(entry(4, event("e", "Melanie", "s1")));
        assert!(changed.has(0), "superseded");
        assert!(changed.has(2), "deleted");
        assert!(changed.has(4) && changed.has(70), "not in the copy");
        for doc in [1, 3] {
            assert!(!changed.has(doc));
            assert_eq!(copy[doc as usize].status, t.head(doc).status);
            assert_eq!(copy[doc as usize].tenant, t.head(doc).tenant);
        }
        assert_eq!(
            t.watchers.lock().len(),
            1,
            "a dropped copy is no longer watched"
        );
    }

    #[test]
    fn names_never_seen_prove_an_empty_scope() {
        let mut t = Table::new(SubjectRule::OFF);
        t.push(entry(0, event("a", "Caroline", "s1")));
        let filter = |tenant: &str, actors: &[&str], projects: &[&str]| ScopeFilter {
            tenant: tenant.into(),
            actor_ids: actors.iter().map(|a| a.to_string()).collect(),
            project_ids: projects.iter().map(|p| p.to_string()).collect(),
            ..ScopeFilter::default()
        };
        assert!(t.may_match(&filter("acme", &[], &[])));
        assert!(t.may_match(&filter("acme", &["Nobody", "Caroline"], &["p1"])));
        assert!(!t.may_match(&filter("other", &[], &[])), "unknown tenant");
        assert!(
            !t.may_match(&filter("acme", &["Nobody"], &[])),
            "unknown actor"
        );
        assert!(
            !t.may_match(&filter("acme", &[], &["p9"])),
            "unknown project"
        );
    }

    #[test]
    fn a_head_stays_small() {
        assert_eq!(std::mem::size_of::<Head>(), 72);
    }

    #[test]
    fn marks_keep_every_privacy_class_and_the_question_flag() {
        assert_eq!(PrivacyClass::ALL.len(), 4, "two bits hold the class");
        for p in PrivacyClass::ALL {
            for asks in [false, true] {
                let m = Marks::new(p, asks);
                assert_eq!((m.privacy(), m.asks()), (p, asks));
            }
        }
    }

    #[test]
    fn a_subject_speaking_for_itself_is_listed_under_its_topic() {
        let about = |actor: &str| {
            let mut e = event(actor, actor, "s1");
            e.resource_refs = vec!["cust-7".into()];
            e
        };
        let (agent, customer) = (about("agent"), about("cust-7"));
        let default = SubjectRule::default();
        assert_ne!(default.key(&agent), default.key(&customer));
        let h = RandomState::new();
        assert_eq!(default.topic(&agent, &h), default.topic(&customer, &h));
        assert_ne!(default.topic(&agent, &h), NONE);
        let no_actor = SubjectRule {
            actor: false,
            ..default
        };
        assert_eq!(no_actor.topic(&agent, &h), NONE);
        let bare = event("x", "agent", "s1");
        assert_eq!((default.key(&bare), default.topic(&bare, &h)), (None, NONE));

        let mut t = Table::new(default);
        t.push(entry(0, agent));
        t.push(entry(1, customer));
        let mut other = about("cust-8");
        other.resource_refs = vec!["cust-8".into()];
        t.push(entry(2, other));
        let (a, c) = (t.head(0), t.head(1));
        assert_ne!(a.subject, c.subject);
        assert_eq!(a.topic, c.topic);
        assert_eq!(t.subject_docs(a.subject), &[0]);
        assert_eq!(
            t.voice_docs(a.topic),
            &[1],
            "only the customer speaks for itself"
        );
        assert!(t.same_topic(0, 1) && !t.same_topic(0, 2));
        let at = Timestamp::parse("2026-06-18T00:00:00Z").unwrap();
        t.delete("acme", "cust-7", at).expect("deleted");
        assert!(t.voice_docs(a.topic).is_empty());
    }
}
