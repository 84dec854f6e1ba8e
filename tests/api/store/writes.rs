//! What `complete_records` writes with the records: usage in the same transaction, and values
//! no backend can store failing only their own record.

use std::collections::BTreeMap;

use serde_json::json;
use synthgate::domain::RecordStatus;
use synthgate::domain::usage::{ToolOutcome, ToolUsage};
use synthgate::queue::RecordResult;
use synthgate::store::{RecordError, RecordErrorCode, RecordOutcome, RecordStage, UsageCounts};

use super::{EXPIRED, LONG, claim, completed, create, failed, new_job, trace};
use crate::db::{TestDb, both_backends};

both_backends!(
    usage_is_written_with_its_record,
    a_nul_fails_only_its_record,
);

fn usage(
    alias: &str,
    requests: u64,
    prompt: u64,
    completion: u64,
) -> BTreeMap<String, UsageCounts> {
    BTreeMap::from([(
        alias.to_owned(),
        UsageCounts {
            requests,
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_requests: 0,
            cost_nanos: 0,
        },
    )])
}

/// A job's usage is the sum over the results written for it: counted in the transaction that
/// writes them, so nothing is lost or counted twice whatever happens between the two, and a
/// result that is not written (its record was taken over) counts nothing.
async fn usage_is_written_with_its_record(db: TestDb) {
    let store = &*db.store;
    let a = create(store, &new_job(None, 3)).await;
    let b = create(store, &new_job(None, 1)).await;
    // A dead worker's record, then taken over by the live worker with the rest.
    let dead = claim(store, "dead", 1, EXPIRED).await;
    let live = claim(store, "live", 4, LONG).await;
    assert_eq!(live.len(), 4);
    assert_eq!(
        (live[0].chunk, live[0].index),
        (dead[0].chunk, dead[0].index)
    );

    // The dead worker's late result is fenced out, and so is its usage.
    let mut late = completed(&dead[0], json!({}));
    late.usage = usage("m", 100, 100, 100);
    assert!(
        store
            .complete_records("dead", &[late])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.job_usage(a.id).await.unwrap().is_empty());

    // One batch across two jobs and two aliases; a failed record's usage counts too.
    let mut results = Vec::new();
    for (i, c) in live.iter().enumerate() {
        let mut r = if i == 2 {
            failed(c, "boom")
        } else {
            completed(c, json!({"i": c.index}))
        };
        r.usage = usage("m", 1, 10 + i as u64, 5);
        if i == 1 {
            r.usage.extend(usage("judge", 2, 7, 3));
        }
        results.push(r);
    }
    let written = store.complete_records("live", &results).await.unwrap();
    assert_eq!(written.len(), 4);
    // Retrying the batch (as the writer does when a commit's answer was lost) writes nothing
    // and counts nothing again.
    assert!(
        store
            .complete_records("live", &results)
            .await
            .unwrap()
            .is_empty()
    );

    let want_a = BTreeMap::from([
        (
            "judge".to_owned(),
            UsageCounts {
                requests: 2,
                prompt_tokens: 7,
                completion_tokens: 3,
                cached_requests: 0,
                cost_nanos: 0,
            },
        ),
        (
            "m".to_owned(),
            UsageCounts {
                requests: 3,
                prompt_tokens: 10 + 11 + 12,
                completion_tokens: 15,
                cached_requests: 0,
                cost_nanos: 0,
            },
        ),
    ]);
    assert_eq!(live[3].job_id, b.id);
    assert_eq!(store.job_usage(a.id).await.unwrap(), want_a);
    assert_eq!(
        store.job_usage(b.id).await.unwrap(),
        usage("m", 1, 13, 5),
        "the other job's usage"
    );
}

