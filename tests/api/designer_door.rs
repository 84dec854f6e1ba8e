//! The Data Designer door's job list (the client's filters, searches, sorts and numbered pages,
//! applied by the database, one statement a page, on both backends) and its dataset archive
//! (served through the export cache).

use std::time::Duration;

use serde_json::{Value, json};

use crate::db::Backend;
use crate::helpers::{TestApp, sampler_config, spawn_app, spawn_app_with, status_json};

/// Submits a Data Designer job of one record and waits for it; its id.
async fn submit(app: &TestApp, name: Option<&str>, project: Option<&str>) -> String {
    let mut body = json!({"spec": {"num_records": 1, "config": sampler_config()["data_designer"]}});
    if let Some(name) = name {
        body["name"] = json!(name);
    }
    if let Some(project) = project {
        body["project"] = json!(project);
    }
    let resp = app
        .client
        .post(app.url("/v1/data-designer/jobs"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, job) = status_json(resp).await;
    assert_eq!(status, 200, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&id, Duration::from_secs(30)).await;
    id
}

/// The ids of a list query's page, and whether the client would ask for another.
async fn list(app: &TestApp, query: &str) -> (Vec<String>, bool) {
    let (status, page) = app.get(&format!("/v1/data-designer/jobs?{query}")).await;
    assert_eq!(status, 200, "{query}: {page}");
    let ids = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    let p = &page["pagination"];
    (ids, p["total_pages"] != p["page"])
}

async fn filters_searches_sorts_and_pages(backend: Backend) {
    let app = spawn_app(backend).await;
    let a = submit(&app, Some("alpha-eval"), Some("vision")).await;
    let b = submit(&app, Some("Beta-Train"), Some("speech")).await;
    let c = submit(&app, Some("gamma_eval 50%"), None).await;
    let d = submit(&app, None, Some("vision")).await;
    // A job submitted at /v1 shows the door's defaults, and is filtered by them.
    let (status, v1) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 1}))
        .await;
    assert_eq!(status, 202, "{v1}");
    let e = v1["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&e, Duration::from_secs(30)).await;

    let newest_first = vec![e.clone(), d.clone(), c.clone(), b.clone(), a.clone()];
    assert_eq!(list(&app, "").await, (newest_first.clone(), false));
    assert_eq!(list(&app, "sort=-created_at").await.0, newest_first);
    let oldest_first: Vec<String> = newest_first.iter().rev().cloned().collect();
    assert_eq!(list(&app, "sort=created_at").await.0, oldest_first);

    // Numbered pages, each one statement: two, two, then the last one.
    assert_eq!(
        list(&app, "page=1&page_size=2").await,
        (vec![e.clone(), d.clone()], true)
    );
    assert_eq!(
        list(&app, "page=2&page_size=2").await,
        (vec![c.clone(), b.clone()], true)
    );
    assert_eq!(
        list(&app, "page=3&page_size=2").await,
        (vec![a.clone()], false)
    );
    assert_eq!(list(&app, "page=4&page_size=2").await, (vec![], false));

    // Exact filters, the defaults included.
    assert_eq!(
        list(&app, "filter%5Bname%5D=alpha-eval").await.0,
        vec![a.clone()]
    );
    assert_eq!(
        list(&app, "filter%5Bname%5D=nemo-data-designer-job")
            .await
            .0,
        [e.clone(), d.clone()]
    );
    assert_eq!(
        list(&app, "filter%5Bproject%5D=vision").await.0,
        [d.clone(), a.clone()]
    );
    assert_eq!(
        list(&app, "filter%5Bproject%5D=nemo-data-designer").await.0,
        [e.clone(), c.clone()]
    );
    assert_eq!(
        list(&app, "filter%5Bnamespace%5D=default").await.0,
        newest_first
    );
    assert_eq!(
        list(&app, "filter%5Bnamespace%5D=other").await.0,
        Vec::<String>::new()
    );

    // Searches: any term, any case; `%` and `_` are themselves, not wildcards.
    assert_eq!(
        list(&app, "search%5Bname%5D=EVAL,train").await.0,
        [c.clone(), b.clone(), a.clone()]
    );
    assert_eq!(
        list(&app, "search%5Bname%5D=50%25").await.0,
        vec![c.clone()]
    );
    // `a_e` as a pattern would match alpha-eval's `a-e` too.
    assert_eq!(list(&app, "search%5Bname%5D=a_e").await.0, vec![c.clone()]);
    assert_eq!(
        list(&app, "search%5Bname%5D=eval&search%5Bproject%5D=VIS")
            .await
            .0,
        vec![a.clone()]
    );

    // Status and times.
    assert_eq!(
        list(&app, "filter%5Bstatus%5D=completed").await.0,
        newest_first
    );
    assert_eq!(
        list(&app, "filter%5Bstatus%5D=active").await.0,
        Vec::<String>::new()
    );
    let (_, job_c) = app.get(&format!("/v1/data-designer/jobs/{c}")).await;
    let created_c = job_c["created_at"].as_str().unwrap().to_owned();
    let enc = |t: &str| t.replace('+', "%2B");
    assert_eq!(
        list(
            &app,
            &format!("filter%5Bcreated_at%5D%5Blte%5D={}", enc(&created_c))
        )
        .await
        .0,
        [c.clone(), b.clone(), a.clone()]
    );
    assert_eq!(
        list(
            &app,
            &format!("filter%5Bcreated_at%5D%5Bgte%5D={}", enc(&created_c))
        )
        .await
        .0,
        [e.clone(), d.clone(), c.clone()]
    );

    // Each job was run to its end before the next was submitted, so they were last updated in
    // the order they were created.
    assert_eq!(list(&app, "sort=-updated_at").await.0, newest_first);
    assert_eq!(list(&app, "sort=updated_at").await.0, oldest_first);
    let (_, job_b) = app.get(&format!("/v1/data-designer/jobs/{b}")).await;
    let updated_b = job_b["updated_at"].as_str().unwrap().to_owned();
    assert_eq!(
        list(
            &app,
            &format!("filter%5Bupdated_at%5D%5Blte%5D={}", enc(&updated_b))
        )
        .await
        .0,
        [b.clone(), a.clone()]
    );
    assert_eq!(
        list(
            &app,
            &format!(
                "filter%5Bupdated_at%5D%5Bgte%5D={}&sort=updated_at",
                enc(&updated_b)
            )
        )
        .await
        .0,
        [b.clone(), c.clone(), d.clone(), e.clone()]
    );

    // What is not served is refused by name.
    let (status, err): (u16, Value) = app.get("/v1/data-designer/jobs?sort=name").await;
    assert_eq!(status, 422, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("-updated_at"),
        "{err}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_filters_searches_sorts_and_pages_in_the_database_sqlite() {
    filters_searches_sorts_and_pages(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_filters_searches_sorts_and_pages_in_the_database_postgres() {
    filters_searches_sorts_and_pages(Backend::Postgres).await;
}

/// The files the export cache holds in `dir`.
fn rendered_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("synthgate-render-")
        })
        .count()
}

