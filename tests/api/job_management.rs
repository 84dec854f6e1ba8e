//! What a batch user manages jobs with (issue 31): names, server-side filters on
//! `GET /v1/jobs`, the error file, exports that resume (`ETag`, `Range`), and retention.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm, sampler_config, spawn_app, status_json};

const WAIT: Duration = Duration::from_secs(60);

async fn submit(app: &TestApp, body: Value) -> String {
    let (status, job) = app.create_job(&body).await;
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// The ids of `GET /v1/jobs?{query}`, in order.
async fn listed(app: &TestApp, query: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/v1/jobs?{query}")).await;
    assert_eq!(status, 200, "{query}: {page}");
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn jobs_are_found_by_name_status_metadata_and_time(backend: Backend) {
    let app = spawn_app(backend).await;
    let a = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 2, "name": "nightly run",
               "metadata": {"team": "search", "round": 3}}),
    )
    .await;
    app.wait_for_job(&a, WAIT).await;
    // Ids carry their creation time to the millisecond: the next job is created after this.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let between = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let b = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 2, "name": "nightly run",
               "metadata": {"team": "ads", "round": 3}}),
    )
    .await;
    app.wait_for_job(&b, WAIT).await;
    // A YAML config file names its job in the query.
    // (JSON is YAML.)
    let yaml = sampler_config().to_string();
    let (status, c) = app
        .post_raw(
            "/v1/jobs?num_records=1&name=from%20yaml",
            "application/yaml",
            yaml,
        )
        .await;
    assert_eq!(status, 202, "{c}");
    assert_eq!(c["name"], "from yaml");
    let c = c["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&c, WAIT).await;

    let (_, job) = app.get(&format!("/v1/jobs/{a}")).await;
    assert_eq!(job["name"], "nightly run");
    assert_eq!(listed(&app, "").await, ids(&[&c, &b, &a]));
    assert_eq!(listed(&app, "name=nightly%20run").await, ids(&[&b, &a]));
    assert_eq!(listed(&app, "name=nightly").await, Vec::<String>::new());
    assert_eq!(listed(&app, "status=completed").await, ids(&[&c, &b, &a]));
    assert_eq!(
        listed(&app, "status=queued,running").await,
        Vec::<String>::new()
    );
    let meta = |m: &str| format!("metadata={}", urlencoding(m));
    assert_eq!(
        listed(&app, &meta(r#"{"team":"search"}"#)).await,
        ids(&[&a])
    );
    assert_eq!(listed(&app, &meta(r#"{"round":3}"#)).await, ids(&[&b, &a]));
    assert_eq!(
        listed(&app, &meta(r#"{"round":3,"team":"ads"}"#)).await,
        ids(&[&b])
    );
    assert_eq!(
        listed(&app, &meta(r#"{"round":"3"}"#)).await,
        Vec::<String>::new(),
        "a string is not the number"
    );
    let t = between.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let t = urlencoding(&t);
    assert_eq!(
        listed(&app, &format!("created_after={t}")).await,
        ids(&[&c, &b])
    );
    assert_eq!(
        listed(&app, &format!("created_before={t}")).await,
        ids(&[&a])
    );
    // Filters and pages go together: a cursor continues the filtered listing.
    let (_, page) = app.get("/v1/jobs?name=nightly%20run&limit=1").await;
    assert_eq!(page["jobs"][0]["id"], b.as_str());
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = listed(&app, &format!("name=nightly%20run&limit=1&cursor={cursor}")).await;
    assert_eq!(next, ids(&[&a]));

    // Bad filters name their parameter.
    for (query, needle) in [
        ("status=done", "'status'"),
        ("metadata=%5B1%5D", "'metadata'"),
        ("metadata=%7B%22a%22%3A%7B%7D%7D", "'metadata'"),
        // A key named twice (serde_json kept the last, silently: issue 49).
        (
            "metadata=%7B%22team%22%3A%22a%22%2C%22team%22%3A%22b%22%7D",
            "key named twice: \"team\"",
        ),
        ("created_after=yesterday", "'created_after'"),
    ] {
        let (status, err) = app.get(&format!("/v1/jobs?{query}")).await;
        assert_eq!(status, 422, "{query}: {err}");
        assert_eq!(err["error"]["code"], "invalid_request", "{query}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{query}: {message}");
    }
    // Bad names are refused, and nothing is stored.
    for name in [
        json!(""),
        json!("  "),
        json!("a\nb"),
        json!("x".repeat(257)),
        json!(5),
    ] {
        let (status, err) = app
            .create_job(&json!({"config": sampler_config(), "num_records": 1, "name": name}))
            .await;
        assert_eq!(status, 422, "{name}: {err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains("name"),
            "{err}"
        );
    }
    assert_eq!(listed(&app, "").await.len(), 3);
    app.stop().await;
}
backends!(find_jobs, jobs_are_found_by_name_status_metadata_and_time);

fn ids(ids: &[&String]) -> Vec<String> {
    ids.iter().map(|s| (*s).clone()).collect()
}

/// Percent-encodes a query value.
fn urlencoding(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = app.client.get(app.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn a_finished_jobs_export_resumes(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 300}),
    )
    .await;
    app.wait_for_job(&id, WAIT).await;
    for format in ["jsonl", "csv", "parquet"] {
        let path = format!("/v1/jobs/{id}/records?format={format}");
        let full = get(&app, &path, &[]).await;
        assert_eq!(full.status(), 200);
        let etag = full.headers()["etag"].to_str().unwrap().to_owned();
        assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
        assert_eq!(full.headers()["accept-ranges"], "bytes");
        let full = full.bytes().await.unwrap();
        assert!(full.len() > 1000, "{format}: {} bytes", full.len());

        // A resumed download: the rest, from where it broke off.
        let cut = full.len() / 3;
        let range = format!("bytes={cut}-");
        let rest = get(&app, &path, &[("range", &range), ("if-range", &etag)]).await;
        assert_eq!(rest.status(), 206, "{format}");
        assert_eq!(
            rest.headers()["content-range"],
            format!("bytes {cut}-{}/{}", full.len() - 1, full.len()).as_str()
        );
        assert_eq!(rest.headers()["etag"], etag.as_str());
        assert_eq!(rest.bytes().await.unwrap(), full[cut..], "{format}");
        // A closed range, and the last bytes (where Parquet keeps its footer).
        let part = get(&app, &path, &[("range", "bytes=10-19")]).await;
        assert_eq!(part.status(), 206);
        assert_eq!(part.bytes().await.unwrap(), full[10..20]);
        let tail = get(&app, &path, &[("range", "bytes=-8")]).await;
        assert_eq!(tail.bytes().await.unwrap(), full[full.len() - 8..]);
        // Past the end: 416 with the length.
        let past = format!("bytes={}-", full.len() + 5);
        let beyond = get(&app, &path, &[("range", &past)]).await;
        assert_eq!(beyond.status(), 416, "{format}");
        assert_eq!(
            beyond.headers()["content-range"],
            format!("bytes */{}", full.len()).as_str(),
            "{format}"
        );
        // Now written out: a full download has its length.
        let again = get(&app, &path, &[]).await;
        assert_eq!(again.status(), 200);
        assert_eq!(
            again.headers()["content-length"],
            full.len().to_string().as_str()
        );
        assert_eq!(again.bytes().await.unwrap(), full);
        // Another validator: the client's copy is stale, so all of it.
        let stale = get(&app, &path, &[("range", &range), ("if-range", "\"old\"")]).await;
        assert_eq!(stale.status(), 200);
        assert_eq!(stale.bytes().await.unwrap(), full);
        // The same validator: nothing to send.
        let same = get(&app, &path, &[("if-none-match", &etag)]).await;
        assert_eq!(same.status(), 304);
    }
    // Each format, and the error file, has its own validator.
    let mut tags = std::collections::BTreeSet::new();
    for q in [
        "format=jsonl",
        "format=csv",
        "format=jsonl&include_traces=true",
        "format=jsonl&status=failed",
    ] {
        let r = get(&app, &format!("/v1/jobs/{id}/records?{q}"), &[]).await;
        tags.insert(r.headers()["etag"].to_str().unwrap().to_owned());
    }
    assert_eq!(tags.len(), 4, "{tags:?}");
    app.stop().await;
}
backends!(export_ranges, a_finished_jobs_export_resumes);

/// Round 3: the JSONL export of a job whose every record failed is empty, and a `Range` on it
/// got a `206` claiming a byte it does not have. No range of zero bytes can be satisfied:
/// `416` with `Content-Range: bytes */0`; without a range, `200` and no bytes.
async fn a_range_on_an_empty_export_is_unsatisfiable(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"status": 400, "body": {"error": {"message": "refused"}}}}]}),
        |_| {},
    )
    .await;
    let config = json!({"columns": [{"name": "a", "column_type": "llm-text",
        "model_alias": "writer", "prompt": "Say hi."}]});
    let id = submit(
        &app,
        json!({"config": config, "num_records": 2,
               "run_config": {"disable_early_shutdown": true}}),
    )
    .await;
    let done = app.wait_for_job(&id, WAIT).await;
    assert_eq!(done["counts"]["failed"], 2, "{done}");
    let path = format!("/v1/jobs/{id}/records?format=jsonl");
    let whole = get(&app, &path, &[]).await;
    assert_eq!(whole.status(), 200);
    assert!(whole.bytes().await.unwrap().is_empty());
    for range in ["bytes=0-", "bytes=0-0", "bytes=-5"] {
        let r = get(&app, &path, &[("range", range)]).await;
        assert_eq!(r.status(), 416, "{range}: {:?}", r.headers());
        assert_eq!(
            r.headers()
                .get("content-range")
                .and_then(|v| v.to_str().ok()),
            Some("bytes */0"),
            "{range}: {:?}",
            r.headers()
        );
    }
    app.stop().await;
}
backends!(
    empty_export_range,
    a_range_on_an_empty_export_is_unsatisfiable
);

async fn failed_records_come_as_an_error_file(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [
            {"when": {"user_contains": "pick b"}, "reply": {"status": 400,
             "body": {"error": {"message": "refused"}}}},
            {"reply": {"text": "fine"}}
        ]}),
        |_| {},
    )
    .await;
    let config = json!({"columns": [
        {"name": "k", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"]}},
        {"name": "say", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "pick {{ k }}", "with_trace": "all_messages"}
    ]});
    let id = submit(
        &app,
        json!({"config": config, "num_records": 40, "seed": 7,
               "run_config": {"disable_early_shutdown": true}}),
    )
    .await;
    let job = app.wait_for_job(&id, WAIT).await;
    let failed = job["counts"]["failed"].as_u64().unwrap();
    assert!(failed > 0 && failed < 40, "{job}");

    let resp = get(
        &app,
        &format!("/v1/jobs/{id}/records?format=jsonl&status=failed&include_traces=true"),
        &[],
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains(&format!("{id}-errors.jsonl"))
    );
    let text = resp.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, failed);
    let (_, page) = app
        .get(&format!("/v1/jobs/{id}/records?status=failed&limit=100"))
        .await;
    let ids: Vec<&Value> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(lines.iter().map(|l| &l["id"]).collect::<Vec<_>>(), ids);
    for line in &lines {
        assert_eq!(line["values"]["k"], "b", "{line}");
        assert!(line["error"]["code"].is_string(), "{line}");
        assert_eq!(line["error"]["column"], "say", "{line}");
        assert!(
            line["index"].is_u64() && line["attempts"].is_u64(),
            "{line}"
        );
        // The refused request is kept in the trace: the rendered prompt the model was sent.
        let trace = &line["values"]["say__trace"];
        assert_eq!(trace[0]["role"], "user", "{line}");
        assert!(trace.to_string().contains("pick b"), "{line}");
    }
    // The error file is JSONL only; other statuses have no export.
    for query in ["format=csv&status=failed", "format=jsonl&status=pending"] {
        let (status, err) = app.get(&format!("/v1/jobs/{id}/records?{query}")).await;
        assert_eq!(status, 422, "{query}: {err}");
    }
    app.stop().await;
}
backends!(error_file, failed_records_come_as_an_error_file);

