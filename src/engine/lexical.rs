//! Read-only BM25 access for offline tools (the retrieval-quality eval).
//!
//! Role: exposes the scope index's lexical search to callers outside the engine without
//! touching the recall pipeline. Invariants: results are restricted to the grant's tenant
//! (by the scope filter and checked again per hit) and to events visible by default
//! (active, not expired); only events committed in the scope index are searched, so callers
//! run [`Engine::refresh`] after writing.

use super::Engine;
use crate::auth::TenantGrant;
use crate::error::{ErrorCode, Problem};
use crate::model::Timestamp;
use crate::retrieve::{scope_filter, Scope};

impl Engine {
    /// The top `k` BM25 hits of the grant's tenant for `query` as `(eventId, score)`, best
    /// first. Read-only; see the module docs for what is searched.
    pub fn lexical(
        &self,
        grant: &TenantGrant,
        query: &str,
        k: usize,
    ) -> Result<Vec<(String, f32)>, Problem> {
        let filter = scope_filter(grant.tenant(), &Scope::default());
        let hits = self
            .shared
            .scope
            .lexical(&filter, query, k)
            .map_err(|e| Problem::new(ErrorCode::Internal, format!("lexical search: {e}")))?;
        let now = Timestamp::now();
        let table = self.shared.table.read();
        Ok(hits
            .into_iter()
            .filter_map(|(doc, score)| {
                let e = table.get(doc)?;
                let visible = grant.can_see(&e.event)
                    && Engine::is_default_visible(e.event.status)
                    && !e.is_expired(now);
                visible.then(|| (e.event.event_id.clone(), score))
            })
            .collect())
    }
}
