//! `max_parallel_requests`, enforced per (provider name, model id) across every job and caller
//! of one [`LlmClient`](super::LlmClient), and per job for the model configs a job brings.
//!
//! DataDesigner's rule (`_GlobalCapState.register_alias`): aliases that share a provider and a
//! model share one limit, the **minimum** of their `max_parallel_requests`. Here that shared
//! limit is the server's: the server's model configs set it at start-up (and a library caller
//! passing plain model configs may lower it, as in DataDesigner). A model config that came
//! with a job carries a [`JobLimit`](crate::domain::models::JobLimit) instead: its cap bounds
//! that job's requests only, through a limiter of its own, and the shared limit of a pair the
//! server names applies on top. One tenant's small cap can thus never slow another's jobs.
//! Lowering a limiter forgets free permits at once and swallows busy ones as they come back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Per-job limiters, by (job scope, provider name, model id).
type JobLimiters = HashMap<(String, String, String), Weak<Limiter>>;

/// Dead per-job entries are swept once the map has grown by this many.
const JOB_SWEEP_EVERY: usize = 64;

/// All limiters: the shared ones keyed by provider name then model id, and the per-job ones.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    by_provider: Mutex<HashMap<String, HashMap<String, Arc<Limiter>>>>,
    /// Held weakly: a job's limiter lives while one of its calls holds or awaits it, and a
    /// new one with the same cap replaces it afterwards, so finished jobs leave nothing.
    jobs: Mutex<JobLimiters>,
}

impl Limits {
    /// The limiter of (provider, model id), created or lowered so its cap is at most `cap`.
    pub(crate) fn get(&self, provider: &str, model_id: &str, cap: u32) -> Arc<Limiter> {
        // A cap of 0 would block forever; validation rejects it, this is the last guard.
        let cap = cap.max(1);
        let limiter = {
            let mut map = self
                .by_provider
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let models = map.entry(provider.to_owned()).or_default();
            match models.get(model_id) {
                Some(l) => Arc::clone(l),
                None => {
                    let l = Arc::new(Limiter::new(cap));
                    models.insert(model_id.to_owned(), Arc::clone(&l));
                    l
                }
            }
        };
        limiter.lower_to(cap);
        limiter
    }

    /// The shared limiter of (provider, model id) if one exists; never creates or lowers one.
    pub(crate) fn existing(&self, provider: &str, model_id: &str) -> Option<Arc<Limiter>> {
        let map = self
            .by_provider
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(provider)?.get(model_id).cloned()
    }

    /// The limiter of job `scope` for (provider, model id), with the job's cap. Keep the
    /// returned handle for the whole call (retries included).
    pub(crate) fn job(
        &self,
        scope: &str,
        provider: &str,
        model_id: &str,
        cap: u32,
    ) -> Arc<Limiter> {
        let cap = cap.max(1);
        let key = (scope.to_owned(), provider.to_owned(), model_id.to_owned());
        let mut map = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = map.get(&key).and_then(Weak::upgrade) {
            l.lower_to(cap);
            return l;
        }
        let l = Arc::new(Limiter::new(cap));
        map.insert(key, Arc::downgrade(&l));
        if map.len().is_multiple_of(JOB_SWEEP_EVERY) {
            map.retain(|_, w| w.strong_count() > 0);
        }
        l
    }
}

/// A FIFO-fair semaphore whose size can shrink.
#[derive(Debug)]
pub(crate) struct Limiter {
    sem: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    cap: u32,
    /// Permits still to be destroyed on release because the cap went down while they were busy.
    debt: u32,
}

