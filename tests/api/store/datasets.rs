//! Datasets in the store, on both backends: imports (file and rows), block reads, owner
//! isolation, deletes (refused while a live job reads the dataset), stale imports.

use std::io::Write;
use std::time::Duration;

use serde_json::{Map, Value, json};
use synthgate::datasets::{
    BLOCK_ROWS, ColumnType, DatasetFormat, DatasetId, DatasetMeta, DatasetQuery, DatasetSourceKind,
    DeleteDataset, import_file, import_rows,
};
use synthgate::store::{CreateOutcome, Store};

use super::{create, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(
    csv_import_reads_back_in_blocks,
    datasets_are_per_owner,
    delete_refused_while_a_live_job_reads_it,
    job_refused_when_its_dataset_is_gone,
    failed_import_leaves_nothing,
    stale_imports_are_deleted,
    listing_rows_import,
);

/// Writes `text` to a temporary file named `name`; keep the dir alive while using the path.
fn file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    (dir, path)
}

async fn import_csv(store: &dyn Store, owner: Option<&str>, name: &str, text: &str) -> DatasetMeta {
    let (_dir, path) = file(name, text);
    import_file(
        store,
        owner,
        name,
        DatasetFormat::Csv,
        &path,
        DatasetSourceKind::Upload,
        None,
        &crate::helpers::test_dataset_limits(),
    )
    .await
    .unwrap()
}

fn all(q: DatasetQuery) -> DatasetQuery {
    DatasetQuery { limit: 100, ..q }
}

