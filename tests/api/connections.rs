//! HTTP connections cannot exhaust the server (issue 9, finding 10): slowloris connections are
//! closed after the header-read timeout, idle keep-alive connections after the idle timeout, and
//! past the connection limit (or the file-descriptor limit) idle connections make room, so
//! `/healthz` keeps answering. Loopback only, bounded counts; every socket closes when its test
//! ends. No store is involved, so these run on SQLite only.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app_with};
use crate::process::{free_port, log_tail};

/// Waits until `n` long requests hold their permits (`synthgate_http_long_requests`): the
/// server has taken each one in, so what the test sends next meets them.
async fn await_long_requests(app: &TestApp, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, text) = app.get_text("/metrics").await;
        let held = text
            .lines()
            .find_map(|l| l.strip_prefix("synthgate_http_long_requests "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if held == n as f64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{held} long requests held, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A request head that is never finished.
const PARTIAL_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ";

/// Opens a connection that sends part of a request head and then nothing.
async fn slow_connection(addr: SocketAddr) -> TcpStream {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .expect("the server stopped accepting connections")
        .expect("connect");
    s.write_all(PARTIAL_HEAD).await.expect("write partial head");
    s
}

/// When the server closed `s` (EOF or reset), or `None` if it is still open at `deadline`.
async fn closed_at(mut s: TcpStream, deadline: Instant) -> Option<Instant> {
    let mut buf = [0u8; 1024];
    match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
        Err(_) => None,
        Ok(Ok(0) | Err(_)) => Some(Instant::now()),
        // The server never answers a head it did not get; anything else is a bug.
        Ok(Ok(n)) => panic!(
            "unexpected bytes on a slow connection: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
}

/// `GET /healthz` on a new connection; asserts `200` and returns how long it took.
async fn healthz(addr: SocketAddr) -> Duration {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        out
    })
    .await
    .expect("/healthz did not answer within 10 s");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    started.elapsed()
}

/// Reads one response with a `Content-Length` body from a keep-alive connection.
async fn read_response(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("response within 10 s")
            .expect("read");
        assert!(n > 0, "closed before the response was complete");
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("content-length");
            if body.len() >= len {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_after_the_header_timeout() {
    const SLOW: usize = 300;
    let timeout = Duration::from_secs(2);
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.header_read_timeout_sec = timeout.as_secs();
    })
    .await;
    let opened = Instant::now();
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        slow.push(slow_connection(app.addr).await);
    }
    // While they are all open, /healthz answers at once, every time.
    for _ in 0..10 {
        let took = healthz(app.addr).await;
        assert!(
            took < Duration::from_millis(100),
            "/healthz took {took:?} with {SLOW} slow connections open"
        );
    }
    let deadline = opened + timeout + Duration::from_secs(10);
    let closed = futures::future::join_all(slow.into_iter().map(|s| closed_at(s, deadline))).await;
    let still_open = closed.iter().filter(|c| c.is_none()).count();
    assert_eq!(
        still_open, 0,
        "slow connections still open 10 s past the timeout"
    );
    for at in closed.into_iter().flatten() {
        // Each was accepted after `opened`, so none may close before `opened + timeout`
        // (10 ms of slack for the millisecond clock).
        assert!(
            at + Duration::from_millis(10) >= opened + timeout,
            "a slow connection was closed {:?} after it opened, before the header timeout",
            at - opened
        );
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_gets_the_idle_timeout_and_a_new_head_the_header_timeout() {
    let header = Duration::from_secs(1);
    let idle = Duration::from_secs(3);
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.header_read_timeout_sec = header.as_secs();
        c.server.idle_timeout_sec = idle.as_secs();
    })
    .await;
    // A keep-alive connection idle after one request: closed at the idle timeout, not sooner.
    let mut quiet = TcpStream::connect(app.addr).await.unwrap();
    quiet
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let text = read_response(&mut quiet).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let quiet_idle = Instant::now();

    // Another one that starts its next head and stalls: closed at the header timeout, counted
    // from that head's first byte.
    let mut stalled = TcpStream::connect(app.addr).await.unwrap();
    stalled
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    read_response(&mut stalled).await;
    stalled.write_all(PARTIAL_HEAD).await.unwrap();
    let stalled_head = Instant::now();

    let deadline = Instant::now() + idle + Duration::from_secs(10);
    let (quiet_closed, stalled_closed) =
        tokio::join!(closed_at(quiet, deadline), closed_at(stalled, deadline));
    let quiet_closed = quiet_closed.expect("the idle connection was never closed");
    let stalled_closed = stalled_closed.expect("the stalled head was never closed");
    let slack = Duration::from_millis(10);
    assert!(
        quiet_closed + slack >= quiet_idle + idle,
        "idle connection closed after {:?}, before the idle timeout",
        quiet_closed - quiet_idle
    );
    assert!(
        stalled_closed + slack >= stalled_head + header,
        "stalled head closed after {:?}, before the header timeout",
        stalled_closed - stalled_head
    );
    assert!(
        stalled_closed < quiet_closed,
        "a stalled head must not get the idle timeout"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limit_closes_idle_connections_and_healthz_answers() {
    const LIMIT: usize = 16;
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.max_connections = LIMIT;
        // Long timeouts: only the limit can close anything during this test.
        c.server.header_read_timeout_sec = 300;
        c.server.idle_timeout_sec = 300;
    })
    .await;
    let first: Vec<TcpStream> =
        futures::future::join_all((0..LIMIT).map(|_| slow_connection(app.addr))).await;
    // Twice the limit: each new connection makes the server close the longest-idle one.
    let mut second = Vec::with_capacity(LIMIT);
    for _ in 0..LIMIT {
        second.push(slow_connection(app.addr).await);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let closed = futures::future::join_all(first.into_iter().map(|s| closed_at(s, deadline))).await;
    assert!(
        closed.iter().all(Option::is_some),
        "{} of the first {LIMIT} connections stayed open past the limit",
        closed.iter().filter(|c| c.is_none()).count()
    );
    // The limit is full of idle connections, and /healthz still answers, every time.
    for _ in 0..20 {
        let took = healthz(app.addr).await;
        assert!(
            took < Duration::from_millis(100),
            "/healthz took {took:?} at the connection limit"
        );
    }
    // Only as many as needed were closed: most of the second wave is still open.
    let mut open = 0;
    for mut s in second {
        let mut buf = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await {
            Err(_) => open += 1,
            Ok(Ok(0) | Err(_)) => {}
            Ok(Ok(_)) => panic!("unexpected bytes on a slow connection"),
        }
    }
    assert!(
        open >= LIMIT - 2,
        "only {open} of the second {LIMIT} are still open"
    );
    app.stop().await;
}

/// Starts an upload that drips its body: the head, then one byte, then nothing more (well
/// inside `datasets.upload_idle_timeout_sec`, so the upload stays in progress).
async fn dripping_upload(addr: SocketAddr) -> TcpStream {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .expect("the server stopped accepting connections")
        .expect("connect");
    s.write_all(
        b"POST /v1/datasets?name=drip.csv HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          Content-Type: text/csv\r\nContent-Length: 1000000\r\n\r\na",
    )
    .await
    .expect("write");
    s
}

/// Uploads dripping their bodies (and event streams, exports: any request the request
/// timeout does not cut) used to fill `max_connections` with busy connections that the limit
/// cannot close, and `/healthz` waited in the backlog. They are bounded by
/// `server.max_long_requests` now: past it, the next one gets `503 server_busy` (with
/// `Retry-After`) at once, and short requests always find a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripping_uploads_cannot_fill_the_connections() {
    const LIMIT: usize = 8;
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.max_connections = LIMIT;
        c.server.max_long_requests = Some(LIMIT / 2);
        c.server.header_read_timeout_sec = 300;
        c.server.idle_timeout_sec = 300;
        c.datasets.upload_idle_timeout_sec = 300;
    })
    .await;
    let mut dripping = Vec::new();
    for _ in 0..LIMIT / 2 {
        dripping.push(dripping_upload(app.addr).await);
    }
    // The server has taken each one in (they hold their permits from the request's head on).
    await_long_requests(&app, (LIMIT / 2) as u64).await;
    for _ in 0..LIMIT {
        let mut s = dripping_upload(app.addr).await;
        let answer = read_response(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("\"server_busy\""), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("retry-after: 1"),
            "{answer}"
        );
    }
    for _ in 0..20 {
        let took = healthz(app.addr).await;
        assert!(
            took < Duration::from_millis(200),
            "/healthz took {took:?} beside the dripping uploads"
        );
    }
    // The dripping uploads are still in progress: nothing answered them.
    for mut s in dripping {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
        assert!(read.is_err(), "a dripping upload was answered or closed");
    }
    app.stop().await;
}

