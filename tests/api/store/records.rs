//! Record reads, traces, progress and bulk inserts.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;
use synthgate::domain::usage::{ToolOutcome, ToolUsage};
use synthgate::domain::{RecordId, RecordStatus};
use synthgate::queue::RecordResult;
use synthgate::store::{
    JobCounts, JobSelect, RecordError, RecordErrorCode, RecordStage, UsageCounts,
};

use super::{LONG, claim, completed, counts, create, failed, first_errors, new_job, trace};
use crate::db::{TestDb, both_backends};

both_backends!(
    list_records_by_index_and_status,
    results_round_trip,
    finished_since_returns_later_records,
    traces_are_replaced_not_duplicated,
    create_job_with_1m_records,
    summaries_read_counts_first_errors_and_usage,
);

async fn list_records_by_index_and_status(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 10)).await;
    let held = claim(store, "w", 10, LONG).await;
    // Odd indexes fail, even ones complete.
    let results: Vec<RecordResult> = held
        .iter()
        .map(|c| match c.index % 2 {
            0 => completed(c, json!({"i": c.index})),
            _ => failed(c, "bad_output"),
        })
        .collect();
    assert_eq!(
        store.complete_records("w", &results).await.unwrap().len(),
        10
    );

    let page = store
        .list_records(j.id, Some(3), synthgate::store::RecordSelect::default(), 4)
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|r| r.index).collect::<Vec<_>>(),
        [4, 5, 6, 7]
    );
    let tail = store
        .list_records(j.id, Some(7), synthgate::store::RecordSelect::default(), 4)
        .await
        .unwrap();
    assert_eq!(tail.iter().map(|r| r.index).collect::<Vec<_>>(), [8, 9]);
    assert!(
        store
            .list_records(j.id, Some(9), synthgate::store::RecordSelect::default(), 4)
            .await
            .unwrap()
            .is_empty()
    );

    let failures = store
        .list_records(
            j.id,
            Some(2),
            synthgate::store::RecordSelect::status(Some(RecordStatus::Failed)),
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        failures.iter().map(|r| r.index).collect::<Vec<_>>(),
        [3, 5, 7, 9]
    );
    let first = first_errors(store, j.id, 2).await;
    assert_eq!(first.iter().map(|r| r.index).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(first[0].error.code, "bad_output");
    assert!(
        store
            .list_records(
                j.id,
                None,
                synthgate::store::RecordSelect::status(Some(RecordStatus::Pending)),
                10
            )
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            completed: 5,
            failed: 5,
            ..Default::default()
        }
    );
}

async fn results_round_trip(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(Some("a"), 3)).await;
    let held = claim(store, "w", 3, LONG).await;
    let values = json!({"name": "Ada", "n": 3, "nested": {"list": [1, 2.5, null, "é"]}});
    // A code and stage this build does not know (another version of the service wrote them)
    // are read back as written.
    let bare_error = RecordError {
        code: RecordErrorCode::parse("timeout"),
        message: "took too long".to_owned(),
        column: None,
        stage: Some(RecordStage::parse("a_later_stage")),
    };
    let bare_failure = RecordResult {
        id: held[2].id,
        job_id: held[2].job_id,
        index: held[2].index,
        chunk: held[2].chunk,
        attempts: held[2].attempts,
        outcome: synthgate::store::RecordOutcome::Failed {
            values: None,
            error: bare_error.clone(),
        },
        traces: Vec::new(),
        usage: Default::default(),
        column_usage: Default::default(),
        tool_usage: Default::default(),
        media: Vec::new(),
        selection: None,
    };
    let results = [
        completed(&held[0], values.clone()),
        failed(&held[1], "tool_error"),
        bare_failure,
    ];
    let written = store.complete_records("w", &results).await.unwrap();
    assert_eq!(written, [held[0].id, held[1].id, held[2].id]);

    let ok = store
        .get_record(held[0].id, Some("a"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ok.job_id, j.id);
    assert_eq!(
        (ok.index, ok.status, ok.attempts),
        (0, RecordStatus::Completed, 1)
    );
    assert_eq!(ok.values, Some(values));
    assert_eq!(ok.error, None);
    assert!(ok.updated_at >= ok.created_at);

    let bad = store.get_record(held[1].id, None).await.unwrap().unwrap();
    assert_eq!(bad.status, RecordStatus::Failed);
    assert_eq!(bad.values, Some(json!({"x": 1})));
    assert_eq!(
        bad.error,
        Some(RecordError {
            code: RecordErrorCode::parse("tool_error"),
            message: "tool_error happened".to_owned(),
            column: Some("summary".to_owned()),
            stage: Some(RecordStage::Llm),
        })
    );
    let bare = store.get_record(held[2].id, None).await.unwrap().unwrap();
    assert_eq!(bare.values, None);
    assert_eq!(bare.error, Some(bare_error));
}