/// Postgres refuses a NUL character in `text` and `jsonb`. A value holding one fails its own
/// record (`unstorable_value`, stage `store`, naming the column) on both backends; traces and
/// error texts keep their content with U+FFFD in its place; the other records of the batch,
/// another owner's included, are written as they are.
async fn a_nul_fails_only_its_record(db: TestDb) {
    let store = &*db.store;
    let mine = create(store, &new_job(Some("a"), 3)).await;
    let theirs = create(store, &new_job(Some("b"), 1)).await;
    let held = claim(store, "w", 4, LONG).await;
    assert_eq!(held[3].job_id, theirs.id);

    let mut bad_value = completed(
        &held[0],
        json!({"topic": "ok", "answer": {"text": "a\u{0}b"}, "n": 1}),
    );
    bad_value.traces = vec![trace("answer", "said a\u{0}b")];
    bad_value.usage = BTreeMap::from([(
        "m".to_owned(),
        UsageCounts {
            requests: 1,
            ..Default::default()
        },
    )]);
    let mut bad_trace = completed(&held[1], json!({"topic": "ok"}));
    bad_trace.traces = vec![trace("answer", "\u{0}")];
    let bad_error = RecordResult {
        id: held[2].id,
        job_id: held[2].job_id,
        index: held[2].index,
        chunk: held[2].chunk,
        attempts: held[2].attempts,
        outcome: RecordOutcome::Failed {
            values: None,
            error: RecordError::new(
                RecordErrorCode::TemplateError,
                Some("answer".to_owned()),
                "cannot use 'x\u{0}'",
            ),
        },
        traces: Vec::new(),
        usage: BTreeMap::new(),
        column_usage: Default::default(),
        // A tool name comes from the model, and may hold a NUL too.
        tool_usage: BTreeMap::from([("answer".to_owned(), {
            let mut u = ToolUsage {
                tool_turns: 1,
                ..Default::default()
            };
            u.count_call("x\u{0}y", ToolOutcome::ValidationError);
            u
        })]),
        media: Vec::new(),
        selection: None,
    };
    let clean = completed(&held[3], json!({"topic": "theirs"}));
    let results = [bad_value, bad_trace, bad_error, clean];

    let written = store.complete_records("w", &results).await.unwrap();
    assert_eq!(written, held.iter().map(|c| c.id).collect::<Vec<_>>());

    let get = |i: usize| store.get_record(held[i].id, None);
    let r0 = get(0).await.unwrap().unwrap();
    assert_eq!(r0.status, RecordStatus::Failed);
    let e = r0.error.expect("error");
    assert_eq!(e.code, "unstorable_value");
    assert_eq!(e.column.as_deref(), Some("answer"));
    assert_eq!(e.stage, Some(RecordStage::Store));
    assert!(e.message.contains("column 'answer'"), "{}", e.message);
    // The other values are kept, as for any failed record.
    assert_eq!(r0.values, Some(json!({"topic": "ok", "n": 1})));
    let t0 = store.get_traces(held[0].id, None).await.unwrap();
    assert_eq!(
        t0[0].messages,
        json!([{"role": "user", "content": "said a\u{FFFD}b"}])
    );
    // The record's usage is written with it.
    assert_eq!(store.job_usage(mine.id).await.unwrap()["m"].requests, 1);

    let r1 = get(1).await.unwrap().unwrap();
    assert_eq!(r1.status, RecordStatus::Completed);
    assert_eq!(r1.values, Some(json!({"topic": "ok"})));
    let t1 = store.get_traces(held[1].id, None).await.unwrap();
    assert_eq!(
        t1[0].messages,
        json!([{"role": "user", "content": "\u{FFFD}"}])
    );

    let r2 = get(2).await.unwrap().unwrap();
    assert_eq!(r2.status, RecordStatus::Failed);
    let e = r2.error.expect("error");
    assert_eq!(e.code, "template_error");
    assert_eq!(e.message, "cannot use 'x\u{FFFD}'");

    let one = synthgate::store::JobSelect::One {
        id: mine.id,
        owner: None,
    };
    let summary = &store.job_summaries(one, 0).await.unwrap()[0];
    assert_eq!(summary.tool_usage["answer"].tool_turns, 1);
    assert_eq!(
        summary.tool_usage["answer"].tool_calls["x\u{FFFD}y"][&ToolOutcome::ValidationError],
        1
    );

    let r3 = get(3).await.unwrap().unwrap();
    assert_eq!(r3.status, RecordStatus::Completed);
    assert_eq!(r3.values, Some(json!({"topic": "theirs"})));
}