/// The finding as reported: the process runs out of file descriptors before any connection
/// limit. Runs the real binary under `ulimit -n 128` with the default `max_connections` (1024):
/// `accept` fails with `EMFILE`, the server closes idle connections to free descriptors, and
/// `/healthz` keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_when_file_descriptors_run_out() {
    const SLOW: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("synthgate.log");
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 128 && exec \"$0\" serve")
        .arg(env!("CARGO_BIN_EXE_synthgate"))
        .env("SYNTHGATE__SERVER__PORT", port.to_string())
        .env(
            "SYNTHGATE__DATABASE__SQLITE_PATH",
            dir.path().join("synthgate.db"),
        )
        .env("SYNTHGATE__DATABASE__MAX_CONNECTIONS", "2")
        .env("SYNTHGATE__WORKERS__COUNT", "2")
        .env("SYNTHGATE__SERVER__HEADER_READ_TIMEOUT_SEC", "300")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .kill_on_drop(true)
        .spawn()
        .expect("start synthgate");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Ready when /healthz answers (the database is local SQLite).
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await
            && s.write_all(b"GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .await
                .is_ok()
        {
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
            if out.starts_with(b"HTTP/1.1 200") {
                break;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("synthgate exited ({status})\n{}", log_tail(&log));
        }
        assert!(
            Instant::now() < ready_by,
            "synthgate did not become ready\n{}",
            log_tail(&log)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        slow.push(slow_connection(addr).await);
    }
    for _ in 0..10 {
        let took = healthz(addr).await;
        assert!(
            took < Duration::from_millis(100),
            "/healthz took {took:?} out of file descriptors\n{}",
            log_tail(&log)
        );
    }
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("accepting a connection failed"),
        "the test did not reach the descriptor limit\n{}",
        log_tail(&log)
    );
    drop(slow);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_connections_at_once() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.header_read_timeout_sec = 300;
        c.server.idle_timeout_sec = 300;
        c.server.shutdown_timeout_sec = 30;
    })
    .await;
    let addr = app.addr;
    let slow = futures::future::join_all((0..20).map(|_| slow_connection(addr))).await;
    healthz(addr).await;
    let started = Instant::now();
    app.stop().await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "shutdown waited {took:?} for connections with no request in progress"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    let closed = futures::future::join_all(slow.into_iter().map(|s| closed_at(s, deadline))).await;
    assert!(
        closed.iter().all(Option::is_some),
        "slow connections survived shutdown"
    );
}

