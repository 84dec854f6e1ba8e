//! `local` seeds in the allow-listed directories: what resolves, what does not (`..`,
//! absolute paths outside, symlinks and globs leading out), and that nothing outside leaks
//! through a different answer. Both backends.

use std::path::Path;

use serde_json::json;
use synthgate::datasets::DatasetSourceKind;
use synthgate::datasets::sources::server::{resolve_directory, resolve_local};
use synthgate::domain::dataset::FileSystemSource;

use super::{ctx, one_issue, rows_of, sources};
use crate::db::{TestDb, both_backends};

both_backends!(
    allowed_files_resolve_and_nothing_outside_does,
    a_server_file_is_imported_once_per_version,
    listings_do_not_leave_the_allowed_directories,
    without_seed_dirs_nothing_is_read,
);

/// `root/outside/secret.csv`, and `root/allowed` holding files, a nested file, a symlink inside
/// and symlinks pointing out (to a file and to a directory).
fn tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    std::fs::create_dir_all(p.join("outside")).unwrap();
    std::fs::write(p.join("outside/secret.csv"), "secret\ns3cr3t-value\n").unwrap();
    std::fs::create_dir_all(p.join("allowed/nested/deep")).unwrap();
    std::fs::write(p.join("allowed/data.csv"), "name,age\nada,36\ngrace,45\n").unwrap();
    std::fs::write(p.join("allowed/nested/deep/inner.csv"), "x\n1\n").unwrap();
    std::os::unix::fs::symlink("../outside/secret.csv", p.join("allowed/link.csv")).unwrap();
    std::os::unix::fs::symlink("../outside", p.join("allowed/linkdir")).unwrap();
    std::os::unix::fs::symlink("data.csv", p.join("allowed/ok_link.csv")).unwrap();
    root
}

fn allowed(root: &Path) -> std::path::PathBuf {
    root.join("allowed")
}

