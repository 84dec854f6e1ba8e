//! `otel`: exporting spans over OTLP. Off unless an endpoint is set.
//!
//! The standard `OTEL_*` environment variables are how collectors and platforms configure
//! OpenTelemetry SDKs, so they are read here and win over the file: a deployment that sets
//! `OTEL_EXPORTER_OTLP_ENDPOINT` gets what every other service of it gets, whatever the file
//! says. The file's keys are for those who keep everything in one place.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;

/// OTLP span export.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtelConfig {
    /// The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` has it: `/v1/traces` is
    /// appended for `http/protobuf`. Unset (the default): nothing is exported.
    pub endpoint: Option<String>,
    /// The full traces URL, used as is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); set from the
    /// environment only.
    #[serde(skip)]
    pub traces_endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    pub protocol: OtlpProtocol,
    /// Headers sent with every export (a collector's API key); `OTEL_EXPORTER_OTLP_HEADERS`
    /// adds to them. Secrets: never logged.
    pub headers: BTreeMap<String, SecretString>,
    /// `service.name` of the resource.
    pub service_name: String,
    /// `always_on`, `always_off`, `traceidratio`, `parentbased_always_on` (default),
    /// `parentbased_always_off` or `parentbased_traceidratio`.
    pub sampler: String,
    /// The ratio of the `*traceidratio` samplers, 0 to 1.
    pub sampler_arg: Option<f64>,
    /// Put prompts, completions and tool arguments and results on spans
    /// (`gen_ai.input.messages`, ...). Off by default, as the GenAI conventions advise: they
    /// may hold personal data, and they are large.
    pub capture_content: bool,
    /// How records sit in traces: `record` (default), each record its own trace, linked to
    /// its job's span; or `job`, every record a child of its job's span, so one job is one
    /// trace (readable for small jobs; a trace of 10,000 records is more than most backends
    /// show or keep).
    pub record_traces: RecordTraces,
    /// Spans waiting for export at most; past it, spans are dropped (and counted in
    /// `synthgate_otel_spans_dropped_total`) rather than slowing records down.
    pub max_queue_spans: usize,
}

impl Default for OtelConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            traces_endpoint: None,
            protocol: OtlpProtocol::HttpProtobuf,
            headers: BTreeMap::new(),
            service_name: "synthgate".into(),
            sampler: "parentbased_always_on".into(),
            sampler_arg: None,
            capture_content: false,
            record_traces: RecordTraces::Record,
            max_queue_spans: 2048,
        }
    }
}

/// OTLP's transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP POST (`/v1/traces`).
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// gRPC.
    #[serde(rename = "grpc")]
    Grpc,
}

/// Where a record's span sits: see [`OtelConfig::record_traces`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordTraces {
    /// One trace per record, linked to the job's span.
    Record,
    /// Records are children of the job's span.
    Job,
}

/// The samplers `OTEL_TRACES_SAMPLER` names that this build has.
pub const SAMPLERS: [&str; 6] = [
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
];

impl OtelConfig {
    /// Whether spans are exported at all.
    pub fn exporting(&self) -> bool {
        self.endpoint.is_some() || self.traces_endpoint.is_some()
    }

    /// The URL spans are sent to: the traces endpoint as given, else the base endpoint (with
    /// `/v1/traces` for HTTP, as the OTLP exporter spec says).
    pub fn url(&self) -> Option<String> {
        if let Some(url) = &self.traces_endpoint {
            return Some(url.clone());
        }
        let base = self.endpoint.as_deref()?;
        Some(match self.protocol {
            OtlpProtocol::Grpc => base.to_owned(),
            OtlpProtocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
        })
    }