async fn csv_import_reads_back_in_blocks(db: TestDb) {
    let store = &*db.store;
    let n = BLOCK_ROWS * 2 + 5;
    let mut text = String::from("id,score,name,ok,gap\n");
    for i in 0..n {
        // `gap` is null in every other row and stays an integer column.
        let gap = if i % 2 == 0 {
            String::new()
        } else {
            i.to_string()
        };
        text.push_str(&format!("{i},{}.5,\"n, {i}\",{},{gap}\n", i, i % 3 == 0));
    }
    let meta = import_csv(store, Some("a"), "people.csv", &text).await;
    assert_eq!(meta.num_rows, n);
    assert_eq!(meta.num_blocks(), 3);
    assert_eq!(meta.size_bytes, text.len() as u64);
    assert_eq!(meta.sha256.len(), 64);
    assert_eq!(meta.format, DatasetFormat::Csv);
    let types: Vec<(&str, ColumnType)> = meta
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.r#type))
        .collect();
    assert_eq!(
        types,
        [
            ("id", ColumnType::Integer),
            ("score", ColumnType::Float),
            ("name", ColumnType::String),
            ("ok", ColumnType::Boolean),
            ("gap", ColumnType::Integer),
        ]
    );
    let first = store.read_dataset_block(meta.id, 0).await.unwrap();
    assert_eq!(first.len() as u64, BLOCK_ROWS);
    assert_eq!(
        Value::Object(first[1].clone()),
        json!({"id": 1, "score": 1.5, "name": "n, 1", "ok": false, "gap": 1})
    );
    // Key order is column order.
    let keys: Vec<&String> = first[0].keys().collect();
    assert_eq!(keys, ["id", "score", "name", "ok", "gap"]);
    assert_eq!(first[0]["gap"], Value::Null);
    let last = store.read_dataset_block(meta.id, 2).await.unwrap();
    assert_eq!(last.len(), 5);
    assert_eq!(last[4]["id"], json!(n - 1));
    assert!(
        store
            .read_dataset_block(meta.id, 3)
            .await
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        store.get_dataset(meta.id, Some("a")).await.unwrap(),
        Some(meta.clone())
    );
    assert_eq!(
        store
            .get_datasets(&[meta.id, DatasetId::new()])
            .await
            .unwrap(),
        std::slice::from_ref(&meta)
    );
    let by_name = store
        .find_datasets(
            Some("a"),
            &all(DatasetQuery {
                name: Some("people.csv".into()),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(by_name, std::slice::from_ref(&meta));
    let by_hash = store
        .find_datasets(
            Some("a"),
            &all(DatasetQuery {
                sha256: Some(meta.sha256.clone()),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(by_hash, [meta]);
}

async fn datasets_are_per_owner(db: TestDb) {
    let store = &*db.store;
    let a1 = import_csv(store, Some("a"), "x.csv", "v\n1\n").await;
    let b = import_csv(store, Some("b"), "x.csv", "v\n2\n").await;
    let a2 = import_csv(store, Some("a"), "x.csv", "v\n3\n").await;

    assert_eq!(store.get_dataset(b.id, Some("a")).await.unwrap(), None);
    assert_eq!(
        store.get_dataset(b.id, None).await.unwrap(),
        Some(b.clone())
    );
    let ids = |v: Vec<DatasetMeta>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
    // Newest first, then pages by cursor.
    let page = store
        .find_datasets(Some("a"), &all(DatasetQuery::default()))
        .await
        .unwrap();
    assert_eq!(ids(page), [a2.id, a1.id]);
    let q = DatasetQuery {
        before: Some(a2.id),
        limit: 1,
        ..Default::default()
    };
    assert_eq!(
        ids(store.find_datasets(Some("a"), &q).await.unwrap()),
        [a1.id]
    );
    let everyone = store
        .find_datasets(None, &all(DatasetQuery::default()))
        .await
        .unwrap();
    assert_eq!(ids(everyone), [a2.id, b.id, a1.id]);
    assert_eq!(
        store.delete_dataset(b.id, Some("a")).await.unwrap(),
        DeleteDataset::Missing
    );
    assert_eq!(store.get_dataset(b.id, Some("b")).await.unwrap(), Some(b));
}

async fn delete_refused_while_a_live_job_reads_it(db: TestDb) {
    let store = &*db.store;
    let meta = import_csv(store, Some("a"), "seed.csv", "v\n1\n2\n").await;
    let mut new = new_job(Some("a"), 1);
    new.seed_datasets = vec![meta.id];
    let job = create(store, &new).await;

    assert_eq!(
        store.delete_dataset(meta.id, Some("a")).await.unwrap(),
        DeleteDataset::InUse(vec![job.id])
    );
    assert_eq!(store.read_dataset_block(meta.id, 0).await.unwrap().len(), 2);

    // Once the job has finished, the delete goes through, rows included.
    store.request_cancel(job.id).await.unwrap();
    assert_eq!(
        store.delete_dataset(meta.id, Some("a")).await.unwrap(),
        DeleteDataset::Deleted
    );
    assert_eq!(store.get_dataset(meta.id, None).await.unwrap(), None);
    assert!(
        store
            .read_dataset_block(meta.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.delete_dataset(meta.id, Some("a")).await.unwrap(),
        DeleteDataset::Missing
    );
}

async fn job_refused_when_its_dataset_is_gone(db: TestDb) {
    let store = &*db.store;
    let kept = import_csv(store, None, "a.csv", "v\n1\n").await;
    let gone = import_csv(store, None, "b.csv", "v\n1\n").await;
    assert_eq!(
        store.delete_dataset(gone.id, None).await.unwrap(),
        DeleteDataset::Deleted
    );
    let mut new = new_job(None, 2);
    new.seed_datasets = vec![kept.id, gone.id];
    match store.create_job(&new).await.unwrap() {
        CreateOutcome::SeedDatasetsMissing(ids) => assert_eq!(ids, [gone.id]),
        other => panic!("expected SeedDatasetsMissing, got {other:?}"),
    }
    assert_eq!(store.get_job(new.id, None).await.unwrap(), None);
}

async fn failed_import_leaves_nothing(db: TestDb) {
    let store = &*db.store;
    let mut text = String::from("a,b\n");
    for i in 0..(BLOCK_ROWS * 40) {
        text.push_str(&format!("{i},{i}\n"));
    }
    // A bad row after many good blocks: some batches were already written.
    text.push_str("1,2,3\n");
    let (_dir, path) = file("bad.csv", &text);
    let err = import_file(
        store,
        None,
        "bad.csv",
        DatasetFormat::Csv,
        &path,
        DatasetSourceKind::Upload,
        None,
        &crate::helpers::test_dataset_limits(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, "invalid_dataset");
    assert!(
        err.message
            .contains(&format!("row {}", BLOCK_ROWS * 40 + 1)),
        "{}",
        err.message
    );
    assert!(
        store
            .find_datasets(None, &all(DatasetQuery::default()))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(db.count("select count(*) from datasets").await, 0);
    assert_eq!(db.count("select count(*) from dataset_blocks").await, 0);
}

async fn stale_imports_are_deleted(db: TestDb) {
    let store = &*db.store;
    // An import cut short by a crash: the row and a block, never finished.
    let meta = DatasetMeta {
        id: DatasetId::new(),
        owner: None,
        name: "crash.csv".into(),
        format: DatasetFormat::Csv,
        columns: Vec::new(),
        num_rows: 0,
        size_bytes: 10,
        sha256: "0".repeat(64),
        source: DatasetSourceKind::Upload,
        source_ref: None,
        created_at: chrono::Utc::now(),
    };
    store.begin_dataset_import(&meta).await.unwrap();
    assert!(
        store
            .write_dataset_blocks(meta.id, 0, &[b"[{}]".to_vec()])
            .await
            .unwrap()
    );
    // Invisible while importing.
    assert_eq!(store.get_dataset(meta.id, None).await.unwrap(), None);
    assert!(
        store
            .find_datasets(None, &all(DatasetQuery::default()))
            .await
            .unwrap()
            .is_empty()
    );
    // Not idle long enough: kept.
    assert_eq!(
        store
            .delete_stale_imports(Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.delete_stale_imports(Duration::ZERO).await.unwrap(), 1);
    assert_eq!(db.count("select count(*) from dataset_blocks").await, 0);
    // The dead import cannot write or finish any more.
    assert!(
        !store
            .write_dataset_blocks(meta.id, 1, &[b"[]".to_vec()])
            .await
            .unwrap()
    );
    assert_eq!(
        store.finish_dataset_import(meta.id, &[], 1).await.unwrap(),
        None
    );
}

async fn listing_rows_import(db: TestDb) {
    let store = &*db.store;
    let row = |v: Value| -> Map<String, Value> { v.as_object().unwrap().clone() };
    let rows = vec![
        row(json!({"path": "a.txt", "size": 3})),
        row(json!({"path": "b.txt", "size": 4.5, "extra": [1]})),
    ];
    let meta = import_rows(
        store,
        Some("k"),
        "docs",
        rows,
        DatasetSourceKind::Directory,
        Some("dir:/x".into()),
    )
    .await
    .unwrap();
    assert_eq!(meta.format, DatasetFormat::Listing);
    assert_eq!(meta.source_ref.as_deref(), Some("dir:/x"));
    let types: Vec<(&str, ColumnType)> = meta
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.r#type))
        .collect();
    assert_eq!(
        types,
        [
            ("path", ColumnType::String),
            ("size", ColumnType::Float),
            ("extra", ColumnType::Array)
        ]
    );
    let block = store.read_dataset_block(meta.id, 0).await.unwrap();
    assert_eq!(
        Value::Object(block[0].clone()),
        json!({"path": "a.txt", "size": 3, "extra": null})
    );
    let found = store
        .find_datasets(
            Some("k"),
            &all(DatasetQuery {
                source_ref: Some("dir:/x".into()),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(found, [meta]);
}
