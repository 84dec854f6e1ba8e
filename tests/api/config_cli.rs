//! The binary refuses a bad config with a non-zero exit and a message naming the key.

use std::process::Command;

fn synthgate(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_synthgate"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("SYNTHGATE_CONFIG")
        .output()
        .expect("run synthgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn config_check_accepts_the_shipped_file() {
    let (code, out) = synthgate(
        &["config", "check", "--config", "config/synthgate.yaml"],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("config OK"), "{out}");
}

#[test]
fn config_check_names_every_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "workers:\n  count: 0\nmodel_configs:\n  - {alias: m, model: x, provider: nowhere}\n",
    )
    .unwrap();
    let (code, out) = synthgate(
        &["config", "check", "--config", path.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("workers.count"), "{out}");
    assert!(out.contains("model_configs[0].provider"), "{out}");
}

#[test]
fn env_override_errors_name_the_key_and_serve_refuses_to_start() {
    let (code, out) = synthgate(
        &["serve", "--config", "config/synthgate.yaml"],
        &[("SYNTHGATE__SERVER__PORT", "not-a-port")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("server.port"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub.yaml");
    std::fs::write(&path, "database:\n  url: ${env:SYNTHGATE_TEST_UNSET_VAR}\n").unwrap();
    let (code, out) = synthgate(
        &["config", "check", "--config", path.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("database.url") && out.contains("SYNTHGATE_TEST_UNSET_VAR"),
        "{out}"
    );
}