async fn finished_jobs_past_retention_are_deleted(backend: Backend) {
    let app = spawn_app(backend).await;
    let old = submit(&app, json!({"config": sampler_config(), "num_records": 3})).await;
    let new = submit(&app, json!({"config": sampler_config(), "num_records": 3})).await;
    app.wait_for_job(&old, WAIT).await;
    app.wait_for_job(&new, WAIT).await;
    // `old` finished 3 days ago; `new` just now.
    app.db
        .execute(match backend {
            Backend::Sqlite => {
                "update jobs set finished_at = finished_at - 259200000000 \
                 where id = (select id from jobs order by id limit 1)"
            }
            Backend::Postgres => {
                "update jobs set finished_at = finished_at - interval '3 days' \
                 where id = (select id from jobs order by id limit 1)"
            }
        })
        .await;
    let records_before = app.db.count("select count(*) from records").await;
    assert_eq!(records_before, 6);
    // The sweep runs at start.
    let app = app
        .restart(|c| c.database.job_retention_days = Some(2))
        .await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (status, _) = app.get(&format!("/v1/jobs/{old}")).await;
        if status == 404 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{old} not deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, job) = app.get(&format!("/v1/jobs/{new}")).await;
    assert_eq!((status, &job["status"]), (200, &json!("completed")));
    assert_eq!(app.db.count("select count(*) from records").await, 3);
    assert_eq!(
        app.db.count("select count(*) from job_record_counts").await,
        1
    );
    let (_, metrics) = app.get_text("/metrics").await;
    assert!(
        metrics.contains("synthgate_jobs_expired_total 1"),
        "{metrics}"
    );
    app.stop().await;
}
backends!(retention, finished_jobs_past_retention_are_deleted);