    /// Applies the standard `OTEL_*` variables over the file's values; a bad one is a problem
    /// naming the variable.
    pub(super) fn apply_env(
        &mut self,
        env: &impl Fn(&str) -> Option<String>,
        problems: &mut Vec<String>,
    ) {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
            self.endpoint = Some(v);
        }
        if let Some(v) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            self.traces_endpoint = Some(v);
        }
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v))
            .or_else(|| {
                set("OTEL_EXPORTER_OTLP_PROTOCOL").map(|v| ("OTEL_EXPORTER_OTLP_PROTOCOL", v))
            });
        if let Some((name, v)) = protocol {
            match v.trim() {
                "http/protobuf" => self.protocol = OtlpProtocol::HttpProtobuf,
                "grpc" => self.protocol = OtlpProtocol::Grpc,
                other => problems.push(format!(
                    "environment variable `{name}`: `{other}` is not supported; use `http/protobuf` or `grpc`"
                )),
            }
        }
        if let Some(v) = set("OTEL_SERVICE_NAME") {
            self.service_name = v;
        }
        if let Some(v) = set("OTEL_TRACES_SAMPLER") {
            self.sampler = v.trim().to_owned();
        }
        if let Some(v) = set("OTEL_TRACES_SAMPLER_ARG") {
            match v.trim().parse::<f64>() {
                Ok(r) => self.sampler_arg = Some(r),
                Err(_) => problems.push(format!(
                    "environment variable `OTEL_TRACES_SAMPLER_ARG`: `{v}` is not a number"
                )),
            }
        }
        if let Some(v) = set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => self.capture_content = true,
                "false" | "0" => self.capture_content = false,
                _ => problems.push(format!(
                    "environment variable `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: `{v}` is not true or false"
                )),
            }
        }
        if let Some(v) = set("OTEL_BSP_MAX_QUEUE_SIZE") {
            match v.trim().parse::<usize>() {
                Ok(n) => self.max_queue_spans = n,
                Err(_) => problems.push(format!(
                    "environment variable `OTEL_BSP_MAX_QUEUE_SIZE`: `{v}` is not a whole number"
                )),
            }
        }
        // The SDK's own off switches.
        let disabled =
            set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let no_exporter = set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        if disabled || no_exporter {
            self.endpoint = None;
            self.traces_endpoint = None;
        }
    }

    pub(super) fn problems(&self, out: &mut Vec<String>) {
        // `otel.endpoint` may come from OTEL_EXPORTER_OTLP_ENDPOINT; the traces endpoint only
        // ever comes from its variable.
        let bad = |u: &Option<String>| {
            u.as_ref()
                .filter(|u| !(u.starts_with("http://") || u.starts_with("https://")))
                .cloned()
        };
        if let Some(u) = bad(&self.endpoint) {
            out.push(format!(
                "config key `otel.endpoint` (or OTEL_EXPORTER_OTLP_ENDPOINT): `{u}` must be an \
                 http:// or https:// URL"
            ));
        }
        if let Some(u) = bad(&self.traces_endpoint) {
            out.push(format!(
                "environment variable `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: `{u}` must be an \
                 http:// or https:// URL"
            ));
        }
        if !SAMPLERS.contains(&self.sampler.as_str()) {
            out.push(format!(
                "config key `otel.sampler`: `{}` is not one of {}",
                self.sampler,
                SAMPLERS.join(", ")
            ));
        }
        if let Some(r) = self.sampler_arg
            && !(0.0..=1.0).contains(&r)
        {
            out.push(format!(
                "config key `otel.sampler_arg`: {r} must be between 0 and 1"
            ));
        }
        if self.service_name.trim().is_empty() {
            out.push("config key `otel.service_name`: must not be empty".into());
        }
        if !(1..=1_000_000).contains(&self.max_queue_spans) {
            out.push("config key `otel.max_queue_spans`: must be between 1 and 1000000".into());
        }
        for name in self.headers.keys() {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                out.push(format!(
                    "config key `otel.headers.{name}`: not a valid HTTP header name"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_standard_variables_win_over_the_file() {
        let mut c = OtelConfig {
            endpoint: Some("http://file:4318".into()),
            ..OtelConfig::default()
        };
        let mut problems = Vec::new();
        c.apply_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_SERVICE_NAME", "gen-eu"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ]),
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.url().as_deref(), Some("http://collector:4318/v1/traces"));
        assert_eq!(c.service_name, "gen-eu");
        assert_eq!(c.sampler_arg, Some(0.25));
        c.problems(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");

        c.apply_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://other:4317"),
            ]),
            &mut problems,
        );
        assert_eq!(c.protocol, OtlpProtocol::Grpc);
        assert_eq!(c.url().as_deref(), Some("http://other:4317"));

        c.apply_env(&env(&[("OTEL_SDK_DISABLED", "true")]), &mut problems);
        assert!(!c.exporting());
    }

    #[test]
    fn bad_values_name_their_variable_or_key() {
        let mut c = OtelConfig::default();
        let mut problems = Vec::new();
        c.apply_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
                ("OTEL_TRACES_SAMPLER", "xray"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ]),
            &mut problems,
        );
        c.problems(&mut problems);
        let all = problems.join("\n");
        assert!(
            all.contains("`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/json`"),
            "{all}"
        );
        assert!(all.contains("`otel.sampler`: `xray`"), "{all}");
        assert!(
            all.contains("`otel.endpoint` (or OTEL_EXPORTER_OTLP_ENDPOINT): `collector:4318`"),
            "{all}"
        );
    }
}
