//! What the client reads from `/v1/datasets`, and how `synthgate datasets` prints it.
//!
//! Lenient views, like [`super::events`]: unknown fields are ignored and enums stay strings,
//! so an older CLI keeps working against a newer server.

use std::fmt::Write as _;

use indicatif::HumanBytes;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A column of a dataset: its name and inferred type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ColumnView {
    pub name: String,
    #[serde(rename = "type")]
    pub r#type: String,
}

/// The server's Dataset object (`preview` only on `GET /v1/datasets/{id}`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct DatasetView {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub columns: Vec<ColumnView>,
    #[serde(default)]
    pub num_rows: u64,
    #[serde(default)]
    pub size_bytes: u64,
    #[serde(default)]
    pub sha256: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub preview: Option<Vec<Map<String, Value>>>,
}

/// One page of `GET /v1/datasets`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct DatasetPage {
    pub datasets: Vec<DatasetView>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

impl DatasetView {
    /// `a (string), b (integer)`.
    pub(crate) fn columns_line(&self) -> String {
        let columns: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{} ({})", c.name, c.r#type))
            .collect();
        columns.join(", ")
    }

    /// `120 rows, 2 columns, 4.2 KiB`.
    pub(crate) fn summary(&self) -> String {
        format!(
            "{} {}, {} {}, {}",
            self.num_rows,
            plural(self.num_rows, "row", "rows"),
            self.columns.len(),
            plural(self.columns.len() as u64, "column", "columns"),
            HumanBytes(self.size_bytes),
        )
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `datasets list`: one line per dataset under a header, columns padded to their widest cell.
pub(crate) fn table(datasets: &[DatasetView]) -> String {
    let header = ["ID", "NAME", "FORMAT", "ROWS", "COLUMNS", "SIZE", "CREATED"];
    let rows: Vec<[String; 7]> = datasets
        .iter()
        .map(|d| {
            [
                d.id.clone(),
                d.name.clone(),
                d.format.clone(),
                d.num_rows.to_string(),
                d.columns.len().to_string(),
                HumanBytes(d.size_bytes).to_string(),
                d.created_at.clone(),
            ]
        })
        .collect();
    super::table::render(header, &rows)
}

/// `datasets show`: the fields, the columns, then the preview rows as JSON lines.
pub(crate) fn details(d: &DatasetView) -> String {
    let mut out = String::new();
    let fields = [
        ("id", d.id.clone()),
        ("name", d.name.clone()),
        ("format", d.format.clone()),
        ("source", d.source.clone()),
        ("rows", d.num_rows.to_string()),
        (
            "size",
            format!("{} ({} bytes)", HumanBytes(d.size_bytes), d.size_bytes),
        ),
        ("sha256", d.sha256.clone()),
        ("created", d.created_at.clone()),
    ];
    for (key, value) in fields {
        let _ = writeln!(out, "{key:<8} {value}");
    }
    let _ = writeln!(out, "columns:");
    let width = d.columns.iter().map(|c| c.name.chars().count()).max();
    for c in &d.columns {
        let _ = writeln!(
            out,
            "  {:<w$}  {}",
            c.name,
            c.r#type,
            w = width.unwrap_or(0)
        );
    }
    if let Some(rows) = &d.preview {
        let _ = writeln!(out, "preview (first {}):", rows.len());
        for row in rows {
            let _ = writeln!(out, "  {}", Value::Object(row.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dataset() -> DatasetView {
        serde_json::from_value(json!({
            "id": "0197a", "name": "symptoms.csv", "format": "csv",
            "columns": [{"name": "patient_summary", "type": "string"},
                        {"name": "age", "type": "integer"}],
            "num_rows": 1, "size_bytes": 2048, "sha256": "ab12", "source": "upload",
            "created_at": "2026-01-02T03:04:05Z", "a_future_field": true,
            "preview": [{"patient_summary": "cough", "age": 3}],
        }))
        .unwrap()
    }

    #[test]
    fn summaries_name_rows_columns_and_size() {
        let d = dataset();
        assert_eq!(d.summary(), "1 row, 2 columns, 2.00 KiB");
        assert_eq!(d.columns_line(), "patient_summary (string), age (integer)");
    }

    #[test]
    fn the_table_pads_each_column_to_its_widest_cell() {
        let mut long = dataset();
        long.id = "0197b-longer".into();
        long.name = "x.parquet".into();
        long.preview = None;
        assert_eq!(
            table(&[dataset(), long]),
            "ID            NAME          FORMAT  ROWS  COLUMNS  SIZE      CREATED\n\
             0197a         symptoms.csv  csv     1     2        2.00 KiB  2026-01-02T03:04:05Z\n\
             0197b-longer  x.parquet     csv     1     2        2.00 KiB  2026-01-02T03:04:05Z\n"
        );
        assert_eq!(
            table(&[]),
            "ID  NAME  FORMAT  ROWS  COLUMNS  SIZE  CREATED\n"
        );
    }

    #[test]
    fn details_list_fields_columns_and_preview_rows() {
        let text = details(&dataset());
        assert!(
            text.starts_with("id       0197a\nname     symptoms.csv\n"),
            "{text}"
        );
        assert!(text.contains("size     2.00 KiB (2048 bytes)\n"), "{text}");
        assert!(
            text.contains("columns:\n  patient_summary  string\n  age              integer\n"),
            "{text}"
        );
        assert!(
            text.ends_with("preview (first 1):\n  {\"patient_summary\":\"cough\",\"age\":3}\n"),
            "{text}"
        );
    }
}