/// A finished job's archive is written out once, in the export cache, and shares it with the
/// same records' Parquet export: three downloads, one file, the same bytes each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dataset_archive_is_written_once_through_the_export_cache() {
    let renders = tempfile::tempdir().unwrap();
    let dir = renders.path().to_owned();
    let app = spawn_app_with(Backend::Sqlite, |c| c.datasets.upload_dir = Some(dir)).await;
    let id = submit(&app, Some("archived"), None).await;
    assert_eq!(rendered_files(renders.path()), 0);
    let download = |path: String| {
        let app = &app;
        async move {
            let resp = app.client.get(app.url(&path)).send().await.unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            resp.bytes().await.unwrap()
        }
    };
    let archive = format!("/v1/data-designer/jobs/{id}/results/dataset/download");
    let first = download(archive.clone()).await;
    assert_eq!(rendered_files(renders.path()), 1);
    let second = download(archive).await;
    assert_eq!(first, second);
    let parquet = download(format!("/v1/jobs/{id}/records?format=parquet")).await;
    assert_eq!(rendered_files(renders.path()), 1, "one file for both");
    // The archive's one member is that Parquet file, byte for byte.
    let mut tar = tar::Archive::new(&first[..]);
    let mut entries = tar.entries().unwrap();
    let mut member = entries.next().unwrap().unwrap();
    assert_eq!(
        member.path().unwrap().to_str(),
        Some("dataset/part-0.parquet")
    );
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut member, &mut bytes).unwrap();
    assert_eq!(bytes, parquet);
    drop(member);
    assert!(entries.next().is_none());
    app.stop().await;
}
