//! One model request from posting to parsed answer: the concurrency limits and the provider's
//! admission, the retries, and the HTTP attempt itself. Chat, embeddings and image requests
//! all go through [`LlmClient::exchange`].
//!
//! Two budgets bound the retries. A failure that says nothing about the provider as a whole
//! (a 500 on this prompt, a timeout, a reset) spends one of `llm.max_attempts`. A throttle (a
//! 429 or 529) does not: the provider is up and asks for less, so the call waits (its
//! `Retry-After`, else the backoff) and goes on for as long as the admission's patience lasts,
//! while the admission controller lowers the requests in flight. A probe of an open circuit
//! is the controller's request, so its failure spends nothing of the caller's either.

use std::time::{Duration, SystemTime};

use backon::BackoffBuilder;
use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{LlmClient, Provider};
use super::error::LlmError;
use super::params;
use super::retry::{Failure, retry_after};
use super::spans;
use crate::domain::models::ModelConfig;

impl LlmClient {
    /// Posts `body` (serialized JSON) to `url` for `model` under its concurrency limits, its
    /// provider's admission, timeout and retry policy, and parses a 2xx body with `parse`.
    /// Returns the parsed value and the HTTP attempts made.
    pub(super) async fn exchange<T>(
        &self,
        model: &ModelConfig,
        provider: &Provider,
        url: &reqwest::Url,
        body: Result<Vec<u8>, String>,
        cancel: &CancellationToken,
        parse: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<(T, u32), LlmError> {
        let alias = model.alias.as_str();
        let timeout = params::timeout(&model.inference_parameters);
        let body = body.map_err(|message| LlmError::InvalidResponse {
            model: alias.to_owned(),
            attempts: 0,
            message: format!("cannot build the request: {message}"),
        })?;
        let body = Bytes::from(body);
        let mut attempts = 0;
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            r = self.retrying(model, provider, url, &body, timeout, &parse, &mut attempts) => Some(r),
        };
        match outcome {
            None => Err(LlmError::Cancelled {
                model: alias.to_owned(),
                attempts,
            }),
            Some(Ok(t)) => Ok((t, attempts)),
            Some(Err(Stop::Failed(f))) => Err(f.into_error(alias, timeout, attempts)),
            Some(Err(Stop::Unavailable { waited })) => Err(LlmError::ProviderUnavailable {
                model: alias.to_owned(),
                provider: provider.name.clone(),
                waited,
                attempts,
            }),
        }
    }

    /// The attempts of one request until one is answered or a budget is spent.
    #[allow(clippy::too_many_arguments)]
    async fn retrying<T>(
        &self,
        model: &ModelConfig,
        provider: &Provider,
        url: &reqwest::Url,
        body: &Bytes,
        timeout: Duration,
        parse: &impl Fn(&Value) -> Result<T, String>,
        attempts: &mut u32,
    ) -> Result<T, Stop> {
        let started = Instant::now();
        let deadline = started + provider.admission.patience();
        let mut counted = self.retry.schedule().build();
        let mut throttled = self.retry.throttle_schedule().build();
        let mut last: Option<Failure> = None;
        // Taken once: a job's limiter lives while one of its calls holds it.
        let slots = self.slots(model, provider);
        loop {
            let (result, probe) = {
                // Always the job's slot, then the shared one, then the provider's: one order,
                // no deadlock. Slots are held for the attempt only, never during a backoff.
                let waiting = std::time::Instant::now();
                let _job_slot = match &slots.0 {
                    Some(l) => Some(l.acquire().await),
                    None => None,
                };
                let _slot = match &slots.1 {
                    Some(l) => Some(l.acquire().await),
                    None => None,
                };
                let Ok(ticket) = provider.admission.admit(deadline).await else {
                    spans::waited_for_slot(waiting.elapsed());
                    return Err(match last {
                        Some(f) => Stop::Failed(f),
                        None => Stop::Unavailable {
                            waited: started.elapsed(),
                        },
                    });
                };
                spans::waited_for_slot(waiting.elapsed());
                *attempts += 1;
                let result = match self.attempt(provider, url, body.clone(), timeout).await {
                    Ok(v) => parse(&v).map_err(|m| Failure::Invalid(provider.redactor.clean(&m))),
                    Err(f) => Err(f),
                };
                let probe = ticket.is_probe();
                let signal = match &result {
                    Ok(_) => super::admission::Signal::Answered,
                    Err(f) => f.signal(),
                };
                ticket.report(signal, self.retry.max_delay);
                (result, probe)
            };
            let failure = match result {
                Ok(t) => return Ok(t),
                Err(f) if !f.is_retryable() => return Err(Stop::Failed(f)),
                Err(f) => f,
            };
            let free = failure.is_throttle() || probe;
            let scheduled = if free {
                throttled.next()
            } else {
                counted.next()
            };
            let Some(scheduled) = scheduled else {
                return Err(Stop::Failed(failure));
            };
            let delay = self.retry.wait(&failure, scheduled);
            if free && Instant::now() + delay > deadline {
                return Err(Stop::Failed(failure));
            }
            tracing::warn!(
                llm.provider = %provider.name,
                llm.model_alias = %model.alias,
                gen_ai.request.model = %model.model,
                attempt = *attempts,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %failure.label(),
                counted = !free,
                "LLM request failed; retrying"
            );
            tokio::time::sleep(delay).await;
            last = Some(failure);
        }
    }

