//! Reading a query once: the tenant's actors it names (only those with an event the grant
//! can see) and the texts BM25 and the embedder take.

use crate::auth::TenantGrant;
use crate::rank::RankConfig;
use crate::read::words::{ActorNames, QueryWords};
use crate::read::Table;

/// What a recall reads from its query text once: the tenant's actors it names and the texts
/// BM25 and the embedder take ([`QueryWords`]).
#[derive(Debug, Clone)]
pub struct QueryRead {
    /// Numbers of the tenant's actors the query names, sorted (none without an actor
    /// boost).
    pub named: Vec<u32>,
    /// The lexical and semantic texts.
    pub words: QueryWords,
}

impl QueryRead {
    /// Reads `query` for a recall under `grant` and `rank`. Names count only with an actor
    /// boost: without the actor signal a name stays an ordinary word of the query. Only the
    /// names of actors with an event the grant can see count: any other name is an
    /// ordinary word, exactly like a name no event ever had.
    pub fn new(table: &Table, grant: &TenantGrant, query: &str, rank: &RankConfig) -> Self {
        let mut named = Vec::new();
        let mut ids = Vec::new();
        if rank.actor_boost > 0.0 {
            let names = ActorNames::new(query);
            let ceiling = grant.max_privacy_class();
            let allowed = |actor: &str| grant.allows_actor(actor);
            for (n, name) in table.actors_named(grant.tenant(), &names, ceiling, allowed) {
                if named.last() != Some(&n) {
                    named.push(n);
                }
                ids.push(name.to_string());
            }
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        QueryRead {
            named,
            words: QueryWords::new(query, &ids),
        }
    }
}
