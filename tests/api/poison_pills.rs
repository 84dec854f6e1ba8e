//! Records whose worker keeps dying (a poison pill that aborts the process), simulated by claims
//! whose lease lapses at once: a suspect record runs beside the pool's other work without
//! stopping it, and the record that kills its workers is abandoned while every record next to
//! it completes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate::domain::{JobId, JobStatus, RecordStatus};
use synthgate::queue::{ClaimPolicy, ClaimedRecord, RecordResult};
use synthgate::store::{CreateOutcome, NewJob, RecordOutcome};
use synthgate_testkit::mock_llm::{MockLlm, Script};

use crate::backends;
use crate::db::{Backend, TestDb};
use crate::helpers::{sampler_config, spawn_app_on, test_config};
use crate::scheduling::{slow_llm_config, wait_counts};

/// A claim by a dead worker `owner` of up to `limit` records whose lease lapses at once, as if
/// the process died right after it, made with the policy of a pool that has no suspect record
/// in flight.
async fn die_with(db: &TestDb, owner: &str, limit: u32) -> Vec<ClaimedRecord> {
    let policy = ClaimPolicy {
        max_lease_expiries: 3,
        isolate: true,
    };
    db.store
        .claim(owner, limit, Duration::ZERO, policy)
        .await
        .unwrap()
        .records
}

/// Kills the workers of `db`'s next `limit` claimable records `times` times, as a poison pill
/// among them would: each claim takes them over and its lease lapses at once.
async fn expire_leases(db: &TestDb, limit: u32, times: usize) {
    for i in 0..times {
        let owner = format!("dead-{i}");
        let got = die_with(db, &owner, limit).await;
        assert_eq!(got.len(), limit as usize, "{owner}: {got:?}");
    }
}

/// A new job of `db` for key `owner` from `body` (a `POST /v1/jobs` body), created in the
/// store directly.
async fn create_job(db: &TestDb, owner: Option<&str>, body: &Value) -> JobId {
    let id = JobId::new();
    let created = db
        .store
        .create_job(&NewJob {
            id,
            owner: owner.map(str::to_owned),
            config: body["config"].clone(),
            num_records: body["num_records"].as_u64().unwrap() as u32,
            seed: 1,
            metadata: None,
            run_config: json!({}),
            idempotency_key: None,
            request_hash: None,
            output_columns: Vec::new(),
            max_live_jobs: None,
            max_live_records: None,
            seed_datasets: Vec::new(),
            name: None,
            trace_context: None,
            selection: None,
            cache_mode: Default::default(),
            max_cost_nanos: None,
        })
        .await
        .unwrap();
    assert!(matches!(created, CreateOutcome::Created(_)), "{created:?}");
    id
}

/// A job of `n` records with one LLM column on the `writer` model, prompted with `prompt`.
fn llm_job(prompt: &str, n: u32) -> Value {
    json!({"config": {"columns": [
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer", "prompt": prompt}
    ]}, "num_records": n})
}

/// A job of `n` records of samplers only, as stored.
fn cpu_job(n: u32) -> Value {
    json!({"config": sampler_config()["data_designer"], "num_records": n})
}

/// Writes a result for `rec` as its dead worker `owner` did before dying.
async fn written_before_dying(db: &TestDb, owner: &str, rec: &ClaimedRecord) {
    let result = RecordResult {
        id: rec.id,
        job_id: rec.job_id,
        index: rec.index,
        chunk: rec.chunk,
        attempts: rec.attempts,
        outcome: RecordOutcome::Completed {
            values: json!({"written": "before the death"}),
        },
        traces: Vec::new(),
        usage: Default::default(),
        column_usage: Default::default(),
        tool_usage: Default::default(),
        media: Vec::new(),
        selection: None,
    };
    let written = db.store.complete_records(owner, &[result]).await.unwrap();
    assert_eq!(written.len(), 1, "{owner}: index {}", rec.index);
}

