//! The CPU pool: a named rayon pool plus a bridge that lets async code await CPU work
//! (embedding, scoring, index searches) without blocking a runtime thread.
//!
//! Invariants: closures passed to [`CpuPool::run`] execute on pool threads only; rayon
//! parallel iterators inside them use this pool; a panic inside a job becomes an error for
//! the caller instead of tearing down the process.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tokio::sync::oneshot;

/// A shareable handle to the CPU pool.
#[derive(Clone, Debug)]
pub struct CpuPool {
    pool: Arc<rayon::ThreadPool>,
}

impl CpuPool {
    /// A pool of `threads` workers named `episodic-cpu-N`.
    pub fn new(threads: usize) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("episodic-cpu-{i}"))
            .build()?;
        Ok(CpuPool {
            pool: Arc::new(pool),
        })
    }

    /// Runs `f` on the pool and awaits its result.
    pub async fn run<T, F>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.pool.spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(result);
        });
        match rx.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err("a cpu job panicked".to_string()),
            Err(_) => Err("the cpu pool dropped a job".to_string()),
        }
    }

    /// Runs `f` inside the pool synchronously (for blocking callers such as CLI tools).
    pub fn install<T: Send, F: FnOnce() -> T + Send>(&self, f: F) -> T {
        self.pool.install(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_off_the_runtime_and_reports_panics() {
        let pool = CpuPool::new(1).expect("pool");
        let name = pool
            .run(|| std::thread::current().name().map(str::to_string))
            .await
            .expect("ran");
        assert_eq!(name.as_deref(), Some("episodic-cpu-0"));
        let err = pool.run(|| panic!("boom")).await;
        assert!(err.is_err());
    }
}
