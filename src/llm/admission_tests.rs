use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::*;

const PAUSE_CAP: Duration = Duration::from_secs(30);

fn admission(max_in_flight: u32) -> Arc<Admission> {
    Arc::new(Admission::new(
        "p",
        AdmissionPolicy {
            max_in_flight,
            failures_to_open: 3,
            probe_interval: Duration::from_secs(5),
            patience: Duration::from_secs(60),
        },
    ))
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

async fn admit(a: &Arc<Admission>) -> Ticket {
    a.admit(far()).await.expect("admitted")
}

/// Spawns on a tracker of its own (the house rule: no untracked tasks).
fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio_util::task::TaskTracker::new().spawn(f)
}

const THROTTLED: Signal = Signal::Throttled { retry_after: None };

#[tokio::test(start_paused = true)]
async fn a_throttle_halves_what_was_in_flight_once_per_round_trip() {
    let a = admission(64);
    let tickets: Vec<Ticket> = futures::future::join_all((0..8).map(|_| admit(&a))).await;
    assert_eq!(a.state().in_flight, 8);
    let mut tickets = tickets.into_iter();
    // The first 429 halves the 8 in use (not the unused ceiling of 64)...
    tickets.next().unwrap().report(THROTTLED, PAUSE_CAP);
    assert_eq!(a.state().concurrency_limit, 4);
    // ...and the 429s of requests sent before that decrease are the same signal.
    for t in tickets.by_ref().take(3) {
        t.report(THROTTLED, PAUSE_CAP);
    }
    assert_eq!(a.state().concurrency_limit, 4);
    assert_eq!(a.state().throttled, 4);
    // A request admitted after the decrease lowers it again.
    drop(tickets);
    let t = admit(&a).await;
    t.report(THROTTLED, PAUSE_CAP);
    assert_eq!(a.state().concurrency_limit, 1, "halved what was in use: 1");
}

#[tokio::test(start_paused = true)]
async fn answers_raise_the_limit_by_one_per_limit_of_answers() {
    let a = admission(4);
    let t = admit(&a).await;
    t.report(THROTTLED, PAUSE_CAP);
    assert_eq!(a.state().concurrency_limit, 1);
    let mut seen = vec![];
    for _ in 0..12 {
        admit(&a).await.report(Signal::Answered, PAUSE_CAP);
        seen.push(a.state().concurrency_limit);
    }
    // 1 answer at 1, then 2 at 2, then 3 at 3; never past the ceiling.
    assert_eq!(seen, [2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4]);
    // A refusal (4xx) neither raises nor lowers it.
    admit(&a).await.report(Signal::Refused, PAUSE_CAP);
    assert_eq!(a.state().concurrency_limit, 4);
}

#[tokio::test(start_paused = true)]
async fn the_limit_holds_callers_back_in_order() {
    let a = admission(2);
    let first = admit(&a).await;
    first.report(THROTTLED, PAUSE_CAP);
    let held = admit(&a).await;
    let waiting = {
        let a = Arc::clone(&a);
        spawn(async move { admit(&a).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished(), "a limit of 1 is taken");
    held.report(Signal::Answered, PAUSE_CAP);
    let next = waiting.await.unwrap();
    assert_eq!(a.state().in_flight, 1);
    drop(next);
    assert_eq!(a.state().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn retry_after_pauses_every_caller_of_the_provider() {
    let a = admission(8);
    let t = admit(&a).await;
    t.report(
        Signal::Throttled {
            retry_after: Some(Duration::from_secs(2)),
        },
        PAUSE_CAP,
    );
    assert!(a.state().paused_for_secs.is_some());
    let before = Instant::now();
    drop(admit(&a).await);
    assert_eq!((Instant::now() - before).as_secs(), 2);
    // The pause is capped by the caller's most backoff.
    admit(&a).await.report(
        Signal::Throttled {
            retry_after: Some(Duration::from_secs(3600)),
        },
        Duration::from_secs(3),
    );
    let before = Instant::now();
    drop(admit(&a).await);
    assert_eq!((Instant::now() - before).as_secs(), 3);
}

#[tokio::test(start_paused = true)]
async fn failures_in_a_row_open_the_circuit_and_one_probe_closes_it() {
    let a = admission(8);
    // Two failures, then an answer: the streak ends, the circuit stays closed.
    for _ in 0..2 {
        admit(&a).await.report(Signal::Down, PAUSE_CAP);
    }
    admit(&a).await.report(Signal::Refused, PAUSE_CAP);
    for _ in 0..2 {
        admit(&a).await.report(Signal::Down, PAUSE_CAP);
    }
    assert_eq!(a.state().circuit, "closed");
    admit(&a)
        .await
        .report(Signal::Unavailable { retry_after: None }, PAUSE_CAP);
    assert_eq!(a.state().circuit, "open");

    // Nothing is admitted for the probe interval; then exactly one caller probes.
    let opened = Instant::now();
    let callers: Vec<_> = (0..5)
        .map(|_| {
            let a = Arc::clone(&a);
            spawn(async move {
                let t = admit(&a).await;
                (Instant::now(), t)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(a.state().circuit, "half_open");
    let finished = callers.iter().filter(|c| c.is_finished()).count();
    assert_eq!(finished, 1, "one probe");
    let mut callers = callers;
    let probe_at = callers.iter().position(|c| c.is_finished()).unwrap();
    let (at, probe) = callers.remove(probe_at).await.unwrap();
    assert!(probe.is_probe());
    assert!(at - opened >= Duration::from_secs(5));
    // The probe fails: open for another interval, the others still wait.
    probe.report(Signal::Down, PAUSE_CAP);
    assert_eq!(a.state().circuit, "open");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(callers.iter().all(|c| !c.is_finished()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let probe_at = callers.iter().position(|c| c.is_finished()).unwrap();
    let (_, probe) = callers.remove(probe_at).await.unwrap();
    assert!(probe.is_probe());
    // It answers: closed, everyone goes.
    probe.report(Signal::Answered, PAUSE_CAP);
    assert_eq!(a.state().circuit, "closed");
    for c in callers {
        let (_, t) = c.await.unwrap();
        assert!(!t.is_probe());
    }
}

#[tokio::test(start_paused = true)]
async fn a_probe_dropped_unanswered_hands_the_probe_on() {
    let a = admission(8);
    for _ in 0..3 {
        admit(&a).await.report(Signal::Down, PAUSE_CAP);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let probe = admit(&a).await;
    assert!(probe.is_probe());
    let next = {
        let a = Arc::clone(&a);
        spawn(async move { admit(&a).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!next.is_finished());
    drop(probe);
    let next = next.await.unwrap();
    assert!(next.is_probe(), "the next caller probes at once");
}

#[tokio::test(start_paused = true)]
async fn patience_bounds_the_wait_for_an_open_circuit() {
    let a = admission(8);
    for _ in 0..3 {
        admit(&a).await.report(Signal::Down, PAUSE_CAP);
    }
    let started = Instant::now();
    let refused = a.admit(started + Duration::from_secs(2)).await;
    assert_eq!(refused.err(), Some(PatienceSpent));
    assert_eq!((Instant::now() - started).as_secs(), 2);
    assert_eq!(a.state().circuit, "open", "no probe was taken");
}

#[tokio::test(start_paused = true)]
async fn no_patience_still_sends_when_nothing_holds_it_back() {
    let a = admission(8);
    for _ in 0..50 {
        let t = a.admit(Instant::now()).await.expect("a free slot is taken");
        t.report(Signal::Answered, PAUSE_CAP);
    }
}
