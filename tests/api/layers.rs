//! The module map of `src/lib.rs` as a rule, and files of a size a person can hold. Each
//! top-level module may import only modules of
//! its own rank or below, so no import climbs back up (a store that imports datasets, a
//! config that reaches into the API). Read from the source, not from a list kept by hand: a
//! new `crate::...` path that climbs fails here with the file and line.

use std::path::Path;

/// Top-level modules by rank; an import must name a module of the same rank or lower.
const RANKS: &[(&str, u8)] = &[
    // Plain data and leaf helpers.
    ("domain", 0),
    ("config", 0),
    ("decode", 0),
    ("metrics", 0),
    ("cpu", 0),
    ("rendered", 0),
    ("shutdown", 0),
    ("telemetry", 0),
    ("serve", 0),
    ("install_crypto_provider", 0),
    ("lanes", 0),
    ("bounded_body", 0),
    ("pytext", 0),
    // Persistence of domain types.
    ("store", 1),
    // The work queue, on the store's backends.
    ("queue", 2),
    // Outbound calls: LLM providers, MCP sessions, tool calls.
    ("llm", 3),
    ("mcp", 3),
    ("tools", 3),
    // Compiled plans and record generation.
    ("generate", 4),
    // Seed datasets.
    ("datasets", 5),
    // The HTTP edge's error vocabulary (maps store and dataset errors).
    ("error", 5),
    // The job service and the caller identity it is given.
    ("jobs", 6),
    ("auth", 6),
    // The drivers: HTTP handlers (with their shared state) and the queue's workers.
    ("state", 7),
    ("api", 7),
    ("worker", 7),
    // The composition root, the client and the fuzz entry points.
    ("app", 8),
    ("cli", 8),
    ("fuzzing", 8),
];

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_import_climbs_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut climbs = Vec::new();
    let mut unranked = Vec::new();
    for path in &all {
        let rel = path.strip_prefix(&src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy();
        let module = top.trim_end_matches(".rs");
        if matches!(module, "lib" | "main") {
            continue;
        }
        let Some(own) = rank(module) else {
            unranked.push(module.to_owned());
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if rest.starts_with('{') {
                    climbs.push(format!(
                        "src/{}:{}: `crate::{{...}}` is not checked here; import each module on its own line",
                        rel.display(),
                        n + 1
                    ));
                    continue;
                }
                if name == module || name.is_empty() {
                    continue;
                }
                match rank(&name) {
                    Some(r) if r <= own => {}
                    Some(_) => climbs.push(format!(
                        "src/{}:{}: {module} imports {name}: {}",
                        rel.display(),
                        n + 1,
                        code.trim()
                    )),
                    None => unranked.push(name),
                }
            }
        }
    }
    unranked.sort();
    unranked.dedup();
    assert!(
        unranked.is_empty(),
        "modules without a rank in tests/api/layers.rs: {unranked:?}"
    );
    assert!(
        climbs.is_empty(),
        "imports that climb:\n{}",
        climbs.join("\n")
    );
}

/// Files a person can hold: no product source file over 600 lines (tests and test doubles
/// are not product code).
#[test]
fn no_source_file_is_over_600_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut long: Vec<String> = all
        .iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "tests"))
        .filter(|p| p.file_name().is_none_or(|n| n != "tests.rs"))
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > 600).then(|| format!("{} ({n} lines)", p.strip_prefix(&src).unwrap().display()))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "split these: {long:?}");
}

/// The worker pool runs records through the queue's trait alone: a claim-to-write path that
/// reached into the store would bypass the queue's guarantee (`src/queue/mod.rs`).
#[test]
fn the_worker_holds_the_queue_not_the_store() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/worker");
    let mut all = Vec::new();
    files(&dir, &mut all);
    let mut found = Vec::new();
    for path in &all {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && code.contains("crate::store") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, code));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the worker imports the store:\n{}",
        found.join("\n")
    );
}
