//! Fair shares for a claim of new chunks (records not yet claimed), shared by both backends.
//!
//! Taking the oldest job's records first would let one key's large job hold every worker until
//! it was done while another key's one-record job waited behind it (head-of-line blocking).
//! So each claimed record goes, in turn, to the job whose owner has the fewest
//! records in progress, then the job with the fewest, oldest job first on ties. Counts are
//! taken from the database, so they cover every replica; the rule needs no state between
//! claims and gives round-robin across jobs and keys when their counts are equal.

use uuid::Uuid;

use crate::store::from_row::row_struct;

row_struct! {
    /// A live job with unclaimed records, as the claim query sees it.
    #[derive(Debug, Clone)]
    pub(crate) struct ClaimableJob {
        /// The job id (UUIDv7: creation order).
        pub(crate) id: Uuid,
        /// The API key that owns it; `None` when auth is off (all such jobs share one owner).
        pub(crate) owner: Option<String>,
        /// Its records in progress now, on any replica.
        pub(crate) busy: i64,
        /// Still `queued`: its first carve marks it running.
        pub(crate) queued: bool,
    }
}

/// How many of `n` records to ask of each job: `(index into jobs, count)`, only counts above
/// zero, in the order of `jobs`. Each record goes to the job whose owner has the fewest
/// records in progress (counting the ones already given out by this call), then the job with
/// the fewest, then the oldest job.
pub(crate) fn shares(jobs: &[ClaimableJob], n: usize) -> Vec<(usize, usize)> {
    if jobs.is_empty() || n == 0 {
        return Vec::new();
    }
    // Owners by index, so the loop compares integers.
    let mut owners: Vec<&Option<String>> = Vec::new();
    let owner_of: Vec<usize> = jobs
        .iter()
        .map(|j| match owners.iter().position(|o| **o == j.owner) {
            Some(i) => i,
            None => {
                owners.push(&j.owner);
                owners.len() - 1
            }
        })
        .collect();
    let mut owner_busy = vec![0i64; owners.len()];
    for (j, &o) in jobs.iter().zip(&owner_of) {
        owner_busy[o] += j.busy.max(0);
    }
    let mut job_busy: Vec<i64> = jobs.iter().map(|j| j.busy.max(0)).collect();
    let mut given = vec![0usize; jobs.len()];
    // n is a claim batch (tens) and jobs the live ones with pending work: this is cheap.
    for _ in 0..n {
        let pick = (0..jobs.len())
            .min_by_key(|&i| (owner_busy[owner_of[i]], job_busy[i], jobs[i].id))
            .expect("jobs is not empty");
        given[pick] += 1;
        job_busy[pick] += 1;
        owner_busy[owner_of[pick]] += 1;
    }
    given
        .into_iter()
        .enumerate()
        .filter(|&(_, k)| k > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u128, owner: Option<&str>, busy: i64) -> ClaimableJob {
        ClaimableJob {
            id: Uuid::from_u128(id),
            owner: owner.map(str::to_owned),
            busy,
            queued: false,
        }
    }

    #[test]
    fn equal_jobs_share_round_robin_oldest_first() {
        let jobs = [job(1, None, 0), job(2, None, 0), job(3, None, 0)];
        assert_eq!(shares(&jobs, 4), [(0, 2), (1, 1), (2, 1)]);
        assert_eq!(shares(&jobs, 0), []);
        assert_eq!(shares(&[], 5), []);
    }

    #[test]
    fn the_least_busy_owner_goes_first() {
        // Key a has a big job with 30 in progress and a second job; key b one idle job.
        let jobs = [
            job(1, Some("a"), 30),
            job(2, Some("a"), 0),
            job(3, Some("b"), 0),
        ];
        assert_eq!(shares(&jobs, 1), [(2, 1)]);
        // b catches up to a's 30 before a gets more, and a's idle job goes before its busy one.
        assert_eq!(shares(&jobs, 31), [(1, 1), (2, 30)]);
    }

    #[test]
    fn jobs_of_one_owner_are_balanced() {
        let jobs = [job(1, Some("a"), 5), job(2, Some("a"), 1)];
        assert_eq!(shares(&jobs, 6), [(0, 1), (1, 5)]);
    }
}
