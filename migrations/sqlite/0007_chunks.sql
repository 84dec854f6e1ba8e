-- Work is leased in chunks of record indexes instead of one pre-created row per record
-- (issue 13); see the Postgres migration of the same number for the model. Encodings as in
-- 0001: ids are 16-byte blobs, timestamps integer microseconds.

alter table jobs add column claimed_upto integer not null default 0;

create table chunks (
    job_id blob not null references jobs (id) on delete cascade,
    start_idx integer not null check (start_idx >= 0),
    end_idx integer not null,
    -- Null: given back and claimable now, without counting an expiry.
    lease_owner text,
    lease_expires_at integer,
    attempts integer not null default 1,
    lease_expiries integer not null default 0,
    -- Records of `[start_idx, end_idx)` that have a row in `records`.
    written integer not null default 0,
    created_at integer not null,
    updated_at integer not null,
    primary key (job_id, start_idx),
    check (end_idx > start_idx),
    check (written >= 0 and written <= end_idx - start_idx)
) strict;

create index chunks_lease_owner on chunks (lease_owner);

update jobs set claimed_upto = num_records;
insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, attempts,
                    lease_expiries, written, created_at, updated_at)
select j.id, 0, j.num_records, null, null, 0, 0,
       (select count(*) from records r
        where r.job_id = j.id and r.status in ('completed', 'failed')),
       j.updated_at, j.updated_at
from jobs j
where j.status in ('queued', 'running', 'cancelling') and j.num_records > 0
  and exists (select 1 from records r
              where r.job_id = j.id and r.status in ('pending', 'in_progress'));
delete from records where status in ('pending', 'in_progress', 'cancelled');

drop index records_lease_owner;
alter table records drop column lease_owner;
alter table records drop column lease_expires_at;
