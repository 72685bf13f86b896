//! Domain types only: the event record, its enums, scopes and timestamps.
//!
//! Invariants: no I/O and no async here; every wire name is the seed's camelCase;
//! timestamps are UTC and render as RFC 3339 (`Z` suffix).

pub mod draft;
pub mod event;
pub mod ident;
pub mod metadata;
pub mod request;
pub mod schema;
pub mod time;
pub mod validate;
pub mod warnings;

pub use draft::{Derived, EventDraft, Facts};
pub use event::{
    Audience, Confidence, Decision, EventInput, EventStatus, PrivacyClass, Retention, SourceTrust,
    StoredEvent,
};
pub use metadata::Metadata;
pub use time::Timestamp;
