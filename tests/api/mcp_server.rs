//! `/mcp`: the API as MCP tools, driven by rmcp's streamable-HTTP client (the official Python
//! SDK's client drives it in `python`): tools and their schemas, a preview with
//! progress, a job from submit to trace, tool errors with the API's codes, and the keys
//! (`limits`: the keys, the body limit, deadlines and shutdown).

mod limits;
mod python;

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam, Tool};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use synthgate::config::Config;

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm, sampler_config, spawn_app_with, status_json};

const KEY_A: &str = "mcp-key-a-0123456789abcdef";
const KEY_B: &str = "mcp-key-b-0123456789abcdef";

const TOOLS: [&str; 14] = [
    "cancel_job",
    "get_dataset",
    "get_job",
    "get_job_config",
    "get_record",
    "get_record_trace",
    "get_records",
    "list_datasets",
    "list_jobs",
    "list_models",
    "list_tools",
    "preview_dataset",
    "submit_job",
    "wait_job",
];

fn with_keys(c: &mut Config) {
    c.auth = serde_json::from_value(json!({"api_keys": [
        {"name": "alice", "key": KEY_A},
        {"name": "bob", "key": KEY_B},
    ]}))
    .unwrap();
}

/// The mock LLM answers every prompt with `a haiku`.
fn script() -> Value {
    json!({"rules": [{"reply": {"text": "a haiku"}}]})
}

/// A sampler and an LLM column that keeps its trace.
fn llm_config() -> Value {
    json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["sea", "moon"]}},
        {"name": "poem", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Write a haiku about {{ topic }}.", "with_trace": "all_messages"}
    ]})
}

/// A client handler that keeps the progress notifications it gets.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl Recorder {
    fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The notifications once one reporting `progress` has arrived (at most 5 s). The server
    /// sends them in order and the last before the result, but rmcp's client hands each
    /// notification to the handler on a task of its own: they may arrive in any order, and
    /// after the result.
    async fn reported(&self, progress: f64) -> Vec<ProgressNotificationParam> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let seen = self.progress();
            if seen.iter().any(|p| p.progress == progress) || std::time::Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(params);
    }
}

/// A connected client, with the tools it listed (for their output schemas).
struct Client {
    service: RunningService<RoleClient, Recorder>,
    recorder: Recorder,
    tools: Vec<Tool>,
}

async fn connect(app: &TestApp, key: Option<&str>) -> Client {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp"));
    if let Some(k) = key {
        cfg = cfg.auth_header(k);
    }
    let recorder = Recorder::default();
    let service = recorder
        .clone()
        .serve(StreamableHttpClientTransport::from_config(cfg))
        .await
        .expect("MCP initialize");
    let tools = service.list_all_tools().await.expect("tools/list");
    Client {
        service,
        recorder,
        tools,
    }
}

