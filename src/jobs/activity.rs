//! What this replica's records are doing now: how many of each job's records in progress are
//! waiting on a model (for a `max_parallel_requests` slot, or for the answer). The queue's
//! `in_progress` counts every record claimed; most of a slow model's job waits, and a page
//! that called them all "running" misled its reader. Kept in memory, per replica: a job spread
//! over several replicas shows the share of the replica that answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::domain::JobId;

/// Records waiting on a model, by job.
#[derive(Debug, Default)]
pub struct Activity(Mutex<HashMap<JobId, u64>>);

impl Activity {
    /// Records of `job` waiting on a model now.
    pub fn waiting_for_model(&self, job: JobId) -> u64 {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(&job).copied().unwrap_or(0)
    }

    fn add(&self, job: JobId, up: bool) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(job).or_default();
        if up {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&job);
            }
        }
    }
}

/// One record's model calls: a record counts as waiting while any of its calls is (its
/// independent LLM columns may call at once).
#[derive(Debug)]
pub struct ModelWaits<'a> {
    activity: &'a Activity,
    job: JobId,
    calls: AtomicU32,
}

impl<'a> ModelWaits<'a> {
    pub fn new(activity: &'a Activity, job: JobId) -> Self {
        Self {
            activity,
            job,
            calls: AtomicU32::new(0),
        }
    }

    /// Marks a call begun; the record waits until the returned guard drops.
    pub fn call(&self) -> CallGuard<'_, 'a> {
        if self.calls.fetch_add(1, Ordering::AcqRel) == 0 {
            self.activity.add(self.job, true);
        }
        CallGuard(self)
    }
}

/// A model call in flight; see [`ModelWaits::call`].
#[derive(Debug)]
pub struct CallGuard<'w, 'a>(&'w ModelWaits<'a>);

impl Drop for CallGuard<'_, '_> {
    fn drop(&mut self) {
        let waits = self.0;
        if waits.calls.fetch_sub(1, Ordering::AcqRel) == 1 {
            waits.activity.add(waits.job, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_waits_while_any_of_its_calls_does() {
        let activity = Activity::default();
        let (a, b) = (JobId::new(), JobId::new());
        let first = ModelWaits::new(&activity, a);
        let second = ModelWaits::new(&activity, a);
        let other = ModelWaits::new(&activity, b);
        let c1 = first.call();
        let c2 = first.call();
        let c3 = second.call();
        let c4 = other.call();
        assert_eq!(activity.waiting_for_model(a), 2, "two records, three calls");
        assert_eq!(activity.waiting_for_model(b), 1);
        drop(c1);
        assert_eq!(
            activity.waiting_for_model(a),
            2,
            "one call of the first left"
        );
        drop(c2);
        assert_eq!(activity.waiting_for_model(a), 1);
        drop((c3, c4));
        assert_eq!(activity.waiting_for_model(a), 0);
        assert_eq!(activity.waiting_for_model(b), 0);
        assert!(
            activity.0.lock().unwrap().is_empty(),
            "finished jobs leave nothing"
        );
    }
}
