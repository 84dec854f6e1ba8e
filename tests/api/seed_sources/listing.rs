//! `directory` and `file_contents` rows compared with DataDesigner's own readers
//! (`DirectorySeedReader`, `FileContentsSeedReader`) listing the same tree: same columns, same
//! rows in the same order, same contents. The interpreter comes from
//! `$SYNTHGATE_TEST_DD_PYTHON` (scripts/test sets it), else `.venv-datadesigner/`; without one
//! the comparison says so and skips (the limits and refusals below still run).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use synthgate::datasets::DatasetSourceKind;
use synthgate::datasets::sources::server::resolve_directory;
use synthgate::domain::dataset::FileSystemSource;

use super::{ctx, one_issue, rows_of, sources};
use crate::db::{TestDb, both_backends};

both_backends!(
    listings_match_datadesigners_readers,
    listing_limits_and_bad_fields_are_refused,
);

/// DataDesigner's interpreter, or `None` (reason printed) to skip.
fn dd_python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SYNTHGATE_TEST_DD_PYTHON") {
        return Some(p.into());
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-datadesigner/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    crate::require::skip(
        "SYNTHGATE_TEST_DD_PYTHON is not set and .venv-datadesigner/ does not exist \
         (scripts/test builds it)",
    );
    None
}

/// DataDesigner's `{"columns", "rows"}` for each of `sources` (seed source objects), from
/// one interpreter run (importing DataDesigner takes seconds).
fn dd_rows(python: &Path, sources: &[Value]) -> Vec<Value> {
    let script = r#"
import json, sys
from data_designer.config.seed_source import DirectorySeedSource, FileContentsSeedSource
from data_designer.engine.resources.seed_reader import DirectorySeedReader, FileContentsSeedReader
from data_designer.engine.secret_resolver import EnvironmentResolver
out = []
for spec in json.loads(sys.argv[1]):
    if spec.pop("seed_type") == "directory":
        reader, source = DirectorySeedReader(), DirectorySeedSource(**spec)
    else:
        reader, source = FileContentsSeedReader(), FileContentsSeedSource(**spec)
    reader.attach(source, EnvironmentResolver())
    df = reader._get_output_dataframe()
    out.append({"columns": list(df.columns), "rows": df.to_dict(orient="records")})
print(json.dumps(out))
"#;
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(Value::Array(sources.to_vec()).to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "DataDesigner could not list the sources: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A tree with nested directories, hidden files, CRLF and CR line ends, non-ASCII text,
/// Latin-1 bytes and names that sort differently by case.
fn tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let docs = root.path().join("docs");
    std::fs::create_dir_all(docs.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(docs.join("Zeta")).unwrap();
    let files: &[(&str, &[u8])] = &[
        ("a.md", b"hello\r\nworld\r"),
        ("B.md", "caf\u{e9} \u{2603}\n".as_bytes()),
        (".hidden.md", b"x"),
        ("notes.txt", b"plain\n"),
        ("sub/c.md", b"nested"),
        ("sub/deeper/d.md", b"deep\n\n"),
        ("sub/UPPER.MD", b"not matched by *.md"),
        ("Zeta/e.md", b""),
    ];
    for (p, b) in files {
        std::fs::write(docs.join(p), b).unwrap();
    }
    let latin = root.path().join("latin");
    std::fs::create_dir_all(&latin).unwrap();
    std::fs::write(latin.join("l.txt"), b"caf\xe9\r\n\xa9").unwrap();
    root
}

async fn listings_match_datadesigners_readers(db: TestDb) {
    let root = tree();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let s = sources(|c| c.datasets.seed_dirs = vec![base.clone()]);
    let cx = ctx(db.store.as_ref(), None, &s);
    let python = dd_python();
    let cases = [
        json!({"seed_type": "directory", "path": "docs"}),
        json!({"seed_type": "directory", "path": "docs", "recursive": false}),
        json!({"seed_type": "directory", "path": "docs", "file_pattern": "*.md"}),
        json!({"seed_type": "directory", "path": "docs", "file_pattern": "[!a]*"}),
        json!({"seed_type": "file_contents", "path": "docs", "file_pattern": "*.md"}),
        json!({"seed_type": "file_contents", "path": "docs", "file_pattern": "?.md", "recursive": false}),
        json!({"seed_type": "file_contents", "path": "latin", "encoding": "latin-1"}),
    ];
    let mut compared = Vec::new();
    for case in cases {
        let files = FileSystemSource {
            path: case["path"].as_str().unwrap().into(),
            file_pattern: case["file_pattern"].as_str().unwrap_or("*").into(),
            recursive: case["recursive"].as_bool().unwrap_or(true),
        };
        let contents = (case["seed_type"] == "file_contents")
            .then(|| case["encoding"].as_str().unwrap_or("utf-8"));
        let found = resolve_directory(&cx, &files, contents).await.unwrap();
        assert_eq!(found.len(), 1);
        let meta = &found[0];
        let expected_kind = if contents.is_some() {
            DatasetSourceKind::FileContents
        } else {
            DatasetSourceKind::Directory
        };
        assert_eq!(meta.source, expected_kind);
        let ours: Vec<Value> = rows_of(db.store.as_ref(), meta)
            .await
            .into_iter()
            .map(Value::Object)
            .collect();
        let columns: Vec<String> = meta.columns.iter().map(|c| c.name.clone()).collect();
        // A second identical listing reuses the stored dataset.
        let again = resolve_directory(&cx, &files, contents).await.unwrap();
        assert_eq!(again[0].id, meta.id, "{case}");
        // DataDesigner resolves the directory itself; it gets the absolute path.
        let mut dd_case = case.clone();
        dd_case["path"] = json!(base.join(files.path.as_str()).to_str().unwrap());
        compared.push((case, dd_case, json!({"columns": columns, "rows": ours})));
    }
    let Some(python) = python else {
        return;
    };
    let dd_cases: Vec<Value> = compared.iter().map(|(_, d, _)| d.clone()).collect();
    let dd = dd_rows(&python, &dd_cases);
    for ((case, _, ours), theirs) in compared.iter().zip(&dd) {
        assert_eq!(ours, theirs, "{case}");
    }
}

async fn listing_limits_and_bad_fields_are_refused(db: TestDb) {
    let root = tree();
    let s = sources(|c| {
        c.datasets.seed_dirs = vec![root.path().to_path_buf()];
        c.datasets.max_seed_files = 3;
        c.datasets.max_seed_bytes = 10;
    });
    let cx = ctx(db.store.as_ref(), None, &s);
    let src = |pattern: &str| FileSystemSource {
        path: "docs".into(),
        file_pattern: pattern.into(),
        recursive: true,
    };
    let cases: &[(FileSystemSource, Option<&str>, &str, &str)] = &[
        (
            src("*"),
            None,
            "seed_source_too_large",
            "seed_config.source.path",
        ),
        (
            src("*.md"),
            Some("utf-8"),
            "seed_source_too_large",
            "seed_config.source.path",
        ),
        (
            src("*.csv"),
            None,
            "seed_dataset_not_found",
            "seed_config.source.file_pattern",
        ),
        (
            src("sub/*.md"),
            None,
            "invalid_seed_config",
            "seed_config.source.file_pattern",
        ),
        (
            src(" "),
            None,
            "invalid_seed_config",
            "seed_config.source.file_pattern",
        ),
        (
            src("a.md"),
            Some("utf-16"),
            "invalid_seed_config",
            "seed_config.source.encoding",
        ),
    ];
    for (files, contents, code, field) in cases {
        let issue = one_issue(resolve_directory(&cx, files, *contents).await);
        assert_eq!(
            issue.code, *code,
            "{files:?} {contents:?}: {}",
            issue.message
        );
        assert_eq!(issue.field.as_deref(), Some(*field), "{files:?}");
    }
    // Latin-1 bytes are not UTF-8: the file is named, as DataDesigner names it.
    let latin = FileSystemSource {
        path: "latin".into(),
        file_pattern: "*".into(),
        recursive: true,
    };
    let issue = one_issue(resolve_directory(&cx, &latin, Some("utf-8")).await);
    assert_eq!(issue.code, "invalid_seed_config");
    assert_eq!(issue.field.as_deref(), Some("seed_config.source.encoding"));
    assert!(issue.message.contains("l.txt"), "{}", issue.message);
}
