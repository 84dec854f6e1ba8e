//! Entry points for the fuzz targets in `fuzz/` (`cargo fuzz`) and for the replay of their
//! seeds in the test suite (`tests/api/fuzz_seeds.rs`). Not an API: hidden from the docs.
//!
//! Each takes arbitrary bytes and runs one parser of untrusted input the way the service runs
//! it: a request body, a job config and its templates, a SQL validator's input, an uploaded
//! dataset file, an `/mcp` message, a seed datastore commit, a request's trace context headers, a job list's filter,
//! a model provider's answer.
//! Any error is a fine answer. What must not happen is a panic, an abort (a stack overflow), or
//! work without bound; libFuzzer reports the first two as crashes and the last as a timeout or
//! out-of-memory.

use std::io::Write;

use serde_json::{Map, Value, json};

use crate::config::DatasetLimits;
use crate::datasets::DatasetFormat;
use crate::datasets::formats::RowSink;
use crate::datasets::import::ImportError;
use crate::domain::dataset::{CodeLang, DatasetConfig};
use crate::generate::{Plan, PlanContext};

/// A job list query of the NeMo Platform door (`GET .../jobs/create?...`): its parameters, its
/// `filter` in brackets or as a JSON object (`$and` nests), made a store filter.
pub fn platform_list_query(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let _ = crate::api::platform::list::read_query("default", &raw);
}

/// A request body as JSON (`POST /v1/jobs`, `/v1/preview`): strictly decoded, then parsed as
/// a DataDesigner config, compiled, and its first records generated (samplers, expressions,
/// templates; LLM columns stop at "needs a runtime").
pub fn job_json(data: &[u8]) {
    if let Ok(body) = crate::decode::json(data) {
        job_config(&body);
    }
}

/// A request body as YAML, the same way.
pub fn job_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(body) = crate::decode::yaml(text) {
        job_config(&body);
    }
}

fn job_config(body: &Value) {
    // A submit's body holds the config under `config`; a bare config is tried too.
    let config = body.get("config").unwrap_or(body);
    let config = config.get("data_designer").unwrap_or(config);
    generate(config, 3);
}

/// One expression column whose template is the input, beside a sampler and a seed-like
/// column it may read: compiled and rendered against the record budgets.
pub fn template(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let config = json!({"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 0, "high": 10}},
        {"name": "s", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b b", "{{ n }}"]}},
        {"name": "out", "column_type": "expression", "expr": source},
    ]});
    generate(&config, 2);
}

fn generate(config: &Value, records: u64) {
    let Ok(cfg) = DatasetConfig::parse(config) else {
        return;
    };
    let Ok(plan) = Plan::compile(&cfg, &PlanContext::default(), 7) else {
        return;
    };
    for index in 0..records {
        let row: Option<&Map<String, Value>> = match plan.seed_row(index) {
            Some(crate::generate::SeedRow::Inline(row)) => Some(row),
            // Stored seeds need the database; inline ones are what a body can carry.
            Some(_) => return,
            None => None,
        };
        let _ = plan.generate(index, row);
    }
}

/// A SQL validator's input, in every dialect.
pub fn sql(data: &[u8]) {
    let Ok(code) = std::str::from_utf8(data) else {
        return;
    };
    for (_, lang) in CodeLang::ALL {
        if let CodeLang::Sql(dialect) = lang {
            let _ = crate::generate::validation::sql::validate(*dialect, code);
        }
    }
}

/// A seed datastore commit body (`POST /v1/hf/api/datasets/{ns}/{repo}/commit/main`), read as
/// the handler reads it before any file is imported.
pub fn hub_commit(data: &[u8]) {
    let _ = crate::datasets::datastore::parse_commit(data);
}

/// An uploaded dataset file in `format` (CSV, JSONL or Parquet), read as an upload is: its
/// columns inferred, every row handed on, under the importer's limits (rows capped lower than
/// the default so a run stays fast).
pub fn dataset(format: DatasetFormat, data: &[u8]) {
    let Ok(mut file) = tempfile::NamedTempFile::new() else {
        return;
    };
    if file.write_all(data).and_then(|()| file.flush()).is_err() {
        return;
    }
    let limits = DatasetLimits {
        max_rows: 10_000,
        max_dataset_bytes: 64 << 20,
        ..crate::config::DatasetsConfig::default().limits()
    };
    let _ = crate::datasets::formats::read_file(format, file.path(), &limits, &mut Count(0));
}

