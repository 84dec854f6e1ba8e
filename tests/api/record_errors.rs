//! `RecordErrorCode` is the one list of record error codes: the committed `openapi.yaml` and
//! the table in docs/api.md must say the same, in both directions.

use serde_json::Value;
use synthgate::domain::record::{RecordErrorCode, RecordStage};

fn committed(file: &str) -> String {
    std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The `enum` of `schema`, following one `$ref` (directly or inside a `oneOf`).
fn enum_of<'a>(schemas: &'a Value, schema: &'a Value) -> Vec<&'a str> {
    let target = schema
        .get("$ref")
        .or_else(|| {
            schema["oneOf"]
                .as_array()?
                .iter()
                .find_map(|s| s.get("$ref"))
        })
        .and_then(Value::as_str)
        .map_or(schema, |r| {
            &schemas[r.trim_start_matches("#/components/schemas/")]
        });
    target["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum in {target}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[test]
fn openapi_record_error_lists_every_code_and_stage() {
    let spec: Value = yaml_serde::from_str(&committed("openapi.yaml")).unwrap();
    let schemas = &spec["components"]["schemas"];
    let fields = &schemas["RecordError"]["properties"];
    let codes: Vec<&str> = RecordErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        enum_of(schemas, &fields["code"]),
        codes,
        "openapi.yaml's RecordError.code; regenerate it"
    );
    let stages: Vec<&str> = RecordStage::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        enum_of(schemas, &fields["stage"]),
        stages,
        "openapi.yaml's RecordError.stage; regenerate it"
    );
}

#[test]
fn docs_record_error_table_is_the_list_of_codes() {
    let expected: Vec<String> = ["| code | stage | meaning |", "| --- | --- | --- |"]
        .into_iter()
        .map(str::to_owned)
        .chain(RecordErrorCode::ALL.iter().map(|c| {
            format!(
                "| `{c}` | `{}` | {} |",
                c.stage().expect("a known code has a stage"),
                c.meaning().expect("a known code has a meaning")
            )
        }))
        .collect();
    let readme = committed("docs/api.md");
    let table: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != expected[0])
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(
        table == expected,
        "docs/api.md's record error table differs from RecordErrorCode; it should read:\n\n{}\n",
        expected.join("\n")
    );
}
