//! What a claim does with records whose lease expired, shared by both backends.
//!
//! A lease expires when its worker stopped renewing it without writing a result or giving the
//! record back: the process crashed or was killed, hung, or lost the database for longer than
//! a lease. A record that itself crashes the process (a poison pill) would be claimed again
//! and kill the next worker too, forever; so each expiry is counted on the record
//! (`records.lease_expiries`, which survives the process), and:
//!
//! * a record whose lease expired `max_lease_expiries` times is failed with `record_abandoned`
//!   instead of being claimed again;
//! * a record whose lease expired at least [`RUN_ALONE_AFTER_EXPIRIES`] times runs alone on its
//!   claimer, so when it crashes the process again, the records that merely ran next to it do
//!   not lose another life.
//!
//! A clean release (drain at SIGTERM, a job that could not be loaded) is not an expiry and is
//! not counted: it proves nothing about the record.

use uuid::Uuid;

use super::{ClaimPolicy, RUN_ALONE_AFTER_EXPIRIES};

/// How many expired records a claim looks at beyond its limit: abandoned ones do not count
/// against the limit, and after a crash there are about as many as the dead worker held.
pub(crate) const EXPIRED_MARGIN: i64 = 64;

/// The expired records a claim found, sorted by what to do with them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SortedExpired {
    /// Fail these with `record_abandoned`.
    pub(crate) abandon: Vec<Uuid>,
    /// Take these over.
    pub(crate) take: Vec<Uuid>,
    /// `take` is one record that must run alone: claim nothing else.
    pub(crate) alone: bool,
    /// Records that must run alone were left because the claimer is not alone.
    pub(crate) alone_waiting: bool,
}

impl SortedExpired {
    /// `expired`: `(id, lease expiries so far)` in claim order (job, then index).
    pub(crate) fn new(
        expired: impl IntoIterator<Item = (Uuid, u32)>,
        limit: u32,
        policy: ClaimPolicy,
    ) -> Self {
        let mut out = Self::default();
        let mut suspects = Vec::new();
        let mut normal = Vec::new();
        for (id, before) in expired {
            // Counting the expiry this claim found.
            let n = before.saturating_add(1);
            if n >= policy.max_lease_expiries.max(1) {
                out.abandon.push(id);
            } else if n >= RUN_ALONE_AFTER_EXPIRIES {
                suspects.push(id);
            } else {
                normal.push(id);
            }
        }
        if limit == 0 {
            out.alone_waiting = !suspects.is_empty();
            return out;
        }
        if policy.alone && !suspects.is_empty() {
            out.take = vec![suspects[0]];
            out.alone = true;
            return out;
        }
        out.alone_waiting = !suspects.is_empty();
        normal.truncate(limit as usize);
        out.take = normal;
        out
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u128) -> Vec<Uuid> {
        (0..n).map(Uuid::from_u128).collect()
    }

    #[test]
    fn sorts_by_expiries() {
        let id = ids(5);
        let found = [(id[0], 0), (id[1], 2), (id[2], 1), (id[3], 0), (id[4], 9)];
        let policy = ClaimPolicy {
            max_lease_expiries: 3,
            alone: false,
        };
        let s = SortedExpired::new(found, 10, policy);
        assert_eq!(s.abandon, [id[1], id[4]]);
        assert_eq!(s.take, [id[0], id[3]]);
        assert!(!s.alone && s.alone_waiting);

        // Alone: the suspect, by itself.
        let alone = ClaimPolicy {
            alone: true,
            ..policy
        };
        let s = SortedExpired::new(found, 10, alone);
        assert_eq!(
            (s.take, s.alone, s.alone_waiting),
            (vec![id[2]], true, false)
        );

        // The limit bounds takes, not abandons.
        let s = SortedExpired::new(found, 1, policy);
        assert_eq!((s.abandon.len(), s.take), (2, vec![id[0]]));
        let s = SortedExpired::new(found, 0, alone);
        assert_eq!((s.abandon.len(), s.take.len()), (2, 0));
    }

    #[test]
    fn a_limit_of_one_abandons_at_the_first_expiry() {
        let id = ids(1);
        let policy = ClaimPolicy {
            max_lease_expiries: 1,
            alone: true,
        };
        let s = SortedExpired::new([(id[0], 0)], 5, policy);
        assert_eq!((s.abandon, s.take), (vec![id[0]], vec![]));
    }
}
