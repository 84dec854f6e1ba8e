//! Writes the database refuses for a while: SQLite after a transient disk-full (the writes that
//! meet it fail, and once space is back every write works again, on the same connections), and
//! a Postgres gone read-only. `/readyz`'s write probe reports both.
//!
//! SQLite rolls a transaction back by itself when a write meets a full disk, so the rollback
//! sqlx sends when the transaction is dropped fails ("no transaction is active") and sqlx's
//! count of open transactions on that connection stayed at one. Back in the pool, every later
//! `begin` on it failed with "begin_with at non-zero transaction depth": every claim and write
//! failed until a restart, even after space was freed.
//!
//! The disk is a real one that fills: a 4 MiB tmpfs mounted for the test (it needs root, as CI
//! and this project's machines run; elsewhere the test says why and passes without running).

use std::path::{Path, PathBuf};

use serde_json::json;
use synthgate::store::DEFAULT_ACQUIRE_TIMEOUT;
use synthgate::store::sqlite::SqliteStore;
use synthgate::store::{JobStore, Store};

use super::new_job;

/// A small tmpfs, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount() -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a filler file until the disk is full; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.flush();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test]
async fn sqlite_recovers_after_a_disk_full() {
    let Some(disk) = crate::require::require(SmallDisk::mount(), || {
        "cannot mount a tmpfs here (the test needs root, as CI has)".into()
    }) else {
        return;
    };
    let path = disk.path().join("synthgate.db");
    let store = SqliteStore::open(path.to_str().unwrap(), 2, DEFAULT_ACQUIRE_TIMEOUT)
        .await
        .unwrap();
    store.create_job(&new_job(None, 1)).await.unwrap();

    let filler = disk.fill();
    let mut big = new_job(None, 1);
    big.config = json!({"columns": [], "pad": "x".repeat(300_000)});
    for _ in 0..4 {
        let e = store.create_job(&big).await.unwrap_err();
        let e = e.to_string();
        assert!(e.contains("full") || e.contains("disk"), "{e}");
    }

    assert!(
        store.probe_write().await.is_err(),
        "/readyz's probe sees it"
    );

    std::fs::remove_file(filler).unwrap();
    for _ in 0..4 {
        let mut job = big.clone();
        job.id = synthgate::domain::JobId::new();
        store
            .create_job(&job)
            .await
            .expect("writes work again once space is back");
    }
    store
        .probe_write()
        .await
        .expect("and /readyz's probe says so");
    store.close().await;
}

/// A Postgres that answers reads but refuses writes (a failed-over replica, a database set
/// read-only): `select 1` passed, so `/readyz` said ready while every submit failed. The write
/// probe says not ready.
#[tokio::test]
async fn a_read_only_postgres_is_not_ready() {
    let db = crate::db::TestDb::new(crate::db::Backend::Postgres).await;
    db.store.probe_write().await.expect("writable at first");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&pool)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "alter database \"{name}\" set default_transaction_read_only = on"
    )))
    .execute(&pool)
    .await
    .unwrap();
    // The store's connections end (as at a failover); the ones it opens next are read-only.
    sqlx::query(
        "select pg_terminate_backend(pid) from pg_stat_activity \
         where datname = $1 and pid <> pg_backend_pid()",
    )
    .bind(&name)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let mut last = String::new();
    for _ in 0..5 {
        match db.store.probe_write().await {
            Ok(()) => panic!("a read-only database passed the write probe"),
            Err(e) => last = e.to_string(),
        }
        if last.contains("read-only") {
            break;
        }
    }
    assert!(last.contains("read-only"), "{last}");
}