/// Starts `POST /v1/jobs` announcing a body of `len` bytes: the head, one byte, then nothing.
async fn dripping_job(addr: SocketAddr, len: usize) -> TcpStream {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .expect("the server stopped accepting connections")
        .expect("connect");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {len}\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).await.expect("write");
    s
}

/// Issue 49 Q6: ordinary requests dripping their bodies held every connection until the
/// request timeout (30 s by default; 300 s here, so the old behaviour cannot pass by waiting),
/// and `/healthz` waited in the backlog. Past a short grace a slow body now needs one of the
/// long requests' permits: half the connections here, so the other half are cut with `408`
/// and closed, and `/healthz` finds a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_bodies_cannot_fill_the_connections() {
    const LIMIT: usize = 8;
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.max_connections = LIMIT;
        c.server.max_long_requests = Some(LIMIT / 2);
        c.server.header_read_timeout_sec = 300;
        c.server.idle_timeout_sec = 300;
        c.server.request_timeout_sec = 300;
    })
    .await;
    let mut dripping = Vec::new();
    for _ in 0..LIMIT {
        dripping.push(dripping_job(app.addr, 1_000_000).await);
    }
    // Past the grace (2 s): half took permits, the rest were answered and closed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut cut = 0;
    for s in &mut dripping {
        let mut buf = vec![0u8; 4096];
        if let Ok(read) = tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
            let n = read.expect("read");
            let text = String::from_utf8_lossy(&buf[..n]);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            assert!(text.contains("\"request_timeout\""), "{text}");
            cut += 1;
        }
    }
    assert_eq!(
        cut,
        LIMIT / 2,
        "slow bodies cut past the long requests' permits"
    );
    for _ in 0..20 {
        let took = healthz(app.addr).await;
        assert!(
            took < Duration::from_millis(200),
            "/healthz took {took:?} beside the slow bodies"
        );
    }
    app.stop().await;
}

