//! The rules of chunk leases shared by both backends: what a claim does with a chunk whose
//! lease expired or that was given back, and how a job's record counts follow from its rows.
//!
//! A job's indexes `0..num_records` are handed out as chunks: a claim carves the next
//! `[claimed_upto, claimed_upto + n)` off the job and leases it. A record becomes a row once it
//! has a result, in a write fenced by its chunk's lease; the chunk row goes when its last
//! record is written. So a chunk row exists only while some of its records have no result,
//! and when its worker dies the chunk is taken over by a later claim, which runs exactly the
//! indexes that have no row yet.
//!
//! A lease expires when its worker stopped renewing it without writing its records or giving
//! it back: the process crashed or was killed, hung, or lost the database for longer than a
//! lease. A record that itself crashes the process (a poison pill) would be claimed again and
//! kill the next worker too, forever; so each expiry is counted on the chunk
//! (`chunks.lease_expiries`, which survives the process), and:
//!
//! * a chunk whose lease expired at least [`ISOLATE_AFTER_EXPIRIES`] times is *suspect*: it is
//!   handed out one record at a time (cut so that the leased chunk ends after its first record
//!   without a result; the rest is given back as a chunk of its own, still suspect), and only
//!   to a claimer with no suspect record in flight ([`ClaimPolicy::isolate`]), one per claim.
//!   The claim hands out other work beside it as usual; a suspect chunk it may not take is
//!   left for a later claim or another replica, so no claim ever waits for one;
//! * a chunk whose lease expired `max_lease_expiries` times has the records it was running
//!   failed with `record_abandoned` instead of being run again: the one record it held when
//!   it was suspect, else all of its records without a result.
//!
//! Why that blames the culprit alone: the count a record carries (its chunk's, which the rest
//! of a cut chunk inherits) is the number of deaths it was leased through, and a poison pill
//! is leased at every death it causes, so no record has died more often than the culprit. An
//! innocent suspect record (two deaths or more) thus never runs beside the culprit on its
//! replica, the culprit being suspect too; an innocent record that is not suspect (at most one
//! death) is still under the limit after the next. The culprit, run as the one suspect record
//! of its replica, reaches the limit holding just itself; the records of its chunk after it
//! are run one at a time and written. Nothing in this needs a lock over the replica's other
//! work: it keeps being claimed, for every key. (This takes a limit above
//! [`ISOLATE_AFTER_EXPIRIES`]; at or below it no chunk is ever handed out as suspect, and a
//! chunk that reaches the limit has all its records without a result abandoned.)
//!
//! A clean release (drain at SIGTERM, a job that could not be loaded) is not an expiry and is
//! not counted: it proves nothing about the records.

use super::{ChunkKey, ClaimPolicy, ClaimedRecord, ISOLATE_AFTER_EXPIRIES};
use crate::domain::RecordId;

/// How many expired or given-back chunks a claim looks at: after a crash, about as many as the
/// dead worker held; abandoned ones do not count against the claim's limit.
pub(crate) const EXPIRED_SCAN: i64 = 64;

/// A chunk whose lease expired or that was given back, as the claim found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stale {
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// Given back (no owner): not an expiry.
    pub(crate) released: bool,
    /// Lease expiries counted before this claim.
    pub(crate) lease_expiries: u32,
}

/// The part of a chunk after a cut: `[start, end)` stays a chunk of its own, given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rest {
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// Its indexes that have a result.
    pub(crate) written: u32,
}

/// What a claim does with one stale chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChunkPlan {
    /// Every index has a result (a write landed just before the lease lapsed): delete it.
    Done,
    /// Leave it for now, for a later claim or another replica: the claim has no room, or the
    /// chunk is suspect and the claim may not take a suspect record.
    Leave,
    /// Fail `indexes` with `record_abandoned`; `rest`, if any, is given back (still suspect);
    /// the chunk itself is deleted.
    Abandon {
        indexes: Vec<u32>,
        rest: Option<Rest>,
    },
    /// Lease `[start, end)` and run `todo` (its indexes without a result, all of them);
    /// `rest`, if any, is given back.
    Take {
        end: u32,
        todo: Vec<u32>,
        /// Indexes of `[start, end)` that have a result.
        written: u32,
        /// Lease expiries including the one this claim found.
        lease_expiries: u32,
        /// The chunk is suspect: `todo` is its one record.
        suspect: bool,
        rest: Option<Rest>,
    },
}

