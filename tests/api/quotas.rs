//! Bounds on what one upload may decode to relative to its size, and on what one key may
//! store (issue 49, Q7).

use serde_json::json;

use crate::db::Backend;
use crate::helpers::{spawn_app, status_json};
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
