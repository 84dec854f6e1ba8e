//! The path an upload was read from, and matching a config's `local` seed path against it.
//!
//! DataDesigner reads `path: artifacts/ocr/parquet-files/*.parquet` from that one folder, and
//! writes every batch of every pipeline as `batch_00000.parquet`, so matching uploads by file
//! name alone takes another pipeline's files (and the newest of two equal names silently
//! wins). An upload may therefore say which path it came from (`POST /v1/datasets?path=`;
//! `synthgate submit` always does), written as the config writes it: the config's own path
//! for a single file, the config's folder plus the file's name for a glob. Such an upload is
//! matched by that path; one uploaded by name only is matched by its name, as before.
//!
//! The path is kept in the dataset's `source_ref` as `upload:{path}`: that column already
//! says where a dataset came from for every other source, is indexed per owner and is a
//! filter of the dataset listing, so no new column is needed.

use crate::domain::stored_dataset::{DatasetMeta, DatasetSourceKind};

/// How an upload's path is written in `source_ref`.
const PREFIX: &str = "upload:";

/// The longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// The `source_ref` of an upload read from `path` (normalized).
pub fn source_ref(path: &str) -> String {
    format!("{PREFIX}{path}")
}

/// The path an uploaded dataset was read from, when its uploader said.
pub fn of(meta: &DatasetMeta) -> Option<&str> {
    if meta.source != DatasetSourceKind::Upload {
        return None;
    }
    meta.source_ref.as_deref()?.strip_prefix(PREFIX)
}

/// `path` as both sides compare it: `\` read as `/` (a config written on Windows), empty and
/// `.` segments dropped, a leading `/` kept. `..` is kept as written: the path is a name the
/// client gave, never opened here.
pub fn normalize(path: &str) -> String {
    let unified = path.replace('\\', "/");
    let segments: Vec<&str> = unified
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let joined = segments.join("/");
    if unified.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The path a glob's match is recorded under: the config's folder (everything before the
/// first `*`, a folder even without a trailing `/`, as DataDesigner resolves it) and the
/// match's path below it.
pub fn glob_match_path(glob_prefix: &str, below: &str) -> String {
    let dir = normalize(glob_prefix);
    if dir.is_empty() {
        normalize(below)
    } else {
        normalize(&format!("{dir}/{below}"))
    }
}

/// The path of `POST /v1/datasets?path=`, normalized, when it is one an upload of `name` may
/// have come from: at most [`MAX_PATH_BYTES`], no control character, ending in `name`.
pub fn check(raw: &str, name: &str) -> Result<String, String> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(format!("longer than {MAX_PATH_BYTES} bytes"));
    }
    if raw.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    let path = normalize(raw);
    if path.rsplit('/').next() != Some(name) {
        return Err(format!(
            "must end in the file's name '{name}' (the path the file was read from, as the \
             config names it)"
        ));
    }
    Ok(path)
}

/// A config's `local` seed path, as matched against recorded upload paths.
#[derive(Debug, Clone)]
pub enum SeedPath {
    /// No glob: the one path, normalized.
    Exact(String),
    /// DataDesigner's glob: everything before the first `*` is a folder (normalized; empty
    /// for the current one), the rest a pattern over paths below it whose `*` stays within
    /// one segment, as DuckDB's does.
    Glob { dir: String, pattern: glob::Pattern },
    /// `?` or `[...]` without a `*`: the whole path is the pattern.
    WholeGlob(glob::Pattern),
}

/// Why a config's path is not a glob.
#[derive(Debug)]
pub struct BadPattern(pub String);

impl SeedPath {
    /// Parses a config's path.
    pub fn parse(path: &str) -> Result<Self, BadPattern> {
        let bad = |e: glob::PatternError| BadPattern(format!("'{path}' is not a valid glob: {e}"));
        let unified = path.replace('\\', "/");
        match unified.split_once('*') {
            Some((prefix, suffix)) => Ok(Self::Glob {
                dir: normalize(prefix),
                pattern: glob::Pattern::new(&format!("*{suffix}")).map_err(bad)?,
            }),
            None if unified.contains(['?', '[']) => Ok(Self::WholeGlob(
                glob::Pattern::new(&normalize(&unified)).map_err(bad)?,
            )),
            None => Ok(Self::Exact(normalize(&unified))),
        }
    }

    /// Whether the path is a glob (several files may match).
    pub fn is_glob(&self) -> bool {
        !matches!(self, Self::Exact(_))
    }

