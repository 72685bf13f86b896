//! Bulk transfer support: reading a tenant's events out for `episodic export`, and batch
//! embedding for `episodic import`.
//!
//! Invariants: events come out in log order (a correction always after the events it
//! supersedes, so an import writes them again in a valid order); deleted, erased, rejected and
//! expired events never come out; vectors come out only when asked for.

use std::sync::Arc;

use super::{Engine, Error};
use crate::model::{StoredEvent, Timestamp};

/// One exported event.
#[derive(Debug, Clone)]
pub struct ExportedEvent {
    /// The event as stored.
    pub event: StoredEvent,
    /// Its summary embedding, when requested.
    pub vector: Option<Vec<f32>>,
}

impl Engine {
    /// Embeds many texts in one call on the CPU pool (bulk import).
    pub async fn embed_many(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Error> {
        let embedder = Arc::clone(&self.embedder);
        let count = texts.len();
        let vectors = self
            .cpu
            .run(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .map_err(Error::Internal)?
            .map_err(|e| Error::Internal(e.to_string()))?;
        if vectors.len() != count {
            return Err(Error::Internal("embedder returned too few vectors".into()));
        }
        Ok(vectors)
    }

    /// The exportable events of `tenant`, in log order.
    pub fn export_events(&self, tenant: &str, with_vectors: bool) -> Vec<ExportedEvent> {
        let now = Timestamp::now();
        let table = self.shared.table.read();
        let vectors = self.shared.vectors.load();
        let mut live: Vec<_> = table
            .live_from(0)
            .filter(|e| e.event.tenant_id == tenant)
            .filter(|e| !e.is_expired(now))
            .collect();
        live.sort_by_key(|e| e.seq);
        live.into_iter()
            .map(|e| ExportedEvent {
                event: e.event.clone(),
                vector: with_vectors.then(|| vectors.get(e.doc)).flatten(),
            })
            .collect()
    }
}