impl Limiter {
    pub(crate) fn new(cap: u32) -> Self {
        Self {
            sem: Arc::new(Semaphore::new(cap as usize)),
            state: Mutex::new(State { cap, debt: 0 }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current cap.
    pub(crate) fn cap(&self) -> u32 {
        self.state().cap
    }

    /// Sets the cap to `cap` (at least 1): lowering as [`lower_to`](Self::lower_to) does,
    /// raising by paying back debt first, then adding permits.
    pub(crate) fn resize(&self, cap: u32) {
        let cap = cap.max(1);
        let mut st = self.state();
        if cap <= st.cap {
            drop(st);
            self.lower_to(cap);
            return;
        }
        let mut more = cap - st.cap;
        let paid = more.min(st.debt);
        st.debt -= paid;
        more -= paid;
        st.cap = cap;
        self.sem.add_permits(more as usize);
    }

    fn lower_to(&self, cap: u32) {
        let mut st = self.state();
        if cap >= st.cap {
            return;
        }
        let excess = st.cap - cap;
        let forgotten = u32::try_from(self.sem.forget_permits(excess as usize)).unwrap_or(excess);
        st.debt += excess - forgotten;
        st.cap = cap;
    }

    /// Waits for a slot (FIFO). Hold the permit for one HTTP attempt only.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Permit {
        let permit = Arc::clone(&self.sem)
            .acquire_owned()
            .await
            // The semaphore lives as long as the limiter and is never closed.
            .expect("limiter semaphore is never closed");
        Permit {
            permit: Some(permit),
            limiter: Arc::clone(self),
        }
    }
}

/// One in-flight request's slot; released (or destroyed, to pay a cap decrease) on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    permit: Option<OwnedSemaphorePermit>,
    limiter: Arc<Limiter>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let mut st = self.limiter.state();
        if st.debt > 0 {
            st.debt -= 1;
            permit.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shared_key_uses_the_minimum_cap() {
        let limits = Limits::default();
        let a = limits.get("p", "m", 4);
        let b = limits.get("p", "m", 2);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.cap(), 2);
        assert_eq!(
            limits.get("p", "m", 8).cap(),
            2,
            "a larger cap never raises it"
        );
        assert_eq!(limits.get("p", "other", 8).cap(), 8);
        assert_eq!(limits.get("q", "m", 3).cap(), 3);
        assert_eq!(limits.get("q", "z", 0).cap(), 1);
    }

    #[tokio::test]
    async fn job_limiters_are_per_scope_and_leave_the_shared_one_alone() {
        let limits = Limits::default();
        let shared = limits.get("p", "m", 4);
        let a = limits.job("job-a", "p", "m", 1);
        assert_eq!(a.cap(), 1);
        assert_eq!(shared.cap(), 4, "a job's cap never lowers the shared limit");
        assert!(Arc::ptr_eq(&a, &limits.job("job-a", "p", "m", 1)));
        let b = limits.job("job-b", "p", "m", 3);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.cap(), 3);
        assert!(
            limits
                .existing("p", "m")
                .is_some_and(|l| Arc::ptr_eq(&l, &shared))
        );
        assert!(limits.existing("p", "other").is_none());
        // Held weakly: gone once no call holds it, and the map is swept as it grows.
        drop(a);
        for i in 0..(2 * JOB_SWEEP_EVERY) {
            let _ = limits.job(&format!("j{i}"), "p", "m", 2);
        }
        assert!(limits.jobs.lock().unwrap().len() <= JOB_SWEEP_EVERY + 1);
    }

    #[tokio::test]
    async fn lowering_while_busy_takes_effect_as_permits_return() {
        let limits = Limits::default();
        let l = limits.get("p", "m", 3);
        let held: Vec<Permit> = vec![l.acquire().await, l.acquire().await, l.acquire().await];
        limits.get("p", "m", 1);
        assert_eq!(l.sem.available_permits(), 0);
        drop(held);
        // Two of the three returned permits paid the debt; one slot remains.
        assert_eq!(l.sem.available_permits(), 1);
        let _one = l.acquire().await;
        assert!(Arc::clone(&l.sem).try_acquire_owned().is_err());
    }

    #[tokio::test]
    async fn resizing_up_pays_the_debt_before_adding_slots() {
        let l = Arc::new(Limiter::new(4));
        let held: Vec<Permit> = vec![l.acquire().await, l.acquire().await, l.acquire().await];
        l.resize(1);
        assert_eq!((l.cap(), l.state().debt), (1, 2));
        // Back to 2 before anything returned: one debt is forgiven, nothing added.
        l.resize(2);
        assert_eq!((l.cap(), l.state().debt), (2, 1));
        assert_eq!(l.sem.available_permits(), 0);
        drop(held);
        assert_eq!(l.sem.available_permits(), 2);
        l.resize(5);
        assert_eq!(l.sem.available_permits(), 5);
        l.resize(0);
        assert_eq!(l.cap(), 1);
    }
}
