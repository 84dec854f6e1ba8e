//! The committed `openapi.yaml` must equal what the code generates.
//! Regenerate with: `cargo run -- openapi -o openapi.yaml`.

#[test]
fn openapi_yaml_matches_the_code() {
    let generated = synthgate::api::openapi::yaml();
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml is committed");
    assert!(
        generated == committed,
        "openapi.yaml is out of date; run `cargo run -- openapi -o openapi.yaml`"
    );
}

#[test]
fn every_operation_is_documented() {
    let spec: serde_json::Value = serde_json::to_value(synthgate::api::openapi::spec()).unwrap();
    let paths = spec["paths"].as_object().unwrap();
    for p in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/jobs/{id}/cancel",
        "/v1/jobs/{id}/records",
        "/v1/jobs/{id}/events",
        "/v1/records/{id}",
        "/v1/records/{id}/trace",
        "/v1/preview",
        "/v1/tools",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        let item = paths
            .get(p)
            .unwrap_or_else(|| panic!("{p} missing from the spec"));
        for (method, op) in item.as_object().unwrap() {
            assert!(op["summary"].is_string(), "{method} {p} has no summary");
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {p}"
            );
        }
    }
}

/// A client generated from the spec names a method per operation id: two operations with one
/// id break it (the Data Designer door once reused the `/v1` handlers' names).
#[test]
fn operation_ids_are_unique() {
    let spec: serde_json::Value = serde_json::to_value(synthgate::api::openapi::spec()).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for (path, ops) in spec["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let Some(id) = op.get("operationId").and_then(|v| v.as_str()) else {
                continue;
            };
            if let Some(first) = seen.insert(id.to_owned(), format!("{method} {path}")) {
                panic!("operation id {id} names both {first} and {method} {path}");
            }
        }
    }
    assert!(seen.len() > 40, "{} operation ids", seen.len());
}

/// The Data Designer door's create body is its own (`{spec: {num_records, config}, name, ...}`),
/// not `POST /v1/jobs`'s: one schema name for both once documented the door with the wrong body.
#[test]
fn the_data_designer_create_body_is_its_own() {
    let spec: serde_json::Value = serde_json::to_value(synthgate::api::openapi::spec()).unwrap();
    let body_ref = |path: &str| {
        spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let dd = body_ref("/v1/data-designer/jobs");
    let v1 = body_ref("/v1/jobs");
    assert_ne!(dd, v1, "both bodies are {dd}");
    let props = &spec["components"]["schemas"][&dd]["properties"];
    assert!(props.get("spec").is_some(), "{dd}: {props}");
    let props = &spec["components"]["schemas"][&v1]["properties"];
    assert!(props.get("config").is_some(), "{v1}: {props}");
}

/// A client generated from `openapi.yaml` by a standard generator (`openapi-python-client`)
/// builds: every module compiles and imports, and every operation is in it but the Hub commit,
/// whose body is the Hub's `application/x-ndjson` (for `huggingface_hub`, not for a generated
/// client). Its models include the Data Designer door's own bodies.
#[test]
fn a_client_generated_from_the_spec_builds() {
    let Some(python) = crate::require::require(std::env::var("SYNTHGATE_TEST_PYTHON").ok(), || {
        "SYNTHGATE_TEST_PYTHON is not set (scripts/test sets it)".into()
    }) else {
        return;
    };
    let bin = std::path::Path::new(&python).with_file_name("openapi-python-client");
    let Some(bin) = crate::require::require(bin.exists().then_some(bin), || {
        format!(
            "openapi-python-client is not installed beside {python} (scripts/test installs \
             scripts/requirements-test.txt)"
        )
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&bin)
        .args(["generate", "--meta", "none", "--output-path"])
        .arg(dir.path().join("synthgate_client"))
        .arg("--path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .current_dir(dir.path())
        .output()
        .expect("run openapi-python-client");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let left_out: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("Endpoint will not be generated"))
        .collect();
    assert_eq!(
        left_out,
        [
            "WARNING parsing POST /v1/hf/api/datasets/{namespace}/{name}/commit/{rev} within hf_datastore. Endpoint will not be generated."
        ],
        "{said}"
    );
    // Build: byte-compile every module, then import each one.
    let check = r#"
import compileall, importlib, pkgutil, sys
sys.path.insert(0, ".")
assert compileall.compile_dir("synthgate_client", quiet=1), "a module does not compile"
import synthgate_client
names = [m.name for m in pkgutil.walk_packages(synthgate_client.__path__, "synthgate_client.")]
for name in names:
    importlib.import_module(name)
from synthgate_client.models import DataDesignerJob, DataDesignerJobList, PlatformJobResult
from synthgate_client.api.data_designer import data_designer_get_job
print(len(names))
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", check])
        .current_dir(dir.path())
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let modules: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(modules > 100, "{modules} modules");
}
