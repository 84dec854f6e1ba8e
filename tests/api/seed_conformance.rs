//! DataDesigner's seeding tutorial (`docs/notebook_source/3-seeding-with-a-dataset.py`) and
//! its seed-dataset docs examples (`docs/concepts/seed-datasets.md`: the complete example and
//! the Parquet wildcard source) end to end, as a DataDesigner user runs them.
//!
//! tests/conformance/write_configs.py writes the configs with DataDesigner 0.9.6's own
//! builder, beside made-up seed files with the same columns (`seeded/`). From that directory,
//! the built `synthgate submit CONFIG --wait` uploads each file the config names (the
//! tutorial's path is relative, the docs' a glob) and submits the file unchanged; the job
//! completes with the seed's rows, in order, in its records. DataDesigner's own `preview` of
//! the same config and files against the same mock LLM gives the reference: the same columns,
//! the same JSON kinds, the same seed values row by row, and (where a prompt depends on the
//! seed only) the same LLM text. A second `submit` uploads nothing: the server has every
//! file's hash already.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::conformance::{datadesigner_python, json_kind};
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

/// Each seeded case and the files its config names (the names the uploads take).
const CASES: &[(&str, &[&str])] = &[
    (
        "seeded_tutorial_patient_notes",
        &["gretelai_symptom_to_diagnosis.csv"],
    ),
    ("seeded_docs_physician_notes", &["symptom_to_diagnosis.csv"]),
    (
        "seeded_docs_product_reviews",
        &["part-0.parquet", "part-1.parquet"],
    ),
    // Submitted in this order: a top-level seed, then two pipelines whose artifacts share
    // file names; each glob must read only its own folder (issue 50 item 6: matched by
    // file name, the OCR glob took every `.parquet` upload and failed on their columns).
    ("seeded_glob_a_notebook_seed", &["your_seed_data.parquet"]),
    ("seeded_jsonl_values", &["notes.jsonl"]),
    // An `agent_rollout` seed: submit uploads the folder (checked below), not files.
    ("seeded_rollout_claude_code", &[]),
    ("seeded_glob_captions_pipeline", &["batch_00000.parquet"]),
    (
        "seeded_glob_ocr_pipeline",
        &["batch_00000.parquet", "batch_00001.parquet"],
    ),
];

/// Columns rendered from seed values only (an LLM column's prompt, which the mock's reply
/// quotes, or an expression), so their values must equal DataDesigner's.
const SEED_ONLY_PROMPTS: &[(&str, &str)] = &[
    ("seeded_jsonl_values", "next_n"),
    ("seeded_rollout_claude_code", "recap"),
    ("seeded_jsonl_values", "meta_z"),
    ("seeded_jsonl_values", "meta_l0"),
    ("seeded_jsonl_values", "first_tag"),
    ("seeded_jsonl_values", "all_tags"),
    ("seeded_docs_product_reviews", "review"),
    ("seeded_glob_a_notebook_seed", "question"),
    ("seeded_glob_captions_pipeline", "rewritten"),
    ("seeded_glob_ocr_pipeline", "rewritten"),
];

const NUM_RECORDS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadesigner_seeding_tutorial_and_docs_run_after_submit_uploads_their_files() {
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
    let seeded = dir.path().join("seeded");
    let mut written: Vec<String> = std::fs::read_dir(&seeded)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut listed: Vec<&str> = CASES.iter().map(|(n, _)| *n).collect();
    listed.sort_unstable();
    assert_eq!(written, listed, "every seeded config has a case, and back");

    // The mock's default reply quotes the prompt, so seed values show in the LLM columns.
    let (app, mock) = app_with_mock_llm(Backend::Postgres, json!({"rules": []}), |_| {}).await;
    let reference = datadesigner_previews(&python, &seeded, &mock.endpoint());

    for (name, files) in CASES {
        let config = format!("{name}.yaml");
        let first = submit(&app, &seeded, &config).await;
        for file in *files {
            assert!(
                first
                    .stderr
                    .contains(&format!("{file} uploaded as dataset ")),
                "{name}: {file} not uploaded: {}",
                first.stderr
            );
        }
        if files.is_empty() {
            assert!(
                first.stderr.contains("trajectories in")
                    && first.stderr.contains("stored as dataset"),
                "{name}: the folder was not uploaded: {}",
                first.stderr
            );
        }
        check_records(&app, &seeded, name, &first.job_id, &reference[*name]).await;

        // Again: every file is found by its hash, nothing is sent.
        let datasets_before = app.get("/v1/datasets?limit=100").await.1;
        let second = submit(&app, &seeded, &config).await;
        for file in *files {
            assert!(
                second
                    .stderr
                    .contains(&format!("{file} is on the server already as dataset ")),
                "{name}: {file} sent again: {}",
                second.stderr
            );
        }
        assert!(!second.stderr.contains("uploaded as"), "{}", second.stderr);
        assert_eq!(
            app.get("/v1/datasets?limit=100").await.1,
            datasets_before,
            "{name}: the second submit stored nothing"
        );
        check_records(&app, &seeded, name, &second.job_id, &reference[*name]).await;
    }

    // Each file is one dataset, with the rows and columns of the file.
    let (status, list) = app.get("/v1/datasets?limit=100").await;
    assert_eq!(status, 200, "{list}");
    let mut stored: Vec<(String, u64, u64)> = list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_owned(),
                d["num_rows"].as_u64().unwrap(),
                d["columns"].as_array().unwrap().len() as u64,
            )
        })
        .collect();
    stored.sort();
    assert_eq!(
        stored,
        [
            ("batch_00000.parquet".into(), 1, 3),
            ("batch_00000.parquet".into(), 2, 2),
            ("batch_00001.parquet".into(), 1, 2),
            ("claude_code.tar".into(), 5, 16),
            ("gretelai_symptom_to_diagnosis.csv".into(), 5, 2),
            ("notes.jsonl".into(), 2, 3),
            ("part-0.parquet".into(), 2, 3),
            ("part-1.parquet".into(), 3, 3),
            ("symptom_to_diagnosis.csv".into(), 5, 2),
            ("your_seed_data.parquet".into(), 2, 2),
        ]
    );
    // Each records the path its config names it by, which the globs were matched against.
    let mut paths: Vec<&str> = list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["name"] != "claude_code.tar")
        .map(|d| d["path"].as_str().expect("submit records the path"))
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "artifacts/captions/parquet-files/batch_00000.parquet",
            "artifacts/ocr/parquet-files/batch_00000.parquet",
            "artifacts/ocr/parquet-files/batch_00001.parquet",
            "data/products/part-0.parquet",
            "data/products/part-1.parquet",
            "gretelai_symptom_to_diagnosis.csv",
            "notes.jsonl",
            "symptom_to_diagnosis.csv",
            "your_seed_data.parquet",
        ]
    );
    app.stop().await;
}

