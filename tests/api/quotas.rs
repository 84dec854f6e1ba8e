//! Bounds on what one upload may decode to relative to its size, and on what one key may
//! store (issue 49, Q7).

use serde_json::{Value, json};
use synthgate::config::Config;

use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app, spawn_app_with, status_json};
use crate::hostile_inputs::{dictionary_bomb, refused, upload};

/// A file whose rows decode to more than `datasets.max_decoded_ratio` (100) times its size is
/// refused once they pass 64 MiB, not at `datasets.max_dataset_bytes` (2 GiB): the probe's
/// 1.4 KB file wrote 2.08 GB first. Nothing is kept.
async fn decompression_ratio(backend: Backend) {
    let app = spawn_app(backend).await;
    // 500 rows of one 200 KB value, held once by the dictionary: 133 MB of rows (the
    // writer's byte arrays are stored as base64 text).
    let bomb = dictionary_bomb(500, 200_000);
    assert!(bomb.len() < 300_000, "{}", bomb.len());
    let (s, b) = upload(&app, "bomb.parquet", bomb).await;
    refused(s, &b, "datasets.max_decoded_ratio");
    let msg = b["error"]["message"].as_str().unwrap();
    assert!(msg.contains("100 times"), "{msg}");
    let resp = app
        .client
        .get(app.url("/v1/datasets"))
        .send()
        .await
        .unwrap();
    let (s, list) = status_json(resp).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["datasets"], json!([]), "{list}");
    // The same shape within the floor is read: 200 rows, 53 MB.
    let (s, d) = upload(&app, "ok.parquet", dictionary_bomb(200, 200_000)).await;
    assert_eq!(s, 201, "{d}");
    assert_eq!(d["num_rows"], 200, "{d}");
    app.stop().await;
}
crate::backends!(decompression_ratio_is_bounded, decompression_ratio);

const KEY_A: &str = "quota-a-0123456789abcdef";
const KEY_B: &str = "quota-b-0123456789abcdef";

async fn upload_as(app: &TestApp, key: &str, name: &str, body: String) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(&format!("/v1/datasets?name={name}")))
        .bearer_auth(key)
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(resp).await
}

async fn datasets_of(app: &TestApp, key: &str) -> Vec<Value> {
    let resp = app
        .client
        .get(app.url("/v1/datasets"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let (s, list) = status_json(resp).await;
    assert_eq!(s, 200, "{list}");
    list["datasets"].as_array().unwrap().clone()
}

/// A CSV of `rows` rows of about 1 KB each.
fn csv(rows: usize) -> String {
    let mut out = String::from("n,text\n");
    for i in 0..rows {
        out.push_str(&format!("{i},{}\n", "x".repeat(1000)));
    }
    out
}

fn quota_refused(status: u16, body: &Value, needle: &str) {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

/// Per-key quotas on stored datasets: rows and stored bytes of all of one key's datasets
/// together. Past either, an import is refused with `403 quota_exceeded` (naming the key),
/// nothing of it is kept, the other key is unaffected, and deleting a dataset makes room.
async fn per_key_quotas(backend: Backend) {
    let app = spawn_app_with(backend, |c: &mut Config| {
        c.auth = serde_json::from_value(json!({"api_keys": [
            {"name": "a", "key": KEY_A},
            {"name": "b", "key": KEY_B},
        ]}))
        .unwrap();
        c.datasets.max_bytes_per_key = 300_000;
        c.datasets.max_rows_per_key = 1_300;
    })
    .await;
    // 200 rows of 1 KB: 200 KB stored.
    let (s, first) = upload_as(&app, KEY_A, "one.csv", csv(200)).await;
    assert_eq!(s, 201, "{first}");
    // Another 200 KB passes 300 KB part way through: refused, nothing kept.
    let (s, b) = upload_as(&app, KEY_A, "two.csv", csv(200)).await;
    quota_refused(s, &b, "datasets.max_bytes_per_key");
    assert_eq!(datasets_of(&app, KEY_A).await.len(), 1);
    // The other key has its own quota.
    let (s, b) = upload_as(&app, KEY_B, "two.csv", csv(200)).await;
    assert_eq!(s, 201, "{b}");
    // Rows: 1,150 short rows (a few KB) fit beside nothing else, not beside the 200 stored.
    let short: String = std::iter::once("n\n".to_owned())
        .chain((0..1_150).map(|i| format!("{i}\n")))
        .collect();
    let (s, b) = upload_as(&app, KEY_A, "short.csv", short.clone()).await;
    quota_refused(s, &b, "datasets.max_rows_per_key");
    assert_eq!(datasets_of(&app, KEY_A).await.len(), 1);
    // Deleting the first dataset makes room; then the rows quota binds part way through.
    let id = first["id"].as_str().unwrap();
    let resp = app
        .client
        .delete(app.url(&format!("/v1/datasets/{id}")))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let (s, b) = upload_as(&app, KEY_A, "short.csv", short).await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = upload_as(&app, KEY_A, "three.csv", csv(200)).await;
    quota_refused(s, &b, "by row 151");
    app.stop().await;
}
crate::backends!(per_key_quotas_bound_stored_datasets, per_key_quotas);