async fn allowed_files_resolve_and_nothing_outside_does(db: TestDb) {
    let root = tree();
    let s = sources(|c| c.datasets.seed_dirs = vec![allowed(root.path())]);
    let cx = ctx(db.store.as_ref(), None, &s);

    let found = resolve_local(&cx, "data.csv").await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "data.csv");
    assert_eq!(found[0].source, DatasetSourceKind::ServerFile);
    let rows = rows_of(db.store.as_ref(), &found[0]).await;
    assert_eq!(
        serde_json::Value::Array(rows.into_iter().map(Into::into).collect()),
        json!([{"name": "ada", "age": 36}, {"name": "grace", "age": 45}])
    );

    let nested = resolve_local(&cx, "nested/deep/inner.csv").await.unwrap();
    assert_eq!(nested[0].name, "inner.csv");
    // Windows separators are read as `/`.
    let nested2 = resolve_local(&cx, "nested\\deep\\inner.csv").await.unwrap();
    assert_eq!(nested2[0].id, nested[0].id);
    let absolute = allowed(root.path()).join("data.csv");
    let abs = resolve_local(&cx, absolute.to_str().unwrap())
        .await
        .unwrap();
    assert_eq!(abs[0].id, found[0].id, "the same file is the same dataset");
    // A symlink that stays inside is followed: it is the same file, so the same dataset.
    let ok_link = resolve_local(&cx, "ok_link.csv").await.unwrap();
    assert_eq!(ok_link[0].id, found[0].id);
    // A glob matches inside only, in path order (data.csv, ok_link.csv); the link out is
    // left out.
    let globbed = resolve_local(&cx, "*.csv").await.unwrap();
    let ids: Vec<_> = globbed.iter().map(|m| m.id).collect();
    assert_eq!(ids, [found[0].id, found[0].id]);
    let deep = resolve_local(&cx, "**/*.csv").await.unwrap();
    let ids: Vec<_> = deep.iter().map(|m| m.id).collect();
    assert_eq!(ids, [found[0].id, nested[0].id, found[0].id]);

    // A missing file and every path leading outside get the same answer: nothing matched
    // (`resolve` then reports `seed_dataset_not_found` for all alike).
    assert!(resolve_local(&cx, "nope.csv").await.unwrap().is_empty());
    let secret_abs = root.path().join("outside/secret.csv");
    let secret_abs = secret_abs.to_str().unwrap();
    for escaping in [
        "../outside/secret.csv",
        "nested/../../outside/secret.csv",
        secret_abs,
        "link.csv",
        "linkdir/secret.csv",
        "../outside/*.csv",
        "*/../../outside/*.csv",
        "linkdir/*.csv",
        "../*/secret.csv",
        "/etc/passwd",
    ] {
        let found = resolve_local(&cx, escaping).await.unwrap();
        assert!(found.is_empty(), "{escaping} resolved to {found:?}");
    }
    // Nothing from outside was stored.
    for m in db
        .store
        .find_datasets(
            None,
            &synthgate::datasets::DatasetQuery {
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap()
    {
        for row in rows_of(db.store.as_ref(), &m).await {
            assert!(
                !serde_json::to_string(&row).unwrap().contains("s3cr3t"),
                "{}",
                m.name
            );
        }
    }
}

async fn a_server_file_is_imported_once_per_version(db: TestDb) {
    let root = tree();
    let s = sources(|c| c.datasets.seed_dirs = vec![allowed(root.path())]);
    let cx = ctx(db.store.as_ref(), Some("team-a"), &s);
    let first = resolve_local(&cx, "data.csv").await.unwrap();
    let again = resolve_local(&cx, "data.csv").await.unwrap();
    assert_eq!(
        again[0].id, first[0].id,
        "an unchanged file is not imported again"
    );
    assert_eq!(first[0].owner.as_deref(), Some("team-a"));
    // Another key gets its own dataset: datasets are per owner.
    let other = resolve_local(&ctx(db.store.as_ref(), Some("team-b"), &s), "data.csv")
        .await
        .unwrap();
    assert_ne!(other[0].id, first[0].id);
    // A changed file (another size) is imported again, with the new rows.
    std::fs::write(allowed(root.path()).join("data.csv"), "name,age\nlin,7\n").unwrap();
    let changed = resolve_local(&cx, "data.csv").await.unwrap();
    assert_ne!(changed[0].id, first[0].id);
    assert_eq!(changed[0].num_rows, 1);
}

async fn listings_do_not_leave_the_allowed_directories(db: TestDb) {
    let root = tree();
    let s = sources(|c| c.datasets.seed_dirs = vec![allowed(root.path())]);
    let cx = ctx(db.store.as_ref(), None, &s);
    let fs_source = |path: &str| FileSystemSource {
        path: path.into(),
        file_pattern: "*".into(),
        recursive: true,
    };
    for escaping in ["..", "../outside", "linkdir", root.path().to_str().unwrap()] {
        let issue = one_issue(resolve_directory(&cx, &fs_source(escaping), Some("utf-8")).await);
        assert_eq!(issue.code, "seed_dataset_not_found", "{escaping}");
        assert_eq!(issue.field.as_deref(), Some("seed_config.source.path"));
    }
    // The allowed directory itself: the symlinks pointing out are not listed or read.
    let found = resolve_directory(&cx, &fs_source("."), Some("utf-8"))
        .await
        .unwrap();
    let rows = rows_of(db.store.as_ref(), &found[0]).await;
    let paths: Vec<&str> = rows
        .iter()
        .map(|r| r["relative_path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["data.csv", "nested/deep/inner.csv", "ok_link.csv"]);
    assert!(!serde_json::to_string(&rows).unwrap().contains("s3cr3t"));
}

async fn without_seed_dirs_nothing_is_read(db: TestDb) {
    let root = tree();
    let s = sources(|_| {});
    let cx = ctx(db.store.as_ref(), None, &s);
    let absolute = allowed(root.path()).join("data.csv");
    assert!(
        resolve_local(&cx, absolute.to_str().unwrap())
            .await
            .unwrap()
            .is_empty()
    );
    let dir = FileSystemSource {
        path: allowed(root.path()).to_str().unwrap().into(),
        file_pattern: "*".into(),
        recursive: true,
    };
    let issue = one_issue(resolve_directory(&cx, &dir, None).await);
    assert_eq!(issue.code, "unsupported_seed_source");
    assert_eq!(issue.field.as_deref(), Some("seed_config.source.seed_type"));
}