async fn finished_since_returns_later_records(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 4)).await;
    let before = store.now().await.unwrap();
    let held = claim(store, "w", 3, LONG).await;
    let early = [completed(&held[0], json!({})), failed(&held[1], "x")];
    store.complete_records("w", &early).await.unwrap();

    let mark = store.now().await.unwrap();
    let late = [completed(&held[2], json!({}))];
    store.complete_records("w", &late).await.unwrap();

    let since_mark = store.finished_since(j.id, mark).await.unwrap();
    assert_eq!(since_mark.len(), 1);
    assert_eq!((since_mark[0].id, since_mark[0].index), (held[2].id, 2));
    assert_eq!(since_mark[0].status, RecordStatus::Completed);
    assert_eq!(since_mark[0].error_code, None);
    assert!(since_mark[0].updated_at >= mark);

    // In-flight and pending records are not finished; failures carry their code.
    let all = store.finished_since(j.id, before).await.unwrap();
    let mut got: Vec<_> = all
        .iter()
        .map(|f| (f.index, f.status, f.error_code.clone()))
        .collect();
    got.sort_by_key(|g| g.0);
    assert_eq!(
        got,
        [
            (0, RecordStatus::Completed, None),
            (1, RecordStatus::Failed, Some("x".to_owned())),
            (2, RecordStatus::Completed, None),
        ]
    );

    // A cancelled record never ran: it has no row and no event, only a count.
    let mark = store.now().await.unwrap();
    store.request_cancel(j.id).await.unwrap();
    assert!(store.finished_since(j.id, mark).await.unwrap().is_empty());
    assert_eq!(counts(store, j.id).await.cancelled, 1);
}

