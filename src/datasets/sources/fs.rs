//! The allow-listed seed directories on disk: where a config path lands, and which files a walk
//! finds, with every path checked to lie inside an allowed directory *after* symlinks and `..`
//! are resolved (the canonical path), so no spelling of a path reaches a file outside them.
//!
//! Everything here is blocking file-system work; callers run it on `spawn_blocking`.

use std::path::{Path, PathBuf};

/// The allowed directories, canonicalized when a lookup starts (so a directory created or
/// re-pointed after start-up is seen as it is now). Directories that do not exist are left
/// out: nothing can be inside them.
#[derive(Debug)]
pub(crate) struct Allowed {
    roots: Vec<PathBuf>,
}

impl Allowed {
    /// Canonicalizes `dirs`, in order, dropping those that do not resolve to a directory.
    pub(crate) fn resolve(dirs: &[PathBuf]) -> Self {
        let roots = dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .filter(|d| d.is_dir())
            .collect();
        Self { roots }
    }

    /// Whether canonical path `p` is one of the directories or lies below one.
    pub(crate) fn contains(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    /// Where `path` (from a config, `/`-separated) lands: joined to each directory in order
    /// when relative, as it is when absolute; the first candidate whose canonical form exists,
    /// is inside an allowed directory and passes `accept`. Every other path is `None`, outside
    /// or missing alike, so a caller cannot learn what exists outside.
    pub(crate) fn locate(&self, path: &str, accept: impl Fn(&Path) -> bool) -> Option<PathBuf> {
        self.locate_all(path, accept).into_iter().next()
    }

    /// Every candidate [`Allowed::locate`] would consider that qualifies, in order.
    pub(crate) fn locate_all(&self, path: &str, accept: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
        let given = Path::new(path);
        let candidates: Vec<PathBuf> = if given.is_absolute() {
            vec![given.to_path_buf()]
        } else {
            self.roots.iter().map(|r| r.join(given)).collect()
        };
        candidates
            .into_iter()
            .filter_map(|c| {
                let canonical = std::fs::canonicalize(&c).ok()?;
                (self.contains(&canonical) && accept(&canonical)).then_some(canonical)
            })
            .collect()
    }
}

/// A file a walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundFile {
    /// Path relative to the walked directory, `/`-separated, as listed (a symlink keeps its
    /// own name here).
    pub relative: String,
    /// The canonical path of the file itself (symlinks resolved): what is read.
    pub canonical: PathBuf,
    /// Size in bytes.
    pub size: u64,
}

/// Why a walk stopped.
#[derive(Debug)]
pub(crate) enum WalkError {
    /// More than the allowed number of files matched.
    TooManyFiles(usize),
    /// A directory could not be read.
    Io(String),
}

/// Lists the regular files under canonical directory `root`, as fsspec's `find` does for
/// DataDesigner: entries of every subdirectory down to `max_depth` levels (`None` =
/// unbounded, `Some(1)` = direct children), subdirectories entered only when they are real
/// directories (a symlink is an entry, never descended, so there are no loops), sorted by
/// relative path. `keep` sees each relative path and decides whether it is wanted; a kept
/// entry is returned only if its canonical target is a regular file inside `allowed` (a
/// symlink pointing anywhere else, a socket or a FIFO is silently left out). Past `max_files`
/// kept files the walk stops with [`WalkError::TooManyFiles`].
pub(crate) fn walk(
    root: &Path,
    max_depth: Option<usize>,
    allowed: &Allowed,
    max_files: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<FoundFile>, WalkError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new(), 1usize)];
    while let Some((dir, prefix, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| WalkError::Io(e.to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| WalkError::Io(e.to_string()))?;
            // A name that is not UTF-8 cannot be a row value or a config path; skip it.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let relative = format!("{prefix}{name}");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if max_depth.is_none_or(|m| depth < m) {
                    stack.push((entry.path(), format!("{relative}/"), depth + 1));
                }
                continue;
            }
            if !keep(&relative) {
                continue;
            }
            let Ok(canonical) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&canonical) else {
                continue;
            };
            if !meta.is_file() || !allowed.contains(&canonical) {
                continue;
            }
            if out.len() == max_files {
                return Err(WalkError::TooManyFiles(max_files));
            }
            out.push(FoundFile {
                relative,
                canonical,
                size: meta.len(),
            });
        }
    }
    // Python sorts str by code point; UTF-8 byte order is the same order.
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(out)
}

