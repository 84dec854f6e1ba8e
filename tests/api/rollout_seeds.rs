//! `agent_rollout` seeds (issue 50 item 5): the folder of trajectories is uploaded as a tar
//! archive, the server derives DataDesigner's rows from it, and a job whose seed names the
//! same format and folder reads them. Every fixture tree under tests/fixtures/agent_rollout/
//! (one per format DataDesigner 0.9.6 reads, and trees whose index or ids make DataDesigner
//! fail) is derived on both sides: by DataDesigner's own `AgentRolloutSeedReader`
//! (tests/conformance/rollout_derive.py) and by synthgate, whose job records must hold
//! DataDesigner's rows, field by field and in order; where DataDesigner fails the read, the
//! upload is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::conformance::datadesigner_python;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app, status_json};

/// DataDesigner's `NormalizedAgentRolloutRecord` fields, in order.
const FIELDS: [&str; 16] = [
    "trace_id",
    "source_kind",
    "source_path",
    "root_session_id",
    "agent_id",
    "is_sidechain",
    "cwd",
    "project_path",
    "git_branch",
    "started_at",
    "ended_at",
    "messages",
    "source_meta",
    "message_count",
    "tool_call_count",
    "final_assistant_message",
];

/// One read of a tree: (file_pattern, recursive).
type Read = (Option<&'static str>, bool);

/// Each tree, the format it is read as, and its reads.
const TREES: &[(&str, &str, &[Read])] = &[
    ("atif", "atif", &[(None, true), (None, false)]),
    ("claude_code", "claude_code", &[(None, true), (None, false)]),
    (
        "codex",
        "codex",
        &[(None, true), (Some("rollout-2025-07-1[45]*"), true)],
    ),
    (
        "hermes_agent",
        "hermes_agent",
        &[(None, true), (None, false)],
    ),
    ("pi_coding_agent", "pi_coding_agent", &[(None, true)]),
    ("claude_code_bad_index", "claude_code", &[(None, true)]),
    ("claude_code_list_index", "claude_code", &[(None, true)]),
    ("hermes_agent_bad_index", "hermes_agent", &[(None, true)]),
    (
        "pi_coding_agent_unhashable",
        "pi_coding_agent",
        &[(None, true)],
    ),
];

fn tree_dir(tree: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent_rollout");
    std::fs::canonicalize(dir.join(tree)).expect("the fixture tree")
}

/// A tar archive of `dir`, as `synthgate submit` makes one.
fn archive(dir: &Path) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(".", dir).unwrap();
    builder.into_inner().unwrap()
}

