//! The per-provider tool-list cache: one `tools/list` (all pages) however many records ask at
//! once, kept for the provider's `tools_cache_ttl_sec`, dropped early by
//! `notifications/tools/list_changed`.
//!
//! An epoch counter guards the race DataDesigner also guards: a fetch that started before an
//! invalidation must not store its (possibly stale) list afterwards. Its callers still get it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

// Tokio's clock, so the tests can pause it; outside a paused test it is the system's monotonic
// clock.
use tokio::time::Instant;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::Value;

use super::McpError;

/// One tool as a provider lists it.
#[derive(Debug)]
pub struct McpTool {
    /// The name the model calls it by.
    pub name: String,
    /// Shown to the model (empty when the server gave none).
    pub description: String,
    /// `inputSchema`, passed to the model unmodified; shared with every record's tool set.
    pub input_schema: std::sync::Arc<Value>,
    /// The tool's OpenAI JSON, written once per fetched list.
    pub openai: Option<crate::llm::ToolJson>,
    /// Checks arguments before the call; `None` when the server's schema does not compile
    /// (the call then goes through and the server judges the arguments).
    pub validator: Option<jsonschema::Validator>,
}

/// A provider's tools, in server order.
#[derive(Debug, Default)]
pub struct ToolList {
    /// The tools.
    pub tools: Vec<McpTool>,
}

impl ToolList {
    /// A list from rmcp's tool descriptions.
    pub fn from_rmcp(provider: &str, tools: Vec<rmcp::model::Tool>) -> Self {
        let tools = tools
            .into_iter()
            .map(|t| {
                let input_schema = Value::Object((*t.input_schema).clone());
                let validator = match jsonschema::validator_for(&input_schema) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!(mcp.provider = provider, tool = %t.name, error = %e,
                            "the tool's inputSchema does not compile; its arguments are not checked");
                        None
                    }
                };
                let spec = crate::llm::ToolSpec::new(
                    t.name.into_owned(),
                    t.description.map(|d| d.into_owned()).unwrap_or_default(),
                    input_schema,
                );
                McpTool {
                    name: spec.name,
                    description: spec.description,
                    input_schema: spec.parameters,
                    openai: spec.openai,
                    validator,
                }
            })
            .collect();
        Self { tools }
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

type Fetch = Shared<BoxFuture<'static, Result<Arc<ToolList>, McpError>>>;

#[derive(Default)]
struct State {
    epoch: u64,
    entry: Option<(Arc<ToolList>, Instant)>,
    inflight: Option<(u64, Fetch)>,
}

/// See the module doc.
pub(crate) struct ToolCache {
    ttl: Duration,
    state: Mutex<State>,
}

/// Where a [`ToolCache::get`] answer came from (for the hit/miss metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A fresh cached list.
    Hit,
    /// A fetch (started here or joined).
    Fetched,
    /// The fetch failed and the last list (past its TTL) was used instead.
    Stale,
}

