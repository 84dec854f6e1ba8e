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
//!
//! Handing a thread off is not free either: about 0.1 ms of CPU, and each hand-off may start a
//! thread (36 threads, and glibc arenas for them, during a tools job where every record's prompt
//! went through the gate). Most sections of a record are a prompt that renders in microseconds,
//! so [`CpuGate::run_measured`] runs a section inline when the same section measured cheap
//! before ([`SectionCost`]), and through the gate otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

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

    /// Runs `work`, a section whose cost `cost` has tracked: inline on the calling thread when
    /// its estimate is at most [`SectionCost::INLINE_MICROS`], through the gate ([`Self::run`])
    /// when it is higher or not known yet. Either way the run updates the estimate.
    ///
    /// A section runs inline only after one of its kind was measured cheap, so a heavy
    /// template never does; one whose cost jumps with a record's data (a loop over a long seed
    /// value) may hold a runtime thread once, for at most what the template budgets allow,
    /// before its estimate sends the next ones to the gate.
    pub async fn run_measured<R>(&self, cost: &SectionCost, work: impl FnOnce() -> R) -> R {
        let timed = || {
            let started = thread_cpu_micros();
            let out = work();
            (out, thread_cpu_micros().saturating_sub(started))
        };
        let inline = cost.inline();
        let path = if inline { "inline" } else { "gate" };
        metrics::counter!(crate::metrics::CPU_SECTIONS, "path" => path).increment(1);
        let (out, micros) = if inline {
            timed()
        } else {
            self.run(timed).await
        };
        cost.record(micros);
        out
    }
}

/// The calling thread's CPU time in microseconds. CPU time rather than wall time: a section
/// preempted midway (two cores, busy) would otherwise measure the other threads' work too, and
/// a cheap section go back to the gate for a while.
fn thread_cpu_micros() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000)
}

/// A running estimate of one kind of section's CPU time (one step of a compiled plan), shared
/// by every record that runs it: see [`CpuGate::run_measured`].
///
/// The estimate takes a costlier run at once and forgets it by an eighth per cheaper run, so a
/// section that was heavy once stays on the gate for a while, and one that is always cheap
/// stays inline. Concurrent updates may overwrite each other; the estimate only steers.
#[derive(Debug)]
pub struct SectionCost {
    micros: AtomicU32,
}

impl SectionCost {
    /// Sections estimated at this or less run inline: tokio's guidance for the longest a task
    /// should run between two `.await`s is 10 to 100 µs, and a hand-off costs about 100 µs.
    pub const INLINE_MICROS: u32 = 100;
    const UNKNOWN: u32 = u32::MAX;

    /// The estimate of a section not run yet: unknown, so its first runs go through the gate.
    pub fn new() -> Self {
        Self {
            micros: AtomicU32::new(Self::UNKNOWN),
        }
    }

    fn inline(&self) -> bool {
        self.micros.load(Ordering::Relaxed) <= Self::INLINE_MICROS
    }

    fn record(&self, micros: u64) {
        let sample = u32::try_from(micros).unwrap_or(Self::UNKNOWN - 1);
        let old = self.micros.load(Ordering::Relaxed);
        let new = if old == Self::UNKNOWN || sample >= old {
            sample
        } else {
            old - (old - sample) / 8
        };
        self.micros.store(new, Ordering::Relaxed);
    }
}

impl Default for SectionCost {
    fn default() -> Self {
        Self::new()
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

    /// Burns CPU for about `d` (thread CPU time, what sections are measured in).
    fn spin(d: Duration) {
        let until = thread_cpu_micros() + u64::try_from(d.as_micros()).unwrap();
        while thread_cpu_micros() < until {
            std::hint::black_box(());
        }
    }

    /// A section measured cheap runs inline from then on; one measured heavy goes back to the
    /// gate at once and returns inline only after enough cheap runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn measured_sections_run_inline_once_known_cheap() {
        let gate = CpuGate::new(1);
        let cost = SectionCost::new();
        // Unknown: the first run goes through the gate; measured cheap, the next runs inline.
        assert!(!cost.inline());
        assert_eq!(gate.run_measured(&cost, || 41 + 1).await, 42);
        assert!(cost.inline(), "{cost:?}");
        // Inline means past the gate: with its only permit held elsewhere, the known-cheap
        // section still runs, and a section not measured yet waits.
        let held = gate.permits.clone().acquire_owned().await.unwrap();
        let wait = Duration::from_millis(200);
        tokio::time::timeout(wait, gate.run_measured(&cost, || ()))
            .await
            .expect("a cheap section runs inline");
        let unknown = SectionCost::new();
        assert!(
            tokio::time::timeout(wait, gate.run_measured(&unknown, || ()))
                .await
                .is_err(),
            "a section of unknown cost waits for the gate"
        );
        drop(held);

        // A heavy run (5 ms of CPU: a sleep would not count): the next one goes through the gate.
        gate.run_measured(&cost, || spin(Duration::from_millis(5)))
            .await;
        assert!(!cost.inline(), "{cost:?}");
        // Cheap runs bring it back down, an eighth of the way at a time: 5 ms takes a few
        // dozen of them to reach 100 µs, not one.
        gate.run_measured(&cost, || ()).await;
        assert!(!cost.inline(), "{cost:?}");
        let mut runs = 1;
        while !cost.inline() {
            gate.run_measured(&cost, || ()).await;
            runs += 1;
        }
        assert!((20..60).contains(&runs), "{runs} cheap runs");
    }

    #[tokio::test]
    async fn runs_inline_on_a_current_thread_runtime() {
        assert_eq!(CpuGate::new(1).run(|| 41 + 1).await, 42);
    }
}
