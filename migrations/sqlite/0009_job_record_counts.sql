-- How many records of each job have a result, by outcome, kept as counters (issue 13). A job's
-- counts were a `group by status` over its rows in `records`: a read that grew with the job
-- (a million rows for the documented maximum) and ran on every job read, progress tick and
-- early-shutdown check. The batch writer now adds to these counters in the transaction that
-- inserts the rows (like `job_usage`), so a count is one row read and always agrees with the
-- rows written. No row yet: nothing written.
create table job_record_counts (
    job_id blob primary key references jobs (id),
    completed integer not null check (completed >= 0),
    failed integer not null check (failed >= 0)
) strict;

insert into job_record_counts (job_id, completed, failed)
select job_id, sum(status = 'completed'), sum(status = 'failed')
from records
group by job_id;

-- `records_job_status` served the counts, the first errors and listing by status. Counts no
-- longer need it; failures are few, so a partial index on them serves the first errors and
-- listing failed records, and costs nothing on the insert of a completed one. Listing
-- completed records walks the unique `(job_id, idx)` index.
drop index records_job_status;
create index records_job_failed on records (job_id, idx) where status = 'failed';
