//! The mock's memory: the active script and its rule counters, per-model request and in-flight
//! counts, the recorded requests, and the decision of what each request gets.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::reply::{Answer, default_text, fenced_json};
use super::script::{Api, Reply, Script, header_text};
use super::view::View;

/// Per-model counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelStats {
    /// Requests received.
    pub requests: u64,
    /// Requests being answered right now.
    pub in_flight: u64,
    /// The most requests ever in flight at once (asserts `max_parallel_requests`).
    pub max_in_flight: u64,
    /// Every finished request's time in flight, summed, in µs: divided by the span from the
    /// first arrival to the last answer, the mean number in flight (how well a client kept
    /// its `max_parallel_requests` busy, which benchmarks compare with the bound).
    #[serde(default)]
    pub busy_us: u64,
    /// The first arrival, in µs since the mock started.
    #[serde(default)]
    pub first_arrival_us: Option<u64>,
    /// The last request's end, in µs since the mock started.
    #[serde(default)]
    pub last_end_us: Option<u64>,
}

/// `GET /_mock/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MockStats {
    /// Requests received since the last reset.
    pub total_requests: u64,
    /// Counters by the request's `model`.
    pub models: BTreeMap<String, ModelStats>,
    /// How often each rule answered, in script order.
    pub rule_hits: Vec<u32>,
}

/// One request as received, for `GET /_mock/requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// 1-based arrival order since the last reset.
    pub seq: u64,
    /// Protocol.
    pub api: Api,
    /// The request's `model`.
    pub model: String,
    /// Request headers (lower-case names; this is a test double, so keys are kept verbatim).
    pub headers: BTreeMap<String, String>,
    /// The JSON body (a string if it was not JSON).
    pub body: Value,
    /// Arrival, in ms since the mock started.
    pub received_ms: f64,
    /// When the answer was produced, in ms since the mock started.
    pub responded_ms: Option<f64>,
    /// Status sent; `None` while in flight or when the connection was reset.
    pub status: Option<u16>,
}

/// What a request gets.
#[derive(Debug)]
pub(crate) enum Plan {
    Answer(Answer),
    Error {
        status: u16,
        body: Option<Value>,
        retry_after: Option<String>,
    },
    Malformed,
    Reset,
    Endless,
}

/// Shared state behind every handler.
#[derive(Debug)]
pub struct MockState {
    started: Instant,
    inner: Mutex<Inner>,
    /// Whether answers that `hold` may go (see [`MockState::release`]).
    released: watch::Sender<bool>,
}

/// How long an answer waits before it is sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    /// A fixed delay (the script's latency plus the reply's `delay_ms`).
    pub delay: Duration,
    /// Then until the mock is released (the reply's `hold`).
    pub hold: bool,
}

impl Wait {
    fn after(delay: Duration) -> Self {
        Self { delay, hold: false }
    }
}

#[derive(Debug)]
struct Inner {
    script: Script,
    rule_hits: Vec<u32>,
    rng: ChaCha8Rng,
    total: u64,
    tool_call_seq: u64,
    models: BTreeMap<String, ModelStats>,
    history: VecDeque<RecordedRequest>,
}

impl Inner {
    fn new(script: Script) -> Self {
        Self {
            rule_hits: vec![0; script.rules.len()],
            rng: ChaCha8Rng::seed_from_u64(script.faults.seed),
            script,
            total: 0,
            tool_call_seq: 0,
            models: BTreeMap::new(),
            history: VecDeque::new(),
        }
    }
}

/// Decrements the model's in-flight count when the handler finishes or is dropped, and
/// records the answer's status in the history: one lock per request's end, since at the scale
/// benches' rates every request takes the state's one lock.
pub(crate) struct InFlight {
    state: Arc<MockState>,
    model: String,
    seq: u64,
    /// Arrival, in µs since the mock started.
    arrived_us: u64,
    /// Set by [`InFlight::answered`]: the status sent (`None`: connection reset).
    answered: Option<Option<u16>>,
}

impl InFlight {
    /// Records that the request was answered with `status` (`None`: connection reset); the
    /// history gets it when the guard drops.
    pub(crate) fn answered(&mut self, status: Option<u16>) {
        self.answered = Some(status);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.state.now_us();
        let mut g = self.state.lock();
        if let Some(status) = self.answered
            && let Some(r) = g.history.iter_mut().rev().find(|r| r.seq == self.seq)
        {
            r.responded_ms = Some(self.state.now_ms());
            r.status = status;
        }
        if let Some(m) = g.models.get_mut(&self.model) {
            m.in_flight = m.in_flight.saturating_sub(1);
            m.busy_us += now.saturating_sub(self.arrived_us);
            m.last_end_us = Some(m.last_end_us.map_or(now, |l| l.max(now)));
        }
    }
}