    /// Whether an upload recorded as read from `recorded` is one of the files this path names.
    pub fn matches(&self, recorded: &str) -> bool {
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        match self {
            Self::Exact(path) => path == recorded,
            // The path itself too: a CLI that found `data[1]/seed.csv` as a file recorded it
            // as written.
            Self::WholeGlob(pattern) => {
                pattern.as_str() == recorded || pattern.matches_with(recorded, options)
            }
            Self::Glob { dir, pattern } => {
                let below = if dir.is_empty() {
                    (!recorded.starts_with('/')).then_some(recorded)
                } else if dir == "/" {
                    recorded.strip_prefix('/')
                } else {
                    recorded
                        .strip_prefix(dir.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                };
                below.is_some_and(|below| pattern.matches_with(below, options))
            }
        }
    }

    /// Whether the config's path names a folder once normalized (`data/seed.parquet` does;
    /// `seed.parquet` and `./seed.parquet` do not).
    pub fn names_folder(&self) -> bool {
        match self {
            Self::Exact(path) => path.contains('/'),
            Self::Glob { dir, .. } => !dir.is_empty(),
            Self::WholeGlob(pattern) => pattern.as_str().contains('/'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_as_both_sides_write_them() {
        assert_eq!(normalize("./data//seed.csv"), "data/seed.csv");
        assert_eq!(normalize(r"data\sub\seed.csv"), "data/sub/seed.csv");
        assert_eq!(normalize("/abs/./x.csv"), "/abs/x.csv");
        assert_eq!(normalize("../up/x.csv"), "../up/x.csv");
        assert_eq!(normalize("~/seeds/x.csv"), "~/seeds/x.csv");
        assert_eq!(glob_match_path("", "a.parquet"), "a.parquet");
        assert_eq!(glob_match_path("data/", "a.parquet"), "data/a.parquet");
        // DataDesigner reads `data/part-*.parquet` as the folder `data/part-`.
        assert_eq!(
            glob_match_path("data/part-", "a.parquet"),
            "data/part-/a.parquet"
        );
    }

    #[test]
    fn a_glob_reads_only_its_folder() {
        let p = SeedPath::parse("artifacts/ocr/parquet-files/*.parquet").unwrap();
        assert!(p.is_glob() && p.names_folder());
        assert!(p.matches("artifacts/ocr/parquet-files/batch_00000.parquet"));
        assert!(!p.matches("your_seed_data.parquet"));
        assert!(!p.matches("artifacts/other/batch_00000.parquet"));
        // `*` stays within one segment, as DuckDB's does.
        assert!(!p.matches("artifacts/ocr/parquet-files/sub/batch_00000.parquet"));
        assert!(!p.matches("artifacts/ocr/parquet-files-2/batch_00000.parquet"));

        let here = SeedPath::parse("*.csv").unwrap();
        assert!(here.matches("a.csv") && !here.matches("d/a.csv") && !here.matches("/a.csv"));
        assert!(!here.names_folder());

        let part = SeedPath::parse("data/part-*.parquet").unwrap();
        assert!(part.matches("data/part-/x.parquet"));
        assert!(!part.matches("data/part-1.parquet"));

        let abs = SeedPath::parse("/*.csv").unwrap();
        assert!(abs.matches("/a.csv") && !abs.matches("a.csv"));

        let nested = SeedPath::parse(r"data\*\x.csv").unwrap();
        assert!(nested.matches("data/a/x.csv") && !nested.matches("data/a/b/x.csv"));
    }

    #[test]
    fn upload_paths_end_in_the_name() {
        assert_eq!(check("./data/a.csv", "a.csv").unwrap(), "data/a.csv");
        assert!(check("data/b.csv", "a.csv").is_err());
        assert!(check("data/\u{7}a.csv", "a.csv").is_err());
        assert!(check(&"d/".repeat(3000), "d").is_err());
    }

    #[test]
    fn exact_and_whole_globs() {
        let p = SeedPath::parse("./data/seed.csv").unwrap();
        assert!(!p.is_glob() && p.names_folder());
        assert!(p.matches("data/seed.csv") && !p.matches("seed.csv"));
        assert!(!SeedPath::parse("seed.csv").unwrap().names_folder());

        let q = SeedPath::parse("data/seed-?.csv").unwrap();
        assert!(q.is_glob());
        assert!(q.matches("data/seed-1.csv") && !q.matches("other/seed-1.csv"));
        assert!(q.matches("data/seed-?.csv"));
        assert!(SeedPath::parse("data/[.csv").is_err());
    }
}
