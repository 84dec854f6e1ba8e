//! OpenTelemetry export end to end: the real `synthgate` binary, configured by the standard
//! `OTEL_*` variables, exports to an OTLP/HTTP receiver on loopback (this file's, decoding the
//! protobuf requests with the OTLP proto types); a tool-using job runs against the scripted
//! mock LLM and the `mock-mcp` stdio server. Checked: the spans and their GenAI attributes,
//! their parents and links, the caller's `traceparent` carried into the job and on to the LLM
//! (a header) and the MCP server (`_meta`), and, with content capture off, no prompt text on
//! any span.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{MockLlm, Script};
use synthgate_testkit::mock_mcp::{MockMcpHttp, Options};
use tokio_util::task::TaskTracker;

use crate::backends;
use crate::db::{Backend, TestDb};
use crate::mcp_support::{Events, mock_mcp_bin};
use crate::process::{free_port, log_tail, sigterm, start_serve, wait_for_job, wait_ready};

/// Written into every prompt: no span may show it unless content capture is on.
const PROMPT_MARKER: &str = "PROMPT-TEXT-7f3a";

/// The caller's trace: its id and the span id of its client span.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP traces receiver on loopback, keeping every span it is sent.
struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
    endpoint: String,
}

impl Receiver {
    async fn start() -> Self {
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        // Serves until the test's runtime ends.
        TaskTracker::new().spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { spans, endpoint }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the spans received, or fails with what did arrive.
    async fn wait_for(&self, what: &str, log: &std::path::Path, done: impl Fn(&[Span]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; spans: {:?}\n{}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>(),
                log_tail(log)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<Span>>>>, body: Bytes) -> &'static str {
    let req = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
    let mut all = spans.lock().unwrap();
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            all.extend(ss.spans);
        }
    }
    ""
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attribute `key` of `span`, as text (strings as they are, numbers printed).
fn attr(span: &Span, key: &str) -> Option<String> {
    let v = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match v.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::ArrayValue(a) => format!("{:?}", a.values),
        other => format!("{other:?}"),
    })
}

/// Every attribute and event attribute value of every span, as text.
fn all_text(spans: &[Span]) -> String {
    let mut out = String::new();
    for s in spans {
        out.push_str(&s.name);
        for kv in s
            .attributes
            .iter()
            .chain(s.events.iter().flat_map(|e| e.attributes.iter()))
        {
            out.push_str(&format!(" {}={:?}", kv.key, kv.value));
        }
        out.push('\n');
    }
    out
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// Model: call `echo` once, then answer `done`.
fn echo_once() -> Script {
    serde_json::from_value(json!({"rules": [
        {"when": {"tool_result_contains": "echoed"}, "reply": {"text": "done"}},
        {"when": {"has_tools": true},
         "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "echoed"}}]}}
    ]}))
    .unwrap()
}

/// How the MCP server is reached.
enum Mcp {
    /// `mock-mcp stdio`, started by the service, writing `events`.
    Stdio,
    /// An in-process `mock-mcp` over streamable HTTP.
    Http(MockMcpHttp),
}

impl Mcp {
    /// The provider `tools` in the service config.
    fn provider(&self, events: &std::path::Path) -> String {
        match self {
            Self::Stdio => format!(
                r#"  - name: tools
    provider_type: stdio
    command: "{}"
    args: [stdio]
    env: {{MOCK_MCP_EVENTS: "{}"}}"#,
                mock_mcp_bin(),
                events.display()
            ),
            Self::Http(server) => format!(
                "  - {{name: tools, provider_type: streamable_http, endpoint: \"{}\"}}",
                server.url()
            ),
        }
    }
}

/// The service config: the mock LLM as alias `writer`, `mock-mcp` as provider `tools`, tool
/// alias `t`, and `extra` appended.
fn write_config(dir: &std::path::Path, llm: &str, mcp: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("synthgate.yaml");
    std::fs::write(
        &path,
        format!(
            r#"workers: {{count: 8, poll_interval_ms: 50, write_interval_ms: 20}}
logging: {{level: info}}
model_providers:
  - {{name: mock, endpoint: "{llm}", api_key: "sk-test-not-a-secret"}}
model_configs:
  - {{alias: writer, model: mock-writer, provider: mock, inference_parameters: {{temperature: 0.5, max_tokens: 64}}}}
mcp_providers:
{mcp}
tool_configs:
  - {{tool_alias: t, providers: [tools]}}
{extra}
"#,
        ),
    )
    .unwrap();
    path
}

fn job(n: u32) -> Value {
    json!({"num_records": n, "name": "otel-test", "config": {"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 0, "high": 100}},
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "prompt": format!("{PROMPT_MARKER} use the tools for {{{{ n }}}}"), "tool_alias": "t"}
    ]}})
}

