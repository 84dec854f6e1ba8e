//! A record's worker slot, given back while the record only waits: for an LLM, a tool, a
//! remote validator.
//!
//! A record holds one of the `workers.count` slots while it works (sampling, rendering,
//! parsing). An LLM call is mostly waiting: for the model's `max_parallel_requests`
//! limiter (the one bound on requests to that model), then for the provider's answer. Holding a
//! worker slot through it let one key's slow LLM job occupy every slot while another key's
//! records, which needed only a few milliseconds of CPU, waited for the whole job. So
//! [`SlotChat`] gives the slot back for the duration of each call and takes one again (FIFO,
//! behind records already waiting) before the record goes on. MCP tool calls and listings,
//! remote validators and their backoff do the same through [`crate::generate::Waits`].
//!
//! Records whose independent LLM columns run concurrently hold no slot while any of their
//! calls is in flight; the slot comes back when the last one returns. The work between the
//! calls of such a record is short (a render, a parse), so this slight overrun of `count` is
//! accepted rather than tracking slots per branch.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::domain::models::ModelConfig;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError};

/// `permit` if the claim had one for this task, else one of `slots` once free; `None` when
/// `cut` fires first (the records stay in flight and are released at the end of the drain).
pub(super) async fn take(
    permit: Option<OwnedSemaphorePermit>,
    slots: Arc<Semaphore>,
    cut: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    if let Some(p) = permit {
        return Some(p);
    }
    tokio::select! {
        biased;
        () = cut.cancelled() => None,
        p = slots.acquire_owned() => p.ok(),
    }
}

/// `n` of `starts` (`workers.max_in_flight`: records started), to start records the claim
/// handed out: at once when they are free. Otherwise the records were claimed ahead, and they
/// give the slot the claim took for them (`permit`) back while they wait for records in flight
/// to end. `None` when `stop` (shutdown) fires first: records not started by then are not
/// started at all.
pub(super) async fn start(
    starts: &Arc<Semaphore>,
    n: u32,
    permit: &mut Option<OwnedSemaphorePermit>,
    stop: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(p) = Arc::clone(starts).try_acquire_many_owned(n) {
        return Some(p);
    }
    drop(permit.take());
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        p = Arc::clone(starts).acquire_many_owned(n) => p.ok(),
    }
}

/// One record's hold on the pool's worker slots.
pub(super) struct Slot {
    slots: Arc<Semaphore>,
    state: Mutex<State>,
}

struct State {
    /// The slot, while the record works.
    permit: Option<OwnedSemaphorePermit>,
    /// Waits of the record in flight.
    waiting: u32,
}

impl Slot {
    /// A record starting with `permit`, one of `slots`.
    pub(super) fn new(slots: Arc<Semaphore>, permit: OwnedSemaphorePermit) -> Self {
        Self {
            slots,
            state: Mutex::new(State {
                permit: Some(permit),
                waiting: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call starts waiting: the first one gives the slot back.
    fn begin_wait(&self) -> WaitGuard<'_> {
        let freed = {
            let mut st = self.state();
            st.waiting += 1;
            st.permit.take()
        };
        drop(freed);
        WaitGuard { slot: self }
    }

    /// Whether the record holds a slot now (for tests).
    #[cfg(test)]
    pub(super) fn holds(&self) -> bool {
        self.state().permit.is_some()
    }
}

/// One call in flight; [`WaitGuard::done`] takes the slot again when it was the last one.
/// Dropped without `done` (the call was abandoned, the record is being cut), it only counts
/// the call out: nothing can be awaited in `drop`.
struct WaitGuard<'a> {
    slot: &'a Slot,
}

impl WaitGuard<'_> {
    async fn done(self) {
        let slot = self.slot;
        // Counted out by `drop`, below.
        drop(self);
        {
            let st = slot.state();
            if st.waiting > 0 || st.permit.is_some() {
                return;
            }
        }
        // The semaphore is never closed.
        let Ok(permit) = Arc::clone(&slot.slots).acquire_owned().await else {
            return;
        };
        let mut st = slot.state();
        // Another call may have started meanwhile: then the record waits again, and the slot
        // goes back to the pool.
        if st.waiting == 0 && st.permit.is_none() {
            st.permit = Some(permit);
        }
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.slot.state();
        st.waiting = st.waiting.saturating_sub(1);
    }
}

impl crate::generate::Waits for Slot {
    fn wait<'a>(&'a self, wait: BoxFuture<'a, ()>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let guard = self.begin_wait();
            wait.await;
            guard.done().await;
        })
    }
}

/// The record's view of the shared LLM client: the same calls, without its worker slot, and
/// counted as its job's model waits meanwhile.
pub(super) struct SlotChat<'a> {
    pub(super) chat: &'a dyn ChatModel,
    pub(super) slot: &'a Slot,
    pub(super) waits: crate::jobs::ModelWaits<'a>,
}

#[async_trait::async_trait]
impl ChatModel for SlotChat<'_> {
    async fn chat(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let wait = self.slot.begin_wait();
        let waiting = self.waits.call();
        let out = self.chat.chat(model, req, cancel).await;
        drop(waiting);
        wait.done().await;
        out
    }

    fn provider_identity(&self, model: &ModelConfig) -> Option<serde_json::Value> {
        self.chat.provider_identity(model)
    }

    async fn generate_image(
        &self,
        model: &ModelConfig,
        prompt: &str,
        context: Vec<crate::llm::ContentBlock>,
        cancel: &CancellationToken,
    ) -> Result<crate::llm::Images, LlmError> {
        let wait = self.slot.begin_wait();
        let waiting = self.waits.call();
        let out = self
            .chat
            .generate_image(model, prompt, context, cancel)
            .await;
        drop(waiting);
        wait.done().await;
        out
    }

    async fn embed(
        &self,
        model: &ModelConfig,
        inputs: &[String],
        cancel: &CancellationToken,
    ) -> Result<crate::llm::Embeddings, LlmError> {
        let wait = self.slot.begin_wait();
        let waiting = self.waits.call();
        let out = self.chat.embed(model, inputs, cancel).await;
        drop(waiting);
        wait.done().await;
        out
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn the_slot_is_free_while_calls_wait_and_back_after_the_last() {
        let slots = Arc::new(Semaphore::new(1));
        let first = Arc::clone(&slots).try_acquire_owned().unwrap();
        let slot = Slot::new(Arc::clone(&slots), first);
        let a = slot.begin_wait();
        let b = slot.begin_wait();
        assert!(!slot.holds());
        // Another record takes the slot while this one waits.
        let other = Arc::clone(&slots).try_acquire_owned().unwrap();
        a.done().await;
        assert!(!slot.holds(), "b is still waiting");
        // The last call back needs a slot, and none is free.
        assert!(b.done().now_or_never().is_none());
        assert!(!slot.holds());
        drop(other);
        slot.begin_wait().done().await;
        assert!(slot.holds());
        assert_eq!(slots.available_permits(), 0);
    }
}