/// Decides what a claim with room for `left` more records does with `chunk`, whose indexes in
/// `written` (sorted, within the chunk) have a result. `isolate`: the claim may take a suspect
/// record (the claimer has none in flight and this claim has taken none yet).
pub(crate) fn plan(
    chunk: Stale,
    written: &[u32],
    left: usize,
    policy: ClaimPolicy,
    isolate: bool,
) -> ChunkPlan {
    let todo: Vec<u32> = unwritten(chunk.start, chunk.end, written).collect();
    if todo.is_empty() {
        return ChunkPlan::Done;
    }
    let before = chunk.lease_expiries;
    let after = if chunk.released {
        before
    } else {
        before.saturating_add(1)
    };
    let cut_after = |last: u32| -> Option<Rest> {
        (last + 1 < chunk.end).then(|| Rest {
            start: last + 1,
            end: chunk.end,
            written: count_in(written, last + 1, chunk.end),
        })
    };
    if !chunk.released && after >= policy.max_lease_expiries.max(1) {
        // A suspect chunk held one record, its first without a result: that is the one that
        // died with its worker every time. Otherwise it is not known which of its records
        // did, and all of them go.
        if before >= ISOLATE_AFTER_EXPIRIES {
            let first = todo[0];
            let rest = cut_after(first).filter(|r| r.written < r.end - r.start);
            return ChunkPlan::Abandon {
                indexes: vec![first],
                rest,
            };
        }
        return ChunkPlan::Abandon {
            indexes: todo,
            rest: None,
        };
    }
    if left == 0 {
        return ChunkPlan::Leave;
    }
    if after >= ISOLATE_AFTER_EXPIRIES {
        if !isolate {
            return ChunkPlan::Leave;
        }
        let first = todo[0];
        return ChunkPlan::Take {
            end: first + 1,
            written: count_in(written, chunk.start, first + 1),
            todo: vec![first],
            lease_expiries: after,
            suspect: true,
            rest: cut_after(first),
        };
    }
    let mut todo = todo;
    let rest = if todo.len() > left {
        todo.truncate(left);
        cut_after(*todo.last().expect("left > 0"))
    } else {
        None
    };
    let end = rest.map_or(chunk.end, |r| r.start);
    ChunkPlan::Take {
        end,
        written: count_in(written, chunk.start, end),
        todo,
        lease_expiries: after,
        suspect: false,
        rest,
    }
}

/// The records of a claimed chunk, each with a fresh id.
pub(crate) fn records_of(
    chunk: ChunkKey,
    todo: &[u32],
    attempts: u32,
    lease_expiries: u32,
    suspect: bool,
) -> impl Iterator<Item = ClaimedRecord> + '_ {
    let chunk_todo = todo.len() as u32;
    todo.iter().map(move |&index| ClaimedRecord {
        id: RecordId::new(),
        job_id: chunk.job_id,
        index,
        chunk,
        chunk_todo,
        attempts,
        lease_expiries,
        suspect,
    })
}

/// The `error.message` of an abandoned record.
pub(crate) fn abandoned_message(max_lease_expiries: u32) -> String {
    format!(
        "the worker generating this record stopped without a result {max_lease_expiries} \
         time(s) (process crash, hang or lost database); the record is not retried again"
    )
}

/// A stored count as `u32`, saturating (a hand-edited row must not fail every claim).
pub(crate) fn to_count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// The indexes of `[start, end)` not in `written` (sorted).
fn unwritten(start: u32, end: u32, written: &[u32]) -> impl Iterator<Item = u32> + '_ {
    (start..end).filter(move |i| written.binary_search(i).is_err())
}