/// Runs a 3-record tool job on `backend` with `extra` config, submitted under the caller's
/// `traceparent`; returns the spans (once the job's span arrived), the job, the mock LLM's
/// requests and the MCP server's events.
async fn run(backend: Backend, http_mcp: bool, extra: &str) -> (Vec<Span>, Value, MockLlm, Events) {
    synthgate::install_crypto_provider();
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let mock = MockLlm::start(echo_once()).await.unwrap();
    let events = Events::new();
    let mcp = if http_mcp {
        let opts = Options {
            events: Some(events.path.clone()),
            ..Options::default()
        };
        Mcp::Http(MockMcpHttp::start(opts).await.unwrap())
    } else {
        Mcp::Stdio
    };
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &mock.endpoint(),
        &mcp.provider(&events.path),
        extra,
    );
    let log = dir.path().join("serve.log");
    let port = free_port();
    let env = [
        ("SYNTHGATE__DATABASE__URL", db.url.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_SERVICE_NAME", "synthgate-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let service = start_serve(port, Some(&config), &env, &log);
    let client = reqwest::Client::new();
    wait_ready(&client, &service.base).await;

    let resp = client
        .post(format!("{}/v1/jobs", service.base))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&job(3))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202, "{}", log_tail(&log));
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = wait_for_job(&client, &service, &id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    receiver
        .wait_for(
            "the request's and job's spans and 3 records",
            &log,
            |spans| {
                named(spans, "job").len() == 1
                    && named(spans, "record").len() == 3
                    && !named(spans, "POST /v1/jobs").is_empty()
            },
        )
        .await;
    sigterm(&service.child);
    drop(mcp);
    (receiver.spans(), done, mock, events)
}

