//! Which local files a config's seed names: `seed_config.source` with `seed_type: local`,
//! its `path` resolved the way DataDesigner 0.9.6 resolves it
//! (`_resolve_local_file_runtime_path` in `data_designer/config/seed_source.py`), so
//! `synthgate submit` uploads the same files a local DataDesigner run would read.
//!
//! DataDesigner's rules, kept here:
//! - relative paths are relative to the current directory, not to the config file;
//! - `~` and `~/...` are the home directory;
//! - with a `*`, everything before the first `*` is a directory and the rest a pattern over
//!   the names in it (DuckDB then globs it): `data/*.parquet` is every `.parquet` file in
//!   `data/`; `data/part-*.parquet` is the `.parquet` files in a directory `data/part-`, as
//!   in DataDesigner.
//!
//! Each file is uploaded under its name, recording the path the config names it by (see
//! `crate::datasets::upload_path`): the config's path for a single file, the glob's folder as
//! written plus the match's name for a glob. The server matches the config's path against
//! those recorded paths, so a glob reads only its own folder, as in DataDesigner.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::datasets::upload_path;

/// A local seed file to make sure the server has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeedFile {
    /// Where it is on this machine.
    pub path: PathBuf,
    /// The dataset name the server will look for.
    pub name: String,
    /// The path the config names it by, recorded with the upload so the server matches the
    /// config's path against it (see `crate::datasets::upload_path`): the config's path for
    /// a single file, the glob's folder as written plus the file's name for a match.
    pub upload_path: String,
}

/// What a config's `local` seed path resolved to here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LocalSeed {
    /// The config has no `local` seed (no seed, inline rows, `hf`, directories...).
    None,
    /// The files the path names, in name order (one for a plain path).
    Files { path: String, files: Vec<SeedFile> },
    /// Nothing here matches: not an error, since the server may have the file (already
    /// uploaded, or in an allow-listed directory); it says so if not.
    Missing { path: String },
}

/// The `seed_config.source` of a config as DataDesigner writes it (with or without the
/// `data_designer` wrapper), when its `seed_type` is `local`: its `path`.
pub(crate) fn local_seed_path(config: &Value) -> Option<&str> {
    let inner = config.get("data_designer").unwrap_or(config);
    let source = inner.get("seed_config")?.get("source")?;
    if source.get("seed_type")?.as_str()? != "local" {
        return None;
    }
    source.get("path")?.as_str()
}

/// Finds the files a config's `local` seed names, relative to `cwd` with `home` for `~`.
pub(crate) fn find_local_seed(config: &Value, cwd: &Path, home: Option<&Path>) -> LocalSeed {
    let Some(path) = local_seed_path(config) else {
        return LocalSeed::None;
    };
    let files = match path.split_once('*') {
        None => single_file(path, cwd, home).into_iter().collect(),
        Some((prefix, suffix)) => glob_files(prefix, suffix, cwd, home),
    };
    if files.is_empty() {
        LocalSeed::Missing { path: path.into() }
    } else {
        LocalSeed::Files {
            path: path.into(),
            files,
        }
    }
}

/// The dataset name the server matches a config path against: the last component, with `\`
/// read as a separator (a config written on Windows).
pub(crate) fn dataset_name(config_path: &str) -> Option<String> {
    let unified = config_path.replace('\\', "/");
    Path::new(&unified)
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
}

fn single_file(path: &str, cwd: &Path, home: Option<&Path>) -> Option<SeedFile> {
    let local = absolute(&expand_home(path, home), cwd);
    if !local.is_file() {
        return None;
    }
    Some(SeedFile {
        path: local,
        name: dataset_name(path)?,
        upload_path: upload_path::normalize(path),
    })
}