impl Client {
    /// Calls a tool; a protocol error fails the test.
    async fn call(&self, name: &'static str, args: Value) -> CallToolResult {
        self.try_call(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// rmcp's client asks for progress on every request (it puts a progress token of its own
    /// in `_meta`), so every call gets the notifications the tool sends.
    async fn try_call(
        &self,
        name: &'static str,
        args: Value,
    ) -> Result<CallToolResult, ServiceError> {
        let params = CallToolRequestParams::new(name)
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        self.service.call_tool(params).await
    }

    /// The structured result of a successful call, checked against the tool's output schema.
    async fn ok(&self, name: &'static str, args: Value) -> Value {
        let result = self.call(name, args).await;
        self.structured(name, result)
    }

    fn structured(&self, name: &str, result: CallToolResult) -> Value {
        assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
        let value = result.structured_content.expect("structured content");
        let tool = self.tools.iter().find(|t| t.name == name).unwrap();
        let schema = Value::Object((*tool.output_schema.clone().expect("output schema")).clone());
        let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{value}");
        value
    }

    /// The error envelope of a failed call (a tool error, not a protocol error).
    async fn err(&self, name: &'static str, args: Value) -> Value {
        let result = self.call(name, args).await;
        assert_eq!(result.is_error, Some(true), "{name}: {result:?}");
        // No structured content: it would have to match the output schema of a success.
        assert_eq!(result.structured_content, None, "{name}: {result:?}");
        let text = result.content[0]
            .as_text()
            .expect("text content")
            .text
            .clone();
        let body: Value = serde_json::from_str(&text).unwrap();
        body["error"].clone()
    }
}

async fn tools_preview_job_and_trace(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(backend, script(), with_keys).await;
    let a = connect(&app, Some(KEY_A)).await;

    let names: Vec<&str> = a.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    for t in &a.tools {
        assert_eq!(
            t.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            t.name
        );
        assert!(t.description.is_some(), "{}", t.name);
        assert!(t.output_schema.is_some(), "{}", t.name);
        // The schema says what the server takes: a page size of 0 is refused, so not offered.
        if let Some(limit) = t
            .input_schema
            .get("properties")
            .and_then(|p| p.get("limit"))
        {
            assert_eq!(limit["minimum"], 1, "{}: {limit}", t.name);
        }
    }
    // Neither prompts nor resources are declared, so their methods do not exist.
    assert!(a.service.list_prompts(None).await.is_err());
    assert!(a.service.list_resources(None).await.is_err());
    let submit = a.tools.iter().find(|t| t.name == "submit_job").unwrap();
    let mut required: Vec<&str> = submit.input_schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["config", "num_records"]);

    // Preview: records with their traces and progress per record; nothing stored.
    let preview = a
        .ok(
            "preview_dataset",
            json!({"config": llm_config(), "num_records": 2, "seed": 7}),
        )
        .await;
    assert_eq!(preview["columns"], json!(["topic", "poem"]), "{preview}");
    let records = preview["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    for r in records {
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["values"]["poem"], "a haiku");
        assert_eq!(r["traces"][0]["column"], "poem");
        let messages = r["traces"][0]["messages"].as_array().unwrap();
        let answer = &messages.last().unwrap()["content"][0]["text"];
        assert_eq!(answer, "a haiku", "{messages:?}");
    }
    let progress = a.recorder.reported(2.0).await;
    let last = progress
        .iter()
        .find(|p| p.progress == 2.0)
        .unwrap_or_else(|| panic!("no progress 2 of 2: {progress:?}"));
    assert_eq!(last.total, Some(2.0), "{progress:?}");
    assert!(progress.iter().all(|p| p.progress <= 2.0), "{progress:?}");
    // The server echoes the request's token.
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token),
        "{progress:?}"
    );
    let listed = a.ok("list_jobs", json!({})).await;
    assert_eq!(listed["jobs"], json!([]), "a preview stores nothing");

    // A job: submit, wait, page through its records, read one and its trace.
    let job = a
        .ok(
            "submit_job",
            json!({"config": llm_config(), "num_records": 3, "metadata": {"via": "mcp"}}),
        )
        .await;
    let job_id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(job["metadata"], json!({"via": "mcp"}));
    let done = a
        .ok("wait_job", json!({"job_id": job_id, "timeout_sec": 60}))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 3);
    let progress = a.recorder.reported(3.0).await;
    let last = progress
        .iter()
        .rev()
        .find(|p| p.progress == 3.0)
        .unwrap_or_else(|| panic!("no progress 3 of 3: {progress:?}"));
    assert_eq!(
        (last.progress, last.total),
        (3.0, Some(3.0)),
        "{progress:?}"
    );
    assert!(
        last.message
            .as_deref()
            .unwrap()
            .contains("3 of 3 records finished"),
        "{last:?}"
    );
    let got = a.ok("get_job", json!({"job_id": job_id})).await;
    assert_eq!(got["id"], job_id.as_str());
    let page = a
        .ok("get_records", json!({"job_id": job_id, "limit": 2}))
        .await;
    assert_eq!(page["records"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let rest = a
        .ok(
            "get_records",
            json!({"job_id": job_id, "cursor": cursor, "status": "completed"}),
        )
        .await;
    assert_eq!(rest["records"].as_array().unwrap().len(), 1);
    assert!(rest["next_cursor"].is_null(), "{rest}");
    let record_id = page["records"][0]["id"].as_str().unwrap().to_owned();
    let record = a.ok("get_record", json!({"record_id": record_id})).await;
    assert_eq!(record["values"]["poem"], "a haiku");
    assert_eq!(record["job_id"], job_id.as_str());
    let trace = a
        .ok(
            "get_record_trace",
            json!({"record_id": record_id, "column": "poem"}),
        )
        .await;
    assert_eq!(trace["record_id"], record_id.as_str());
    let messages = trace["traces"][0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user", "{messages:?}");
    assert_eq!(messages.last().unwrap()["role"], "assistant");
    let config = a.ok("get_job_config", json!({"job_id": job_id})).await;
    assert_eq!(config["config"]["columns"][1]["name"], "poem");
    let listed = a.ok("list_jobs", json!({"limit": 5})).await;
    assert_eq!(listed["jobs"][0]["id"], job_id.as_str());
    let cancel = a.err("cancel_job", json!({"job_id": job_id})).await;
    assert_eq!(cancel["code"], "job_finished");

    // The catalogue tools.
    let models = a.ok("list_models", json!({})).await;
    assert_eq!(models["models"][0]["alias"], "writer");
    let tools = a.ok("list_tools", json!({})).await;
    assert_eq!(tools["tool_configs"], json!([]));
    let (status, uploaded) = status_json(
        app.client
            .post(app.url("/v1/datasets?name=people.csv"))
            .bearer_auth(KEY_A)
            .body("name,age\nann,31\nbo,42\n")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{uploaded}");
    let datasets = a.ok("list_datasets", json!({"name": "people.csv"})).await;
    assert_eq!(datasets["datasets"][0]["id"], uploaded["id"]);
    let dataset = a
        .ok("get_dataset", json!({"dataset_id": uploaded["id"]}))
        .await;
    assert_eq!(dataset["num_rows"], 2);
    assert_eq!(dataset["preview"][1], json!({"name": "bo", "age": 42}));

    // Key B sees none of it: the same answers as for ids that do not exist.
    let b = connect(&app, Some(KEY_B)).await;
    let err = b.err("get_job", json!({"job_id": job_id})).await;
    assert_eq!(err["code"], "job_not_found", "{err}");
    let err = b.err("get_record", json!({"record_id": record_id})).await;
    assert_eq!(err["code"], "record_not_found", "{err}");
    let err = b
        .err("get_record_trace", json!({"record_id": record_id}))
        .await;
    assert_eq!(err["code"], "record_not_found", "{err}");
    let err = b.err("get_records", json!({"job_id": job_id})).await;
    assert_eq!(err["code"], "job_not_found", "{err}");
    let listed = b.ok("list_jobs", json!({})).await;
    assert_eq!(listed["jobs"], json!([]));
    let err = b
        .err("get_dataset", json!({"dataset_id": uploaded["id"]}))
        .await;
    assert_eq!(err["code"], "dataset_not_found", "{err}");

    a.service.cancel().await.unwrap();
    b.service.cancel().await.unwrap();
    app.stop().await;
}
backends!(mcp_tools_end_to_end, tools_preview_job_and_trace);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_tool_errors_with_the_api_codes() {
    let app = spawn_app_with(Backend::Sqlite, |_| {}).await;
    // Authentication is off: anyone may connect, and is the one anonymous caller.
    let c = connect(&app, None).await;

    let bad = json!({"columns": [
        {"name": "x", "column_type": "telepathy"}
    ]});
    let err = c
        .err("preview_dataset", json!({"config": bad, "num_records": 1}))
        .await;
    assert_eq!(err["code"], "unknown_column_type", "{err}");
    assert!(err["details"].is_array(), "{err}");
    let err = c
        .err(
            "submit_job",
            json!({"config": sampler_config(), "num_records": 0}),
        )
        .await;
    assert_eq!(err["code"], "num_records_out_of_range", "{err}");
    let err = c
        .err(
            "preview_dataset",
            json!({"config": sampler_config(), "num_records": 11}),
        )
        .await;
    assert_eq!(err["code"], "num_records_out_of_range", "{err}");
    // Arguments are read as the REST API reads a body: the field is named.
    let err = c
        .err(
            "submit_job",
            json!({"config": sampler_config(), "num_records": 1, "colour": "red"}),
        )
        .await;
    assert_eq!(err["code"], "invalid_request", "{err}");
    assert!(err["message"].as_str().unwrap().contains("colour"), "{err}");
    let err = c.err("get_job", json!({"job_id": "not-a-uuid"})).await;
    assert_eq!(err["code"], "invalid_id", "{err}");
    let missing = "0190f2a8-0000-7000-8000-000000000000";
    let err = c.err("get_job", json!({"job_id": missing})).await;
    assert_eq!(err["code"], "job_not_found", "{err}");
    let err = c.err("get_dataset", json!({"dataset_id": missing})).await;
    assert_eq!(err["code"], "dataset_not_found", "{err}");
    let err = c
        .err("wait_job", json!({"job_id": missing, "timeout_sec": 0}))
        .await;
    assert_eq!(err["code"], "invalid_request", "{err}");
    let err = c
        .err(
            "get_records",
            json!({"job_id": missing, "cursor": "not-ours"}),
        )
        .await;
    assert_eq!(err["code"], "invalid_cursor", "{err}");

    // An unknown tool is a protocol error, not a tool error.
    match c.try_call("drop_tables", json!({})).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602, "{e:?}"),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }

    // A sampler-only job end to end without keys.
    let job = c
        .ok(
            "submit_job",
            json!({"config": sampler_config(), "num_records": 4, "seed": 3}),
        )
        .await;
    let done = c
        .ok("wait_job", json!({"job_id": job["id"], "timeout_sec": 30}))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    c.service.cancel().await.unwrap();
    app.stop().await;
}