/// DataDesigner's reads of every case, in one interpreter: `{"rows": [...]}` or
/// `{"error": "..."}` each.
fn datadesigner_reads(python: &str, cases: &[Value]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("cases.json");
    std::fs::write(&batch, serde_json::to_vec(cases).unwrap()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/rollout_derive.py"
    );
    let out = std::process::Command::new(python)
        .arg(script)
        .arg("--batch")
        .arg(&batch)
        .output()
        .expect("run rollout_derive.py");
    assert!(
        out.status.success(),
        "rollout_derive.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Uploads `tree` for a seed of `format` at config path `traces/{tree}`.
async fn upload(
    app: &TestApp,
    tree: &str,
    format: &str,
    pattern: Option<&str>,
    recursive: bool,
) -> (u16, Value) {
    let root = tree_dir(tree);
    let folder = format!("traces/{tree}");
    let recursive = recursive.to_string();
    let name = format!("{tree}.tar");
    let mut query = vec![
        ("name", name.as_str()),
        ("format", "agent_rollout"),
        ("rollout_format", format),
        ("path", folder.as_str()),
        ("recursive", recursive.as_str()),
        ("root", root.to_str().unwrap()),
    ];
    if let Some(pattern) = pattern {
        query.push(("file_pattern", pattern));
    }
    let resp = app
        .client
        .post(app.url("/v1/datasets"))
        .query(&query)
        .body(archive(&root))
        .send()
        .await
        .unwrap();
    status_json(resp).await
}

/// The records of a job seeded by the upload of `tree` (`n` records, rows in order).
async fn seeded_records(
    app: &TestApp,
    tree: &str,
    format: &str,
    pattern: Option<&str>,
    recursive: bool,
    n: usize,
) -> Vec<Value> {
    let mut source = json!({"seed_type": "agent_rollout", "format": format,
        "path": format!("traces/{tree}"), "recursive": recursive});
    if let Some(pattern) = pattern {
        source["file_pattern"] = json!(pattern);
    }
    let (status, job) = app
        .create_job(&json!({
            "config": {
                "seed_config": {"source": source, "sampling_strategy": "ordered"},
                "columns": [{"name": "summary", "column_type": "expression",
                             "expr": "{{ trace_id }}: {{ message_count }} messages"}],
            },
            "num_records": n,
        }))
        .await;
    assert_eq!(status, 202, "{tree}: {job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{tree}: {done}");
    let mut records = app.all_records(id).await;
    records.sort_by_key(|r| r["index"].as_u64());
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_rollout_rows_equal_datadesigners_for_every_format() {
    let Some(python) = datadesigner_python() else {
        return;
    };
    let mut cases = Vec::new();
    for (tree, format, reads) in TREES {
        for (pattern, recursive) in *reads {
            cases.push(json!({"format": format, "root": tree_dir(tree),
                "file_pattern": pattern, "recursive": recursive}));
        }
    }
    let theirs = datadesigner_reads(&python, &cases);
    let app = spawn_app(Backend::Sqlite).await;
    let mut read = 0;
    let mut compared_rows = 0;
    for (tree, format, reads) in TREES {
        for (pattern, recursive) in *reads {
            let dd = &theirs[read];
            read += 1;
            let what = format!("{tree} (pattern {pattern:?}, recursive {recursive})");
            let (status, dataset) = upload(&app, tree, format, *pattern, *recursive).await;
            let Some(rows) = dd["rows"].as_array() else {
                // DataDesigner fails this read: so does the upload, saying why.
                assert_eq!(status, 422, "{what}: DataDesigner: {dd}; ours: {dataset}");
                assert_eq!(
                    dataset["error"]["code"], "invalid_dataset",
                    "{what}: {dataset}"
                );
                eprintln!(
                    "rollout: {what} refused as DataDesigner fails it: {} / {}",
                    dd["error"], dataset["error"]["message"]
                );
                continue;
            };
            assert_eq!(status, 201, "{what}: {dataset}; DataDesigner: {dd}");
            let columns: Vec<&str> = dataset["columns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            assert_eq!(columns, FIELDS, "{what}");
            assert_eq!(dataset["num_rows"], rows.len(), "{what}");
            let records =
                seeded_records(&app, tree, format, *pattern, *recursive, rows.len()).await;
            for (i, (record, row)) in records.iter().zip(rows).enumerate() {
                assert_eq!(record["status"], "completed", "{what}: {record}");
                let keys: Vec<&str> = row
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                assert_eq!(keys, FIELDS, "{what}: DataDesigner's row {i}");
                for field in FIELDS {
                    assert_eq!(
                        record["values"][field], row[field],
                        "{what}: row {i}, field {field}"
                    );
                }
                assert_eq!(
                    record["values"]["summary"],
                    format!(
                        "{}: {} messages",
                        row["trace_id"].as_str().unwrap(),
                        row["message_count"]
                    ),
                    "{what}: row {i}"
                );
                compared_rows += 1;
            }
        }
    }
    assert!(compared_rows >= 20, "only {compared_rows} rows compared");
    eprintln!("rollout: {compared_rows} rows equal DataDesigner's over {read} reads");

    // A seed with another pattern, or no upload at all, names what to upload.
    let source = json!({"seed_type": "agent_rollout", "format": "codex", "path": "traces/codex",
        "file_pattern": "*.json"});
    let (status, body) = app
        .create_job(&json!({"config": {"seed_config": {"source": source},
            "columns": [{"name": "x", "column_type": "expression", "expr": "x"}]}, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "seed_dataset_not_found", "{body}");
    let message = body["error"]["details"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("synthgate submit") && message.contains("format=agent_rollout"),
        "{message}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rollout_uploads_and_seeds_are_refused_naming_the_field() {
    let app = spawn_app(Backend::Sqlite).await;
    let post = |query: Vec<(&'static str, &'static str)>, body: Vec<u8>| {
        let request = app
            .client
            .post(app.url("/v1/datasets"))
            .query(&query)
            .body(body);
        async move { status_json(request.send().await.unwrap()).await }
    };
    // Refused on the query, before the body is read: a small body, so none is cut off.
    let tar = b"x".to_vec();
    for (query, field) in [
        (
            vec![("name", "t.tar"), ("format", "agent_rollout")],
            "rollout_format",
        ),
        (
            vec![
                ("name", "t.tar"),
                ("format", "agent_rollout"),
                ("rollout_format", "cursor"),
            ],
            "rollout_format",
        ),
        (
            vec![
                ("name", "t.tar"),
                ("format", "agent_rollout"),
                ("rollout_format", "atif"),
            ],
            "path",
        ),
        (
            vec![
                ("name", "t.tar"),
                ("format", "agent_rollout"),
                ("rollout_format", "codex"),
                ("file_pattern", "a/*.jsonl"),
            ],
            "file_pattern",
        ),
        (
            vec![("name", "t.csv"), ("rollout_format", "codex")],
            "rollout_format",
        ),
        (
            vec![
                ("name", "t.tar"),
                ("format", "agent_rollout"),
                ("rollout_format", "codex"),
                ("root", "/home/a\u{7}b"),
            ],
            "root",
        ),
    ] {
        let (status, body) = post(query.clone(), tar.clone()).await;
        assert_eq!(status, 422, "{query:?}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{field}: {body}"
        );
    }
    // Not a tar archive; no file the pattern matches.
    let codex = vec![
        ("name", "t.tar"),
        ("format", "agent_rollout"),
        ("rollout_format", "codex"),
    ];
    let (status, body) = post(codex.clone(), b"not a tar archive at all".repeat(40)).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_dataset", "{body}");
    let (status, body) = post(codex, archive(&tree_dir("atif"))).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No files matched"),
        "{body}"
    );

    // Seeds: DataDesigner's own validation of the source's fields.
    for (source, field) in [
        (
            json!({"seed_type": "agent_rollout", "format": "cursor"}),
            "seed_config.source.format",
        ),
        (
            json!({"seed_type": "agent_rollout", "format": "atif"}),
            "seed_config.source.path",
        ),
        (
            json!({"seed_type": "agent_rollout", "format": "codex", "file_pattern": "x/*.jsonl"}),
            "seed_config.source.file_pattern",
        ),
    ] {
        let (status, body) = app
            .create_job(&json!({"config": {"seed_config": {"source": source},
                "columns": [{"name": "x", "column_type": "expression", "expr": "x"}]}, "num_records": 1}))
            .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["details"][0]["field"], field, "{body}");
    }
    app.stop().await;
}
