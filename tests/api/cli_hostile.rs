//! The CLI against a hostile server (issue 49): text it prints cannot drive the terminal, and a
//! resumed download that the server cuts short is not renamed into place as if it were whole.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

/// Serves `app` on a loopback port until the test's runtime ends; its address.
async fn serve(app: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio_util::task::TaskTracker::new().spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

async fn cli(addr: std::net::SocketAddr, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_synthgate"));
    cmd.args(args)
        .args(["--url", &format!("http://{addr}")])
        .env("NO_COLOR", "1");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A job whose name and error codes carry terminal escapes (clear screen, retitle, a C1 CSI, a
/// bidi override): printed as `\uXXXX`, and the JSON printed still means the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_text_cannot_drive_the_terminal() {
    const NAME: &str = "job\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m\u{202e}txt";
    let app = Router::new().route(
        "/v1/jobs/{id}",
        get(|| async {
            axum::Json(serde_json::json!({
                "id": "j", "name": NAME, "status": "failed\u{1b}[1A",
                "counts": {}, "errors": [{"code": "x\u{1b}[K", "message": "m"}]
            }))
        }),
    );
    let addr = serve(app).await;
    let (code, stdout, stderr) = cli(addr, &["jobs", "show", "j"]).await;
    assert_eq!(code, 0, "{stderr}");
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(
            !stdout.contains(c),
            "{c:?} reached the terminal: {stdout:?}"
        );
    }
    assert!(stdout.contains("\\u001b[2J"), "{stdout}");
    let shown: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(shown["name"], NAME);
}

/// A `206` whose body stops before the end its `Content-Range` names: the CLI says so, keeps
/// the part to resume, and writes no file under the final name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_ranged_answer_is_not_taken_for_the_whole_file() {
    let app = Router::new().route(
        "/v1/jobs/{id}/records",
        get(|| async {
            (
                StatusCode::PARTIAL_CONTENT,
                [
                    (header::CONTENT_RANGE, "bytes 10-99/100"),
                    (header::ETAG, "\"e\""),
                ],
                vec![b'x'; 20],
            )
                .into_response()
        }),
    );
    let addr = serve(app).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data.csv");
    std::fs::write(dir.path().join("data.csv.part"), [b'a'; 10]).unwrap();
    std::fs::write(dir.path().join("data.csv.part.etag"), "\"e\"").unwrap();
    let (code, _, stderr) = cli(
        addr,
        &[
            "records",
            "j",
            "--format",
            "csv",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("ended at byte 30 of 100"), "{stderr}");
    assert!(!out.exists(), "a short download was renamed into place");
    assert!(dir.path().join("data.csv.part").exists());
}
