-- Record selection (issue 51): a job with `record_selection` generates candidates until
-- `num_records` pass its predicate column or `max_candidates` were generated. Null on every
-- other job. See migrations/postgres/0014_record_selection.sql for the model.
alter table jobs add column max_candidates integer check (max_candidates is null or max_candidates > 0);
alter table jobs add column on_exhausted text
    check (on_exhausted is null or on_exhausted in ('raise', 'return_partial'));

-- A completed candidate's verdict; null on failed rows (`failed_generation`) and on records of
-- other jobs. `accepted` rows past the first `num_records` become `trimmed` when the job ends.
alter table records add column selection text
    check (selection is null or selection in ('accepted', 'rejected', 'null_predicate', 'trimmed'));
create index records_job_selection on records (job_id, selection, idx) where selection is not null;

-- Completed candidates whose predicate was true (accepted and trimmed) and false, added to in
-- the transaction that writes the rows, like `completed` and `failed`.
alter table job_record_counts add column passed integer not null default 0 check (passed >= 0);
alter table job_record_counts add column rejected integer not null default 0 check (rejected >= 0);
