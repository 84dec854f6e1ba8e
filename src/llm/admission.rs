//! One admission controller per model provider, shared by every job, key and model of the
//! process: the requests a provider may have in flight adapt to how it answers.
//!
//! * **Throttling** (429, Anthropic's 529, 503) halves the limit, once per round trip: only an
//!   answer to a request sent since the last decrease lowers it again, so a burst of 429s from
//!   requests already in flight counts as one signal, as TCP counts one loss per window. A
//!   `Retry-After` pauses the whole provider until then, not only the caller that read it.
//! * **Success** raises the limit by one per limit's worth of answers (additive increase), up
//!   to `llm.admission.max_in_flight`.
//! * **A provider that is down** (connection errors, timeouts, 500/502/503/504 in a row) opens
//!   the circuit: nothing is sent for `probe_interval`, then one caller's request probes it. An
//!   answer of any kind but those closes it; another failure opens it for one more interval. A
//!   dead provider thus costs one request per interval instead of every record's retries.
//!
//! The per-(provider, model) `max_parallel_requests` limits (`limits.rs`) still apply; this
//! limit sits under them, so it only bites when the provider pushes back. Each replica has its
//! own: the provider's answers reach each one.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::limits::{Limiter, Permit};
use crate::metrics;

/// How the admission controllers behave (`llm.admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionPolicy {
    /// The most requests one provider may have in flight, the limit's ceiling and start.
    pub max_in_flight: u32,
    /// Failures in a row (connection, timeout, 500/502/503/504) that open the circuit.
    pub failures_to_open: u32,
    /// How long an open circuit sends nothing before one request probes the provider.
    pub probe_interval: Duration,
    /// How long one call may keep going through 429s (retried without counting against
    /// `max_attempts`) and waiting for an open circuit, before it fails.
    pub patience: Duration,
}

impl From<&crate::config::AdmissionConfig> for AdmissionPolicy {
    fn from(c: &crate::config::AdmissionConfig) -> Self {
        Self {
            max_in_flight: c.max_in_flight.max(1),
            failures_to_open: c.failures_to_open.max(1),
            probe_interval: Duration::from_millis(c.probe_interval_ms),
            patience: Duration::from_secs(c.patience_secs),
        }
    }
}

impl Default for AdmissionPolicy {
    fn default() -> Self {
        Self::from(&crate::config::AdmissionConfig::default())
    }
}

/// What one answer (or its absence) says about the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// A 2xx: it works.
    Answered,
    /// It is up but refused this request (a 4xx, a body it could not read): no change to the
    /// limit; a failure streak ends.
    Refused,
    /// It asks for less (429, 529): lower the limit, pause for `retry_after`.
    Throttled { retry_after: Option<Duration> },
    /// 503: both throttled and a failure towards the circuit.
    Unavailable { retry_after: Option<Duration> },
    /// Connection error, timeout, 500/502/504: a failure towards the circuit.
    Down,
}

/// The circuit of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Circuit {
    Closed,
    /// Nothing is sent before `until`; then the first caller probes.
    Open {
        until: Instant,
    },
    /// One probe is in flight; everyone else waits for its answer.
    HalfOpen,
}

impl Circuit {
    fn name(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open { .. } => "open",
            Self::HalfOpen => "half_open",
        }
    }

    /// The value of the `synthgate_llm_provider_circuit` gauge.
    fn gauge(self) -> f64 {
        match self {
            Self::Closed => 0.0,
            Self::Open { .. } => 1.0,
            Self::HalfOpen => 2.0,
        }
    }
}

#[derive(Debug)]
struct Gate {
    /// The limit: at least 1, at most `max_in_flight`.
    limit: u32,
    /// Answers since the limit last moved: at `limit` of them it grows by one.
    answers: u32,
    /// Bumped by every decrease: an answer to a request admitted before it lowers nothing.
    epoch: u64,
    /// No request is sent before this (a `Retry-After`).
    paused_until: Option<Instant>,
    circuit: Circuit,
    /// Failures in a row towards the circuit.
    failures: u32,
}

