//! One step of the worker loop: take leases and slots for a claim, claim, and start the
//! claimed records (one task per record, or one per CPU-only chunk). [`super::WorkerPool::run`]
//! repeats [`Claimer::step`] until shutdown, then drains what the claimer started.
//!
//! A claim may hand out a suspect record (its chunk's worker died twice; see
//! [`ClaimedRecord::suspect`]) only while this replica runs none: the claimer holds one token
//! for that, taken without waiting before each claim and held by the suspect record until its
//! result is written. Nothing waits on it, so a suspect record never stops the claim loop.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{
    FINALIZE_SWEEP_EVERY, Finished, Held, Inner, Settled, chunk, cpu_leases, faults, not_generated,
    run_record, slot, unsent,
};
use crate::queue::{ClaimPolicy, ClaimedRecord};

/// The claim loop's state between steps.
pub(super) struct Claimer {
    inner: Arc<Inner>,
    /// Notified by local submits.
    wake: Arc<Notify>,
    /// To the batch writer.
    tx: mpsc::Sender<Finished>,
    /// `workers.count`: records working at once.
    slots: Arc<Semaphore>,
    /// Records claimed and not yet handed to the writer: `workers.max_in_flight` plus those
    /// claimed ahead (`WorkersConfig::claim_ahead`).
    leases: Arc<Semaphore>,
    lease_limit: u32,
    /// `workers.max_in_flight`: records started and not yet handed to the writer.
    starts: Arc<Semaphore>,
    start_limit: u32,
    /// Shutdown: records claimed ahead and not started by then are given back.
    stop: CancellationToken,
    batch: usize,
    /// The record and chunk tasks started, for the drain.
    pub(super) records: TaskTracker,
    /// Cuts the records in flight when the drain deadline passes.
    pub(super) cut: CancellationToken,
    last_sweep: tokio::time::Instant,
    /// One permit, the suspect token: held by the one suspect record of this replica in
    /// flight (until its result is written or it is given back). A claim may hand out a
    /// suspect record only when it is free; the claimer tries it, never waits for it.
    suspect: Arc<Semaphore>,
    /// The last claim handed out CPU-only chunks only (it sizes the next claim).
    cpu_streak: bool,
    /// Records of a CPU-only chunk per lease in a claim sized for such chunks
    /// ([`WorkersConfig::cpu_records_per_lease`](crate::config::WorkersConfig::cpu_records_per_lease)).
    cpu_per_lease: usize,
    /// Held while claims keep finding records: more are coming, so the writer keeps batching
    /// (see `unsent`). Let go when a claim finds nothing or fails.
    claiming: Option<unsent::Sending>,
}

impl Claimer {
    pub(super) fn new(
        inner: Arc<Inner>,
        wake: Arc<Notify>,
        tx: mpsc::Sender<Finished>,
        stop: CancellationToken,
    ) -> Self {
        let cfg = &inner.cfg;
        let start_limit = cfg.in_flight_limit();
        let lease_limit = cfg.lease_limit();
        Self {
            slots: Arc::new(Semaphore::new(cfg.count as usize)),
            leases: Arc::new(Semaphore::new(lease_limit as usize)),
            lease_limit,
            starts: Arc::new(Semaphore::new(start_limit as usize)),
            start_limit,
            stop,
            batch: cfg.claim_batch_size.max(1) as usize,
            records: TaskTracker::new(),
            cut: CancellationToken::new(),
            last_sweep: tokio::time::Instant::now(),
            suspect: Arc::new(Semaphore::new(1)),
            cpu_streak: false,
            cpu_per_lease: cfg.cpu_records_per_lease() as usize,
            claiming: None,
            inner,
            wake,
            tx,
        }
    }