fn count_in(written: &[u32], start: u32, end: u32) -> u32 {
    written.iter().filter(|&&i| i >= start && i < end).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: ClaimPolicy = ClaimPolicy {
        max_lease_expiries: 3,
        isolate: false,
    };

    fn stale(start: u32, end: u32, released: bool, lease_expiries: u32) -> Stale {
        Stale {
            start,
            end,
            released,
            lease_expiries,
        }
    }

    #[test]
    fn a_first_expiry_is_taken_over_cut_to_the_room_left() {
        // 10..20, 11 and 14 written; room for 3: 10, 12, 13, and the rest given back.
        let p = plan(stale(10, 20, false, 0), &[11, 14], 3, POLICY, false);
        assert_eq!(
            p,
            ChunkPlan::Take {
                end: 14,
                todo: vec![10, 12, 13],
                written: 1,
                lease_expiries: 1,
                suspect: false,
                rest: Some(Rest {
                    start: 14,
                    end: 20,
                    written: 1
                }),
            }
        );
        // Room for all of it: no cut.
        let p = plan(stale(10, 20, false, 0), &[11, 14], 50, POLICY, false);
        assert!(
            matches!(
                p,
                ChunkPlan::Take {
                    end: 20,
                    rest: None,
                    written: 2,
                    ..
                }
            ),
            "{p:?}"
        );
        // No room.
        let p = plan(stale(10, 20, false, 0), &[], 0, POLICY, false);
        assert_eq!(p, ChunkPlan::Leave);
    }

    #[test]
    fn a_released_chunk_counts_no_expiry() {
        let p = plan(stale(0, 4, true, 1), &[], 10, POLICY, false);
        assert!(
            matches!(
                p,
                ChunkPlan::Take {
                    lease_expiries: 1,
                    suspect: false,
                    ..
                }
            ),
            "{p:?}"
        );
    }

    #[test]
    fn a_fully_written_chunk_is_done() {
        assert_eq!(
            plan(stale(0, 3, false, 2), &[0, 1, 2], 5, POLICY, true),
            ChunkPlan::Done
        );
    }

    #[test]
    fn a_suspect_chunk_is_handed_out_one_record_at_a_time() {
        // Second expiry: suspect. A claim that may not take a suspect record leaves it.
        let p = plan(stale(0, 8, false, 1), &[0], 32, POLICY, false);
        assert_eq!(p, ChunkPlan::Leave);
        // One that may: its first record without a result, cut right after it, the rest given
        // back (still suspect, with the count it reached).
        let p = plan(stale(0, 8, false, 1), &[0], 32, POLICY, true);
        assert_eq!(
            p,
            ChunkPlan::Take {
                end: 2,
                todo: vec![1],
                written: 1,
                lease_expiries: 2,
                suspect: true,
                rest: Some(Rest {
                    start: 2,
                    end: 8,
                    written: 0
                }),
            }
        );
        // The rest, given back: suspect without a new expiry.
        let p = plan(stale(2, 8, true, 2), &[], 32, POLICY, true);
        assert!(
            matches!(
                p,
                ChunkPlan::Take {
                    end: 3,
                    lease_expiries: 2,
                    suspect: true,
                    ..
                }
            ),
            "{p:?}"
        );
        // A suspect record needs room like any other.
        assert_eq!(
            plan(stale(0, 8, false, 1), &[], 0, POLICY, true),
            ChunkPlan::Leave
        );
    }

    #[test]
    fn the_suspect_record_that_died_again_is_abandoned() {
        // Suspect (2 expiries before), died again: its one record goes, whether or not the
        // claim may take a suspect record.
        for isolate in [false, true] {
            let p = plan(stale(5, 6, false, 2), &[], 32, POLICY, isolate);
            assert_eq!(
                p,
                ChunkPlan::Abandon {
                    indexes: vec![5],
                    rest: None
                }
            );
        }
        // A limit under the suspect threshold abandons every record without a result.
        let one = ClaimPolicy {
            max_lease_expiries: 1,
            isolate: true,
        };
        let p = plan(stale(0, 4, false, 0), &[2], 32, one, true);
        assert_eq!(
            p,
            ChunkPlan::Abandon {
                indexes: vec![0, 1, 3],
                rest: None
            }
        );
        // A released chunk is never abandoned.
        let p = plan(stale(0, 4, true, 0), &[], 32, one, true);
        assert!(matches!(p, ChunkPlan::Take { .. }), "{p:?}");
    }
}