impl MockState {
    /// State running `script`.
    pub fn new(script: Script) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            inner: Mutex::new(Inner::new(script)),
            released: watch::Sender::new(false),
        })
    }

    /// Lets the answers whose reply `hold`s go, those waiting and those to come.
    pub fn release(&self) {
        self.released.send_replace(true);
    }

    /// Waits until [`MockState::release`] (at once if it was called).
    pub(crate) async fn released(&self) {
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = self.released.subscribe().wait_for(|r| *r).await;
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Replaces the script; rule counters and the fault RNG start over, stats are kept.
    pub fn set_script(&self, script: Script) {
        let mut g = self.lock();
        g.rule_hits = vec![0; script.rules.len()];
        g.rng = ChaCha8Rng::seed_from_u64(script.faults.seed);
        g.script = script;
    }

    /// The active script.
    pub fn script(&self) -> Script {
        self.lock().script.clone()
    }

    /// Forgets requests, counters, rule hits and a release; keeps the script.
    pub fn reset(&self) {
        let mut g = self.lock();
        let script = std::mem::take(&mut g.script);
        // In-flight requests finish against fresh counters; their guards saturate at zero.
        *g = Inner::new(script);
        self.released.send_replace(false);
    }

    /// Counters.
    pub fn stats(&self) -> MockStats {
        let g = self.lock();
        MockStats {
            total_requests: g.total,
            models: g.models.clone(),
            rule_hits: g.rule_hits.clone(),
        }
    }

    /// Recorded requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().history.iter().cloned().collect()
    }

    /// Registers an arrival and decides its answer (a 400 when the body was not JSON,
    /// without consuming any rule). Returns (seq, wait, plan, guard). The headers and body
    /// are copied only when the history keeps requests: at tens of thousands of requests a
    /// second (the scale benches), copying every body cost the double more CPU than the
    /// service it stands beside.
    pub(crate) fn begin(
        self: &Arc<Self>,
        view: &View,
        headers: &HeaderMap,
        body: &Value,
        is_json: bool,
    ) -> (u64, Wait, Plan, InFlight) {
        let arrived_us = self.now_us();
        let received_ms = arrived_us as f64 / 1000.0;
        let mut g = self.lock();
        g.total += 1;
        let seq = g.total;
        let m = g.models.entry(view.model.clone()).or_default();
        m.requests += 1;
        m.in_flight += 1;
        m.max_in_flight = m.max_in_flight.max(m.in_flight);
        m.first_arrival_us.get_or_insert(arrived_us);
        let limit = g.script.history_limit;
        if limit > 0 {
            while g.history.len() >= limit {
                g.history.pop_front();
            }
            g.history.push_back(RecordedRequest {
                seq,
                api: view.api,
                model: view.model.clone(),
                headers: header_map(headers),
                body: body.clone(),
                received_ms,
                responded_ms: None,
                status: None,
            });
        }
        let (delay, plan) = if is_json {
            decide(&mut g, seq, view)
        } else {
            let plan = Plan::Error {
                status: 400,
                body: None,
                retry_after: None,
            };
            (Wait::after(Duration::ZERO), plan)
        };
        let guard = InFlight {
            state: Arc::clone(self),
            model: view.model.clone(),
            seq,
            arrived_us,
            answered: None,
        };
        (seq, delay, plan, guard)
    }
}

/// A request's headers as the history records them (lossy UTF-8 values).
fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (k.to_string(), value)
        })
        .collect()
}

/// Faults first (latency, every-k 429, every-k or random errors), then the first matching
/// rule with `times` left, then the default reply.
fn decide(g: &mut Inner, seq: u64, view: &View) -> (Wait, Plan) {
    let f = g.script.faults.clone();
    let latency = Duration::from_millis(f.latency_ms);
    let every = |k: Option<u64>| k.is_some_and(|k| k > 0 && seq.is_multiple_of(k));
    if f.string_content_only && view.text_part_lists {
        let body = serde_json::json!({"error": {
            "message": "can only concatenate str (not \"list\") to str",
            "type": "internal_server_error", "param": null, "code": null}});
        let plan = Plan::Error {
            status: 500,
            body: Some(body),
            retry_after: None,
        };
        return (Wait::after(latency), plan);
    }
    if every(f.rate_limit_every) {
        let retry_after = f.retry_after.as_ref().map(header_text);
        let plan = Plan::Error {
            status: 429,
            body: None,
            retry_after,
        };
        return (Wait::after(latency), plan);
    }
    let random_error = f
        .error_probability
        .is_some_and(|p| g.rng.random_bool(p.clamp(0.0, 1.0)));
    if every(f.error_every) || random_error {
        let plan = Plan::Error {
            status: f.error_status,
            body: None,
            retry_after: None,
        };
        return (Wait::after(latency), plan);
    }
    let hit = g.script.rules.iter().enumerate().find_map(|(i, r)| {
        let left = r.times.is_none_or(|t| g.rule_hits[i] < t);
        (left && r.when.matches(view)).then_some(i)
    });
    let Some(i) = hit else {
        let answer = Answer {
            text: default_text(view),
            ..Answer::default()
        };
        return (Wait::after(latency), Plan::Answer(answer));
    };
    g.rule_hits[i] += 1;
    let reply = g.script.rules[i].reply.clone();
    let wait = Wait {
        delay: latency + Duration::from_millis(reply.delay_ms),
        hold: reply.hold,
    };
    (wait, plan_for(g, &reply, view))
}

