//! Where a test finds this crate's binaries (`mock-mcp`, `mock-llm`).
//!
//! Cargo's `CARGO_BIN_EXE_<name>` only names binaries of the test's own package, and these live
//! in `synthgate-testkit`. Cargo puts every binary of a workspace build in one directory,
//! `<target>/<profile>/`, and test executables one level below it in `deps/`, so the binary
//! sits beside the running test's directory. `cargo nextest run --workspace` (what
//! `scripts/test` runs) builds it there; a run that did not (`-p synthgate`) gets it built once
//! per test process, with the test's own profile and target dir.
//!
//! A binary that is present is used as is: after changing the doubles, build the workspace (or
//! run the tests with `--workspace`) so a package-only run does not use a stale one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// The path of this crate's binary `name` for the running test, building it when missing.
///
/// # Panics
/// When the test's executable cannot be located or the build fails: the test cannot run
/// without the binary, and the panic says why.
pub fn bin_path(name: &str) -> PathBuf {
    // One build at a time within a process; cargo's own lock orders builds across processes.
    static BUILD: Mutex<()> = Mutex::new(());
    let exe = std::env::current_exe().expect("the running test's executable path");
    let profile_dir = profile_dir(&exe);
    let path = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let _guard = BUILD.lock().unwrap_or_else(PoisonError::into_inner);
    if !path.exists() {
        build(name, &profile_dir);
        assert!(
            path.exists(),
            "building `{name}` did not produce {}",
            path.display()
        );
    }
    path
}

/// `<target>/<profile>` for an executable in `<target>/<profile>/{deps,examples}/` or in
/// `<target>/<profile>/` itself.
fn profile_dir(exe: &Path) -> PathBuf {
    let dir = exe.parent().expect("an executable lives in a directory");
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("deps" | "examples") => dir.parent().unwrap_or(dir).to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// `cargo build --bin <name>` of this package into `profile_dir`'s target dir and profile.
fn build(name: &str, profile_dir: &Path) {
    let target_dir = profile_dir
        .parent()
        .expect("a profile directory lives in a target directory");
    // The directory is named after the profile, except the dev profile's, which is `debug`.
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    // Cargo sets CARGO for what it runs (nextest too); a plain `cargo` is the fallback.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    eprintln!("bin_path: `{name}` is missing; building it ({profile} profile)");
    let status = Command::new(cargo)
        .args(["build", "--manifest-path", manifest, "--bin", name])
        .args(["--profile", profile])
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build `{name}`: {e}"));
    assert!(status.success(), "building `{name}` failed: {status}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_executables_in_deps_find_binaries_one_level_up() {
        let dir = profile_dir(Path::new("/t/debug/deps/api-0123abcd"));
        assert_eq!(dir, Path::new("/t/debug"));
        let dir = profile_dir(Path::new("/t/release/examples/demo"));
        assert_eq!(dir, Path::new("/t/release"));
        let dir = profile_dir(Path::new("/t/release/synthgate"));
        assert_eq!(dir, Path::new("/t/release"));
    }
}
