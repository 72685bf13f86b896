//! HTTP-level integration tests with the real embedding model.

mod cli_transfer;
mod common;
mod corruption;
mod crash;
mod disk_full;
mod eval_locomo;
mod eval_scenarios;
mod fuzz_inputs;
mod hnsw_path;
mod http_auth;
mod http_governance;
mod http_langchain;
mod http_lifecycle;
mod http_observe;
mod http_openapi;
mod http_policy;
mod http_recall;
mod http_storage;
mod http_write;
mod hybrid_recall;
mod isolation;
mod mcp;
mod races;
mod server_binary;
mod soak;
mod ui;