async fn a_running_jobs_export_has_no_validator(backend: Backend) {
    let app = crate::helpers::spawn_slow_worker_app(backend).await;
    let id = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 500}),
    )
    .await;
    let resp = get(
        &app,
        &format!("/v1/jobs/{id}/records?format=jsonl"),
        &[("range", "bytes=0-9")],
    )
    .await;
    // Ranges are ignored while the export can still change: the whole export, streamed.
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("etag").is_none());
    assert_eq!(resp.headers()["accept-ranges"], "none");
    let (status, _) = status_json(
        app.client
            .post(app.url(&format!("/v1/jobs/{id}/cancel")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    app.stop().await;
}
backends!(running_export, a_running_jobs_export_has_no_validator);

/// Runs the `synthgate` binary with `args` against `app`; returns exit code, stdout, stderr.
async fn cli(app: &TestApp, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_synthgate"));
    cmd.args(args)
        .args(["--url", &format!("http://{}", app.addr)])
        .env("NO_COLOR", "1");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

async fn the_cli_manages_jobs(backend: Backend) {
    let app = spawn_app(backend).await;
    let named = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 4, "name": "cli job"}),
    )
    .await;
    let other = submit(&app, json!({"config": sampler_config(), "num_records": 2})).await;

    let (code, _, stderr) = cli(&app, &["jobs", "wait", &named]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("completed"), "{stderr}");
    app.wait_for_job(&other, WAIT).await;

    let (code, table, stderr) = cli(&app, &["jobs", "list", "--name", "cli job"]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("STATUS"),
        "{table}"
    );
    assert!(
        lines[1].starts_with(&named) && lines[1].contains("cli job"),
        "{table}"
    );
    assert!(
        lines[1].contains("completed") && lines[1].contains("4/4"),
        "{table}"
    );
    let (_, table, _) = cli(&app, &["jobs", "list", "--status", "completed"]).await;
    assert_eq!(table.lines().count(), 3, "{table}");

    let (code, shown, _) = cli(&app, &["jobs", "show", &named]).await;
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        (&shown["id"], &shown["name"]),
        (&json!(named), &json!("cli job"))
    );

    // No record failed: the error file is empty; the dataset has the 4.
    let (code, errors, stderr) = cli(&app, &["records", &named, "--status", "failed"]).await;
    assert_eq!((code, errors.as_str()), (0, ""), "{stderr}");
    let (_, data, _) = cli(&app, &["records", &named]).await;
    assert_eq!(data.lines().count(), 4, "{data}");

    let (code, _, stderr) = cli(&app, &["jobs", "delete", &named]).await;
    assert_eq!(code, 0, "{stderr}");
    let (status, _) = app.get(&format!("/v1/jobs/{named}")).await;
    assert_eq!(status, 404);
    // Gone: the server's code is printed, and the exit code says the request failed.
    let (code, _, stderr) = cli(&app, &["jobs", "show", &named]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("job_not_found"), "{stderr}");
    app.stop().await;
}
backends!(cli_jobs, the_cli_manages_jobs);