/// A shell-style pattern as Python's `fnmatch.fnmatchcase` reads it: case-sensitive, `*`
/// also matching a leading dot. Runs of `*` are one `*` (the same in fnmatch, which has no
/// `**`; the glob crate would reject `**` outside a path component).
pub(crate) fn fnmatch_pattern(pattern: &str) -> Result<glob::Pattern, glob::PatternError> {
    let mut collapsed = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if !(c == '*' && collapsed.ends_with('*')) {
            collapsed.push(c);
        }
    }
    glob::Pattern::new(&collapsed)
}

/// fnmatch options: case-sensitive, no special meaning for `/` or a leading dot.
pub(crate) const FNMATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// Path-glob options (`data/*.csv`, `**/*.parquet`): `*` stays within one directory, as in
/// DuckDB's and fsspec's globs; `**` spans directories.
pub(crate) const PATH_GLOB: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// Whether `s` has a glob metacharacter (`*`, `?`, `[`).
pub(crate) fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Splits a globbed path into the directory before the first wildcard (`""` for none) and
/// the pattern under it: `data/2024/*.csv` → (`data/2024`, `*.csv`), `*/x.csv` → (``,
/// `*/x.csv`).
pub(crate) fn split_glob(path: &str) -> (&str, &str) {
    let first = path.find(['*', '?', '[']).unwrap_or(path.len());
    match path[..first].rfind('/') {
        Some(slash) => (&path[..slash.max(1)], &path[slash + 1..]),
        None => ("", path),
    }
}

/// How deep a walk must go for `pattern`: one level per path component, unbounded with `**`.
pub(crate) fn glob_depth(pattern: &str) -> Option<usize> {
    if pattern.contains("**") {
        None
    } else {
        Some(pattern.split('/').count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_glob_keeps_the_directory_before_the_first_wildcard() {
        assert_eq!(split_glob("data/2024/*.csv"), ("data/2024", "*.csv"));
        assert_eq!(split_glob("*.csv"), ("", "*.csv"));
        assert_eq!(split_glob("*/x.csv"), ("", "*/x.csv"));
        assert_eq!(
            split_glob("/srv/seeds/*.parquet"),
            ("/srv/seeds", "*.parquet")
        );
        assert_eq!(split_glob("/*.csv"), ("/", "*.csv"));
        assert_eq!(split_glob("a/b?/c.csv"), ("a", "b?/c.csv"));
        assert_eq!(glob_depth("*.csv"), Some(1));
        assert_eq!(glob_depth("*/x.csv"), Some(2));
        assert_eq!(glob_depth("**/*.csv"), None);
    }

    #[test]
    fn fnmatch_matches_like_python() {
        let p = fnmatch_pattern("*.txt").unwrap();
        assert!(p.matches_with(".hidden.txt", FNMATCH));
        assert!(!p.matches_with("a.TXT", FNMATCH));
        assert!(
            fnmatch_pattern("**.md")
                .unwrap()
                .matches_with("x.md", FNMATCH)
        );
        assert!(fnmatch_pattern("[!a]*").unwrap().matches_with("b", FNMATCH));
        assert!(!fnmatch_pattern("[!a]*").unwrap().matches_with("a", FNMATCH));
        assert!(
            fnmatch_pattern("?.md")
                .unwrap()
                .matches_with("x.md", FNMATCH)
        );
    }

    #[test]
    fn path_globs_keep_star_within_a_directory() {
        let p = glob::Pattern::new("*.csv").unwrap();
        assert!(p.matches_with("a.csv", PATH_GLOB));
        assert!(!p.matches_with("sub/a.csv", PATH_GLOB));
        let deep = glob::Pattern::new("**/*.csv").unwrap();
        assert!(deep.matches_with("sub/a.csv", PATH_GLOB));
        assert!(deep.matches_with("a.csv", PATH_GLOB));
    }
}
