//! Fresh, migrated databases for integration tests: a temporary SQLite file, or a new Postgres
//! database on the server named by `SYNTHGATE_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; the role must be allowed to create
//! databases). Each [`TestDb`] is private to one test and removed when it is dropped, even when
//! the test fails; set `SYNTHGATE_TEST_KEEP_DB=1` to keep Postgres databases for a post-mortem.
//!
//! Store tests run against both backends with [`both_backends!`].

use std::sync::Arc;
use synthgate::queue::Database;

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection};
use synthgate::store::DEFAULT_ACQUIRE_TIMEOUT;
use synthgate::store::postgres::PgStore;
use synthgate::store::sqlite::SqliteStore;

/// The admin URL used when `SYNTHGATE_TEST_PG_URL` is not set.
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Pool size of test stores: enough for the concurrency tests.
const MAX_CONNECTIONS: u32 = 8;

/// A database backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh, migrated database and a store opened on it.
pub struct TestDb {
    /// Which backend this is.
    pub backend: Backend,
    /// The database URL (`sqlite://...` or `postgres://...`), to start the whole service on it
    /// or to open a second store, as another replica would.
    pub url: String,
    /// A store on the database.
    pub store: Arc<dyn Database>,
    cleanup: Cleanup,
}

enum Cleanup {
    /// Removed with the directory.
    Sqlite(
        #[expect(dead_code, reason = "held only to delete the directory on drop")]
        tempfile::TempDir,
    ),
    /// Dropped by name through the admin URL.
    Postgres { admin_url: String, name: String },
}

impl TestDb {
    /// Creates a database on `backend` and opens a store on it. Panics with a readable message
    /// if the backend is unavailable: a test that cannot reach its database must fail, not
    /// silently pass.
    pub async fn new(backend: Backend) -> TestDb {
        match backend {
            Backend::Sqlite => Self::sqlite().await,
            Backend::Postgres => Self::postgres().await,
        }
    }

