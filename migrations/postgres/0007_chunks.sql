-- Work is leased in chunks of record indexes instead of one pre-created row per record
-- (issue 13). Submitting a job inserts the job row only; a claim carves the next chunk
-- `[claimed_upto, claimed_upto + n)` off the job and leases it; a record becomes a row in
-- `records` once it has a result (completed or failed). So submit is O(1) whatever
-- `num_records`, and storage grows with finished records only.
--
-- `chunks` holds the chunks in flight only (leased, or given back and waiting for the next
-- claim): a chunk is deleted in the transaction that writes its last record. Pending and
-- cancelled records are counts derived from the job (`num_records`, `claimed_upto`, its status)
-- and its chunks, never rows.

alter table jobs add column claimed_upto bigint not null default 0;

create table chunks (
    job_id uuid not null references jobs (id) on delete cascade,
    start_idx bigint not null check (start_idx >= 0),
    end_idx bigint not null,
    -- Null: given back (drain, a record that could not be loaded) and claimable now, without
    -- counting an expiry.
    lease_owner text,
    lease_expires_at timestamptz,
    -- Claims of this chunk, including the current one; written onto its records.
    attempts bigint not null default 1,
    -- How many times a lease on this chunk expired (its worker died, hung or lost the
    -- database). From `RUN_ALONE_AFTER_EXPIRIES` on, its records run one at a time, alone;
    -- at `workers.max_lease_expiries` the record that was running is failed
    -- (`record_abandoned`).
    lease_expiries bigint not null default 0,
    -- Records of `[start_idx, end_idx)` that have a row in `records`.
    written bigint not null default 0,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (job_id, start_idx),
    check (end_idx > start_idx),
    check (written >= 0 and written <= end_idx - start_idx)
);

-- Renewal and release by owner.
create index chunks_lease_owner on chunks (lease_owner);

-- Existing jobs. Finished ones have handed out every index.
update jobs set claimed_upto = num_records;
-- A live job with records still to run gets one chunk spanning it, given back: the next claim
-- takes it over piece by piece, skipping the indexes that already have a result.
insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, attempts,
                    lease_expiries, written)
select j.id, 0, j.num_records, null, null, 0, 0,
       (select count(*) from records r
        where r.job_id = j.id and r.status in ('completed', 'failed'))
from jobs j
where j.status in ('queued', 'running', 'cancelling') and j.num_records > 0
  and exists (select 1 from records r
              where r.job_id = j.id and r.status in ('pending', 'in_progress'));
-- Rows without a result are no longer kept (their traces and media go with them).
delete from records where status in ('pending', 'in_progress', 'cancelled');

drop index records_pending;
drop index records_lease_owner;
alter table records drop column lease_owner;
alter table records drop column lease_expires_at;
