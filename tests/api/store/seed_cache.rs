//! The seed block cache over a real store, on both backends: concurrent misses on one block
//! make one query, hits make none, a byte budget too small for two blocks re-reads, and a row
//! past the dataset's end is a non-transient error rather than a panic.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use synthgate::datasets::seed_cache::{SeedBlocks, SeedReadError};
use synthgate::datasets::{BLOCK_ROWS, DatasetId, DatasetSourceKind, import_rows};
use synthgate::store::Store;

use super::spy::{Poison, Spy};
use crate::db::{TestDb, both_backends};

both_backends!(
    concurrent_misses_on_a_block_make_one_query,
    a_small_cache_reads_again_and_missing_rows_fail_cleanly,
);

/// A dataset of `n` rows `{"i": i, "pad": "..."}` (pad: `pad` bytes of text).
async fn dataset(store: &dyn Store, n: u64, pad: usize) -> DatasetId {
    let rows: Vec<Map<String, Value>> = (0..n)
        .map(|i| {
            json!({"i": i, "pad": "x".repeat(pad)})
                .as_object()
                .unwrap()
                .clone()
        })
        .collect();
    import_rows(
        store,
        None,
        "rows",
        rows,
        DatasetSourceKind::Directory,
        None,
    )
    .await
    .unwrap()
    .id
}

fn reads(spy: &Spy) -> usize {
    spy.take_calls()
        .iter()
        .filter(|c| **c == "read_dataset_block")
        .count()
}

async fn concurrent_misses_on_a_block_make_one_query(db: TestDb) {
    let id = dataset(&*db.store, BLOCK_ROWS * 2, 0).await;
    let spy = Arc::new(Spy::new(&db, Poison::Pass));
    let blocks = SeedBlocks::new(spy.clone(), 8 << 20);
    // 50 records of block 1 at once: one query between them.
    let rows = futures::future::join_all((0..50).map(|k| blocks.row(id, BLOCK_ROWS + k))).await;
    for (k, row) in rows.into_iter().enumerate() {
        assert_eq!(row.unwrap().get()["i"], BLOCK_ROWS + k as u64);
    }
    assert_eq!(reads(&spy), 1);
    // Cached: no query at all.
    assert_eq!(
        blocks.row(id, BLOCK_ROWS + 200).await.unwrap().get()["i"],
        BLOCK_ROWS + 200
    );
    assert_eq!(reads(&spy), 0);
    assert_eq!(blocks.row(id, 3).await.unwrap().get()["i"], 3);
    assert_eq!(reads(&spy), 1);
}

async fn a_small_cache_reads_again_and_missing_rows_fail_cleanly(db: TestDb) {
    // Blocks of about 256 × 1 KiB: a 300 KiB budget holds one, not two. The last block is
    // 10 rows short.
    let id = dataset(&*db.store, BLOCK_ROWS * 2 - 10, 1024).await;
    let spy = Arc::new(Spy::new(&db, Poison::Pass));
    let blocks = SeedBlocks::new(spy.clone(), 300 << 10);
    for round in 0..3 {
        assert_eq!(blocks.row(id, 0).await.unwrap().get()["i"], 0);
        assert_eq!(
            blocks.row(id, BLOCK_ROWS).await.unwrap().get()["i"],
            BLOCK_ROWS
        );
        assert!(
            reads(&spy) >= 1,
            "round {round}: evicted blocks are read again"
        );
    }
    // Past the end: a missing block, and a missing row of the last block.
    for row in [BLOCK_ROWS * 2 - 5, BLOCK_ROWS * 5 + 1] {
        let e = blocks.row(id, row).await.unwrap_err();
        assert!(matches!(e, SeedReadError::Missing { .. }), "{e}");
        assert!(!e.is_transient());
    }
    // A dataset that is gone (a random id) is missing too.
    let e = blocks.row(DatasetId::new(), 0).await.unwrap_err();
    assert!(matches!(e, SeedReadError::Missing { .. }), "{e}");
}