/// What one `synthgate submit` run printed.
struct Submitted {
    job_id: String,
    stderr: String,
}

/// Runs the built binary as a user would, from the directory the config's paths are
/// relative to, and waits for the job; the job must complete (exit 0).
async fn submit(app: &TestApp, cwd: &Path, config: &str) -> Submitted {
    let n = NUM_RECORDS.to_string();
    let url = app.url("");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_synthgate"))
        .args(["submit", config, "-n", &n, "--wait", "--url", &url])
        .current_dir(cwd)
        .env_remove("SYNTHGATE_API_KEY")
        .env_remove("SYNTHGATE_URL")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("synthgate submit finished in time")
        .expect("run synthgate submit");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{config}: {:?}\n{stderr}", out.status);
    let job_id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(!job_id.is_empty() && !job_id.contains('\n'), "{job_id}");
    Submitted { job_id, stderr }
}

/// The job's records against DataDesigner's preview of the same config and files.
async fn check_records(app: &TestApp, dir: &Path, name: &str, id: &str, dd: &Value) {
    let job = app.wait_for_job(id, Duration::from_secs(30)).await;
    assert_eq!(job["status"], "completed", "{name}: {job}");
    let mut records = app.all_records(id).await;
    records.sort_by_key(|r| r["index"].as_u64().unwrap());
    assert_eq!(records.len() as u64, NUM_RECORDS, "{name}");
    assert_eq!(
        dd["ok"], true,
        "{name}: DataDesigner's preview failed: {dd}"
    );

    let mut theirs: Vec<&str> = dd["columns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    theirs.sort_unstable();
    let config_columns = config_columns(&dir.join(format!("{name}.yaml")));
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["status"], "completed", "{name}: {record}");
        let values = record["values"].as_object().unwrap();
        let mut ours: Vec<&str> = values.keys().map(String::as_str).collect();
        ours.sort_unstable();
        assert_eq!(ours, theirs, "{name}: columns differ from DataDesigner's");
        // `shapes` are the kinds of DataDesigner's first row (a column may hold null in
        // some rows and a value in others, as `agent_id` of agent sessions does).
        for (column, kind) in dd["shapes"].as_object().unwrap().iter().filter(|_| i == 0) {
            assert_eq!(
                json_kind(&values[column]),
                kind,
                "{name}.{column}: {}",
                values[column]
            );
        }
        // Seed columns (those the config does not define) hold row i of the seed, as in
        // DataDesigner's ordered sampling; so do LLM columns prompted from seed values only.
        for (column, column_values) in dd["scalars"].as_object().unwrap() {
            let seeded = !config_columns.contains(column)
                || SEED_ONLY_PROMPTS.contains(&(name, column.as_str()));
            if seeded {
                assert_eq!(
                    values[column], column_values[i],
                    "{name}: record {i}, column {column}"
                );
            }
        }
    }
}

/// The column names a config defines, read back from the file DataDesigner wrote.
fn config_columns(path: &Path) -> Vec<String> {
    let config: Value = yaml_serde::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    config["data_designer"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

/// DataDesigner's `preview` of every seeded config, run from the directory of its files.
fn datadesigner_previews(python: &str, dir: &Path, endpoint: &str) -> Value {
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
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run datadesigner_preview.py");
    assert!(status.success(), "datadesigner_preview.py failed");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}
