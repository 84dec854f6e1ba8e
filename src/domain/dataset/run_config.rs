//! DataDesigner 0.9.7's `RunConfig` (`data_designer.config.run_config`), plus synthgate's
//! `debug_override_save_all_column_traces`.
//!
//! Every DataDesigner field is accepted with its default and range, so a DataDesigner user's
//! run config parses unchanged; synthgate honours the ones that make sense for a server
//! (early shutdown, conversation restarts and correction steps) and keeps the rest for
//! reference. The deprecated `progress_bar` and `throttle` keys are translated as
//! DataDesigner does.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConfigIssue;
use super::issues::{codes, deserialize_at};
use super::sampler_params::json_kind;
use crate::domain::models::MAX_TIMEOUT_SEC;

/// The job's run config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Never stop a job early, whatever its error rate.
    pub disable_early_shutdown: bool,
    /// Error rate in `[0, 1]` over the window that stops a job early (default 0.5).
    pub shutdown_error_rate: f64,
    /// Number of most recent record outcomes the error rate is computed over (≥ 1, default 10).
    pub shutdown_error_window: u32,
    /// Records per row group (> 0, default 1000).
    pub buffer_size: u32,
    /// Row groups in flight (≥ 1, default 3).
    pub max_concurrent_row_groups: u32,
    /// Scheduler task leases (≥ 1, default 1024).
    pub max_in_flight_tasks: u32,
    /// Threads for non-LLM columns (≥ 1, default 4).
    pub non_inference_max_parallel_workers: u32,
    /// Full conversation restarts after parse failures (default 5).
    pub max_conversation_restarts: u32,
    /// Correction turns within one conversation after a parse failure (default 0).
    pub max_conversation_correction_steps: u32,
    /// Collect per-task tracing data (DataDesigner's async engine).
    pub async_trace: bool,
    /// Write scheduler events (DataDesigner's async engine).
    pub write_scheduler_events: bool,
    /// Show DataDesigner's terminal UI.
    pub display_tui: bool,
    /// Seconds between progress reports (> 0, default 5).
    pub progress_interval: f64,
    /// DataDesigner's metrics port (1..=65535, default 9464, null = off).
    pub otel_metrics_port: Option<u16>,
    /// Keep dropped columns in side files (DataDesigner).
    pub preserve_dropped_columns: bool,
    /// `secure` (default) or `native`.
    pub jinja_rendering_engine: JinjaRenderingEngine,
    /// AIMD tuning of request admission.
    pub request_admission: Option<RequestAdmissionTuning>,
    /// synthgate: store the full message trace of every LLM column, whatever its `with_trace`.
    pub debug_override_save_all_column_traces: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            disable_early_shutdown: false,
            shutdown_error_rate: 0.5,
            shutdown_error_window: 10,
            buffer_size: 1000,
            max_concurrent_row_groups: 3,
            max_in_flight_tasks: 1024,
            non_inference_max_parallel_workers: 4,
            max_conversation_restarts: 5,
            max_conversation_correction_steps: 0,
            async_trace: false,
            write_scheduler_events: false,
            display_tui: false,
            progress_interval: 5.0,
            otel_metrics_port: Some(9464),
            preserve_dropped_columns: true,
            jinja_rendering_engine: JinjaRenderingEngine::Secure,
            request_admission: None,
            debug_override_save_all_column_traces: false,
        }
    }
}

/// `JinjaRenderingEngine`. synthgate always renders with its own sandboxed minijinja
/// environment; the value is accepted for compatibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JinjaRenderingEngine {
    /// DataDesigner's hardened sandbox (default).
    #[default]
    Secure,
    /// Jinja2's built-in sandbox.
    Native,
}

