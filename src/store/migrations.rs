//! The schema migrations of both backends, embedded in the binary, and their sqlx migrator.
//!
//! sqlx's `migrate!` macro embeds a directory the same way, but it is in sqlx's proc-macro
//! crate, which builds sqlx's database drivers a second time (see `from_row.rs`). The migrator
//! built here is the one the macro builds: each file's version and description from its name,
//! its checksum from its text, so databases migrated by earlier builds validate unchanged (a
//! test compares both against sqlx's own reading of the directories).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One migration file: its name (`<version>_<description>.sql`) and text.
pub(crate) struct Embedded {
    pub(crate) file: &'static str,
    pub(crate) sql: &'static str,
}

/// Embeds each named file of `migrations/sqlite` as `SQLITE` and of `migrations/postgres` as
/// `POSTGRES`, in order. The backends number and name their migrations alike (one change, one
/// file in each). A file added to a directory must be named here too; the test below fails
/// until it is.
macro_rules! embed {
    ($($file:literal),+ $(,)?) => {
        /// `migrations/sqlite`.
        pub(crate) const SQLITE: &[Embedded] = &[$(Embedded {
            file: $file,
            sql: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite/", $file)),
        }),+];

        /// `migrations/postgres`.
        pub(crate) const POSTGRES: &[Embedded] = &[$(Embedded {
            file: $file,
            sql: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres/", $file)),
        }),+];
    };
}

embed!(
    "0001_jobs_records_traces.sql",
    "0002_job_usage.sql",
    "0003_record_lease_expiries.sql",
    "0004_job_output_columns.sql",
    "0005_media.sql",
    "0006_datasets.sql",
    "0007_chunks.sql",
    "0008_job_tool_usage.sql",
    "0009_job_record_counts.sql",
    "0010_readiness.sql",
    "0011_job_names.sql",
    "0012_job_trace_context.sql",
    "0013_job_cursors.sql",
    "0014_record_selection.sql",
    "0015_llm_cache.sql",
    "0016_costs.sql",
);

/// The migrator of `files`, as sqlx's `migrate!` would build it from their directory.
pub(crate) fn migrator(files: &'static [Embedded]) -> Migrator {
    Migrator::with_migrations(files.iter().map(migration).collect())
}

/// A file as sqlx reads one: `<version>_<description>.sql`, underscores of the description
/// read as spaces, `-- no-transaction` on the first line to run it outside a transaction.
fn migration(f: &'static Embedded) -> Migration {
    let (version, rest) = f
        .file
        .split_once('_')
        .expect("embedded migration names are <version>_<description>.sql");
    let version = version
        .parse()
        .expect("embedded migration versions are integers");
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    Migration::new(
        version,
        Cow::Owned(description),
        kind,
        f.sql.into_sql_str(),
        f.sql.starts_with("-- no-transaction"),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// What sqlx's `migrate!` embeds for `dir`: sqlx's own reading of the directory.
    fn from_directory(dir: &str) -> Vec<Migration> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        sqlx::migrate::resolve_blocking(&dir)
            .expect("migrations directory")
            .into_iter()
            .map(|(m, _)| m)
            .collect()
    }

    /// What the migrator checks and runs of one migration.
    type Key = (i64, String, MigrationType, Vec<u8>, bool, String);

    fn key(m: &Migration) -> Key {
        (
            m.version,
            m.description.to_string(),
            m.migration_type,
            m.checksum.to_vec(),
            m.no_tx,
            m.sql.as_str().to_owned(),
        )
    }

    fn same(dir: &str, files: &'static [Embedded]) {
        let embedded: Vec<Key> = migrator(files).iter().map(key).collect();
        let read: Vec<Key> = from_directory(dir).iter().map(key).collect();
        let names = |v: &[Key]| {
            v.iter()
                .map(|m| format!("{} {}", m.0, m.1))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&embedded),
            names(&read),
            "{dir}: the embedded list (src/store/migrations.rs) must name every file"
        );
        assert!(embedded == read, "{dir}: an embedded migration differs");
    }

    #[test]
    fn sqlite_migrations_are_the_directory() {
        same("migrations/sqlite", SQLITE);
    }

    #[test]
    fn postgres_migrations_are_the_directory() {
        same("migrations/postgres", POSTGRES);
    }
}
