//! Conformance against the real `data-designer` package: tests/conformance/write_configs.py
//! writes configs with DataDesigner 0.9.6's own builder (one per column type, sampler type,
//! constraint, processor and profiler, its default model configs, tutorial-style pipelines),
//! and each file is submitted unchanged (YAML, `?num_records=`) against the mock LLM.
//!
//! [`CASES`] says which are expected to be accepted. A refused case asserts the exact 422
//! code, so when a feature lands (another branch serves it), its case fails until it is
//! flipped to `Accepted`. The interpreter comes from `$SYNTHGATE_TEST_DD_PYTHON` (scripts/test
//! builds `.venv-datadesigner/` for it); the test skips loudly when it is unset.

use std::time::Duration;

use serde_json::{Value, json};

use crate::db::Backend;
use crate::helpers::app_with_mock_llm;

/// What synthgate is expected to do with a case.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// 202, and every record completes with the config's output columns.
    Accepted,
    /// 422 with this code.
    Refused(&'static str),
}

use Expect::{Accepted, Refused};

/// Every case write_configs.py writes, by file stem.
const CASES: &[(&str, Expect)] = &[
    ("sampler_category", Accepted),
    ("sampler_uniform", Accepted),
    ("sampler_gaussian", Accepted),
    ("sampler_bernoulli", Accepted),
    ("sampler_binomial", Accepted),
    ("sampler_poisson", Accepted),
    ("sampler_uuid", Accepted),
    ("sampler_datetime", Accepted),
    ("sampler_subcategory", Accepted),
    ("sampler_timedelta", Accepted),
    ("sampler_scipy", Accepted),
    ("sampler_bernoulli_mixture", Accepted),
    ("sampler_person", Accepted),
    ("sampler_person_from_faker", Accepted),
    ("sampler_person_from_faker_locales", Accepted),
    ("column_expression", Accepted),
    ("column_llm-text", Accepted),
    ("column_llm-code", Accepted),
    ("column_llm-structured", Accepted),
    ("column_llm-judge", Accepted),
    ("column_validation", Accepted),
    ("column_embedding", Accepted),
    ("column_image", Accepted),
    ("tutorial_image_caption", Accepted),
    // A Python function cannot run in a service.
    ("column_custom", Refused("python_callable_not_served")),
    ("constraint_scalar_inequality", Accepted),
    ("constraint_column_inequality", Accepted),
    ("constraint_datetime_columns", Accepted),
    ("processor_drop_columns", Accepted),
    ("processor_schema_transform", Accepted),
    ("profiler_judge_score", Accepted),
    ("builder_default_model_configs", Accepted),
    ("tutorial_product_reviews", Accepted),
    ("tutorial_persona_bios", Accepted),
    ("semantics_jinja", Accepted),
    ("round3_templates", Accepted),
];

/// Cases whose every value is determined by the config: each of DataDesigner's scalar columns
/// must equal ours, row by row.
const VALUE_CASES: &[&str] = &["semantics_jinja", "round3_templates"];

const NUM_RECORDS: u64 = 3;

/// The interpreter with data_designer (see [`crate::require`]: `None` skips, or fails under
/// `CI=true`).
#[track_caller]
pub fn datadesigner_python() -> Option<String> {
    crate::require::require(std::env::var("SYNTHGATE_TEST_DD_PYTHON").ok(), || {
        "SYNTHGATE_TEST_DD_PYTHON is not set (scripts/test builds .venv-datadesigner/ from \
         scripts/requirements-datadesigner.txt and sets it)"
            .into()
    })
}