/// A slow body that holds a permit must still keep to the minimum rate (32 KiB/s): 40,000
/// bytes get two seconds after the grace, then `408`, and the permit is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_with_a_permit_is_cut_below_the_minimum_rate() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.max_long_requests = Some(1);
        c.server.request_timeout_sec = 300;
    })
    .await;
    let started = Instant::now();
    let mut s = dripping_job(app.addr, 40_000).await;
    let answer = read_response(&mut s).await;
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(took >= Duration::from_secs(4), "cut after {took:?}");
    // The permit was released: another slow body gets one (and is cut the same way).
    let mut s = dripping_job(app.addr, 40_000).await;
    let answer = read_response(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    app.stop().await;
}

/// Issue 49 Q7: one key may hold at most `server.max_long_requests_per_key` long requests, so
/// a key dripping uploads cannot take the permits every other key needs: its next one gets
/// `429 too_many_long_requests`, another key's upload still starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_holds_at_most_its_share_of_long_requests() {
    const A: &str = "long-a-0123456789abcdef";
    const B: &str = "long-b-0123456789abcdef";
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.auth = serde_json::from_value(serde_json::json!({"api_keys": [
            {"name": "a", "key": A},
            {"name": "b", "key": B},
        ]}))
        .unwrap();
        c.server.max_long_requests = Some(4);
        c.server.max_long_requests_per_key = Some(2);
        c.datasets.upload_idle_timeout_sec = 300;
    })
    .await;
    let start = |key: &'static str| {
        let addr = app.addr;
        async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let head = format!(
                "POST /v1/datasets?name=drip.csv HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer {key}\r\nContent-Type: text/csv\r\n\
                 Content-Length: 1000000\r\n\r\na"
            );
            s.write_all(head.as_bytes()).await.expect("write");
            s
        }
    };
    let mut held = vec![start(A).await, start(A).await];
    await_long_requests(&app, 2).await;
    let mut third = start(A).await;
    let answer = read_response(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("\"too_many_long_requests\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    // Key b's upload takes one of the permits a left free: still in progress, unanswered.
    held.push(start(B).await);
    await_long_requests(&app, 3).await;
    for s in &mut held {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
        assert!(
            read.is_err(),
            "an upload in progress was answered or closed"
        );
    }
    app.stop().await;
}