/// A provider's admission state, as the job view shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ProviderAdmission {
    /// `closed` (requests flow), `open` (the provider failed; nothing is sent until the next
    /// probe) or `half_open` (one probe in flight).
    pub circuit: String,
    /// Requests this replica may have in flight to the provider now.
    pub concurrency_limit: u32,
    /// Requests in flight to it now (from this replica).
    pub in_flight: u32,
    /// Answers that throttled it (429, 529, 503) since the server started.
    pub throttled: u64,
    /// Seconds until a `Retry-After` pause ends, when one is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_for_secs: Option<f64>,
}

/// One provider's admission controller.
#[derive(Debug)]
pub(crate) struct Admission {
    provider: String,
    policy: AdmissionPolicy,
    /// The limit as a semaphore, resized as the limit moves.
    slots: Arc<Limiter>,
    gate: Mutex<Gate>,
    /// Wakes the callers that wait for the pause, the circuit or a probe's answer.
    changed: Notify,
    in_flight: AtomicU32,
    throttled: AtomicU64,
}

/// Why a call could not be admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PatienceSpent;

impl Admission {
    pub(crate) fn new(provider: &str, policy: AdmissionPolicy) -> Self {
        let a = Self {
            provider: provider.to_owned(),
            policy,
            slots: Arc::new(Limiter::new(policy.max_in_flight)),
            gate: Mutex::new(Gate {
                limit: policy.max_in_flight.max(1),
                answers: 0,
                epoch: 0,
                paused_until: None,
                circuit: Circuit::Closed,
                failures: 0,
            }),
            changed: Notify::new(),
            in_flight: AtomicU32::new(0),
            throttled: AtomicU64::new(0),
        };
        a.publish(&a.lock());
        a
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long one call may keep going through throttling and an open circuit.
    pub(crate) fn patience(&self) -> Duration {
        self.policy.patience
    }

    /// The state the job view shows.
    pub(crate) fn state(&self) -> ProviderAdmission {
        let g = self.lock();
        let now = Instant::now();
        ProviderAdmission {
            circuit: g.circuit.name().to_owned(),
            concurrency_limit: g.limit,
            in_flight: self.in_flight.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
            paused_for_secs: g
                .paused_until
                .filter(|t| *t > now)
                .map(|t| (t - now).as_secs_f64()),
        }
    }

    /// Waits until a request may be sent: no pause on, the circuit closed (or this caller's
    /// request is the probe) and a slot under the limit free. Gives up at `deadline`.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<Ticket, PatienceSpent> {
        let probe = loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = Instant::now();
            let wait_until = {
                let mut g = self.lock();
                match g.circuit {
                    Circuit::Open { until } if now < until => Some(until),
                    Circuit::Open { .. } => {
                        g.circuit = Circuit::HalfOpen;
                        self.publish(&g);
                        break true;
                    }
                    // Woken by the probe's answer.
                    Circuit::HalfOpen => None,
                    Circuit::Closed => match g.paused_until {
                        Some(t) if now < t => Some(t),
                        _ => break false,
                    },
                }
            };
            if now >= deadline {
                return Err(PatienceSpent);
            }
            let until = wait_until.map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(until) => {}
            }
        };
        // From here the ticket's drop puts a probe back if the call is dropped.
        let mut ticket = Ticket {
            admission: Arc::clone(self),
            permit: None,
            epoch: 0,
            probe,
            reported: false,
        };
        // Biased: a free slot wins over a deadline that has passed (patience 0 still sends).
        let permit = tokio::select! {
            biased;
            p = self.slots.acquire() => p,
            () = tokio::time::sleep_until(deadline) => return Err(PatienceSpent),
        };
        ticket.permit = Some(permit);
        // The epoch the request is sent in, not the one it started waiting in.
        ticket.epoch = self.lock().epoch;
        let n = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        metrics_gauge(
            metrics::LLM_PROVIDER_IN_FLIGHT,
            &self.provider,
            f64::from(n),
        );
        Ok(ticket)
    }

    fn report(&self, ticket_epoch: u64, probe: bool, signal: Signal, max_pause: Duration) {
        let now = Instant::now();
        let mut g = self.lock();
        let (throttled, retry_after, down) = match signal {
            Signal::Answered | Signal::Refused => (false, None, false),
            Signal::Throttled { retry_after } => (true, retry_after, false),
            Signal::Unavailable { retry_after } => (true, retry_after, true),
            Signal::Down => (false, None, true),
        };
        if throttled {
            self.throttled.fetch_add(1, Ordering::Relaxed);
            ::metrics::counter!(metrics::LLM_PROVIDER_THROTTLED, "provider" => self.provider.clone())
                .increment(1);
            if ticket_epoch == g.epoch {
                // Halve what was in use, not an unused ceiling.
                let in_use = self.in_flight.load(Ordering::Relaxed);
                g.limit = (g.limit.min(in_use) / 2).max(1);
                g.answers = 0;
                g.epoch += 1;
                self.slots.resize(g.limit);
            }
            if let Some(ra) = retry_after {
                let until = now + ra.min(max_pause);
                g.paused_until = Some(g.paused_until.map_or(until, |t| t.max(until)));
            }
        } else if signal == Signal::Answered && g.limit < self.policy.max_in_flight {
            g.answers += 1;
            if g.answers >= g.limit {
                g.limit += 1;
                g.answers = 0;
                self.slots.resize(g.limit);
            }
        }
        if down {
            g.failures = g.failures.saturating_add(1);
            let opens = if probe {
                true
            } else {
                g.circuit == Circuit::Closed && g.failures >= self.policy.failures_to_open
            };
            if opens {
                if g.circuit == Circuit::Closed {
                    tracing::warn!(
                        llm.provider = %self.provider,
                        failures = g.failures,
                        probe_interval_ms = u64::try_from(self.policy.probe_interval.as_millis())
                            .unwrap_or(u64::MAX),
                        "model provider failing; circuit open, probing it once per interval"
                    );
                    ::metrics::counter!(metrics::LLM_PROVIDER_CIRCUIT_OPENED, "provider" => self.provider.clone())
                        .increment(1);
                }
                g.circuit = Circuit::Open {
                    until: now + self.policy.probe_interval,
                };
            }
        } else {
            // It answered: whatever the answer, it is up.
            g.failures = 0;
            if probe || g.circuit != Circuit::Closed {
                if g.circuit != Circuit::Closed {
                    tracing::info!(llm.provider = %self.provider, "model provider answered; circuit closed");
                }
                g.circuit = Circuit::Closed;
            }
        }
        self.publish(&g);
        drop(g);
        self.changed.notify_waiters();
    }

    /// A probe dropped before its answer: the next caller probes at once.
    fn abandon_probe(&self) {
        let mut g = self.lock();
        if g.circuit == Circuit::HalfOpen {
            g.circuit = Circuit::Open {
                until: Instant::now(),
            };
            self.publish(&g);
        }
        drop(g);
        self.changed.notify_waiters();
    }

    fn publish(&self, g: &Gate) {
        metrics_gauge(
            metrics::LLM_PROVIDER_LIMIT,
            &self.provider,
            f64::from(g.limit),
        );
        metrics_gauge(
            metrics::LLM_PROVIDER_CIRCUIT,
            &self.provider,
            g.circuit.gauge(),
        );
    }
}

