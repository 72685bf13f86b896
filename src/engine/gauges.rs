//! The engine's gauges for a metrics scrape: counts and sizes read now.

use super::{Engine, Paths};
use crate::telemetry::{dir_bytes, EngineGauges};

impl Engine {
    /// Live events, HNSW vectors, whether the scope index is degraded, and the bytes each
    /// store holds on disk (walks the data directory: call it off the async threads).
    pub fn gauges(&self) -> EngineGauges {
        let stats = self.stats();
        let paths = Paths::new(&self.config().data_dir);
        let parent = |p: &std::path::Path| dir_bytes(p.parent().unwrap_or(p));
        EngineGauges {
            events: stats.events,
            hnsw_vectors: stats.hnsw_len,
            tenant_graphs: stats.tenant_graphs,
            tenant_graph_points: stats.graph_points,
            tenant_graphs_unsearched: stats.graphs_measured.1,
            scope_degraded: self.scope_health().degraded().is_some(),
            storage: vec![
                ("log", parent(&paths.log)),
                ("audit", parent(&paths.audit)),
                ("scope_index", dir_bytes(&paths.scope)),
                ("hnsw_index", dir_bytes(&paths.hnsw)),
            ],
        }
    }
}
