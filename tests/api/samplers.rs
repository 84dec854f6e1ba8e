//! DataDesigner's person, scipy and bernoulli_mixture samplers and sampler constraints through
//! the job API, on both backends: a `person` sampler reading a managed-dataset Parquet file
//! the test writes (in DataDesigner's layout, `<managed assets>/datasets/<locale>.parquet`),
//! and the 422s a missing file and bad constraints get.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::spawn_app_with;

/// People of the test dataset: (first, last, sex, age, city, region).
const PEOPLE: &[(&str, &str, &str, i64, &str, &str)] = &[
    ("Ada", "Lovelace", "Female", 36, "Austin", "TX"),
    ("Alan", "Turing", "Male", 41, "Boston", "MA"),
    ("Grace", "Hopper", "Female", 85, "Austin", "TX"),
    ("Kid", "Young", "Male", 9, "Austin", "TX"),
];

/// Writes `datasets/en_US.parquet` under `dir` with DataDesigner's column names (also used
/// by the conformance suite, whose `person` cases need a managed dataset).
pub(crate) fn write_dataset(dir: &Path) {
    std::fs::create_dir_all(dir.join("datasets")).unwrap();
    let schema = parse_message_type(
        "message schema {
            REQUIRED BYTE_ARRAY first_name (UTF8);
            REQUIRED BYTE_ARRAY last_name (UTF8);
            REQUIRED BYTE_ARRAY sex (UTF8);
            REQUIRED INT64 age;
            REQUIRED BYTE_ARRAY city (UTF8);
            REQUIRED BYTE_ARRAY region (UTF8);
            REQUIRED BYTE_ARRAY persona (UTF8);
            REQUIRED group openness {
                REQUIRED INT64 t_score;
                REQUIRED BYTE_ARRAY label (UTF8);
                REQUIRED BYTE_ARRAY description (UTF8);
            }
            REQUIRED BYTE_ARRAY postcode (UTF8);
        }",
    )
    .unwrap();
    let file = File::create(dir.join("datasets/en_US.parquet")).unwrap();
    let props = Arc::new(WriterProperties::builder().build());
    let mut w = SerializedFileWriter::new(file, Arc::new(schema), props).unwrap();
    let mut rg = w.next_row_group().unwrap();
    let texts: [Vec<String>; 6] = [
        PEOPLE.iter().map(|p| p.0.to_owned()).collect(),
        PEOPLE.iter().map(|p| p.1.to_owned()).collect(),
        PEOPLE.iter().map(|p| p.2.to_owned()).collect(),
        Vec::new(),
        PEOPLE.iter().map(|p| p.4.to_owned()).collect(),
        PEOPLE.iter().map(|p| p.5.to_owned()).collect(),
    ];
    let mut i = 0;
    while let Some(mut col) = rg.next_column().unwrap() {
        // The Big Five traits are structs in the persona files: `openness` is leaves 7 to 9.
        if i == 3 || i == 7 {
            let numbers: Vec<i64> = PEOPLE
                .iter()
                .map(|p| if i == 3 { p.3 } else { 39 + p.3 % 7 })
                .collect();
            col.typed::<Int64Type>()
                .write_batch(&numbers, None, None)
                .unwrap();
        } else if i >= 8 {
            let values: Vec<ByteArray> = PEOPLE
                .iter()
                .map(|p| {
                    // Leaf 10: an Austin ZIP code.
                    let text = if i == 10 {
                        "78701".to_owned()
                    } else if i == 8 {
                        "average".to_owned()
                    } else {
                        format!("{} is curious", p.0)
                    };
                    ByteArray::from(text.into_bytes())
                })
                .collect();
            col.typed::<ByteArrayType>()
                .write_batch(&values, None, None)
                .unwrap();
        } else {
            let values: Vec<ByteArray> = if i == 6 {
                PEOPLE
                    .iter()
                    .map(|p| ByteArray::from(format!("{} likes maths", p.0).as_str()))
                    .collect()
            } else {
                texts[i]
                    .iter()
                    .map(|s| ByteArray::from(s.as_str()))
                    .collect()
            };
            col.typed::<ByteArrayType>()
                .write_batch(&values, None, None)
                .unwrap();
        }
        col.close().unwrap();
        i += 1;
    }
    rg.close().unwrap();
    w.close().unwrap();
}

fn sampler(name: &str, sampler_type: &str, params: Value) -> Value {
    json!({"name": name, "column_type": "sampler", "sampler_type": sampler_type, "params": params})
}

backends!(person_from_managed_dataset, person_dataset);

