//! `record_selection` (issue 51): a job generates candidates until `num_records` of them pass
//! a boolean predicate column, within a candidate budget. Exactly `num_records` accepted, the
//! first that passed by index; five counts that add up; the other candidates readable under a
//! filter; an exhausted budget ending the job as `on_exhausted` says; bad selections refused
//! at submit naming the key; previews honouring it.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app};

backends!(exactly_n_accepted_the_first_that_passed, exactly_n);
backends!(an_exhausted_budget_ends_as_on_exhausted_says, exhausted);
backends!(bad_selections_are_refused_at_submit, refused);

/// Candidates whose `keep` is true for about `pass` of them (a uniform draw under `pass`).
pub(crate) fn config(pass: f64, n_budget: u32, on_exhausted: &str) -> Value {
    json!({
        "columns": [
            {"name": "x", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 0.0, "high": 1.0}},
            {"name": "keep", "column_type": "expression", "dtype": "bool",
             "expr": format!("{{{{ x < {pass} }}}}")},
            {"name": "label", "column_type": "expression", "expr": "x={{ x }}"}
        ],
        "record_selection": {"predicate_column": "keep", "max_candidate_records": n_budget,
                             "on_exhausted": on_exhausted}
    })
}

pub(crate) async fn submit(app: &TestApp, config: Value, n: u32, seed: u64) -> String {
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": n, "seed": seed}))
        .await;
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// Every candidate of job `id`, by index (`selection=all`).
pub(crate) async fn candidates(app: &TestApp, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/jobs/{id}/records?selection=all&limit=1000");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = app.get(&path).await;
        assert_eq!(status, 200, "{page}");
        out.extend(page["records"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

/// The checks every finished selection job must pass: the accepted records are exactly the
/// first `n` candidates (by index) whose predicate held; the rest of the passing ones are
/// trimmed; the five counts add up to the candidates and agree with the records.
pub(crate) async fn check_selection(app: &TestApp, id: &str, n: usize) -> Value {
    let job = app.wait_for_job(id, Duration::from_secs(120)).await;
    let all = candidates(app, id).await;
    let sel = &job["counts"]["selection"];
    let passed: Vec<&Value> = all.iter().filter(|r| r["values"]["keep"] == true).collect();
    let expected: Vec<u64> = passed
        .iter()
        .take(n)
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    let accepted = app.all_records(id).await;
    let got: Vec<u64> = accepted
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(
        got, expected,
        "accepted = the first {n} that passed, by index"
    );
    for r in &accepted {
        assert_eq!(r["selection"], "accepted", "{r}");
        assert_eq!(r["values"]["keep"], true, "{r}");
    }
    let by = |v: &str| all.iter().filter(|r| r["selection"] == v).count() as u64;
    for verdict in [
        "accepted",
        "rejected",
        "null_predicate",
        "failed_generation",
        "trimmed",
    ] {
        assert_eq!(sel[verdict], by(verdict), "{verdict}: {sel}");
    }
    for r in all.iter().filter(|r| r["selection"] == "trimmed") {
        assert_eq!(r["values"]["keep"], true, "{r}");
        assert!(
            r["index"].as_u64().unwrap() > *expected.last().unwrap(),
            "{r}"
        );
    }
    let five: u64 = [
        "accepted",
        "rejected",
        "null_predicate",
        "failed_generation",
        "trimmed",
    ]
    .iter()
    .map(|k| sel[k].as_u64().unwrap())
    .sum();
    assert_eq!(five, all.len() as u64, "{sel}");
    let c = &job["counts"];
    assert_eq!(
        c["completed"].as_u64().unwrap() + c["failed"].as_u64().unwrap(),
        five,
        "{c}"
    );
    // Indexes are candidates 0.., each with a result: none lost, none twice.
    let idx: BTreeSet<u64> = all.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(idx.len(), all.len());
    assert_eq!(idx.last().copied(), Some(all.len() as u64 - 1), "no gap");
    job
}

async fn exactly_n(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = submit(&app, config(0.3, 2_000, "raise"), 60, 11).await;
    let job = check_selection(&app, &id, 60).await;
    assert_eq!(job["status"], "completed", "{job}");
    let sel = &job["counts"]["selection"];
    assert_eq!(
        (sel["accepted"].as_u64(), sel["target"].as_u64()),
        (Some(60), Some(60))
    );
    assert_eq!(sel["max_candidate_records"], 2_000);
    // About 200 candidates for 60 at 30 %; the budget was far from spent.
    let candidates = job["counts"]["completed"].as_u64().unwrap();
    assert!((100..600).contains(&candidates), "{job}");
    // The dataset (exports, analysis) is the accepted records.
    let (status, jsonl) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=jsonl"))
        .await;
    assert_eq!(status, 200);
    let rows: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 60);
    assert!(rows.iter().all(|r| r["keep"] == true), "{jsonl}");
    // `status=completed` is the dataset too; `selection=all` with it lists every completed
    // candidate.
    let (_, page) = app
        .get(&format!(
            "/v1/jobs/{id}/records?status=completed&limit=1000"
        ))
        .await;
    assert_eq!(page["records"].as_array().unwrap().len(), 60, "{page}");
    let (_, page) = app
        .get(&format!(
            "/v1/jobs/{id}/records?status=completed&selection=all&limit=1000"
        ))
        .await;
    assert!(page["records"].as_array().unwrap().len() > 60, "{page}");
    // The other candidates stay readable under a filter.
    let (status, page) = app
        .get(&format!("/v1/jobs/{id}/records?selection=rejected&limit=5"))
        .await;
    assert_eq!(status, 200, "{page}");
    let rejected = page["records"].as_array().unwrap();
    assert_eq!(rejected.len(), 5);
    assert!(
        rejected.iter().all(|r| r["values"]["keep"] == false),
        "{page}"
    );
    // A re-run with the same seed accepts the same records.
    let again = submit(&app, config(0.3, 2_000, "raise"), 60, 11).await;
    check_selection(&app, &again, 60).await;
    let values =
        |rs: Vec<Value>| -> Vec<Value> { rs.into_iter().map(|r| r["values"].clone()).collect() };
    assert_eq!(
        values(app.all_records(&id).await),
        values(app.all_records(&again).await)
    );
    // `selection` is for selection jobs; exports refuse it.
    let (status, body) = app
        .get(&format!("/v1/jobs/{id}/records?format=jsonl&selection=all"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_request"))
    );
    let plain = submit(&app, crate::helpers::sampler_config(), 3, 1).await;
    app.wait_for_job(&plain, Duration::from_secs(30)).await;
    let (status, body) = app
        .get(&format!("/v1/jobs/{plain}/records?selection=accepted"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("selection"),
        "{body}"
    );
    let (status, _) = app
        .get(&format!("/v1/jobs/{plain}/records?selection=all"))
        .await;
    assert_eq!(status, 200);
}

async fn exhausted(backend: Backend) {
    let app = spawn_app(backend).await;
    // Never true: the budget runs out.
    let partial = submit(&app, config(-1.0, 40, "return_partial"), 5, 3).await;
    let job = check_selection(&app, &partial, 5).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job["error"].is_null(), "{job}");
    let sel = &job["counts"]["selection"];
    assert_eq!(
        (sel["accepted"].as_u64(), sel["rejected"].as_u64()),
        (Some(0), Some(40))
    );
    assert_eq!(job["counts"]["cancelled"], 0, "{job}");
    assert!(app.all_records(&partial).await.is_empty());

    let raised = submit(&app, config(-1.0, 40, "raise"), 5, 3).await;
    let job = check_selection(&app, &raised, 5).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "record_selection_exhausted", "{job}");
    assert_eq!(
        candidates(&app, &raised).await.len(),
        40,
        "every candidate kept"
    );

    // Some pass, not enough: what passed is accepted and kept.
    let short = submit(&app, config(0.05, 30, "return_partial"), 20, 5).await;
    let job = check_selection(&app, &short, 20).await;
    let accepted = job["counts"]["selection"]["accepted"].as_u64().unwrap();
    assert!(accepted < 20, "{job}");
    assert_eq!(app.all_records(&short).await.len() as u64, accepted);
}

async fn refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let with = |sel: Value| {
        let mut c = config(0.5, 100, "raise");
        c["record_selection"] = sel;
        c
    };
    let cases = [
        (
            with(json!({"predicate_column": "nope", "max_candidate_records": 100})),
            "does not define",
        ),
        (
            with(json!({"predicate_column": "x", "max_candidate_records": 100})),
            "not boolean-valued",
        ),
        (
            with(json!({"predicate_column": "label", "max_candidate_records": 100})),
            "not boolean-valued",
        ),
        (
            with(json!({"predicate_column": "keep", "max_candidate_records": 5})),
            "at least num_records",
        ),
        (
            with(json!({"predicate_column": "keep", "max_candidate_records": 100_000_000})),
            "one job may generate",
        ),
        (
            with(json!({"predicate_column": "keep"})),
            "max_candidate_records",
        ),
        (
            with(
                json!({"predicate_column": "keep", "max_candidate_records": 100, "keep_going": true}),
            ),
            "keep_going",
        ),
        (
            with(
                json!({"predicate_column": "keep", "max_candidate_records": 100, "on_exhausted": "loop"}),
            ),
            "loop",
        ),
    ];
    for (config, says) in cases {
        let (status, body) = app
            .create_job(&json!({"config": config, "num_records": 10}))
            .await;
        assert_eq!(status, 422, "{body}");
        let issue = &body["error"]["details"][0];
        assert_eq!(issue["code"], "invalid_record_selection", "{body}");
        assert!(
            issue["field"]
                .as_str()
                .unwrap()
                .starts_with("record_selection"),
            "{body}"
        );
        assert!(
            issue["message"].as_str().unwrap().contains(says),
            "{says}: {body}"
        );
    }
    let (status, jobs) = app.get("/v1/jobs").await;
    assert_eq!(
        (status, jobs["jobs"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{jobs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_returns_accepted_records_within_a_small_budget() {
    let app = spawn_app(Backend::Sqlite).await;
    let (status, preview) = app
        .post_raw(
            "/v1/preview",
            "application/json",
            json!({"config": config(0.3, 10_000, "raise"), "num_records": 4, "seed": 9})
                .to_string(),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    let records = preview["records"].as_array().unwrap();
    assert_eq!(records.len(), 4, "{preview}");
    assert!(
        records.iter().all(|r| r["values"]["keep"] == true),
        "{preview}"
    );
    let sel = &preview["selection"];
    assert_eq!(
        (sel["accepted"].as_u64(), sel["target"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(
        sel["max_candidate_records"], 100,
        "a preview's budget is small: {sel}"
    );
    // A dropped predicate column still decides: it is read before the row is built.
    let mut dropped = config(0.3, 10_000, "raise");
    dropped["columns"][1]["drop"] = json!(true);
    let (status, preview) = app
        .post_raw(
            "/v1/preview",
            "application/json",
            json!({"config": dropped, "num_records": 3, "seed": 9}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    let records = preview["records"].as_array().unwrap();
    assert_eq!(records.len(), 3, "{preview}");
    for r in records {
        assert!(r["values"].get("keep").is_none(), "{r}");
        assert!(r["values"]["x"].as_f64().unwrap() < 0.3, "{r}");
    }
    // An impossible predicate spends the preview's budget and returns nothing, saying so.
    let (status, preview) = app
        .post_raw(
            "/v1/preview",
            "application/json",
            json!({"config": config(-1.0, 10_000, "raise"), "num_records": 4}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["records"], json!([]));
    assert_eq!(preview["selection"]["rejected"], 100, "{preview}");
}

/// NVIDIA's Data Designer door runs a `record_selection` config unchanged: its status details
/// carry the five counts and whether the budget ran out; its dataset holds the accepted records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_designer_door_runs_a_selection_and_says_so_in_its_status_details() {
    let app = spawn_app(Backend::Sqlite).await;
    let resp = app
        .client
        .post(app.url("/v1/data-designer/jobs"))
        .json(&json!({"spec": {"num_records": 5, "config": config(-1.0, 30, "return_partial")}}))
        .send()
        .await
        .unwrap();
    let (status, job) = crate::helpers::status_json(resp).await;
    assert_eq!(status, 200, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&id, Duration::from_secs(30)).await;
    let (status, job) = app.get(&format!("/v1/data-designer/jobs/{id}")).await;
    assert_eq!(status, 200, "{job}");
    let sel = &job["status_details"]["record_selection"];
    assert_eq!(sel["exhausted"], true, "{job}");
    assert_eq!(
        (sel["accepted"].as_u64(), sel["rejected"].as_u64()),
        (Some(0), Some(30))
    );
    assert_eq!(sel["candidates"], 30, "{job}");
}