/// `RequestAdmissionTuningConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestAdmissionTuning {
    /// In `(0, 1)`, default 0.75.
    pub multiplicative_decrease_factor: f64,
    /// ≥ 1, default 1.
    pub additive_increase_step: u32,
    /// ≥ 1, default 25.
    pub successes_until_increase: u32,
    /// > 0, default 2.0.
    pub cooldown_seconds: f64,
    /// ≥ 0, default 0.0.
    pub startup_ramp_seconds: f64,
}

impl Default for RequestAdmissionTuning {
    fn default() -> Self {
        Self {
            multiplicative_decrease_factor: 0.75,
            additive_increase_step: 1,
            successes_until_increase: 25,
            cooldown_seconds: 2.0,
            startup_ramp_seconds: 0.0,
        }
    }
}

/// The deprecated `ThrottleConfig`, translated into [`RequestAdmissionTuning`].
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ThrottleDe {
    reduce_factor: f64,
    additive_increase: u32,
    success_window: u32,
    cooldown_seconds: f64,
    /// Accepted for compatibility; DataDesigner does not forward it either.
    ceiling_overshoot: f64,
    rampup_seconds: f64,
}

impl Default for ThrottleDe {
    fn default() -> Self {
        Self {
            reduce_factor: 0.75,
            additive_increase: 1,
            success_window: 25,
            cooldown_seconds: 2.0,
            ceiling_overshoot: 0.10,
            rampup_seconds: 0.0,
        }
    }
}

/// Most `max_conversation_restarts`, and most `max_conversation_correction_steps`.
pub const MAX_CONVERSATION_STEPS: u32 = 100;

