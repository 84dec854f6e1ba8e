//! The queue's rules for `record_selection` jobs, as SQL both backends run alike: how far a
//! claim may carve such a job, whether it fell short of its target (`finish.rs` ends it by
//! that), and which passing candidates are trimmed. See `domain::selection` for the model.
//!
//! Macros, so the fragments join the backends' statements with `concat!`; `$j` names the
//! `jobs` row in the statement and `$k` its `job_cursors` row.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};
use uuid::Uuid;

use super::StoreError;

/// Job `$j`'s completed candidates whose predicate held (accepted and trimmed).
macro_rules! passed {
    ($j:literal) => {
        concat!(
            "coalesce((select p.passed from job_record_counts p where p.job_id = ",
            $j,
            ".id), 0)"
        )
    };
}
pub(crate) use passed;

/// Where carving job `$j` stops: `num_records` for a plain job; for a selection job its
/// candidate budget, or its cursor (`$k.claimed_upto`: nothing more) once `num_records`
/// passed. A job has indexes to carve while `$k.claimed_upto` is below it.
macro_rules! carve_limit {
    ($j:literal, $k:literal) => {
        concat!(
            "(case when ",
            $j,
            ".max_candidates is null then ",
            $j,
            ".num_records \
                   when ",
            $crate::store::selection::passed!($j),
            " >= ",
            $j,
            ".num_records \
                   then ",
            $k,
            ".claimed_upto \
                   else ",
            $j,
            ".max_candidates end)"
        )
    };
}
pub(crate) use carve_limit;

/// Job `$j`'s candidates with a result (completed and failed).
macro_rules! written {
    ($j:literal) => {
        concat!(
            "coalesce((select w.completed + w.failed from job_record_counts w where w.job_id = ",
            $j,
            ".id), 0)"
        )
    };
}
pub(crate) use written;

/// How many more candidates selection job `$j` may carve now: the candidates its missing
/// accepted records should take at the pass rate seen so far (`(written + 1) / (passed + 1)`
/// candidates per pass, so one per missing record before any result, and more as candidates
/// fail the predicate), less those carved and still without a result. Claims carve a job in
/// several chunks at once and before earlier ones are written, so without this a job near its
/// target took a chunk per claim and generated, and paid for, hundreds of candidates it could
/// not use. At least one while the target is not met and nothing is outstanding, so a job
/// always moves.
macro_rules! room {
    ($j:literal, $k:literal) => {
        concat!(
            "((",
            $j,
            ".num_records - ",
            $crate::store::selection::passed!($j),
            ") \
               * (",
            $crate::store::selection::written!($j),
            " + 1) \
               / (",
            $crate::store::selection::passed!($j),
            " + 1) \
              - (",
            $k,
            ".claimed_upto - ",
            $crate::store::selection::written!($j),
            "))"
        )
    };
}
pub(crate) use room;

/// Job `$j` has indexes a claim may carve now: below [`carve_limit!`] and, for a selection
/// job, within its [`room!`].
macro_rules! carvable {
    ($j:literal, $k:literal) => {
        concat!(
            "(",
            $k,
            ".claimed_upto < ",
            $crate::store::selection::carve_limit!($j, $k),
            " and (",
            $j,
            ".max_candidates is null or ",
            $crate::store::selection::room!($j, $k),
            " > 0))"
        )
    };
}
pub(crate) use carvable;

/// The size of job `$j`'s next chunk, for a claim that wants `$want` records: all of it for a
/// plain job, at most its [`room!`] for a selection job (the chunk's end is also capped by
/// [`carve_limit!`]).
macro_rules! carve_want {
    ($j:literal, $k:literal, $want:literal) => {
        concat!(
            "(case when ",
            $j,
            ".max_candidates is null \
                     or ",
            $crate::store::selection::room!($j, $k),
            " >= ",
            $want,
            " \
                   then ",
            $want,
            " \
                   else ",
            $crate::store::selection::room!($j, $k),
            " end)"
        )
    };
}
pub(crate) use carve_want;

/// Job `$j` is a selection job that has not met its target (once it is finished: its budget
/// ran out).
macro_rules! short {
    ($j:literal) => {
        concat!(
            "(",
            $j,
            ".max_candidates is not null and ",
            $crate::store::selection::passed!($j),
            " < ",
            $j,
            ".num_records)"
        )
    };
}
pub(crate) use short;

/// The `error_message` of a job that ended `record_selection_exhausted` (a macro: it is a
/// literal of the finishing statement; no quote in it).
macro_rules! exhausted_message {
    () => {
        "record_selection: the candidate budget (max_candidate_records) ran out before \
         num_records candidates passed the predicate column; every candidate is kept (see the \
         counts.selection of the job, and its records with selection=all)"
    };
}
pub(crate) use exhausted_message;

/// Marks `trimmed` the passing candidates of finished job `id` after its first `num_records`
/// by index (those in flight when the target was met), so that its `accepted` records are
/// exactly the first `num_records` that passed, whatever order they were written in. A job
/// without `record_selection`, or one short of its target, has nothing to trim.
pub(crate) async fn trim<'e, DB, E>(exec: E, id: Uuid) -> Result<(), StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
{
    sqlx::query(
        "update records set selection = 'trimmed' \
         where job_id = $1 and selection = 'accepted' \
           and idx > (select r.idx from records r join jobs j on j.id = r.job_id \
                      where r.job_id = $1 and r.selection = 'accepted' \
                        and j.max_candidates is not null \
                      order by r.idx \
                      limit 1 offset (select num_records - 1 from jobs where id = $1))",
    )
    .bind(id)
    .execute(exec)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exhausted_message_is_a_plain_sql_literal() {
        assert!(!exhausted_message!().contains('\''));
    }
}
