//! The response cache's table: entries per owner, replaced on a second write, and swept by age
//! and by total size (oldest first).

use chrono::Utc;
use serde_json::json;

use crate::db::{TestDb, both_backends};

both_backends!(cache_entries_are_per_owner_and_swept_by_age_and_size);

async fn cache_entries_are_per_owner_and_swept_by_age_and_size(db: TestDb) {
    let store = &*db.store;
    let key = [7u8; 32];
    assert_eq!(store.cache_get("alice", &key).await.unwrap(), None);
    store
        .cache_put("alice", &key, &json!({"a": 1}))
        .await
        .unwrap();
    assert_eq!(
        store.cache_get("alice", &key).await.unwrap(),
        Some(json!({"a": 1}))
    );
    assert_eq!(
        store.cache_get("bob", &key).await.unwrap(),
        None,
        "per owner"
    );
    store
        .cache_put("alice", &key, &json!({"a": 2}))
        .await
        .unwrap();
    assert_eq!(
        store.cache_get("alice", &key).await.unwrap(),
        Some(json!({"a": 2}))
    );

    // Four entries of 100 bytes (after the first), written in order.
    let big = |n: usize| json!({"t": "x".repeat(n)});
    let body = big(92); // {"t":"xx..."} is 100 bytes
    assert_eq!(body.to_string().len(), 100);
    for i in 1..=4u8 {
        store.cache_put("alice", &[i; 32], &body).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    // Nothing is old; 250 bytes keep the two newest, the rest goes.
    let deleted = store
        .cache_sweep(Utc::now() - chrono::Duration::days(1), 250)
        .await
        .unwrap();
    assert_eq!(
        deleted, 3,
        "the first entry and the two oldest 100-byte ones"
    );
    for (i, kept) in [(1u8, false), (2, false), (3, true), (4, true)] {
        let got = store.cache_get("alice", &[i; 32]).await.unwrap();
        assert_eq!(got.is_some(), kept, "entry {i}");
    }
    // Everything older than now goes.
    let deleted = store
        .cache_sweep(Utc::now() + chrono::Duration::seconds(1), u64::MAX / 2)
        .await
        .unwrap();
    assert_eq!(deleted, 2);
}