    async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("synthgate.db").display());
        let store = SqliteStore::open(&url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
            .await
            .expect("open the SQLite test database");
        TestDb {
            backend: Backend::Sqlite,
            url,
            store: Arc::new(store),
            cleanup: Cleanup::Sqlite(dir),
        }
    }

    async fn postgres() -> TestDb {
        let admin_url =
            std::env::var("SYNTHGATE_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned());
        let name = format!("synthgate_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
            panic!("connect to the test Postgres server (SYNTHGATE_TEST_PG_URL): {e}")
        });
        // DDL takes no bind parameters; `name` is generated above from a UUID, never input.
        sqlx::query(AssertSqlSafe(format!("create database {name}")))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        // Closed before the pool connects, so the server's connection slots go further.
        let _ = admin.close().await;
        let url = with_database(&admin_url, &name);
        let store = PgStore::connect(&url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
            .await
            .expect("connect to the test database");
        TestDb {
            backend: Backend::Postgres,
            url,
            store: Arc::new(store),
            cleanup: Cleanup::Postgres { admin_url, name },
        }
    }

    /// A database at an older schema: a fresh one with only the migrations numbered up to
    /// `upto` applied, then `seed(url)` run on it (rows as that version of the service wrote
    /// them), then the store opened, which applies the rest: what an upgrade does.
    pub async fn upgraded_from<F, Fut>(backend: Backend, upto: i64, seed: F) -> TestDb
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let old = dir.path().join("migrations");
        std::fs::create_dir(&old).unwrap();
        let folder = match backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        let all = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(folder);
        for entry in std::fs::read_dir(&all).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let version: i64 = name.split('_').next().unwrap().parse().unwrap();
            if version <= upto {
                std::fs::copy(&path, old.join(&name)).unwrap();
            }
        }
        let migrator = sqlx::migrate::Migrator::new(old.as_path())
            .await
            .expect("read the old migrations");
        let (url, cleanup) = match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}", dir.path().join("synthgate.db").display());
                let options = std::str::FromStr::from_str(&url)
                    .map(|o: sqlx::sqlite::SqliteConnectOptions| o.create_if_missing(true))
                    .unwrap();
                let mut conn = sqlx::sqlite::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                migrator.run(&mut conn).await.expect("old migrations");
                let _ = conn.close().await;
                (url, Cleanup::Sqlite(dir))
            }
            Backend::Postgres => {
                let admin_url = std::env::var("SYNTHGATE_TEST_PG_URL")
                    .unwrap_or_else(|_| DEFAULT_PG_URL.to_owned());
                let name = format!("synthgate_test_{}", uuid::Uuid::new_v4().simple());
                let mut admin = PgConnection::connect(&admin_url).await.unwrap();
                // `name` is generated from a UUID, never input.
                sqlx::query(AssertSqlSafe(format!("create database {name}")))
                    .execute(&mut admin)
                    .await
                    .unwrap();
                let _ = admin.close().await;
                let url = with_database(&admin_url, &name);
                let mut conn = PgConnection::connect(&url).await.unwrap();
                migrator.run(&mut conn).await.expect("old migrations");
                let _ = conn.close().await;
                (url, Cleanup::Postgres { admin_url, name })
            }
        };
        seed(url.clone()).await;
        let store: Arc<dyn Database> = match backend {
            Backend::Sqlite => Arc::new(
                SqliteStore::open(&url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
                    .await
                    .unwrap(),
            ),
            Backend::Postgres => Arc::new(
                PgStore::connect(&url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
                    .await
                    .expect("migrate the old database"),
            ),
        };
        TestDb {
            backend,
            url,
            store,
            cleanup,
        }
    }

    /// Opens another store on the same database, as a second replica (or, for SQLite, a second
    /// process) would.
    pub async fn open_another(&self) -> Arc<dyn Database> {
        match self.backend {
            Backend::Sqlite => Arc::new(
                SqliteStore::open(&self.url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
                    .await
                    .expect("open the SQLite test database again"),
            ),
            Backend::Postgres => Arc::new(
                PgStore::connect(&self.url, MAX_CONNECTIONS, DEFAULT_ACQUIRE_TIMEOUT)
                    .await
                    .expect("connect to the test database again"),
            ),
        }
    }
}

impl TestDb {
    /// The single integer `sql` (a `select count(*) ...`, no binds) returns, read over a
    /// connection of its own: for checking rows no store method shows.
    pub async fn count(&self, sql: &'static str) -> i64 {
        match self.backend {
            Backend::Sqlite => {
                let mut conn = sqlx::sqlite::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect to the SQLite test database");
                sqlx::query_scalar(sql)
                    .fetch_one(&mut conn)
                    .await
                    .expect(sql)
            }
            Backend::Postgres => {
                let mut conn = PgConnection::connect(&self.url)
                    .await
                    .expect("connect to the test database");
                sqlx::query_scalar(sql)
                    .fetch_one(&mut conn)
                    .await
                    .expect(sql)
            }
        }
    }
}

impl TestDb {
    /// Runs one statement (no binds) over a connection of its own: for putting rows in states
    /// no store method produces, such as a crash long ago.
    pub async fn execute(&self, sql: &'static str) {
        match self.backend {
            Backend::Sqlite => {
                let mut conn = sqlx::sqlite::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect to the SQLite test database");
                sqlx::query(sql).execute(&mut conn).await.expect(sql);
            }
            Backend::Postgres => {
                let mut conn = PgConnection::connect(&self.url)
                    .await
                    .expect("connect to the test database");
                sqlx::query(sql).execute(&mut conn).await.expect(sql);
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Cleanup::Postgres { admin_url, name } = &self.cleanup else {
            return; // the TempDir field removes the file
        };
        if std::env::var_os("SYNTHGATE_TEST_KEEP_DB").is_some() {
            eprintln!("keeping test database {name}");
            return;
        }
        let (admin_url, sql) = (
            admin_url.clone(),
            format!("drop database if exists {name} with (force)"),
        );
        // Drop cannot await, and may run inside the test's runtime: use a thread with its own
        // runtime. `with (force)` ends the connections the test's pools still hold.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await?;
                sqlx::query(AssertSqlSafe(sql)).execute(&mut admin).await?;
                admin.close().await?;
                Ok::<_, anyhow::Error>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {name}: {dropped:?}");
        }
    }
}

/// `url` with its database (the path) replaced by `name`, keeping any query parameters.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// Declares each listed `async fn name(db: TestDb)` as two tests, `name::sqlite` and
/// `name::postgres`, each on its own fresh database.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let db = $crate::db::TestDb::new($crate::db::Backend::Sqlite).await;
                super::$name(db).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let db = $crate::db::TestDb::new($crate::db::Backend::Postgres).await;
                super::$name(db).await;
            }
        }
    )*};
}
pub(crate) use both_backends;

#[test]
fn with_database_replaces_only_the_path() {
    assert_eq!(
        with_database("postgres://u:p@h:5432/postgres?sslmode=disable", "t1"),
        "postgres://u:p@h:5432/t1?sslmode=disable"
    );
    assert_eq!(with_database("postgres://u@h", "t2"), "postgres://u@h/t2");
}