impl RunConfig {
    /// Parses a run config object (`null` gives the defaults). Returns every problem found.
    pub fn parse(value: &Value) -> Result<Self, Vec<ConfigIssue>> {
        let issue =
            |field: &str, msg: String| ConfigIssue::at_field(codes::INVALID_RUN_CONFIG, field, msg);
        let mut obj = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(obj) => obj.clone(),
            other => {
                let msg = format!("invalid type: {}, expected an object", json_kind(other));
                return Err(vec![ConfigIssue::new(
                    codes::INVALID_RUN_CONFIG,
                    None,
                    None,
                    msg,
                )]);
            }
        };
        let mut issues = Vec::new();
        if let Some(progress_bar) = obj.remove("progress_bar") {
            obj.entry("display_tui").or_insert(progress_bar);
        }
        if let Some(throttle) = obj.remove("throttle") {
            if obj.get("request_admission").is_some_and(|v| !v.is_null()) {
                let msg = "specify either throttle (deprecated) or request_admission, not both";
                issues.push(issue("throttle", msg.into()));
            } else if !throttle.is_null() {
                match deserialize_at::<ThrottleDe>(&throttle) {
                    Ok(t) => {
                        let tuning = RequestAdmissionTuning {
                            multiplicative_decrease_factor: t.reduce_factor,
                            additive_increase_step: t.additive_increase,
                            successes_until_increase: t.success_window,
                            cooldown_seconds: t.cooldown_seconds,
                            startup_ramp_seconds: t.rampup_seconds,
                        };
                        let tuning = serde_json::to_value(tuning).unwrap_or(Value::Null);
                        obj.insert("request_admission".into(), tuning);
                    }
                    Err((path, msg)) => issues.push(issue(&format!("throttle.{path}"), msg)),
                }
            }
        }
        // Report every unknown key, not only the first one serde would stop at.
        let known = serde_json::to_value(Self::default()).unwrap_or(Value::Null);
        for key in obj.keys() {
            if known.get(key).is_none() {
                issues.push(issue(key, format!("unknown field `{key}`")));
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        let config: Self =
            deserialize_at(&Value::Object(obj)).map_err(|(path, msg)| vec![issue(&path, msg)])?;
        issues.extend(
            config
                .range_problems()
                .into_iter()
                .map(|(f, m)| issue(f, m)),
        );
        if issues.is_empty() {
            Ok(config)
        } else {
            Err(issues)
        }
    }

    /// The error rate that stops a job early: 1.0 (never) when early shutdown is disabled.
    pub fn effective_shutdown_error_rate(&self) -> f64 {
        if self.disable_early_shutdown {
            1.0
        } else {
            self.shutdown_error_rate
        }
    }

    /// Seconds fields are also bounded above ([`MAX_TIMEOUT_SEC`], a day), like every number
    /// of a job that is, or may become, a `Duration`: no input can make a conversion overflow.
    fn range_problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        #[expect(
            clippy::cast_precision_loss,
            reason = "a day in seconds is exact in an f64"
        )]
        let max_sec = MAX_TIMEOUT_SEC as f64;
        let within_day = format!("at most {MAX_TIMEOUT_SEC} seconds");
        let mut check = |ok: bool, field: &'static str, rule: &str| {
            if !ok {
                out.push((field, format!("must be {rule}")));
            }
        };
        let r = self.shutdown_error_rate;
        check(
            (0.0..=1.0).contains(&r),
            "shutdown_error_rate",
            "between 0.0 and 1.0",
        );
        check(
            self.shutdown_error_window >= 1,
            "shutdown_error_window",
            "at least 1",
        );
        check(self.buffer_size >= 1, "buffer_size", "greater than 0");
        check(
            self.max_concurrent_row_groups >= 1,
            "max_concurrent_row_groups",
            "at least 1",
        );
        check(
            self.max_in_flight_tasks >= 1,
            "max_in_flight_tasks",
            "at least 1",
        );
        let workers = self.non_inference_max_parallel_workers;
        check(
            workers >= 1,
            "non_inference_max_parallel_workers",
            "at least 1",
        );
        // Each restart or correction is another model call: past a hundred a record only
        // spends tokens (1e9 restarts ran one record's calls for ever).
        let most = format!("at most {MAX_CONVERSATION_STEPS}");
        check(
            self.max_conversation_restarts <= MAX_CONVERSATION_STEPS,
            "max_conversation_restarts",
            &most,
        );
        check(
            self.max_conversation_correction_steps <= MAX_CONVERSATION_STEPS,
            "max_conversation_correction_steps",
            &most,
        );
        let pi = self.progress_interval;
        check(
            pi.is_finite() && pi > 0.0,
            "progress_interval",
            "greater than 0",
        );
        check(pi <= max_sec, "progress_interval", &within_day);
        check(
            self.otel_metrics_port != Some(0),
            "otel_metrics_port",
            "between 1 and 65535",
        );
        if let Some(ra) = &self.request_admission {
            let f = ra.multiplicative_decrease_factor;
            let name = "request_admission.multiplicative_decrease_factor";
            check(f > 0.0 && f < 1.0, name, "strictly between 0 and 1");
            let name = "request_admission.additive_increase_step";
            check(ra.additive_increase_step >= 1, name, "at least 1");
            let name = "request_admission.successes_until_increase";
            check(ra.successes_until_increase >= 1, name, "at least 1");
            let c = ra.cooldown_seconds;
            let name = "request_admission.cooldown_seconds";
            check(c.is_finite() && c > 0.0, name, "greater than 0");
            check(c <= max_sec, name, &within_day);
            let s = ra.startup_ramp_seconds;
            let name = "request_admission.startup_ramp_seconds";
            check(s.is_finite() && s >= 0.0, name, "at least 0");
            check(s <= max_sec, name, &within_day);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_match_datadesigner() {
        let rc = RunConfig::parse(&json!({})).unwrap();
        assert_eq!(rc, RunConfig::default());
        assert_eq!(rc.shutdown_error_rate, 0.5);
        assert_eq!(rc.shutdown_error_window, 10);
        assert_eq!(rc.max_conversation_restarts, 5);
        assert_eq!(rc.max_conversation_correction_steps, 0);
        assert_eq!(rc.buffer_size, 1000);
        assert_eq!(rc.otel_metrics_port, Some(9464));
        assert!(!rc.debug_override_save_all_column_traces);
        assert_eq!(
            RunConfig::parse(&Value::Null).unwrap(),
            RunConfig::default()
        );
    }

    #[test]
    fn disable_early_shutdown_makes_the_effective_rate_one() {
        let rc =
            RunConfig::parse(&json!({"disable_early_shutdown": true, "shutdown_error_rate": 0.2}))
                .unwrap();
        assert_eq!(rc.shutdown_error_rate, 0.2);
        assert_eq!(rc.effective_shutdown_error_rate(), 1.0);
        let rc = RunConfig::parse(&json!({"shutdown_error_rate": 0.2})).unwrap();
        assert_eq!(rc.effective_shutdown_error_rate(), 0.2);
    }

    #[test]
    fn unknown_keys_are_all_named() {
        let err = RunConfig::parse(&json!({"bogus": 1, "other": 2, "buffer_size": 5})).unwrap_err();
        assert_eq!(err.len(), 2);
        assert!(err.iter().all(|i| i.code == "invalid_run_config"));
        assert_eq!(err[0].field.as_deref(), Some("bogus"));
        assert!(err[0].message.contains("unknown field `bogus`"));
    }

    #[test]
    fn ranges_and_types_are_checked() {
        let err =
            RunConfig::parse(&json!({"shutdown_error_rate": 1.5, "shutdown_error_window": 0}))
                .unwrap_err();
        let fields: Vec<_> = err.iter().map(|i| i.field.clone().unwrap()).collect();
        assert_eq!(fields, ["shutdown_error_rate", "shutdown_error_window"]);
        let err = RunConfig::parse(&json!({"max_conversation_restarts": "x"})).unwrap_err();
        assert_eq!(err[0].field.as_deref(), Some("max_conversation_restarts"));
        let err = RunConfig::parse(&json!([1])).unwrap_err();
        assert_eq!(err[0].code, "invalid_run_config");
        let err = RunConfig::parse(&json!({"max_conversation_restarts": 1_000_000_000,
            "max_conversation_correction_steps": 101}))
        .unwrap_err();
        let fields: Vec<_> = err.iter().map(|i| i.field.clone().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "max_conversation_restarts",
                "max_conversation_correction_steps"
            ]
        );
        assert!(RunConfig::parse(&json!({"max_conversation_restarts": 100})).is_ok());
    }

    #[test]
    fn seconds_are_bounded_above() {
        let err = RunConfig::parse(&json!({"progress_interval": 1e300,
            "request_admission": {"cooldown_seconds": 1e300, "startup_ramp_seconds": 86401}}))
        .unwrap_err();
        let fields: Vec<_> = err.iter().map(|i| i.field.clone().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "progress_interval",
                "request_admission.cooldown_seconds",
                "request_admission.startup_ramp_seconds"
            ]
        );
        assert!(err[0].message.contains("at most 86400 seconds"), "{err:?}");
        assert!(RunConfig::parse(&json!({"progress_interval": 86400})).is_ok());
    }

    #[test]
    fn deprecated_keys_are_translated() {
        let rc =
            RunConfig::parse(&json!({"progress_bar": true, "throttle": {"reduce_factor": 0.5}}))
                .unwrap();
        assert!(rc.display_tui);
        let ra = rc.request_admission.unwrap();
        assert_eq!(ra.multiplicative_decrease_factor, 0.5);
        assert_eq!(ra.successes_until_increase, 25);
        let err = RunConfig::parse(&json!({"throttle": {}, "request_admission": {}})).unwrap_err();
        assert_eq!(err[0].field.as_deref(), Some("throttle"));
    }

    #[test]
    fn synthgate_trace_override_is_accepted() {
        let rc = RunConfig::parse(&json!({"debug_override_save_all_column_traces": true})).unwrap();
        assert!(rc.debug_override_save_all_column_traces);
    }
}
