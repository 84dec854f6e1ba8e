//! `/v1/hf`, the Hub-compatible seed datastore, over plain HTTP (the Data Designer client's
//! own flow is in nemo_client.rs): a commit stored as a dataset of its repository, the
//! repository's info and tree, the file read back whole and by range with the sizes the tree
//! gives, the Hub's error headers, refused commits, and `seed_config.dataset` naming the file.

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app};

const CSV: &str = "city,population\nLyon,522000\nPorto,232000\nKyoto,1464000\n";

fn commit_body(path: &str, content: &[u8]) -> String {
    use base64::Engine as _;
    let header = json!({"key": "header", "value": {"summary": "Upload", "description": ""}});
    let file = json!({"key": "file", "value": {"path": path, "encoding": "base64",
        "content": base64::engine::general_purpose::STANDARD.encode(content)}});
    format!("{header}\n{file}\n")
}

async fn commit(app: &TestApp, repo: &str, body: String) -> (u16, Value) {
    app.post_raw(
        &format!("/v1/hf/api/datasets/{repo}/commit/main"),
        "application/x-ndjson",
        body,
    )
    .await
}

async fn a_committed_file_reads_back_as_it_was_sent(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, created) = app
        .post_raw(
            "/v1/hf/api/repos/create",
            "application/json",
            json!({"name": "cities", "organization": "default", "type": "dataset"}).to_string(),
        )
        .await;
    assert_eq!(
        (status, &created["url"]),
        (200, &json!("datasets/default/cities"))
    );
    // Nothing committed yet: the repository is not found, as the Hub says it.
    let resp = app
        .client
        .get(app.url("/v1/hf/api/datasets/default/cities"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["x-error-code"], "RepoNotFound");

    let (status, first) = commit(
        &app,
        "default/cities",
        commit_body("cities.csv", CSV.as_bytes()),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let sha = first["commitOid"].as_str().unwrap().to_owned();
    assert_eq!(sha.len(), 40);
    assert_eq!(
        first["commitUrl"],
        format!("datasets/default/cities/commit/{sha}")
    );
    // The same bytes again: nothing new, the same revision.
    let (_, again) = commit(
        &app,
        "default/cities",
        commit_body("cities.csv", CSV.as_bytes()),
    )
    .await;
    assert_eq!(again["commitOid"], sha);
    assert_eq!(app.db.count("select count(*) from datasets").await, 1);

    let (status, info) = app.get("/v1/hf/api/datasets/default/cities").await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["id"], "default/cities");
    assert_eq!(info["sha"], sha.as_str());
    assert_eq!(info["siblings"], json!([{"rfilename": "cities.csv"}]));
    let (status, tree) = app
        .get("/v1/hf/api/datasets/default/cities/tree/main")
        .await;
    assert_eq!(status, 200, "{tree}");
    assert_eq!(tree[0]["path"], "cities.csv");
    assert_eq!(tree[0]["size"], CSV.len());

    // The file: written out again from its rows, byte for byte what was sent here.
    let url = app.url("/v1/hf/datasets/default/cities/resolve/main/cities.csv");
    let resp = app.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-repo-commit"], sha.as_str());
    assert!(resp.headers().contains_key("etag"));
    assert_eq!(resp.text().await.unwrap(), CSV);
    let resp = app
        .client
        .get(&url)
        .header("range", "bytes=5-14")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(
        resp.headers()["content-range"],
        format!("bytes 5-14/{}", CSV.len()).as_str()
    );
    assert_eq!(resp.text().await.unwrap(), &CSV[5..15]);
    // At its revision too; another revision, file or repository is not found.
    let (status, _) = app
        .get(&format!(
            "/v1/hf/api/datasets/default/cities/revision/{sha}"
        ))
        .await;
    assert_eq!(status, 200);
    for (path, code) in [
        (
            "/v1/hf/api/datasets/default/cities/revision/v2",
            "RevisionNotFound",
        ),
        (
            "/v1/hf/datasets/default/cities/resolve/main/other.csv",
            "EntryNotFound",
        ),
        ("/v1/hf/api/datasets/default/towns", "RepoNotFound"),
        ("/v1/hf/api/datasets/cities", "RepoNotFound"),
    ] {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        assert_eq!(resp.headers()["x-error-code"], code, "{path}");
    }

    // A config names the file as the Data Designer service's seed shape.
    let mut config = json!({
        "columns": [
            {"name": "city", "column_type": "seed-dataset"},
            {"name": "label", "column_type": "expression", "expr": "{{ city }}!"}
        ],
        "seed_config": {"dataset": "default/cities/cities.csv",
            "sampling_strategy": "ordered", "selection_strategy": null}
    });
    let (status, preview) = app
        .post_raw(
            "/v1/preview",
            "application/json",
            json!({"config": config, "num_records": 3}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    let cities: Vec<&Value> = preview["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["values"]["city"])
        .collect();
    assert_eq!(
        cities,
        [&json!("Lyon"), &json!("Porto"), &json!("Kyoto")],
        "{preview}"
    );
    config["seed_config"]["dataset"] = json!("default/cities/towns.csv");
    let (status, err) = app
        .post_raw(
            "/v1/preview",
            "application/json",
            json!({"config": config, "num_records": 1}).to_string(),
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "seed_dataset_not_found", "{err}");
    assert!(err.to_string().contains("seed_config.dataset"), "{err}");
    app.stop().await;
}
backends!(datastore, a_committed_file_reads_back_as_it_was_sent);

/// Commits that are not inline dataset files are refused, naming what is wrong, and store
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_that_are_not_dataset_files_are_refused() {
    let app = spawn_app(Backend::Sqlite).await;
    let lfs = format!(
        "{}\n{}\n",
        json!({"key": "header", "value": {"summary": "x"}}),
        json!({"key": "lfsFile", "value": {"path": "big.parquet", "algo": "sha256", "oid": "ab"}})
    );
    let not_b64 = format!(
        "{}\n",
        json!({"key": "file", "value": {"path": "a.csv", "encoding": "base64", "content": "%%%"}})
    );
    for (body, code, says) in [
        (
            lfs,
            "invalid_request",
            "'lfsFile' operations are not served",
        ),
        (not_b64, "invalid_request", "content is not base64"),
        (
            commit_body("data/a.csv", b"a\n1\n"),
            "invalid_dataset",
            "folders",
        ),
        (
            commit_body("a.txt", b"a\n1\n"),
            "unsupported_dataset_format",
            ".csv",
        ),
        (commit_body("a.csv", b""), "invalid_dataset", "empty"),
        (
            format!("{}\n", json!({"key": "header", "value": {}})),
            "invalid_request",
            "no file",
        ),
        ("{not json\n".into(), "invalid_request", "commit line 1"),
    ] {
        let (status, err) = commit(&app, "default/x", body).await;
        assert_eq!(status, 422, "{err}");
        assert_eq!(err["error"]["code"], code, "{err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(says),
            "{err}"
        );
    }
    let (status, err) = commit(&app, "default/bad name", commit_body("a.csv", b"a\n1\n")).await;
    assert_eq!(status, 422, "{err}");
    let (status, err) = app
        .post_raw(
            "/v1/hf/api/repos/create",
            "application/json",
            json!({"name": "m", "type": "model"}).to_string(),
        )
        .await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (422, &json!("invalid_request"))
    );
    assert_eq!(app.db.count("select count(*) from datasets").await, 0);
    app.stop().await;
}

/// A commit is all or nothing (issue 49): two good files and a bad one store nothing, not the
/// two; and a commit of more than 1,000 files is refused before any is imported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_is_all_or_nothing() {
    use base64::Engine as _;
    let app = spawn_app(Backend::Sqlite).await;
    let file = |path: &str, content: &[u8]| {
        json!({"key": "file", "value": {"path": path, "encoding": "base64",
            "content": base64::engine::general_purpose::STANDARD.encode(content)}})
        .to_string()
    };
    let header = json!({"key": "header", "value": {"summary": "x"}}).to_string();
    let body = [
        header.clone(),
        file("a.csv", CSV.as_bytes()),
        file("b.csv", CSV.as_bytes()),
        file("c.parquet", b"not a parquet file"),
    ]
    .join("\n");
    let (status, err) = commit(&app, "default/x", body).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "invalid_dataset", "{err}");
    assert_eq!(app.db.count("select count(*) from datasets").await, 0);
    // The same two good files commit.
    let body = [
        header.clone(),
        file("a.csv", CSV.as_bytes()),
        file("b.csv", CSV.as_bytes()),
    ]
    .join("\n");
    let (status, ok) = commit(&app, "default/x", body).await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(app.db.count("select count(*) from datasets").await, 2);
    let many: Vec<String> = std::iter::once(header)
        .chain((0..1_001).map(|i| file(&format!("f{i}.csv"), b"a\n1\n")))
        .collect();
    let (status, err) = commit(&app, "default/y", many.join("\n")).await;
    assert_eq!(status, 422, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1000"),
        "{err}"
    );
    assert_eq!(app.db.count("select count(*) from datasets").await, 2);
    app.stop().await;
}

/// The Data Designer job list's query: what is not served is refused, naming the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_list_refuses_what_it_does_not_serve() {
    let app = spawn_app(Backend::Sqlite).await;
    for (query, says) in [
        ("sort=name", "'sort'"),
        ("filter%5Bstatus%5D=running", "'filter[status]'"),
        (
            "filter%5Bcreated_at%5D%5Bgte%5D=yesterday",
            "'filter[created_at][gte]'",
        ),
        ("filter%5Bowner%5D=x", "filter[owner]"),
        ("page=0", "'page'"),
    ] {
        let (status, err) = app.get(&format!("/v1/data-designer/jobs?{query}")).await;
        assert_eq!(status, 422, "{query}: {err}");
        assert_eq!(err["error"]["code"], "invalid_request", "{err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(says),
            "{query}: {err}"
        );
    }
    let (status, page) = app
        .get("/v1/data-designer/jobs?filter%5Bcreated_at%5D%5Bgte%5D=2025-01-01T00:00:00&sort=-created_at")
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["data"], json!([]));
    app.stop().await;
}