/// A suspect record (its chunk's worker died twice mid-chunk) waits on its model while other
/// keys' jobs run. They are claimed and complete during the wait, while the rest of the suspect
/// chunk waits its turn (one suspect record in flight per replica); then the wait ends at the
/// moment the pool's leases are all taken by records claimed after it, and the suspect's job
/// completes one record at a time beside the next key's job. Running the suspect record alone
/// instead (every lease held while it works) wedges here: the claim loop, having seen the rest
/// of the chunk, waits for every lease while the record, done waiting, queues for them behind
/// it, and nothing is claimed again.
async fn a_suspect_record_waits_while_other_keys_jobs_run(backend: Backend) {
    let db = TestDb::new(backend).await;
    let suspect = create_job(&db, Some("a"), &llm_job("Suspect.", 3)).await;
    expire_leases(&db, 3, 2).await;
    // The suspect's answers, and those of the job run at its wait's end, come only at the
    // release; the others after 100 ms.
    let script: Script = serde_json::from_value(json!({"rules": [
        {"when": {"user_contains": "Suspect"}, "reply": {"hold": true}},
        {"when": {"user_contains": "Later"}, "reply": {"hold": true}},
        {"reply": {"delay_ms": 100}}
    ]}))
    .unwrap();
    let mock = MockLlm::start(script).await.unwrap();
    let endpoint = mock.endpoint();
    // Two slots and four records started at once: 12-record jobs keep the claim loop waiting
    // for leases.
    let app = spawn_app_on(db, move |c| slow_llm_config(c, &endpoint, 2, Some(4))).await;
    let suspect = suspect.to_string();
    wait_counts(&app, &suspect, |c| c["waiting_for_model"] == 1).await;

    let during = create_job(&app.db, Some("b"), &llm_job("Now.", 12)).await;
    let quick = create_job(&app.db, Some("c"), &cpu_job(1)).await;
    for (id, n) in [(during, 12), (quick, 1)] {
        let done = app
            .wait_for_job(&id.to_string(), Duration::from_secs(30))
            .await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["completed"], n, "{done}");
    }
    let (_, job) = app.get(&format!("/v1/jobs/{suspect}")).await;
    let c = &job["counts"];
    assert_eq!(
        (&c["in_progress"], &c["completed"], &c["waiting_for_model"]),
        (&json!(1), &json!(0), &json!(1)),
        "one suspect record in flight, still waiting, the rest of its chunk not started: {job}"
    );

    // Records claimed after the suspect fill every lease and wait too; then every wait ends.
    let later = create_job(&app.db, Some("b"), &llm_job("Later.", 12)).await;
    let later = later.to_string();
    wait_counts(&app, &later, |c| c["waiting_for_model"].as_u64() >= Some(3)).await;
    mock.release();
    for (id, n) in [(&later, 12), (&suspect, 3)] {
        let done = app.wait_for_job(id, Duration::from_secs(30)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["completed"], n, "{done}");
    }
    app.stop().await;
}

backends!(
    suspect_waits,
    a_suspect_record_waits_while_other_keys_jobs_run
);