async fn traces_are_replaced_not_duplicated(db: TestDb) {
    let store = &*db.store;
    create(store, &new_job(None, 2)).await;
    let held = claim(store, "w", 2, LONG).await;
    let (a, b) = (held[0].id, held[1].id);

    // The same column twice in one result: the last one wins, stored once.
    let mut first = completed(&held[0], json!({}));
    first.traces = vec![
        trace("summary", "draft"),
        trace("judge", "j"),
        trace("summary", "final"),
    ];
    let mut second = failed(&held[1], "tool_error");
    second.traces = vec![trace("summary", "b")];
    store.complete_records("w", &[first, second]).await.unwrap();

    let traces = store.get_traces(a, None).await.unwrap();
    let got: Vec<_> = traces
        .iter()
        .map(|t| (t.column.as_str(), t.messages.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("judge", json!([{"role": "user", "content": "j"}])),
            ("summary", json!([{"role": "user", "content": "final"}])),
        ]
    );
    assert!(traces.iter().all(|t| t.record_id == a));
    let one = store.get_traces(a, Some("summary")).await.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].messages,
        json!([{"role": "user", "content": "final"}])
    );
    assert!(
        store
            .get_traces(a, Some("missing"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.get_traces(b, None).await.unwrap().len(), 1);
    assert!(
        store
            .get_traces(RecordId::new(), None)
            .await
            .unwrap()
            .is_empty()
    );

    // A duplicate result for a written record is ignored and leaves its traces alone.
    let mut dup = completed(&held[0], json!({"again": true}));
    dup.traces = vec![trace("other", "x")];
    assert!(
        store
            .complete_records("w", &[dup])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.get_traces(a, None).await.unwrap().len(), 2);
}

/// Submitting is one row whatever the size: records become rows with their results.
async fn create_job_with_1m_records(db: TestDb) {
    const N: u32 = 1_000_000;
    let store = &*db.store;
    let started = Instant::now();
    let j = create(store, &new_job(None, N)).await;
    let took = started.elapsed();
    eprintln!(
        "{:?}: create_job with {N} records took {took:?}",
        db.backend
    );

    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            pending: u64::from(N),
            ..Default::default()
        }
    );
    assert!(
        store
            .list_records(j.id, None, synthgate::store::RecordSelect::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Claims stay cheap at this size.
    let started = Instant::now();
    let mut claimed = 0;
    for _ in 0..10 {
        claimed += claim(store, "w", 100, LONG).await.len();
    }
    eprintln!(
        "{:?}: 10 claims of 100 from {N} pending took {:?}",
        db.backend,
        started.elapsed()
    );
    assert_eq!(claimed, 1_000);
    let c = counts(store, j.id).await;
    assert_eq!((c.in_progress, c.total()), (1_000, u64::from(N)));
    let started = Instant::now();
    assert_eq!(counts(store, j.id).await.pending, u64::from(N) - 1_000);
    let counted = started.elapsed();
    let started = Instant::now();
    assert!(first_errors(store, j.id, 3).await.is_empty());
    let since = store.now().await.unwrap();
    assert!(store.finished_since(j.id, since).await.unwrap().is_empty());
    eprintln!(
        "{:?}: at {N} records, job_counts took {counted:?}, first_errors + finished_since {:?}",
        db.backend,
        started.elapsed()
    );
}

/// A job summary holds what the job's own queries return, read in one statement: counts by
/// status, the first failed records by index (as many as asked), and usage by alias; a page
/// of summaries holds each job's own.
async fn summaries_read_counts_first_errors_and_usage(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(Some("a"), 6)).await;
    let held = claim(store, "w", 5, LONG).await;
    let results: Vec<_> = held
        .iter()
        .map(|r| {
            let mut res = if r.index == 0 {
                completed(r, json!({"x": 0}))
            } else {
                failed(r, &format!("code_{}", r.index))
            };
            res.usage.insert(
                format!("m{}", r.index % 2),
                UsageCounts {
                    requests: 1,
                    prompt_tokens: 10,
                    completion_tokens: u64::from(r.index),
                    cached_requests: 0,
                    cost_nanos: 0,
                },
            );
            // Tool use: one turn per record in column `answer`; record i calls `clock` once
            // (ok) and, for odd i, `nope` once (validation_error).
            let mut tools = ToolUsage {
                tool_turns: 1,
                ..Default::default()
            };
            tools.count_call("clock", ToolOutcome::Ok);
            if r.index % 2 == 1 {
                tools.count_call("nope", ToolOutcome::ValidationError);
            }
            res.tool_usage.insert("answer".to_owned(), tools);
            res
        })
        .collect();
    store.complete_records("w", &results).await.unwrap();
    let quiet = create(store, &new_job(Some("a"), 2)).await;

    let one = JobSelect::One {
        id: j.id,
        owner: Some("a"),
    };
    let [s] = &store.job_summaries(one, 3).await.unwrap()[..] else {
        panic!("one summary expected");
    };
    assert_eq!(s.job, super::job(store, j.id).await);
    assert_eq!(s.counts, counts(store, j.id).await);
    assert_eq!(
        (s.counts.completed, s.counts.failed, s.counts.pending),
        (1, 4, 1)
    );
    let first: Vec<_> = s
        .first_errors
        .iter()
        .map(|f| (f.index, f.error.code.as_str()))
        .collect();
    assert_eq!(first, [(1, "code_1"), (2, "code_2"), (3, "code_3")]);
    let failed_ids: Vec<_> = held[1..4].iter().map(|r| r.id).collect();
    let got_ids: Vec<_> = s.first_errors.iter().map(|f| f.id).collect();
    assert_eq!(got_ids, failed_ids);
    assert_eq!(s.first_errors[0].error.column.as_deref(), Some("summary"));
    assert_eq!(s.usage, store.job_usage(j.id).await.unwrap());
    assert_eq!(
        s.usage["m1"].requests, 2,
        "indexes 1 and 3 (5 was not claimed)"
    );
    assert_eq!(s.usage["m0"].completion_tokens, 2 + 4);
    let answer = &s.tool_usage["answer"];
    assert_eq!(
        answer.tool_turns, 5,
        "indexes 0 to 4, failed records included"
    );
    assert_eq!(
        answer.tool_calls["clock"],
        BTreeMap::from([(ToolOutcome::Ok, 5)])
    );
    assert_eq!(
        answer.tool_calls["nope"],
        BTreeMap::from([(ToolOutcome::ValidationError, 2)]),
        "indexes 1 and 3"
    );
    assert_eq!(s.tool_usage.len(), 1);

    // Another owner does not see it.
    let hidden = JobSelect::One {
        id: j.id,
        owner: Some("b"),
    };
    assert!(store.job_summaries(hidden, 3).await.unwrap().is_empty());

    // A page: newest first, each with its own parts; a job with no failure and no usage has
    // empty ones.
    let page = JobSelect::Page {
        owner: None,
        before: None,
        limit: 10,
        filter: &Default::default(),
    };
    let page = store.job_summaries(page, 5).await.unwrap();
    let ids: Vec<_> = page.iter().map(|s| s.job.id).collect();
    assert_eq!(ids, [quiet.id, j.id]);
    assert_eq!(page[0].counts.pending, 2);
    assert!(page[0].first_errors.is_empty() && page[0].usage.is_empty());
    assert!(page[0].tool_usage.is_empty());
    assert_eq!(page[1].first_errors.len(), 4);
    assert_eq!(page[1].tool_usage, s.tool_usage);
}