/// A job of every new sampler type and a constraint: the person comes from the file and obeys
/// its filters, its fields reach Jinja, and the constrained values hold.
async fn person_dataset(backend: Backend) {
    let assets = tempfile::tempdir().unwrap();
    write_dataset(assets.path());
    let dir = assets.path().to_owned();
    let app = spawn_app_with(backend, |c| c.samplers.managed_assets_dir = Some(dir)).await;
    let config = json!({
        "columns": [
            sampler("person", "person", json!({"locale": "en_US", "city": "Austin",
                "age_range": [18, 90], "with_synthetic_personas": true})),
            {"name": "intro", "column_type": "expression",
             "expr": "{{ person.first_name }} from {{ person.state }}"},
            {"name": "trait", "column_type": "expression",
             "expr": "{{ person.openness.description }} ({{ person.openness.label }})"},
            sampler("fake", "person_from_faker", json!({"locale": "de_DE", "sex": "Male"})),
            sampler("score", "scipy", json!({"dist_name": "beta",
                "dist_params": {"a": 2, "b": 5}, "decimal_places": 3})),
            sampler("spend", "bernoulli_mixture", json!({"p": 0.5, "dist_name": "lognorm",
                "dist_params": {"s": 1, "scale": 20}})),
        ],
        "constraints": [
            {"target_column": "score", "operator": "lt", "rhs": 0.5,
             "constraint_type": "scalar_inequality"}
        ],
    });
    let (status, job) = app
        .create_job(
            &json!({"config": {"data_designer": config, "library_version": "0.9.6"},
            "num_records": 20, "seed": 7}),
        )
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(id).await;
    assert_eq!(records.len(), 20);
    let mut austin_phones = 0;
    for r in &records {
        let v = &r["values"];
        let p = &v["person"];
        let first = p["first_name"].as_str().unwrap();
        assert!(["Ada", "Grace"].contains(&first), "filters: {p}");
        assert_eq!(p["city"], "Austin");
        assert_eq!(p["state"], "TX", "en_US region is returned as state");
        assert!(p.get("region").is_none());
        assert_eq!(p["locale"], "en_US");
        assert_eq!(p["persona"], format!("{first} likes maths"));
        assert!(p["email_address"].as_str().unwrap().contains('@'), "{p}");
        assert!(p["birth_date"].is_string());
        assert_eq!(v["intro"], format!("{first} from TX"));
        // Struct columns are objects, as in DataDesigner's rows.
        assert_eq!(p["openness"]["label"], "average", "{p}");
        assert!(p["openness"]["t_score"].is_i64(), "{p}");
        assert_eq!(v["trait"], format!("{first} is curious (average)"));
        // en_US adults get a synthetic SSN of their state (TX: 449 to 467 before 2011).
        let ssn = p["national_id"].as_str().unwrap();
        let parts: Vec<u32> = ssn.split('-').map(|x| x.parse().unwrap()).collect();
        assert_eq!(ssn.len(), 11, "{ssn}");
        assert!((449..=467).contains(&parts[0]), "{ssn}");
        let phone = p["phone_number"].as_str().unwrap();
        assert_eq!(phone.len(), 12, "{phone}");
        if phone.starts_with("512-") || phone.starts_with("737-") {
            austin_phones += 1;
        }
        assert_eq!(v["fake"]["sex"], "Male");
        assert_eq!(v["fake"]["locale"], "de_DE");
        let score = v["score"].as_f64().unwrap();
        assert!((0.0..0.5).contains(&score), "constraint: {score}");
        assert!(v["spend"].as_f64().unwrap() >= 0.0);
    }
    // Area codes come from the postcode (Austin: 512, 737) but for DataDesigner's 10% drawn
    // anywhere.
    assert!(
        austin_phones >= 14,
        "{austin_phones} of 20 phones from Austin"
    );
    app.stop().await;
}

backends!(person_refused_without_its_file, missing_file);

/// Without the dataset file, submit names the file and says how to install it; a bad
/// constraint names its field.
async fn missing_file(backend: Backend) {
    let assets = tempfile::tempdir().unwrap();
    let dir = assets.path().to_owned();
    let app = spawn_app_with(backend, |c| c.samplers.managed_assets_dir = Some(dir)).await;
    let config = json!({"columns": [sampler("p", "person", json!({"locale": "ja_JP"}))]});
    let (status, body) = app
        .create_job(&json!({"config": config, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_sampler_params");
    let msg = body["error"]["message"].as_str().unwrap();
    let file = assets.path().join("datasets/ja_JP.parquet");
    assert!(msg.contains(&file.display().to_string()), "{msg}");
    assert!(
        msg.contains("data-designer download personas --locale ja_JP"),
        "{msg}"
    );

    let config = json!({
        "columns": [sampler("x", "uniform", json!({"low": 0, "high": 1}))],
        "constraints": [{"target_column": "y", "operator": "lt", "rhs": 1}],
    });
    let (status, body) = app
        .create_job(&json!({"config": config, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_constraint");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("constraints[0].target_column"), "{msg}");
    app.stop().await;
}