/// A file of agent trajectories, derived as an `agent_rollout` upload is: the first byte picks
/// the format, the rest is one file at a path that format reads, with a session index beside
/// it for the formats that read one (the same bytes).
pub fn agent_rollout(data: &[u8]) {
    use crate::datasets::rollout::{RolloutFile, RolloutFormat, derive};
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let format = RolloutFormat::ALL[usize::from(pick) % RolloutFormat::ALL.len()];
    let (path, index) = match format {
        RolloutFormat::Atif => ("run/trajectory.json", None),
        RolloutFormat::ClaudeCode => ("-home-a-p/s1.jsonl", Some("-home-a-p/sessions-index.json")),
        RolloutFormat::Codex => ("2025/07/14/rollout-2025-07-14T09-20-11-a.jsonl", None),
        RolloutFormat::HermesAgent => ("20250714_101500_a1b2c3.jsonl", Some("sessions.json")),
        RolloutFormat::PiCodingAgent => ("--home-a--/2025-07-13T20-00-00-000Z_s.jsonl", None),
    };
    let file = |path: &str| RolloutFile {
        relative_path: path.to_owned(),
        bytes: body.to_vec(),
    };
    let mut files = vec![file(path)];
    files.extend(index.map(file));
    let _ = derive(format, "/home/a/traces", &files, None, true);
}

/// Counts the rows a reader hands on.
struct Count(u64);

impl RowSink for Count {
    fn push(&mut self, _row: Map<String, Value>) -> Result<(), ImportError> {
        self.0 += 1;
        Ok(())
    }
}

/// A request's trace context: the first line as `traceparent`, the rest as `tracestate`, read
/// as a request's headers are; a job span made a child of what was read is stored as a job's
/// trace context is, and must read back to the same text. The whole input is also read as a
/// stored context.
pub fn trace_context(data: &[u8]) {
    use reqwest::header::{HeaderMap, HeaderValue};
    let text = String::from_utf8_lossy(data);
    let (parent, state) = text.split_once('\n').unwrap_or((&text, ""));
    let mut headers = HeaderMap::new();
    for (name, value) in [("traceparent", parent), ("tracestate", state)] {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    }
    if let Some(cx) = crate::telemetry::read_parent(&headers) {
        use opentelemetry::trace::TraceContextExt;
        let stored = crate::telemetry::JobTrace::child_of(cx.span().span_context()).to_text();
        let back = crate::telemetry::JobTrace::parse(&stored).map(|t| t.to_text());
        assert_eq!(
            back.as_deref(),
            Some(stored.as_str()),
            "a stored context reads back"
        );
    }
    let _ = crate::telemetry::JobTrace::parse(&text);
}

/// A `POST /mcp` body: the service's own check of the message, then rmcp's reading of it as a
/// client message.
pub fn mcp_message(data: &[u8]) {
    let Ok(request) = axum::http::Request::post(crate::api::mcp_server::PATH)
        .header("content-type", "application/json")
        .body(())
    else {
        return;
    };
    let (parts, ()) = request.into_parts();
    if crate::api::mcp_server::unreadable_message(&parts, data).is_none() {
        let _ = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(data);
    }
}

/// A model provider's answer body, read by every reader of one (error bodies, chat answers in
/// both protocols, embeddings, images); then the text of each chat answer, and the whole input
/// as text, as a column reads a model's text: prompt-based tool calls, each call's arguments
/// checked and coerced against an input schema, the code of each language, JSON under a schema
/// and judge scores. A provider, or a proxy in front of one, is not trusted to answer well, and
/// a model writes what it likes.
pub fn llm_answer(data: &[u8]) {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1},
            "units": {"enum": ["metric", "imperial"]},
            "when": {"type": "object", "properties": {"hour": {"type": "number"}}},
            "flags": {"type": "array", "items": {"type": "boolean"}}
        },
        "required": ["city"]
    });
    let whole = String::from_utf8_lossy(data);
    crate::tools::read_calls_for_fuzzing(&whole, &[], &schema);
    crate::generate::parse_answers_for_fuzzing(whole.trim());
    for message in crate::llm::read_answer_for_fuzzing(data) {
        let text = message.text();
        crate::tools::read_calls_for_fuzzing(&text, &message.tool_calls, &schema);
        crate::generate::parse_answers_for_fuzzing(text.trim());
    }
}