/// Answers that fit every LLM column of the cases: Python in a fence for code columns, JSON in
/// a fence for the rest (structured and judge columns parse it; text columns keep it).
fn mock_script() -> Value {
    let answer = json!({
        "title": "A title", "sentiment": "positive", "keywords": ["soft"],
        "quality": {"reasoning": "fine", "score": "4"}
    });
    json!({"history_limit": 100_000, "rules": [
        // Code columns (python in every case): both synthgate's and DataDesigner's code
        // instructions name the language, and both refuse a block in another language.
        {"when": {"user_contains": "python"}, "reply": {"text": "```python\nprint('hello')\n```"}},
        {"reply": {"text": format!("```json\n{answer}\n```")}},
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadesigner_builder_configs_run_unchanged() {
    let Some(python) = datadesigner_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/write_configs.py"
    );
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(dir.path())
        .output()
        .expect("run write_configs.py");
    assert!(
        out.status.success(),
        "write_configs.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut listed: Vec<String> = CASES.iter().map(|(n, _)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(written, listed, "every written config has a case, and back");

    // `person` samplers read a managed dataset: a small one in DataDesigner's layout.
    let assets = tempfile::tempdir().unwrap();
    crate::samplers::write_dataset(assets.path());
    let assets_dir = assets.path().to_path_buf();
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, mock_script(), |c| {
        c.samplers.managed_assets_dir = Some(assets_dir);
    })
    .await;
    let reference = datadesigner_previews(&python, dir.path(), &mock.endpoint(), assets.path());
    // What DataDesigner sent the model; everything the mock sees later is synthgate's.
    let theirs_sent = mock.requests().len();
    let mut accepted = 0;
    let mut shape_differences = Vec::new();
    for (name, expect) in CASES {
        let text = std::fs::read_to_string(dir.path().join(format!("{name}.yaml"))).unwrap();
        let (status, body) = app
            .post_raw(
                &format!("/v1/jobs?num_records={NUM_RECORDS}"),
                "application/yaml",
                text.clone(),
            )
            .await;
        match expect {
            Refused(code) => {
                assert_eq!(status, 422, "{name}: {body}");
                assert_eq!(body["error"]["code"], *code, "{name}: {body}");
                continue;
            }
            Accepted => assert_eq!(status, 202, "{name}: {body}"),
        }
        accepted += 1;
        let id = body["id"].as_str().unwrap().to_owned();
        let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
        assert_eq!(done["status"], "completed", "{name}: {done}");
        let config: Value = yaml_serde::from_str(&text).unwrap();
        let config = &config["data_designer"];
        let expected = output_columns(config);
        let records = app.all_records(&id).await;
        assert_eq!(records.len() as u64, NUM_RECORDS, "{name}");
        // DataDesigner's own preview of the same file against the same mock: where it runs,
        // its dataset has the same columns (it may order them differently).
        let dd = &reference[*name];
        if VALUE_CASES.contains(name) {
            assert_eq!(
                dd["ok"], true,
                "{name}: DataDesigner's preview failed: {dd}"
            );
        }
        if dd["ok"] == true {
            let mut theirs: Vec<&str> = dd["columns"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            theirs.sort_unstable();
            let mut ours: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
            ours.sort_unstable();
            assert_eq!(
                ours, theirs,
                "{name}: columns differ from DataDesigner's preview"
            );
            let processors = config["processors"].as_array().cloned().unwrap_or_default();
            let mut outputs: Vec<&str> = processors
                .iter()
                .filter(|p| p["processor_type"] == "schema_transform")
                .filter_map(|p| p["name"].as_str())
                .collect();
            outputs.sort_unstable();
            assert_eq!(dd["outputs"], json!(outputs), "{name}: processor outputs");
            if VALUE_CASES.contains(name) {
                for (column, theirs) in dd["scalars"].as_object().unwrap() {
                    for (i, r) in records.iter().enumerate() {
                        assert_eq!(
                            &r["values"][column.as_str()],
                            &theirs[i],
                            "{name}: record {i}, column {column} differs from DataDesigner's"
                        );
                    }
                }
            }
            // And each value has the same JSON kind as DataDesigner's first row.
            let first = records[0]["values"].as_object().unwrap();
            for (column, theirs) in dd["shapes"].as_object().unwrap() {
                let ours = json_kind(&first[column.as_str()]);
                if ours != theirs.as_str().unwrap() {
                    shape_differences
                        .push(format!("{name}.{column}: ours {ours}, theirs {theirs}"));
                }
            }
        } else {
            eprintln!(
                "conformance: DataDesigner's own preview of {name} failed: {}",
                dd["error"]
            );
        }
        for r in &records {
            assert_eq!(r["status"], "completed", "{name}: {r}");
            let values = r["values"].as_object().unwrap();
            let mut got: Vec<&String> = values.keys().collect();
            got.sort();
            let mut want: Vec<&String> = expected.iter().map(|(n, _)| n).collect();
            want.sort();
            assert_eq!(got, want, "{name}: output columns");
            for (column, shape) in &expected {
                let v = &values[column.as_str()];
                assert!(
                    shape_fits(shape, v),
                    "{name}: {column} should be {shape}: {v}"
                );
            }
        }
        for p in config["processors"].as_array().into_iter().flatten() {
            if p["processor_type"] != "schema_transform" {
                continue;
            }
            let path = format!("/v1/jobs/{id}/outputs/{}", p["name"].as_str().unwrap());
            let (status, body) = app.get_text(&path).await;
            assert_eq!(status, 200, "{name}: {body}");
            assert_eq!(body.lines().count() as u64, NUM_RECORDS, "{name}: {body}");
        }
    }
    // The semantics case, spelled out: what both agreed on is DataDesigner's Jinja.
    let (_, jobs) = app.get("/v1/jobs?limit=100").await;
    let semantics = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| {
            j["columns"]
                .as_array()
                .is_some_and(|c| c.contains(&json!("gated")))
        })
        .expect("the semantics job");
    let records = app.all_records(semantics["id"].as_str().unwrap()).await;
    let v = &records[0]["values"];
    assert_eq!(
        (
            &v["words"],
            &v["doubled"],
            &v["missing"],
            &v["deep"],
            &v["gated"]
        ),
        (
            &json!(3),
            &json!(2469.0),
            &json!("[]"),
            &json!("deep"),
            &json!("skipped")
        ),
        "{v}"
    );
    assert_eq!(v["title"], "Great Soft Blanket", "{v}");
    // The prompts of `round3_templates`' LLM columns, as each side sent them: the same user
    // text (`echo` reads through a slice; `pet` and `snippet` end with DataDesigner's
    // instructions) and the same roles (`echo`'s `system_prompt` is '': no system message).
    let sent = |requests: &[Value], marker: &str| -> Vec<(Vec<String>, String)> {
        requests
            .iter()
            .filter_map(|body| {
                let messages = body["messages"].as_array()?;
                let user = messages.iter().find(|m| m["role"] == "user")?;
                let text = content_text(&user["content"]);
                text.starts_with(marker).then(|| {
                    let roles = messages
                        .iter()
                        .map(|m| m["role"].as_str().unwrap_or_default().to_owned())
                        .collect();
                    (roles, text)
                })
            })
            .collect()
    };
    let all: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    let (dd_sent, ours_sent) = all.split_at(theirs_sent);
    for marker in [
        "Repeat after me",
        "Invent a pet",
        "Write a function that prints",
        "Judge the pet named",
    ] {
        let (theirs, ours) = (sent(dd_sent, marker), sent(ours_sent, marker));
        assert!(!theirs.is_empty(), "DataDesigner sent no {marker:?} prompt");
        assert_eq!(ours.len() as u64, NUM_RECORDS, "{marker}: {ours:?}");
        for request in &ours {
            assert_eq!(request, &theirs[0], "{marker}: ours, then DataDesigner's");
        }
        eprintln!(
            "conformance: {marker:?} sent as DataDesigner sends it: {:?}",
            theirs[0]
        );
    }
    // Audio and video context (item 4): the whole user message, blocks and all, is
    // DataDesigner's.
    let user_content = |requests: &[Value]| -> Vec<Value> {
        requests
            .iter()
            .filter_map(|body| {
                let user = body["messages"]
                    .as_array()?
                    .iter()
                    .find(|m| m["role"] == "user")?;
                content_text(&user["content"])
                    .starts_with("Describe what you hear")
                    .then(|| user["content"].clone())
            })
            .collect()
    };
    let (theirs, ours) = (user_content(dd_sent), user_content(ours_sent));
    assert!(
        !theirs.is_empty(),
        "DataDesigner sent no audio/video prompt"
    );
    assert_eq!(ours.len() as u64, NUM_RECORDS, "{ours:?}");
    for content in &ours {
        assert_eq!(
            content, &theirs[0],
            "audio/video context: ours, then DataDesigner's"
        );
    }
    assert_eq!(
        theirs[0][0],
        json!({"type": "audio_url", "audio_url": {"url": "https://media.example/clip.mp3"}})
    );
    eprintln!(
        "conformance: audio/video context sent as DataDesigner sends it: {}",
        theirs[0]
    );
    let echo = &sent(ours_sent, "Repeat after me")[0];
    assert_eq!(
        echo,
        &(vec!["user".to_owned()], "Repeat after me: brave".to_owned())
    );
    assert!(
        shape_differences.is_empty(),
        "value kinds differ from DataDesigner's preview: {shape_differences:#?}"
    );
    eprintln!(
        "conformance: {accepted} of {} DataDesigner builder configs accepted",
        CASES.len()
    );
    app.stop().await;
}

/// A message's text: a string, or a list of text parts joined (DataDesigner sends parts,
/// synthgate a string).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Runs DataDesigner's `preview` on every file in `dir` against `endpoint` (the mock LLM).
/// DataDesigner reads `person` datasets from `assets`, the same managed-assets directory the
/// service is given.
fn datadesigner_previews(
    python: &str,
    dir: &std::path::Path,
    endpoint: &str,
    assets: &std::path::Path,
) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/datadesigner_preview.py"
    );
    let out = dir.join("datadesigner_previews.json");
    let status = std::process::Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(endpoint)
        .arg(&out)
        .env("DATA_DESIGNER_MANAGED_ASSETS_PATH", assets)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run datadesigner_preview.py");
    assert!(status.success(), "datadesigner_preview.py failed");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// The dataset columns of a config as DataDesigner writes it, each with the JSON shape its
/// values take: columns with `drop: false` not named by a drop_columns processor (the builder
/// marks those `drop: true` itself).
fn output_columns(config: &Value) -> Vec<(String, &'static str)> {
    let dropped: Vec<&str> = config["processors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["processor_type"] == "drop_columns")
        .flat_map(|p| p["column_names"].as_array().unwrap().iter())
        .filter_map(Value::as_str)
        .collect();
    config["columns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["drop"] != true && !dropped.contains(&c["name"].as_str().unwrap()))
        .map(|c| {
            let shape = match c["column_type"].as_str().unwrap() {
                "llm-structured" | "llm-judge" | "validation" | "embedding" => "object",
                "sampler" => match c["sampler_type"].as_str().unwrap() {
                    "uniform" | "gaussian" | "bernoulli" | "binomial" | "poisson" | "scipy"
                    | "bernoulli_mixture" => "number",
                    "person" | "person_from_faker" => "object",
                    "uuid" | "datetime" | "timedelta" | "subcategory" => "string",
                    _ => "scalar",
                },
                "image" => "array",
                "expression" => match c["dtype"].as_str() {
                    Some("int" | "float") => "number",
                    Some("bool") => "scalar",
                    _ => "string",
                },
                _ => "string",
            };
            (c["name"].as_str().unwrap().to_owned(), shape)
        })
        .collect()
}

/// The JSON kind of a value, named as datadesigner_preview.py names them.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Bool(_) => "bool",
        Value::Null => "null",
        Value::Number(_) => "number",
        Value::String(_) => "string",
    }
}

fn shape_fits(shape: &str, v: &Value) -> bool {
    match shape {
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        _ => v.is_string() || v.is_number() || v.is_boolean(),
    }
}

/// The person_from_faker tables the binary embeds are what `scripts/faker-locales.py` takes
/// out of the Faker release DataDesigner runs: regenerated here, byte for byte. A Faker or
/// DataDesigner upgrade that changes the data fails this test until the asset is rewritten.
#[test]
fn faker_locale_asset_is_reproducible() {
    let Some(python) = datadesigner_python() else {
        return;
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("faker_locales.jsonl.gz");
    let status = std::process::Command::new(python)
        .arg(format!("{root}/scripts/faker-locales.py"))
        .arg(&out)
        .status()
        .expect("run scripts/faker-locales.py");
    assert!(status.success(), "scripts/faker-locales.py failed");
    let embedded =
        std::fs::read(format!("{root}/src/generate/assets/faker_locales.jsonl.gz")).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == embedded,
        "src/generate/assets/faker_locales.jsonl.gz is not what scripts/faker-locales.py writes; \
         rerun it with .venv-datadesigner/bin/python"
    );
}
