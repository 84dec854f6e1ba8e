//! CSV exports neutralize spreadsheet formulas (issue 9, finding 11), in values and in column
//! names, and leave plain numbers alone; JSONL carries values unchanged. Both backends.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::spawn_app;

/// Expression columns whose values (and one column name) start with formula characters.
fn formula_config() -> Value {
    let expr =
        |name: &str, expr: &str| json!({"name": name, "column_type": "expression", "expr": expr});
    json!({"columns": [
        expr("eq", "=HYPERLINK(\"http://evil.example\",\"x\")"),
        expr("plus", "+1+1"),
        expr("minus", "-2+3"),
        expr("at", "@SUM(A1)"),
        expr("tab", "{{ '\\t' }}=1"),
        expr("cr", "{{ '\\r' }}=1"),
        expr("=cmd|' /C calc'!A0", "plain"),
        {"name": "neg", "column_type": "expression", "expr": "-3.5", "dtype": "float"},
        expr("neg_text", "-42"),
        expr("safe", "a=b"),
    ]})
}

async fn csv_neutralizes_formulas(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, job) = app
        .create_job(&json!({"config": formula_config(), "num_records": 2, "seed": 1}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");

    let (status, csv) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=csv"))
        .await;
    assert_eq!(status, 200, "{csv}");
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(csv.as_bytes());
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert_eq!(
        rows[0],
        [
            "eq",
            "plus",
            "minus",
            "at",
            "tab",
            "cr",
            "'=cmd|' /C calc'!A0",
            "neg",
            "neg_text",
            "safe"
        ],
        "a formula column name is neutralized too"
    );
    for row in &rows[1..] {
        assert_eq!(
            row,
            &[
                "'=HYPERLINK(\"http://evil.example\",\"x\")",
                "'+1+1",
                "'-2+3",
                "'@SUM(A1)",
                "'\t=1",
                "'\r=1",
                "plain",
                "-3.5",
                "-42",
                "a=b",
            ],
            "{csv}"
        );
    }
    // No cell of the raw text starts with a formula character outside a plain number.
    for row in &rows {
        for cell in row {
            let lead = cell.chars().next().unwrap_or(' ');
            assert!(
                !['=', '+', '@', '\t', '\r'].contains(&lead)
                    && (lead != '-' || cell.parse::<f64>().is_ok()),
                "cell {cell:?} would run as a formula"
            );
        }
    }

    // JSONL is data for programs, not spreadsheets: values as generated.
    let (status, jsonl) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=jsonl"))
        .await;
    assert_eq!(status, 200);
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["plus"], "+1+1");
    assert_eq!(first["neg"], -3.5);
    app.stop().await;
}
backends!(csv_formulas, csv_neutralizes_formulas);