fn glob_files(prefix: &str, suffix: &str, cwd: &Path, home: Option<&Path>) -> Vec<SeedFile> {
    // Python's `Path(prefix or ".")`: an empty prefix is the current directory.
    let written = prefix;
    let prefix = if prefix.is_empty() { "." } else { prefix };
    let dir = absolute(&expand_home(prefix, home), cwd);
    let root = dir.clone();
    let Some(dir) = dir.to_str() else {
        return Vec::new();
    };
    // The directory is literal; only the part from the first `*` on is a pattern.
    let pattern = Path::new(&glob::Pattern::escape(dir)).join(format!("*{suffix}"));
    let Some(pattern) = pattern.to_str() else {
        return Vec::new();
    };
    let Ok(paths) = glob::glob(pattern) else {
        return Vec::new();
    };
    let mut files: Vec<SeedFile> = paths
        .filter_map(Result::ok)
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let below = p.strip_prefix(&root).ok()?.to_str()?;
            let upload_path = upload_path::glob_match_path(written, below);
            Some(SeedFile {
                path: p,
                name,
                upload_path,
            })
        })
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.path.cmp(&b.path)));
    files
}

/// Python's `Path.expanduser` for `~` and `~/...` (`~user` is left as is: it names another
/// account's home, which a seed file on this machine hardly ever is).
fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
    }
}

fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(path: &str) -> Value {
        json!({"data_designer": {"columns": [], "seed_config": {
            "source": {"seed_type": "local", "path": path}, "sampling_strategy": "ordered"}}})
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"a\n1\n").unwrap();
    }

    fn names(seed: &LocalSeed) -> Vec<(&str, &Path)> {
        match seed {
            LocalSeed::Files { files, .. } => files
                .iter()
                .map(|f| (f.name.as_str(), f.path.as_path()))
                .collect(),
            other => panic!("no files: {other:?}"),
        }
    }

    #[test]
    fn only_local_sources_name_files() {
        assert_eq!(local_seed_path(&config("x.csv")), Some("x.csv"));
        // The inner object, as the server also accepts it.
        let inner = config("y.csv")["data_designer"].clone();
        assert_eq!(local_seed_path(&inner), Some("y.csv"));
        for other in [
            json!({"columns": []}),
            json!({"seed_config": {"source": {"seed_type": "inline", "rows": [{"a": 1}]}}}),
            json!({"seed_config": {"source": {"seed_type": "hf", "path": "datasets/a/b/x.csv"}}}),
            json!({"seed_config": {"source": {"seed_type": "local", "path": 3}}}),
            json!("not an object"),
        ] {
            assert_eq!(local_seed_path(&other), None, "{other}");
            let cwd = Path::new("/nonexistent");
            assert_eq!(find_local_seed(&other, cwd, None), LocalSeed::None);
        }
    }

    #[test]
    fn relative_paths_are_relative_to_the_current_directory() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("data/seed.csv"));
        let seed = find_local_seed(&config("data/seed.csv"), dir.path(), None);
        assert_eq!(
            names(&seed),
            [("seed.csv", &*dir.path().join("data/seed.csv"))]
        );
        // `..` works as DataDesigner's resolve() lets it.
        let cwd = dir.path().join("data");
        let seed = find_local_seed(&config("../data/seed.csv"), &cwd, None);
        assert_eq!(names(&seed)[0].0, "seed.csv");
        // Absolute paths ignore the current directory.
        let absolute = dir.path().join("data/seed.csv");
        let seed = find_local_seed(&config(absolute.to_str().unwrap()), Path::new("/"), None);
        assert_eq!(names(&seed)[0].1, absolute);
    }

    #[test]
    fn the_home_directory_is_expanded() {
        let home = tempfile::tempdir().unwrap();
        touch(&home.path().join("seeds/s.jsonl"));
        let cwd = Path::new("/nonexistent");
        for path in ["~/seeds/s.jsonl", "~//seeds/s.jsonl"] {
            let seed = find_local_seed(&config(path), cwd, Some(home.path()));
            assert_eq!(
                names(&seed),
                [("s.jsonl", &*home.path().join("seeds/s.jsonl"))]
            );
        }
        // A glob under the home directory.
        let seed = find_local_seed(&config("~/seeds/*.jsonl"), cwd, Some(home.path()));
        assert_eq!(names(&seed)[0].0, "s.jsonl");
        // Without a home, `~` is a plain directory name.
        let seed = find_local_seed(&config("~/seeds/s.jsonl"), cwd, None);
        assert!(matches!(seed, LocalSeed::Missing { .. }), "{seed:?}");
    }

    #[test]
    fn globs_match_names_in_the_prefix_directory_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.parquet", "a.parquet", "c.csv", "sub/d.parquet"] {
            touch(&dir.path().join("data").join(name));
        }
        // A directory whose name matches is not a file.
        std::fs::create_dir_all(dir.path().join("data/e.parquet")).unwrap();
        let seed = find_local_seed(&config("data/*.parquet"), dir.path(), None);
        let found: Vec<&str> = names(&seed).into_iter().map(|(n, _)| n).collect();
        assert_eq!(found, ["a.parquet", "b.parquet"]);
        match &seed {
            LocalSeed::Files { path, files } => {
                assert_eq!(path, "data/*.parquet");
                // Each records the path the config names it by, as the server matches it.
                let recorded: Vec<&str> = files.iter().map(|f| f.upload_path.as_str()).collect();
                assert_eq!(recorded, ["data/a.parquet", "data/b.parquet"]);
            }
            other => panic!("{other:?}"),
        }
        // No prefix: the current directory.
        touch(&dir.path().join("top.csv"));
        let seed = find_local_seed(&config("*.csv"), dir.path(), None);
        assert_eq!(names(&seed)[0].0, "top.csv");
        let LocalSeed::Files { files, .. } = &seed else {
            panic!("{seed:?}")
        };
        assert_eq!(files[0].upload_path, "top.csv");
        let seed = find_local_seed(&config("./data/a.parquet"), dir.path(), None);
        let LocalSeed::Files { files, .. } = &seed else {
            panic!("{seed:?}")
        };
        assert_eq!(files[0].upload_path, "data/a.parquet");
        // DataDesigner treats the text before `*` as a directory: `data/a*.parquet` looks in
        // `data/a/`, which does not exist here.
        let seed = find_local_seed(&config("data/a*.parquet"), dir.path(), None);
        assert!(matches!(seed, LocalSeed::Missing { .. }), "{seed:?}");
        // Glob characters in the directory are literal.
        touch(&dir.path().join("x[1]/f.csv"));
        let seed = find_local_seed(&config("x[1]/*.csv"), dir.path(), None);
        assert_eq!(names(&seed)[0].0, "f.csv");
        let LocalSeed::Files { files, .. } = &seed else {
            panic!("{seed:?}")
        };
        assert_eq!(files[0].upload_path, "x[1]/f.csv");
        assert!(
            crate::datasets::upload_path::SeedPath::parse("x[1]/*.csv")
                .unwrap()
                .matches(&files[0].upload_path)
        );
    }

    #[test]
    fn missing_files_are_reported_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        for path in ["nope.csv", "data/*.parquet", "~/x.csv"] {
            let seed = find_local_seed(&config(path), dir.path(), Some(dir.path()));
            assert_eq!(seed, LocalSeed::Missing { path: path.into() });
        }
        // A directory is not a seed file.
        std::fs::create_dir(dir.path().join("d.csv")).unwrap();
        let seed = find_local_seed(&config("d.csv"), dir.path(), None);
        assert!(matches!(seed, LocalSeed::Missing { .. }));
    }

    #[test]
    fn names_are_the_last_component_as_the_server_reads_it() {
        assert_eq!(dataset_name("data/seed.csv").as_deref(), Some("seed.csv"));
        assert_eq!(dataset_name("seed.csv").as_deref(), Some("seed.csv"));
        assert_eq!(
            dataset_name(r"C:\data\seed.parquet").as_deref(),
            Some("seed.parquet")
        );
        assert_eq!(dataset_name("data/.."), None);
    }
}
