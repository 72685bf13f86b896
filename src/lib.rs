//! Episodic: a long-term episodic memory server for AI agents.
//!
//! Bird's-eye view: a write body is parsed once at the edge into a typed `EventInput`
//! (`wire::event_input`, `model::validate`), decided by the write policy
//! (`policy`), embedded (`embed`) on the CPU pool (`cpu`), appended and fsynced to the log
//! (`store`) by the single writer (`engine`), then applied to the read model (`read`: the
//! in-memory table and its dense heads) and the derived indexes (`index::scope` in tantivy,
//! `index::vector` with exact scoring and HNSW). Recall (`retrieve`) takes one snapshot of
//! the read model, narrows by scope first, then scores only in-scope candidates, ranks them
//! (`rank`) and renders evidence blocks. `auth` turns keys into tenant grants, and `api`
//! is the only module that speaks HTTP to API clients, besides `mcp`, which serves the same
//! engine calls as MCP tools (on `/mcp` in `api`'s router, and over stdio), and `ui`, which
//! only serves the static operator page at `/ui` (the page itself calls `/v1`). `observe`
//! turns a raw interaction into a candidate event (or ignores it) and hands it to the
//! engine's ordinary write path.
//!
//! Dependency direction: `model` ← `policy`, `store`, `index`, `embed`, `rank` ← `read` ←
//! `retrieve` ← `engine` ← `wire` ← `mcp` ← `api` (the router mounts `mcp`; both edges share
//! `wire`'s parsing of bodies into typed inputs, the JSON of results, and `Problem`, the one
//! translation of `engine::Error` into a client answer); and `model`, `embed` ← `observe` ←
//! `engine`. The engine never reaches an edge (`tests/it/structure.rs`). Offline quality
//! evaluation (LoCoMo, MADial-Bench, the observe classifier's labelled sets, the scenario
//! suite) lives outside this crate, in the `episodic-eval` workspace member, which uses only
//! this library's public API.

pub mod api;
pub mod audit;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod cpu;
pub mod credentials;
pub mod embed;
pub mod engine;
pub mod error;
pub mod fsutil;
pub mod index;
pub mod mcp;
pub mod model;
pub mod observe;
pub mod offline_keys;
pub mod policy;
pub mod rank;
pub mod read;
pub mod retrieve;
pub mod serving;
pub mod store;
pub mod telemetry;
pub mod transfer;
pub mod ui;
pub mod wire;