fn plan_for(g: &mut Inner, reply: &Reply, view: &View) -> Plan {
    if let Some(status) = reply.status {
        return Plan::Error {
            status,
            body: reply.body.clone(),
            retry_after: reply.retry_after.as_ref().map(header_text),
        };
    }
    if reply.reset {
        return Plan::Reset;
    }
    if reply.malformed {
        return Plan::Malformed;
    }
    if reply.endless {
        return Plan::Endless;
    }
    let tool_calls = reply
        .tool_calls
        .iter()
        .map(|c| {
            g.tool_call_seq += 1;
            (
                format!("call_{}", g.tool_call_seq),
                c.name.clone(),
                c.arguments.clone(),
                c.broken,
            )
        })
        .collect::<Vec<_>>();
    let text = match (&reply.json, &reply.text) {
        (Some(j), _) => fenced_json(j),
        (None, Some(t)) => t.clone(),
        (None, None) if !tool_calls.is_empty() => String::new(),
        (None, None) => default_text(view),
    };
    Plan::Answer(Answer {
        text,
        reasoning: reply.reasoning.clone(),
        tool_calls,
        finish_reason: reply.finish_reason.clone(),
        image: reply.image,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(user: &str) -> View {
        View::of(
            Api::Openai,
            &json!({"model": "m", "messages": [{"role": "user", "content": user}]}),
        )
    }

    fn run(st: &Arc<MockState>, user: &str) -> Plan {
        let (_, _, plan, mut guard) = st.begin(&view(user), &HeaderMap::new(), &json!({}), true);
        guard.answered(Some(200));
        plan
    }

    fn status(p: &Plan) -> u16 {
        match p {
            Plan::Error { status, .. } => *status,
            Plan::Answer(_) => 200,
            Plan::Malformed | Plan::Reset | Plan::Endless => 0,
        }
    }

    /// A reply that holds says so in its wait; the release lets waiters through, those already
    /// waiting and later ones, and a reset takes it back.
    #[tokio::test]
    async fn a_held_reply_waits_for_the_release() {
        let script: Script = serde_json::from_value(json!({"rules": [
            {"when": {"user_contains": "hold"}, "reply": {"hold": true}}
        ]}))
        .unwrap();
        let st = MockState::new(script);
        let (_, wait, _, _) = st.begin(&view("free"), &HeaderMap::new(), &json!({}), true);
        assert!(!wait.hold);
        let (_, wait, _, _) = st.begin(&view("hold"), &HeaderMap::new(), &json!({}), true);
        assert!(wait.hold);

        let waiting = st.released();
        tokio::pin!(waiting);
        let early = tokio::time::timeout(Duration::from_millis(50), &mut waiting).await;
        assert!(early.is_err(), "answered before the release");
        st.release();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released");
        tokio::time::timeout(Duration::from_secs(5), st.released())
            .await
            .expect("a later wait passes at once");
        st.reset();
        let again = tokio::time::timeout(Duration::from_millis(50), st.released()).await;
        assert!(again.is_err(), "a reset holds again");
    }

    #[test]
    fn times_fall_through_and_ids_count_up() {
        let script: Script = serde_json::from_value(json!({"rules": [
            {"reply": {"status": 503}, "times": 1},
            {"reply": {"tool_calls": [{"name": "a"}, {"name": "b"}]}, "times": 1}
        ], "history_limit": 2}))
        .unwrap();
        let st = MockState::new(script);
        assert_eq!(status(&run(&st, "x")), 503);
        let Plan::Answer(a) = run(&st, "x") else {
            panic!("answer expected")
        };
        let ids: Vec<&str> = a.tool_calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids, ["call_1", "call_2"]);
        let Plan::Answer(a) = run(&st, "hello") else {
            panic!("answer expected")
        };
        assert_eq!(a.text, "mock reply: hello");
        let stats = st.stats();
        assert_eq!(
            (stats.total_requests, stats.rule_hits.clone()),
            (3, vec![1, 1])
        );
        assert_eq!(stats.models["m"].in_flight, 0);
        let seqs: Vec<u64> = st.requests().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [2, 3], "history keeps the last `history_limit`");
        st.reset();
        assert_eq!(st.stats().total_requests, 0);
        assert_eq!(st.script().rules.len(), 2);
    }

    #[test]
    fn faults_are_deterministic() {
        let every: Script = serde_json::from_value(json!({"faults":
            {"rate_limit_every": 3, "retry_after": 2, "error_every": 2, "error_status": 502}}))
        .unwrap();
        let st = MockState::new(every);
        let got: Vec<u16> = (0..6).map(|_| status(&run(&st, "x"))).collect();
        assert_eq!(got, [200, 502, 429, 502, 200, 429]);

        let random: Script =
            serde_json::from_value(json!({"faults": {"error_probability": 0.5, "seed": 9}}))
                .unwrap();
        let draw = || {
            let st = MockState::new(random.clone());
            (0..40).map(|_| status(&run(&st, "x"))).collect::<Vec<_>>()
        };
        let first = draw();
        assert_eq!(first, draw(), "same seed, same faults");
        assert!(first.contains(&500) && first.contains(&200));
    }
}