async fn records_waiting_on_a_model_are_told_apart(backend: Backend) {
    // The model answers once released, so the records wait as long as the test looks.
    let (app, mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "slow", "hold": true}}]}),
        |_| {},
    )
    .await;
    let config = json!({"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 1, "high": 9}},
        {"name": "say", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Say {{ n }}."}
    ]});
    let id = submit(&app, json!({"config": config, "num_records": 6})).await;
    let deadline = std::time::Instant::now() + WAIT;
    let seen = loop {
        let (_, job) = app.get(&format!("/v1/jobs/{id}")).await;
        let c = &job["counts"];
        let waiting = c["waiting_for_model"].as_u64().unwrap();
        assert!(waiting <= c["in_progress"].as_u64().unwrap(), "{c}");
        assert_eq!(c["total"], 6, "not part of the total: {c}");
        if waiting > 0 {
            break job;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no record seen waiting: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(seen["status"], "running", "{seen}");
    // The list shows the same.
    let (_, page) = app.get("/v1/jobs").await;
    assert!(
        page["jobs"][0]["counts"]["waiting_for_model"].is_u64(),
        "{page}"
    );
    mock.release();
    let done = app.wait_for_job(&id, WAIT).await;
    assert_eq!(done["counts"]["waiting_for_model"], 0, "{done}");
    app.stop().await;
}
backends!(model_waits, records_waiting_on_a_model_are_told_apart);

async fn the_cli_resumes_a_broken_off_download(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = submit(
        &app,
        json!({"config": sampler_config(), "num_records": 200}),
    )
    .await;
    app.wait_for_job(&id, WAIT).await;
    let full = get(&app, &format!("/v1/jobs/{id}/records?format=csv"), &[]).await;
    let etag = full.headers()["etag"].to_str().unwrap().to_owned();
    let full = full.bytes().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data.csv");
    let part = dir.path().join("data.csv.part");
    let tag = dir.path().join("data.csv.part.etag");
    let download = || {
        let out = out.to_str().unwrap().to_owned();
        let id = id.clone();
        let app = &app;
        async move { cli(app, &["records", &id, "--format", "csv", "-o", &out]).await }
    };

    // A download that broke off after a third, under the export's ETag: the rest is fetched.
    std::fs::write(&part, &full[..full.len() / 3]).unwrap();
    std::fs::write(&tag, &etag).unwrap();
    let (code, _, stderr) = download().await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), full);
    assert!(!part.exists() && !tag.exists());

    // A part of another export (another ETag): the whole export again, not appended.
    std::fs::remove_file(&out).unwrap();
    std::fs::write(&part, b"something else entirely").unwrap();
    std::fs::write(&tag, "\"another\"").unwrap();
    let (code, _, stderr) = download().await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("resuming"), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), full);

    // A part longer than the export (416): the whole export again.
    std::fs::remove_file(&out).unwrap();
    std::fs::write(&part, vec![b'x'; full.len() + 10]).unwrap();
    std::fs::write(&tag, &etag).unwrap();
    let (code, _, stderr) = download().await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), full);
    app.stop().await;
}
backends!(cli_resume, the_cli_resumes_a_broken_off_download);