fn metrics_gauge(name: &'static str, provider: &str, value: f64) {
    ::metrics::gauge!(name, "provider" => provider.to_owned()).set(value);
}

/// One admitted request: holds its slot under the provider's limit until dropped. Report
/// the answer with [`report`](Self::report).
#[derive(Debug)]
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    permit: Option<Permit>,
    epoch: u64,
    probe: bool,
    reported: bool,
}

impl Ticket {
    /// Whether this request probes an open circuit (its failure is the controller's, not
    /// counted against the caller's attempts).
    pub(crate) fn is_probe(&self) -> bool {
        self.probe
    }

    /// Reports what the answer said about the provider, and frees the slot. `max_pause` caps
    /// a provider-wide `Retry-After` pause.
    pub(crate) fn report(mut self, signal: Signal, max_pause: Duration) {
        self.reported = true;
        // Reported while its slot is held, so the decrease sees it among those in flight.
        self.admission
            .report(self.epoch, self.probe, signal, max_pause);
        self.release();
    }

    fn release(&mut self) {
        if self.permit.take().is_some() {
            let n = self
                .admission
                .in_flight
                .fetch_sub(1, Ordering::Relaxed)
                .saturating_sub(1);
            metrics_gauge(
                metrics::LLM_PROVIDER_IN_FLIGHT,
                &self.admission.provider,
                f64::from(n),
            );
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.reported {
            return;
        }
        self.release();
        if self.probe {
            self.admission.abandon_probe();
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