    /// The per-job and shared `max_parallel_requests` limiters a request of `model` takes.
    fn slots(
        &self,
        model: &ModelConfig,
        provider: &Provider,
    ) -> (
        Option<std::sync::Arc<super::limits::Limiter>>,
        Option<std::sync::Arc<super::limits::Limiter>>,
    ) {
        let cap = model.inference_parameters.max_parallel_requests;
        match &model.job_limit {
            None => (
                None,
                Some(self.limits.get(&provider.name, &model.model, cap)),
            ),
            Some(j) => (
                Some(
                    self.limits
                        .job(&j.scope, &provider.name, &model.model, j.cap),
                ),
                self.limits.existing(&provider.name, &model.model),
            ),
        }
    }

    /// One HTTP request, its body read in full, all under `timeout`.
    async fn attempt(
        &self,
        p: &Provider,
        url: &reqwest::Url,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        let exchange = async {
            let mut headers = p.headers.clone();
            // The call's span continues at the provider (or the gateway in front of it).
            crate::telemetry::inject(&mut headers);
            let lane = p.lanes.pick();
            let resp = lane
                .http()
                .post(url.clone())
                .headers(headers)
                .body(body)
                .send()
                .await?;
            p.lanes.answered_over(resp.version());
            let status = resp.status();
            let wait = retry_after(resp.headers(), SystemTime::now());
            // Reading the body can fail too (reset mid-body): that is a connection error.
            let bytes = crate::bounded_body::read(resp, self.max_answer_bytes).await?;
            drop(lane);
            Ok::<_, reqwest::Error>((status, wait, bytes))
        };
        let (status, wait, bytes) = match tokio::time::timeout(timeout, exchange).await {
            Err(_elapsed) => return Err(Failure::Timeout),
            Ok(Err(e)) if e.is_timeout() && !e.is_connect() => return Err(Failure::Timeout),
            Ok(Err(e)) => return Err(Failure::Connection(p.transport_message(&e))),
            Ok(Ok(x)) => x,
        };
        let Some(bytes) = bytes else {
            let message = format!(
                "response body is larger than {} bytes; not read",
                self.max_answer_bytes
            );
            return Err(if status.is_success() {
                Failure::Invalid(message)
            } else {
                Failure::Status {
                    status: status.as_u16(),
                    message,
                    retry_after: wait,
                }
            });
        };
        if !status.is_success() {
            return Err(Failure::Status {
                status: status.as_u16(),
                message: p.redactor.clean(&super::adapter::error_message(&bytes)),
                retry_after: wait,
            });
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Invalid(format!("response body is not JSON ({e})")))
    }
}

/// Why [`LlmClient::retrying`] gave up.
enum Stop {
    /// The last attempt's failure: final, or the budget it spends is gone.
    Failed(Failure),
    /// No attempt could be sent within the patience: the provider's circuit stayed open.
    Unavailable { waited: Duration },
}