    /// One claim: waits for leases and a slot, claims, and starts what it got; when nothing
    /// was claimable, waits for a submit or the poll interval. Breaks once `shutdown` fires.
    pub(super) async fn step(&mut self, shutdown: &CancellationToken) -> ControlFlow<()> {
        let lease_limit = self.lease_limit;
        let lease = if self.cpu_streak {
            cpu_leases(
                self.leases.clone(),
                lease_limit,
                self.inner.cfg.write_interval_ms,
            )
            .boxed()
        } else {
            self.leases.clone().acquire_owned().boxed()
        };
        let mut lease = tokio::select! {
            p = lease => match p { Ok(p) => p, Err(_) => return ControlFlow::Break(()) },
            () = shutdown.cancelled() => return ControlFlow::Break(()),
        };
        // After a claim of CPU-only chunks, the next one is sized by the free leases alone:
        // such a chunk needs one slot, however many records it has.
        let lease_target = if self.cpu_streak {
            self.batch.max(lease_limit as usize)
        } else {
            self.batch
        };
        while lease.num_permits() < lease_target {
            match self.leases.clone().try_acquire_owned() {
                Ok(p) => lease.merge(p),
                Err(_) => break,
            }
        }
        let first = tokio::select! {
            p = self.slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return ControlFlow::Break(()),
            },
            () = shutdown.cancelled() => return ControlFlow::Break(()),
        };
        let mut permits = vec![first];
        while !self.cpu_streak && permits.len() < self.batch.min(lease.num_permits()) {
            match self.slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        // A claim sized for CPU-only chunks asks for several records per lease; records of
        // other work it meets get a lease each, as far as the claim's leases go (see `start`).
        let (per_lease, limit) = if self.cpu_streak {
            let per = self.cpu_per_lease;
            (per, lease.num_permits().saturating_mul(per))
        } else {
            (1, permits.len())
        };
        // Registered before the query, so a submit during the claim cannot be missed.
        let wake = self.wake.clone();
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Free: no suspect record of this replica is in flight, and this claim may hand one
        // out. Held: suspect chunks are left to a later claim (or another replica).
        let suspect = self.suspect.clone().try_acquire_owned().ok();
        let policy = ClaimPolicy {
            max_lease_expiries: self.inner.cfg.max_lease_expiries,
            isolate: suspect.is_some(),
        };
        let started = std::time::Instant::now();
        let claim = self
            .inner
            .queue
            .claim(
                &self.inner.owner,
                u32::try_from(limit).unwrap_or(u32::MAX),
                self.inner.cfg.lease_ttl(),
                policy,
            )
            .await;
        metrics::histogram!(crate::metrics::CLAIM_SECONDS).record(started.elapsed().as_secs_f64());
        let claim = match claim {
            Ok(claim) => claim,
            Err(e) => {
                drop((permits, lease, suspect));
                self.claiming = None;
                tracing::warn!(error = %e, "claiming records failed; retrying");
                let pause = Duration::from_millis(self.inner.cfg.poll_interval_ms.max(500));
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = shutdown.cancelled() => return ControlFlow::Break(()),
                }
                return ControlFlow::Continue(());
            }
        };
        if !claim.abandoned.is_empty() {
            faults::settle_abandoned(&self.inner, &claim.abandoned).await;
        }
        if claim.records.is_empty() {
            self.cpu_streak = false;
            self.claiming = None;
            drop((permits, lease, suspect));
            if self.last_sweep.elapsed() >= FINALIZE_SWEEP_EVERY {
                self.inner.jobs.finalize_live().await;
                self.last_sweep = tokio::time::Instant::now();
            }
            let poll = Duration::from_millis(self.inner.cfg.poll_interval_ms);
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep(poll) => {}
                () = shutdown.cancelled() => return ControlFlow::Break(()),
            }
            return ControlFlow::Continue(());
        }
        if self.claiming.is_none() {
            self.claiming = Some(self.inner.unsent.hold(1));
        }
        self.start(claim.records, lease, permits, per_lease, suspect)
            .await;
        ControlFlow::Continue(())
    }

    /// Starts the claimed records: a CPU-only chunk of several records as one task in one slot
    /// (see `chunk`), holding a lease and a place among the records started for every
    /// `per_lease` of its records, any other record as a task of its own with its own lease
    /// (a suspect record also with `suspect`, the token the claim was made with).
    /// Records of other work past the claim's leases (a claim sized for CPU-only chunks that
    /// met an LLM job) are given back unstarted: their chunk goes back to the queue once its
    /// records started here are settled.
    async fn start(
        &mut self,
        claimed: Vec<ClaimedRecord>,
        lease: OwnedSemaphorePermit,
        permits: Vec<OwnedSemaphorePermit>,
        per_lease: usize,
        mut suspect: Option<OwnedSemaphorePermit>,
    ) {
        let inner = &self.inner;
        tracing::debug!(claimed = claimed.len(), "claimed records");
        metrics::counter!(crate::metrics::CLAIMS).increment(1);
        metrics::counter!(crate::metrics::RECORDS_CLAIMED).increment(claimed.len() as u64);
        inner.hold(&claimed);
        let mut lease = Some(lease);
        let mut permits = permits.into_iter();
        let mut claimed = claimed.into_iter().peekable();
        let mut past_leases = Vec::new();
        self.cpu_streak = true;
        while let Some(first) = claimed.next() {
            // The records of one chunk come together (sorted by job and index).
            let mut group = vec![first];
            while let Some(r) = claimed.next_if(|r| r.chunk == group[0].chunk) {
                group.push(r);
            }
            let cpu_only = if group.len() > 1 {
                inner.cpu_only(group[0].job_id).await
            } else {
                None
            };
            let Some(compiled) = cpu_only else {
                self.cpu_streak = false;
                for rec in group {
                    // A CPU-sized claim holds one slot: records past it wait for one.
                    let permit = permits.next();
                    let own = lease.as_mut().and_then(|l| l.split(1));
                    let Some(own) = own else {
                        debug_assert!(per_lease > 1, "a claim of one record per lease ran out");
                        past_leases.push(rec);
                        continue;
                    };
                    // The claim hands out at most one suspect record, and only with the token.
                    let token = if rec.suspect {
                        debug_assert!(suspect.is_some(), "a suspect record without the token");
                        tracing::warn!(record.id = %rec.id, job.id = %rec.job_id,
                            record.index = rec.index, lease_expiries = rec.lease_expiries,
                            "running a suspect record, no other suspect beside it: its chunk's \
                             worker died while generating it before");
                        suspect.take()
                    } else {
                        None
                    };
                    let unsent = inner.unsent.hold(1);
                    let (inner, slots, starts, tx, cut, stop) = (
                        inner.clone(),
                        self.slots.clone(),
                        self.starts.clone(),
                        self.tx.clone(),
                        self.cut.clone(),
                        self.stop.clone(),
                    );
                    self.records.spawn(async move {
                        let mut permit = permit;
                        let Some(start) = slot::start(&starts, 1, &mut permit, &stop).await else {
                            not_generated(&inner, &rec).await;
                            return;
                        };
                        let Some(permit) = slot::take(permit, slots.clone(), &cut).await else {
                            return;
                        };
                        let held = Held {
                            _lease: own,
                            _start: start,
                            slot: slot::Slot::new(slots, permit),
                            unsent,
                            suspect: token,
                        };
                        run_record(inner, rec, held, tx, cut).await;
                    });
                }
                continue;
            };
            // One task and one slot for the chunk: its records are generated together in one
            // CPU section (see `chunk`).
            let need = group.len().div_ceil(per_lease);
            // Leases rounded up chunk by chunk can come to more than the claim holds: then what
            // is left of them (if anything is), or one more if one is free, or the chunk goes
            // back. A chunk never runs on no lease.
            let own = lease
                .as_mut()
                .and_then(|l| l.split(need))
                .or_else(|| lease.take().filter(|l| l.num_permits() > 0))
                .or_else(|| self.leases.clone().try_acquire_owned().ok());
            let Some(own) = own else {
                past_leases.extend(group);
                continue;
            };
            let mut mine = permits.by_ref().take(group.len());
            let permit = mine.next();
            drop(mine.collect::<Vec<_>>());
            let unsent = inner.unsent.hold(group.len());
            // A chunk larger than the limit (a claim of every lease, ahead included) starts
            // with the whole limit.
            let n_starts = (own.num_permits() as u32).min(self.start_limit);
            let (inner, slots, starts, tx, cut, stop) = (
                inner.clone(),
                self.slots.clone(),
                self.starts.clone(),
                self.tx.clone(),
                self.cut.clone(),
                self.stop.clone(),
            );
            self.records.spawn(async move {
                let mut permit = permit;
                let Some(start) = slot::start(&starts, n_starts, &mut permit, &stop).await else {
                    for rec in &group {
                        not_generated(&inner, rec).await;
                    }
                    return;
                };
                let Some(permit) = slot::take(permit, slots.clone(), &cut).await else {
                    return;
                };
                let held = Held {
                    _lease: own,
                    _start: start,
                    slot: slot::Slot::new(slots, permit),
                    unsent,
                    suspect: None,
                };
                chunk::run_cpu_chunk(inner, compiled, group, held, tx, cut).await;
            });
        }
        if !past_leases.is_empty() {
            tracing::debug!(
                records = past_leases.len(),
                "records past the claim's leases given back unstarted"
            );
            let release = inner.settle(past_leases.iter().map(|r| (r.chunk, Settled::GiveBack)));
            inner.release(&release).await;
        }
    }
}