impl ToolCache {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            state: Mutex::default(),
        }
    }

    /// Drops the cached list; a fetch already under way will not be stored.
    pub(crate) fn invalidate(&self) {
        let mut s = self.state.lock().expect("tool cache lock");
        s.epoch += 1;
        s.entry = None;
        s.inflight = None;
    }

    /// The cached list, if any (fresh or not): for status reports.
    pub(crate) fn peek(&self) -> Option<Arc<ToolList>> {
        let s = self.state.lock().expect("tool cache lock");
        s.entry.as_ref().map(|(l, _)| l.clone())
    }

    /// A fresh cached list, or the result of the fetch under way, or of a new one made by
    /// `fetch` (called with the lock held, so it must only build the future).
    pub(crate) async fn get(
        &self,
        fetch: impl FnOnce() -> BoxFuture<'static, Result<Arc<ToolList>, McpError>>,
    ) -> (Result<Arc<ToolList>, McpError>, Source) {
        let (epoch, fut) = {
            let mut s = self.state.lock().expect("tool cache lock");
            if let Some((list, at)) = &s.entry
                && at.elapsed() < self.ttl
            {
                return (Ok(list.clone()), Source::Hit);
            }
            let epoch = s.epoch;
            let fut = match &s.inflight {
                Some((e, f)) if *e == epoch => f.clone(),
                _ => {
                    let f = fetch().shared();
                    s.inflight = Some((epoch, f.clone()));
                    f
                }
            };
            (epoch, fut)
        };
        let result = fut.await;
        let mut s = self.state.lock().expect("tool cache lock");
        if s.epoch == epoch && s.inflight.is_some() {
            s.inflight = None;
            if let Ok(list) = &result {
                s.entry = Some((list.clone(), Instant::now()));
            }
        }
        // Stale-if-error: a list past its TTL beats no tools while the server is away (calls
        // then fail with `Error:` results, or succeed once it is back). A `list_changed`
        // notice clears the entry, so a list known to be wrong is never served.
        if result.is_err()
            && let Some((list, _)) = &s.entry
        {
            return (Ok(list.clone()), Source::Stale);
        }
        (result, Source::Fetched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn counting(n: &Arc<AtomicU32>) -> BoxFuture<'static, Result<Arc<ToolList>, McpError>> {
        let n = n.clone();
        async move {
            n.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(Arc::new(ToolList::default()))
        }
        .boxed()
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_misses_share_one_fetch_and_hits_fetch_nothing() {
        let cache = Arc::new(ToolCache::new(Duration::from_secs(60)));
        let n = Arc::new(AtomicU32::new(0));
        let waiters: Vec<_> = (0..50)
            .map(|_| {
                let (cache, n) = (cache.clone(), n.clone());
                async move { cache.get(|| counting(&n)).await }
            })
            .collect();
        for (r, _) in futures::future::join_all(waiters).await {
            r.unwrap();
        }
        assert_eq!(n.load(Ordering::SeqCst), 1);
        let (_, src) = cache.get(|| counting(&n)).await;
        assert_eq!(src, Source::Hit);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn invalidation_and_ttl_force_a_new_fetch() {
        let cache = ToolCache::new(Duration::from_secs(30));
        let n = Arc::new(AtomicU32::new(0));
        cache.get(|| counting(&n)).await.0.unwrap();
        cache.invalidate();
        cache.get(|| counting(&n)).await.0.unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 2);
        // Kept for the whole TTL, to the millisecond...
        tokio::time::advance(Duration::from_millis(29_999)).await;
        assert_eq!(cache.get(|| counting(&n)).await.1, Source::Hit);
        // ...and fetched again once it has passed.
        tokio::time::advance(Duration::from_millis(2)).await;
        let (_, src) = cache.get(|| counting(&n)).await;
        assert_eq!(src, Source::Fetched);
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_list_is_served_when_the_refresh_fails() {
        let cache = ToolCache::new(Duration::from_secs(10));
        let n = Arc::new(AtomicU32::new(0));
        cache.get(|| counting(&n)).await.0.unwrap();
        tokio::time::advance(Duration::from_secs(11)).await;
        let failing = || async { Err(McpError::ShuttingDown) }.boxed();
        let (r, src) = cache.get(failing).await;
        assert!(r.is_ok());
        assert_eq!(src, Source::Stale);
        cache.invalidate();
        let (r, src) = cache.get(failing).await;
        assert!(r.is_err(), "nothing stale survives list_changed");
        assert_eq!(src, Source::Fetched);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fetch_overtaken_by_list_changed_is_not_stored() {
        let cache = Arc::new(ToolCache::new(Duration::from_secs(60)));
        let n = Arc::new(AtomicU32::new(0));
        let c2 = cache.clone();
        let n2 = n.clone();
        let slow = async move { c2.get(|| counting(&n2)).await };
        // The fetch takes 20 ms of the paused clock; the notice arrives at 5 ms, during it.
        let invalidate = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(n.load(Ordering::SeqCst), 1, "the fetch has started");
            cache.invalidate();
        };
        let ((r, _), ()) = tokio::join!(slow, invalidate);
        r.unwrap();
        assert!(cache.peek().is_none());
    }
}
