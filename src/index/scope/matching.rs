//! The in-memory twin of the index's filter: [`matches`] holds for a document iff a
//! committed copy of it would be found by [`super::ScopeView::search`].

use super::*;

/// Pure in-memory predicate with exactly the semantics of
/// [`super::ScopeView::search`]; used for fresh, not-yet-committed events.
pub fn matches(filter: &ScopeFilter, doc: &ScopeDoc<'_>) -> bool {
    doc.tenant == filter.tenant
        && any_or_contains(&filter.actor_ids, doc.actor)
        && project_matches(&filter.project_ids, doc.project)
        && any_or_contains(&filter.event_types, doc.event_type)
        && resources_match(&filter.resource_refs, doc.resource_refs)
        && filter
            .occurred_after_ms
            .is_none_or(|a| doc.occurred_at_ms >= a)
        && filter
            .occurred_before_ms
            .is_none_or(|b| doc.occurred_at_ms < b)
        && filter.metadata.matches(doc.metadata)
}

/// Empty list = any; otherwise `value` must be in the list.
pub(super) fn any_or_contains(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

/// Empty list = any; otherwise the event must have one of the projects.
pub(super) fn project_matches(list: &[String], project: Option<&str>) -> bool {
    list.is_empty() || project.is_some_and(|p| list.iter().any(|v| v == p))
}

/// Empty list = any; otherwise the event references one of the resources.
pub(super) fn resources_match(list: &[String], refs: &[String]) -> bool {
    list.is_empty() || refs.iter().any(|r| list.contains(r))
}
