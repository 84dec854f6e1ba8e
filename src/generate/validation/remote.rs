//! Remote validators: DataDesigner's request and response shapes
//! (`engine/validators/remote.py`). The record's target values are POSTed as
//! `{"data": [{target: value, ...}]}` (a batch of one); the answer must be
//! `{"data": [{"is_valid": bool|null, ...extra fields}]}`, and match `output_schema` (with
//! `additionalProperties: false` wherever the schema does not say otherwise) when one is given.
//! The column's value is that one output object.
//!
//! Retries: DataDesigner configures retries on 429/5xx and transport errors, but its retry
//! library only retries idempotent methods, so its POSTs are never retried. Here they are, as
//! `max_retries` promises: a validator only reads what it is sent. The wait before retry `n`
//! (from 0) is `retry_backoff * 2^n` seconds with full jitter, capped at 120 s, and a
//! `Retry-After` header wins. `max_parallel_requests` bounds this column's requests in flight
//! per job on this replica.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

use super::ValidatorEnv;
use crate::domain::dataset::RemoteValidatorParams;
use crate::domain::record::RecordErrorCode;
use crate::generate::columns::StepError;

/// httpx-retries' `max_backoff_wait`, which DataDesigner keeps.
const MAX_BACKOFF: Duration = Duration::from_secs(120);
/// The largest answer read (a batch of one record's verdict is small).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// A compiled remote validator.
#[derive(Debug)]
pub(super) struct RemoteStep {
    params: RemoteValidatorParams,
    env: Arc<ValidatorEnv>,
    permits: Semaphore,
    schema: Option<jsonschema::Validator>,
}

impl RemoteStep {
    pub(super) fn new(params: RemoteValidatorParams, env: Arc<ValidatorEnv>) -> Self {
        // The parser checked that the schema compiles; one that no longer would is dropped.
        let schema = params.output_schema.as_ref().and_then(|s| {
            let mut s = Value::Object(s.clone());
            close_objects(&mut s);
            jsonschema::validator_for(&s).ok()
        });
        Self {
            permits: Semaphore::new(params.max_parallel_requests as usize),
            params,
            env,
            schema,
        }
    }

    /// Validates one record (`target → value`) and returns its output object.
    pub(super) async fn validate(&self, record: Map<String, Value>) -> Result<Value, StepError> {
        let body = json!({"data": [Value::Object(record)]});
        let answer = {
            // Closed only when the plan is dropped, after its records.
            let _permit = self.permits.acquire().await.map_err(|_| {
                StepError::new(
                    RecordErrorCode::ValidatorError,
                    "the validator was shut down",
                )
            })?;
            self.post_with_retries(&body).await?
        };
        self.output(answer)
    }

    async fn post_with_retries(&self, body: &Value) -> Result<Value, StepError> {
        let url = &self.params.endpoint_url;
        let timeout = Duration::from_secs_f64(self.params.timeout);
        let mut attempt = 0u32;
        loop {
            let sent = self
                .env
                .client()
                .post(url)
                .timeout(timeout)
                .json(body)
                .send()
                .await;
            let (problem, retry_after) = match sent {
                Ok(resp) if resp.status().is_success() => return read_json(resp).await,
                Ok(resp) => {
                    let status = resp.status();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        // Capped like the backoff (and so never too large for a Duration).
                        .map(|s| Duration::from_secs_f64(s.min(MAX_BACKOFF.as_secs_f64())));
                    let problem = format!("the endpoint answered HTTP {}", status.as_u16());
                    let retryable = matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504);
                    if !retryable {
                        return Err(StepError::new(RecordErrorCode::ValidatorError, problem));
                    }
                    (problem, retry_after)
                }
                Err(e) if e.is_timeout() => (
                    format!("no answer within the timeout ({} s)", self.params.timeout),
                    None,
                ),
                // Never the URL's query or the body: only what kind of failure it was.
                Err(e) if e.is_connect() => ("the endpoint could not be reached".into(), None),
                Err(_) => ("the connection to the endpoint failed".into(), None),
            };
            if attempt >= self.params.max_retries {
                let tries = attempt + 1;
                let msg = format!("remote validator failed after {tries} attempt(s): {problem}");
                return Err(StepError::new(RecordErrorCode::ValidatorError, msg));
            }
            tokio::time::sleep(retry_after.unwrap_or_else(|| self.backoff(attempt))).await;
            attempt += 1;
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let full = self.params.retry_backoff * 2f64.powi(attempt.min(30) as i32);
        let jittered = full * rand::random::<f64>();
        Duration::from_secs_f64(jittered.min(MAX_BACKOFF.as_secs_f64()))
    }

    fn output(&self, answer: Value) -> Result<Value, StepError> {
        let invalid = |msg: String| StepError::new(RecordErrorCode::ValidatorInvalidResponse, msg);
        if let Some(schema) = &self.schema
            && let Some(e) = schema.iter_errors(&answer).next()
        {
            let at = e.instance_path().to_string();
            return Err(invalid(format!(
                "the answer does not match output_schema at '{at}': {e}"
            )));
        }
        let Some(data) = answer.get("data").and_then(Value::as_array) else {
            return Err(invalid(
                "the answer has no `data` list (expected {\"data\": [{\"is_valid\": ...}]})".into(),
            ));
        };
        let [output] = data.as_slice() else {
            return Err(invalid(format!(
                "the answer's `data` holds {} results for the 1 record sent",
                data.len()
            )));
        };
        match output.get("is_valid") {
            Some(Value::Bool(_) | Value::Null) => Ok(output.clone()),
            Some(_) => Err(invalid(
                "`data[0].is_valid` is not a boolean or null".into(),
            )),
            None => Err(invalid("`data[0]` has no `is_valid`".into())),
        }
    }
}

async fn read_json(resp: reqwest::Response) -> Result<Value, StepError> {
    let invalid = |msg: String| StepError::new(RecordErrorCode::ValidatorInvalidResponse, msg);
    let bytes = match crate::bounded_body::read(resp, MAX_RESPONSE_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Err(invalid(format!(
                "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        Err(_) => {
            return Err(StepError::new(
                RecordErrorCode::ValidatorError,
                "the connection broke while reading the answer",
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| invalid(format!("the answer is not JSON: {e}")))
}

/// DataDesigner's `no_extra_properties`: `additionalProperties: false` on every object schema
/// with `properties` that does not set `additionalProperties` or `patternProperties` itself.
fn close_objects(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties")
                && !map.contains_key("additionalProperties")
                && !map.contains_key("patternProperties")
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (_, v) in map.iter_mut() {
                close_objects(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_objects_keeps_explicit_settings() {
        let mut s = json!({"type": "object", "properties": {
            "data": {"type": "array", "items": {"type": "object",
                "properties": {"is_valid": {"type": "boolean"}}}},
            "meta": {"type": "object", "additionalProperties": true, "properties": {}}}});
        close_objects(&mut s);
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(
            s["properties"]["data"]["items"]["additionalProperties"],
            json!(false)
        );
        assert_eq!(s["properties"]["meta"]["additionalProperties"], json!(true));
    }
}
