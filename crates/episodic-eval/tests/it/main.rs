//! Evaluation regression floors with the real embedding model, and the `episodic-eval`
//! binary end to end.

mod cli;
mod common;
mod locomo;
mod madial;
mod observe;
mod scenarios;