/// Checks shared by both modes: the request, job, chat and tool spans and the propagation.
fn check_common(
    spans: &[Span],
    done: &Value,
    mock: &MockLlm,
    events: &Events,
) -> HashMap<String, String> {
    let id = done["id"].as_str().unwrap();
    // The request continues the caller's trace.
    let submit = spans
        .iter()
        .find(|s| s.name == "POST /v1/jobs")
        .unwrap_or_else(|| panic!("no request span: {}", all_text(spans)));
    assert_eq!(hex(&submit.trace_id), CALLER_TRACE);
    assert_eq!(hex(&submit.parent_span_id), CALLER_SPAN);
    assert_eq!(
        attr(submit, "http.response.status_code").as_deref(),
        Some("202")
    );
    // The job, a child of the request, with what it spent.
    let job = named(spans, "job")[0];
    assert_eq!(hex(&job.trace_id), CALLER_TRACE);
    assert_eq!(job.parent_span_id, submit.span_id);
    assert_eq!(attr(job, "synthgate.job.id").as_deref(), Some(id));
    assert_eq!(
        attr(job, "synthgate.job.status").as_deref(),
        Some("completed")
    );
    assert_eq!(
        attr(job, "synthgate.job.name").as_deref(),
        Some("otel-test")
    );
    assert_eq!(
        attr(job, "synthgate.job.records.completed").as_deref(),
        Some("3")
    );
    let tokens: i64 = attr(job, "gen_ai.usage.input_tokens")
        .unwrap()
        .parse()
        .unwrap();
    assert!(tokens > 0, "{}", all_text(std::slice::from_ref(job)));

    let records = named(spans, "record");
    let mut indexes: Vec<String> = records
        .iter()
        .map(|r| attr(r, "synthgate.record.index").unwrap())
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    let by_id: HashMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    for r in &records {
        assert_eq!(attr(r, "synthgate.job.id").as_deref(), Some(id));
        assert_eq!(
            attr(r, "synthgate.record.outcome").as_deref(),
            Some("completed")
        );
        assert_eq!(attr(r, "synthgate.record.attempt").as_deref(), Some("1"));
    }

    // Two model calls per record (the tool call, then the answer), each a GenAI chat span
    // under its record.
    let chats = named(spans, "chat mock-writer");
    assert_eq!(chats.len(), 6, "{}", all_text(spans));
    for c in &chats {
        let parent = by_id[&c.parent_span_id];
        assert_eq!(parent.name, "record");
        assert_eq!(c.trace_id, parent.trace_id);
        assert_eq!(attr(c, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(c, "gen_ai.provider.name").as_deref(), Some("openai"));
        assert_eq!(
            attr(c, "gen_ai.request.model").as_deref(),
            Some("mock-writer")
        );
        assert_eq!(
            attr(c, "gen_ai.request.temperature").as_deref(),
            Some("0.5")
        );
        assert_eq!(attr(c, "gen_ai.request.max_tokens").as_deref(), Some("64"));
        assert!(
            attr(c, "gen_ai.usage.input_tokens")
                .unwrap()
                .parse::<i64>()
                .unwrap()
                > 0
        );
        assert!(attr(c, "gen_ai.usage.output_tokens").is_some());
        assert!(attr(c, "gen_ai.response.finish_reasons").is_some());
        assert_eq!(attr(c, "synthgate.llm.retries").as_deref(), Some("0"));
        assert_eq!(attr(c, "server.address").as_deref(), Some("127.0.0.1"));
    }
    // Every LLM request carried its chat span's context.
    let chat_ids: Vec<String> = chats.iter().map(|c| hex(&c.span_id)).collect();
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    for r in &requests {
        let tp = r.headers.get("traceparent").expect("a traceparent header");
        let parts: Vec<&str> = tp.split('-').collect();
        assert!(
            chat_ids.contains(&parts[2].to_owned()),
            "{tp} is no chat span"
        );
    }

    // One tool call per record: `execute_tool echo` under the record, the MCP request under it.
    let tools = named(spans, "execute_tool echo");
    assert_eq!(tools.len(), 3, "{}", all_text(spans));
    for t in &tools {
        assert_eq!(by_id[&t.parent_span_id].name, "record");
        assert_eq!(
            attr(t, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(attr(t, "gen_ai.tool.name").as_deref(), Some("echo"));
        assert_eq!(attr(t, "synthgate.tool.provider").as_deref(), Some("tools"));
        assert_eq!(attr(t, "synthgate.tool.outcome").as_deref(), Some("ok"));
        assert!(!attr(t, "gen_ai.tool.call.id").unwrap().is_empty());
    }
    let calls = named(spans, "tools/call echo");
    assert_eq!(calls.len(), 3);
    for c in &calls {
        assert_eq!(by_id[&c.parent_span_id].name, "execute_tool echo");
    }
    // The MCP server got each call's context in `_meta`.
    let call_ids: Vec<String> = calls.iter().map(|c| hex(&c.span_id)).collect();
    let traced: Vec<String> = events
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("trace "))
        .map(|l| {
            l.split(' ')
                .nth(1)
                .unwrap()
                .split('-')
                .nth(2)
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(traced.len(), 3, "{:?}", events.lines());
    for t in &traced {
        assert!(call_ids.contains(t), "{t} is no tools/call span");
    }
    // The session's start and the tool list are there too.
    assert!(
        !named(spans, "initialize").is_empty(),
        "{}",
        all_text(spans)
    );
    assert!(
        !named(spans, "tools/list").is_empty(),
        "{}",
        all_text(spans)
    );
    // No secret on any span.
    assert!(!all_text(spans).contains("sk-test-not-a-secret"));
    records
        .iter()
        .map(|r| (hex(&r.span_id), hex(&r.trace_id)))
        .collect()
}

/// The default: each record its own trace, linked to the job span; no prompt text anywhere.
async fn records_are_traces_linked_to_the_job(backend: Backend) {
    let (spans, done, mock, events) = run(backend, false, "").await;
    check_common(&spans, &done, &mock, &events);
    let job = named(&spans, "job")[0];
    for r in named(&spans, "record") {
        assert!(r.parent_span_id.is_empty(), "a record is a root span");
        assert_ne!(hex(&r.trace_id), CALLER_TRACE, "a trace of its own");
        assert_eq!(r.links.len(), 1);
        assert_eq!(r.links[0].span_id, job.span_id);
        assert_eq!(r.links[0].trace_id, job.trace_id);
    }
    let text = all_text(&spans);
    assert!(
        !text.contains(PROMPT_MARKER),
        "prompt text on a span:\n{text}"
    );
    assert!(!text.contains("gen_ai.input.messages"), "{text}");
}

backends!(records_linked, records_are_traces_linked_to_the_job);

/// `record_traces: job` and content capture on, the MCP server over HTTP: the records are
/// children of the job span, so the caller's trace holds everything; the chat spans carry the
/// messages; each `tools/call` POST carries the call's `traceparent` header too.
async fn one_trace_per_job_with_content(backend: Backend) {
    let (spans, done, mock, events) = run(
        backend,
        true,
        "otel: {record_traces: job, capture_content: true}",
    )
    .await;
    check_common(&spans, &done, &mock, &events);
    let job = named(&spans, "job")[0];
    for r in named(&spans, "record") {
        assert_eq!(r.parent_span_id, job.span_id);
        assert_eq!(hex(&r.trace_id), CALLER_TRACE);
    }
    let chat = named(&spans, "chat mock-writer")[0];
    let input = attr(chat, "gen_ai.input.messages").expect("messages captured");
    assert!(input.contains(PROMPT_MARKER), "{input}");
    assert!(attr(chat, "gen_ai.output.messages").is_some());
    let tool = named(&spans, "execute_tool echo")[0];
    assert!(
        attr(tool, "gen_ai.tool.call.arguments")
            .unwrap()
            .contains("echoed")
    );
    let headers = events
        .lines()
        .iter()
        .filter(|l| l.starts_with("trace-header "))
        .count();
    assert_eq!(headers, 3, "{:?}", events.lines());
}

backends!(one_trace_per_job, one_trace_per_job_with_content);

/// A collector that is not there (gRPC to a closed port): records run as ever, the export's
/// failure is counted in `/metrics` and logged once, not per batch.
async fn an_absent_collector_costs_no_record(backend: Backend) {
    synthgate::install_crypto_provider();
    let db = TestDb::new(backend).await;
    let mock = MockLlm::start(echo_once()).await.unwrap();
    let events = Events::new();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &mock.endpoint(),
        &Mcp::Stdio.provider(&events.path),
        "",
    );
    let log = dir.path().join("serve.log");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let env = [
        ("SYNTHGATE__DATABASE__URL", db.url.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", closed.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let service = start_serve(free_port(), Some(&config), &env, &log);
    let client = reqwest::Client::new();
    wait_ready(&client, &service.base).await;
    for _ in 0..2 {
        let id = crate::process::submit(&client, &service.base, &job(5)).await;
        let done = wait_for_job(&client, &service, &id, Duration::from_secs(60)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["completed"], 5, "{done}");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = crate::process::get_text(&client, &service.base, "/metrics").await;
        let failed = text
            .lines()
            .find_map(|l| l.strip_prefix("synthgate_otel_spans_failed_total "))
            .map_or(0.0, |v| v.trim().parse::<f64>().unwrap());
        if failed > 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no failed export counted:\n{text}\n{}",
            log_tail(&log)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged.matches("exporting spans failed").count(),
        1,
        "{}",
        log_tail(&log)
    );
    sigterm(&service.child);
}

backends!(absent_collector, an_absent_collector_costs_no_record);
