//! What a test needs from the machine (a tool, a server, a package) and cannot make itself.
//!
//! Under `CI=true` a missing one fails the test, saying what to install: CI never passes a test
//! it did not run. Elsewhere (a developer's bare `cargo test`) the test skips, saying why, and
//! the skip is written to the file `SYNTHGATE_TEST_SKIPS` names, so `scripts/test` can list
//! every skipped test at the end instead of counting it as passed in silence.

use std::io::Write;

/// Whether this run is CI's (`CI=true`), where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `found`, or, when it is `None`: under `CI=true` a panic naming what is missing and how to
/// get it; elsewhere `None` after recording the skip. Use as
/// `let Some(x) = require(lookup(), || "...".into()) else { return; };`.
#[track_caller]
pub fn require<T>(found: Option<T>, missing: impl FnOnce() -> String) -> Option<T> {
    if found.is_some() {
        return found;
    }
    let why = missing();
    skip(&why);
    None
}

/// Skips the running test for `why`, or fails it under `CI=true`.
#[track_caller]
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    assert!(!in_ci(), "CI=true, and {test} cannot run: {why}");
    eprintln!("skipped: {why}");
    if let Some(path) = std::env::var_os("SYNTHGATE_TEST_SKIPS") {
        // One line per skip; nextest runs tests in processes of their own, so each appends.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {}", why.replace('\n', " "));
        }
    }
}
