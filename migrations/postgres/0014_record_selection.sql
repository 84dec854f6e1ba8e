-- Record selection (issue 51): a job with `record_selection` generates candidates until
-- `num_records` of them pass its predicate column, or `max_candidates` were generated.
--
-- Claims carve a selection job's indexes up to `max_candidates` while fewer than
-- `num_records` passed (`job_record_counts.passed`, read without a lock: a stale read carves
-- at most one chunk more, which runs and is counted like any other candidate). The job is
-- finished once no chunk is left and either every index up to `max_candidates` was carved or
-- the target was met; `on_exhausted` then says whether a short job fails or completes. Null
-- on every other job.
alter table jobs add column max_candidates bigint check (max_candidates is null or max_candidates > 0);
alter table jobs add column on_exhausted text
    check (on_exhausted is null or on_exhausted in ('raise', 'return_partial'));

-- A completed candidate's verdict; null on failed rows (`failed_generation`) and on records of
-- other jobs. `accepted` rows past the first `num_records` (by index) become `trimmed` in the
-- transaction that finishes the job, so the accepted set is the first `num_records` passing
-- candidates whatever the order they were written in.
alter table records add column selection text
    check (selection is null or selection in ('accepted', 'rejected', 'null_predicate', 'trimmed'));
create index records_job_selection on records (job_id, selection, idx) where selection is not null;

-- Completed candidates whose predicate was true (accepted and trimmed) and false, added to in
-- the transaction that writes the rows, like `completed` and `failed`.
alter table job_record_counts add column passed bigint not null default 0 check (passed >= 0);
alter table job_record_counts add column rejected bigint not null default 0 check (rejected >= 0);