/// A record whose worker died three times is failed with `record_abandoned` by the next
/// replica that finds it, instead of being run again; the job finishes.
async fn a_crash_looping_record_is_abandoned(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store.clone();
    let job_id = create_job(&db, None, &cpu_job(2)).await;
    // Three lives: each claim takes the record over and its worker dies at once. The third
    // run is suspect (two expiries before it), as a real pool would run it.
    for owner in ["dead-0", "dead-1", "dead-2"] {
        let got = die_with(&db, owner, 1).await;
        assert_eq!(got.len(), 1, "{owner}: {got:?}");
        assert_eq!(got[0].index, 0);
        assert_eq!(got[0].suspect, owner == "dead-2");
    }

    let running = synthgate::app::start(test_config(&db))
        .await
        .expect("app starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let row = loop {
        let row = store.get_job(job_id, None).await.unwrap().unwrap();
        if row.status.is_terminal() {
            break row;
        }
        assert!(Instant::now() < deadline, "job still {:?}", row.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(row.status, JobStatus::Completed);
    let records = store
        .list_records(job_id, None, synthgate::store::RecordSelect::default(), 10)
        .await
        .unwrap();
    assert_eq!(records[0].status, RecordStatus::Failed);
    assert_eq!(records[0].attempts, 3, "not run a fourth time");
    let e = records[0].error.as_ref().unwrap();
    assert_eq!(
        (e.code.as_str(), e.stage.as_ref().map(|s| s.as_str())),
        ("record_abandoned", Some("worker"))
    );
    assert_eq!(records[1].status, RecordStatus::Completed);
    running.shutdown.cancel();
    running.wait().await;
}

backends!(poison_pill, a_crash_looping_record_is_abandoned);

/// Issue 49's case: the process dies twice mid-chunk, each time with key a's record 2 (the
/// poison) in flight next to its chunk's other records and key b's job. Both chunks turn
/// suspect. The third life runs the poison as the replica's one suspect record, beside key
/// c's fresh job, and dies again. A real pool then takes over: the poison alone ends
/// `record_abandoned`; the records that shared its chunk, key b's suspect records and key c's
/// records that died with it all complete.
async fn only_the_poison_pill_is_abandoned(backend: Backend) {
    let db = TestDb::new(backend).await;
    let poisoned = create_job(&db, Some("a"), &cpu_job(4)).await;
    let beside = create_job(&db, Some("b"), &cpu_job(4)).await;

    // First life: both jobs in flight; record 0 is written before the poison kills it.
    let first = die_with(&db, "dead-1", 8).await;
    assert_eq!(first.len(), 8, "{first:?}");
    written_before_dying(&db, "dead-1", &first[0]).await;
    // Second life: taken over (not suspect after one death); record 1 is written, then the
    // poison kills it again.
    let second = die_with(&db, "dead-2", 8).await;
    assert_eq!(second.len(), 7, "{second:?}");
    assert!(second.iter().all(|r| !r.suspect), "{second:?}");
    assert_eq!((second[0].job_id, second[0].index), (poisoned, 1));
    written_before_dying(&db, "dead-2", &second[0]).await;

    // Third life: one suspect record, the first of its chunk without a result (the poison),
    // beside fresh work; key b's suspect chunk waits for a claim with no suspect in flight.
    let fresh = create_job(&db, Some("c"), &cpu_job(4)).await;
    let third = die_with(&db, "dead-3", 8).await;
    let got: Vec<_> = third
        .iter()
        .map(|r| (r.job_id, r.index, r.suspect))
        .collect();
    assert_eq!(
        got,
        [
            (poisoned, 2, true),
            (fresh, 0, false),
            (fresh, 1, false),
            (fresh, 2, false),
            (fresh, 3, false),
        ]
    );
    assert_eq!((third[0].attempts, third[0].chunk_todo), (3, 1));

    let app = spawn_app_on(db, |_| {}).await;
    let mut ends = Vec::new();
    for id in [poisoned, beside, fresh] {
        let done = app
            .wait_for_job(&id.to_string(), Duration::from_secs(30))
            .await;
        assert_eq!(done["status"], "completed", "{done}");
        let records = app
            .db
            .store
            .list_records(id, None, synthgate::store::RecordSelect::default(), 10)
            .await
            .unwrap();
        ends.push(
            records
                .iter()
                .map(|r| (r.index, r.status, r.attempts))
                .collect::<Vec<_>>(),
        );
    }
    use RecordStatus::{Completed, Failed};
    assert_eq!(
        ends,
        [
            // Records 0 and 1 were written before the deaths; 3 ran once more, as a suspect.
            vec![
                (0, Completed, 1),
                (1, Completed, 2),
                (2, Failed, 3),
                (3, Completed, 3)
            ],
            vec![
                (0, Completed, 3),
                (1, Completed, 3),
                (2, Completed, 3),
                (3, Completed, 3)
            ],
            vec![
                (0, Completed, 2),
                (1, Completed, 2),
                (2, Completed, 2),
                (3, Completed, 2)
            ],
        ]
    );
    let poison = app
        .db
        .store
        .list_records(
            poisoned,
            None,
            synthgate::store::RecordSelect::default(),
            10,
        )
        .await;
    let poison = poison.unwrap().swap_remove(2);
    let e = poison.error.expect("the abandoned record's error");
    assert_eq!(
        (e.code.as_str(), e.stage.as_ref().map(|s| s.as_str())),
        ("record_abandoned", Some("worker"))
    );
    app.stop().await;
}

backends!(poison_mid_chunk, only_the_poison_pill_is_abandoned);
