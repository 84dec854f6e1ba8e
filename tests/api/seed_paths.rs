//! Uploads that record the path they were read from (issue 50 item 6): a `local` seed path is
//! matched against that path, so a glob reads only its own folder and two folders' files of
//! one name stay apart; uploads made by name only are still matched by name.

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app, status_json};

/// Uploads `body` as `name`, recorded as read from `path` when given; returns the status and
/// the body.
async fn upload(app: &TestApp, name: &str, path: Option<&str>, body: &str) -> (u16, Value) {
    let mut query = vec![("name", name)];
    if let Some(path) = path {
        query.push(("path", path));
    }
    let resp = app
        .client
        .post(app.url("/v1/datasets"))
        .query(&query)
        .body(body.to_owned())
        .send()
        .await
        .expect("upload");
    let (status, body) = status_json(resp).await;
    (status, body)
}

/// The values of column `column` of a previewed job seeded from `path` (`Err`: the error).
async fn seeded(app: &TestApp, path: &str, column: &str) -> Result<Vec<Value>, Value> {
    let body = json!({
        "config": {
            "seed_config": {"source": {"seed_type": "local", "path": path}},
            "columns": [{"name": "out", "column_type": "expression", "expr": format!("{{{{ {column} }}}}")}],
        },
        "num_records": 4,
    });
    let resp = app
        .client
        .post(app.url("/v1/preview"))
        .json(&body)
        .send()
        .await
        .expect("preview");
    let (status, body) = status_json(resp).await;
    if status != 200 {
        return Err(body);
    }
    Ok(body["records"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| r["values"]["out"].clone())
        .collect())
}

backends!(
    seed_paths,
    globs_and_paths_match_the_path_an_upload_came_from
);
async fn globs_and_paths_match_the_path_an_upload_came_from(backend: Backend) {
    let app = spawn_app(backend).await;
    // An upload by name only, as before paths were recorded.
    assert_eq!(
        upload(&app, "batch_00000.csv", None, "v\nold\n").await.0,
        201
    );
    // Two pipelines' artifacts, every batch named alike; the other folder's is newer.
    for (name, path, body) in [
        ("batch_00000.csv", "a/batch_00000.csv", "v\na0\n"),
        ("batch_00001.csv", "./a/batch_00001.csv", "v\na1\n"),
        ("batch_00000.csv", r"b\batch_00000.csv", "w\nb0\n"),
    ] {
        let (status, dataset) = upload(&app, name, Some(path), body).await;
        assert_eq!(status, 201, "{dataset}");
        assert_eq!(
            dataset["path"],
            path.replace('\\', "/").trim_start_matches("./")
        );
    }

    // A glob reads its folder only, in path order; the newer `b/` file of the same name and
    // the name-only upload are not read.
    assert_eq!(
        seeded(&app, "a/*.csv", "v").await.unwrap(),
        ["a0", "a1", "a0", "a1"]
    );
    assert_eq!(
        seeded(&app, "./a\\*.csv", "v").await.unwrap(),
        ["a0", "a1", "a0", "a1"]
    );
    assert_eq!(seeded(&app, "b/*.csv", "w").await.unwrap(), ["b0"; 4]);
    // A path names its own file.
    assert_eq!(
        seeded(&app, "a/batch_00000.csv", "v").await.unwrap(),
        ["a0"; 4]
    );
    assert_eq!(
        seeded(&app, "b/batch_00000.csv", "w").await.unwrap(),
        ["b0"; 4]
    );
    // No upload came from `c/`: the name-only upload matches by name, as before.
    assert_eq!(
        seeded(&app, "c/batch_00000.csv", "v").await.unwrap(),
        ["old"; 4]
    );
    // A bare name prefers the name-only upload...
    assert_eq!(
        seeded(&app, "batch_00000.csv", "v").await.unwrap(),
        ["old"; 4]
    );
    // ...and finds a file uploaded from a folder when there is none.
    assert_eq!(
        seeded(&app, "batch_00001.csv", "v").await.unwrap(),
        ["a1"; 4]
    );
    // A folder nothing came from, with no name-only upload of that name either.
    let err = seeded(&app, "c/batch_00001.csv", "v").await.unwrap_err();
    assert_eq!(err["error"]["code"], "seed_dataset_not_found", "{err}");

    // The same file from the same path is stored once; from another path, again.
    let (status, first) = upload(
        &app,
        "batch_00000.csv",
        Some("a/batch_00000.csv"),
        "v\na0\n",
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let (status, _) = upload(
        &app,
        "batch_00000.csv",
        Some("d/batch_00000.csv"),
        "v\na0\n",
    )
    .await;
    assert_eq!(status, 201);
    // The listing filters by path.
    let (status, list) = app.get("/v1/datasets?path=./a/batch_00000.csv").await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<&Value> = list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["id"])
        .collect();
    assert_eq!(ids, [&first["id"]], "{list}");

    // A path must end in the name, and be a path.
    for (name, path) in [("a.csv", "data/b.csv"), ("a.csv", "data/a.csv\u{7}")] {
        let (status, body) = upload(&app, name, Some(path), "v\n1\n").await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("'path'"),
            "{body}"
        );
    }
    let long = format!("{}a.csv", "d/".repeat(2100));
    assert_eq!(upload(&app, "a.csv", Some(&long), "v\n1\n").await.0, 422);
    app.stop().await;
}
