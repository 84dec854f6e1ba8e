//! [`bin_path`] against the paths cargo itself gives this package's integration tests. Being an
//! integration test also makes every `--workspace` test build produce the binaries, so the
//! product's tests find them without building anything.

use std::path::Path;

use synthgate_testkit::bin_path;

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().unwrap() == b.canonicalize().unwrap()
}

#[test]
fn bin_path_finds_the_binaries_cargo_built_for_this_run() {
    for (name, built) in [
        ("mock-mcp", env!("CARGO_BIN_EXE_mock-mcp")),
        ("mock-llm", env!("CARGO_BIN_EXE_mock-llm")),
    ] {
        let found = bin_path(name);
        assert!(
            same_file(&found, Path::new(built)),
            "{name}: {} vs {built}",
            found.display()
        );
    }
}
