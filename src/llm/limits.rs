//! `max_parallel_requests`, enforced per (provider name, model id) across every job and caller
//! of one [`LlmClient`](super::LlmClient).
//!
//! DataDesigner's rule (`_GlobalCapState.register_alias`): aliases that share a provider and a
//! model share one limit, the **minimum** of their `max_parallel_requests`. Aliases may arrive
//! late (a job can bring its own model configs), so the limit can only go down: lowering it
//! forgets free permits at once and swallows busy ones as they come back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// All limiters, keyed by provider name then model id.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    by_provider: Mutex<HashMap<String, HashMap<String, Arc<Limiter>>>>,
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
    fn new(cap: u32) -> Self {
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
}
