//! When a job is finished and how it ends, written once for both backends (the statements
//! that finalize jobs join these fragments with their own timestamps and id lists).
//!
//! A live job is finished once it has nothing left to carve ([`carve_limit!`]: every index
//! claimed, or every candidate its selection may take) and no chunk is left; a cancelling one
//! once no chunk is left. It ends:
//!
//! * `cancelled`: it was cancelling and some record never got a result (a selection job:
//!   it had not met its target);
//! * `failed` with `record_selection_exhausted`: a selection job short of its target (its
//!   budget ran out) whose `on_exhausted` is `raise`;
//! * `completed` otherwise, including a cancel that came when every record was in flight, and
//!   a `return_partial` selection job short of its target (its counts say so).

/// `set` clauses of the finishing `update jobs` (timestamps are the caller's).
macro_rules! finish_set {
    () => {
        concat!(
            "status = case when status = 'cancelling' \
                             and (case when max_candidates is null \
                                  then (select k.claimed_upto from job_cursors k \
                                        where k.job_id = jobs.id) < num_records \
                                       or coalesce((select c.completed + c.failed \
                                                    from job_record_counts c \
                                                    where c.job_id = jobs.id), 0) < num_records \
                                  else ",
            $crate::store::selection::short!("jobs"),
            " end) then 'cancelled' \
                           when status <> 'cancelling' and on_exhausted = 'raise' and ",
            $crate::store::selection::short!("jobs"),
            " then 'failed' else 'completed' end, \
             error_code = case when status <> 'cancelling' and on_exhausted = 'raise' and ",
            $crate::store::selection::short!("jobs"),
            " then '",
            $crate::domain::selection::exhausted_code!(),
            "' else error_code end, \
             error_message = case when status <> 'cancelling' and on_exhausted = 'raise' and ",
            $crate::store::selection::short!("jobs"),
            " then '",
            $crate::store::selection::exhausted_message!(),
            "' else error_message end"
        )
    };
}
pub(crate) use finish_set;

/// The `where` terms (after the caller's id filter) that make a job finished now. The status
/// check makes a second caller (another replica) change nothing and return nothing.
macro_rules! finishable {
    () => {
        concat!(
            "status in ('queued', 'running', 'cancelling') \
             and (status = 'cancelling' \
                  or (select k.claimed_upto >= ",
            $crate::store::selection::carve_limit!("jobs", "k"),
            " from job_cursors k where k.job_id = jobs.id)) \
             and not exists (select 1 from chunks c where c.job_id = jobs.id)"
        )
    };
}
pub(crate) use finishable;

#[cfg(doc)]
use crate::store::selection::carve_limit;
