//! CPU-heavy work off the async runtime threads: [`CpuGate`].
//!
//! Parsing a large config, compiling it, probing it and rendering templates take real CPU. Run
//! on the runtime's worker threads, they stall every other task those threads carry, `/healthz`
//! included (13 s during an ordinary heavy job, before this gate). The gate runs such work with
//! [`tokio::task::block_in_place`]: the calling worker thread hands its other tasks to a fresh
//! worker and becomes a blocking thread for the duration, so the runtime keeps its full set of
//! threads for I/O. A semaphore of one permit per core bounds how many such sections run at
//! once, which is the one place CPU concurrency is bounded: with more, they would only share
//! the same cores and starve the I/O threads of them.
//!
//! Why `block_in_place` rather than `spawn_blocking`: the work borrows the record being built
//! and the compiled plan, and needs no `'static` copy of either. On a current-thread runtime
//! (some tests) there is no other thread to hand tasks to, so the work runs inline there.
//!
//! The work itself must be bounded (template budgets, input bounds): a section cannot be
//! cancelled once it runs.

use std::sync::Arc;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Semaphore;

/// Admission for CPU-heavy sections; cheap to clone (shared permits).
#[derive(Debug, Clone)]
pub struct CpuGate {
    permits: Arc<Semaphore>,
}

impl CpuGate {
    /// A gate that lets `threads` sections run at once (at least one).
    pub fn new(threads: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(threads.max(1))),
        }
    }

    /// A gate with one permit per core this process may use.
    pub fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(2, usize::from))
    }

    /// Runs `work` once a permit is free, off the runtime's worker threads.
    pub async fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        // The semaphore is never closed, so acquiring cannot fail; without a permit the work
        // still runs (only the bound is lost), rather than failing a request.
        let _permit = self.permits.acquire().await.ok();
        let multi_thread =
            Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
        if multi_thread {
            tokio::task::block_in_place(work)
        } else {
            work()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// While the gate's sections burn CPU, a plain async task on the same runtime still runs
    /// promptly: the sections do not occupy the runtime's worker threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sections_leave_the_runtime_threads_free() {
        let gate = CpuGate::new(2);
        let spin = |gate: CpuGate| async move {
            gate.run(|| {
                let until = Instant::now() + Duration::from_millis(600);
                let mut n = 0u64;
                while Instant::now() < until {
                    n = n.wrapping_add(1);
                }
                n
            })
            .await
        };
        let tasks = tokio_util::task::TaskTracker::new();
        let a = tasks.spawn(spin(gate.clone()));
        let b = tasks.spawn(spin(gate.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        tasks.spawn(async {}).await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_millis(300),
            "an async task waited {waited:?} behind CPU sections"
        );
        a.await.unwrap();
        b.await.unwrap();
    }

    #[tokio::test]
    async fn runs_inline_on_a_current_thread_runtime() {
        assert_eq!(CpuGate::new(1).run(|| 41 + 1).await, 42);
    }
}
