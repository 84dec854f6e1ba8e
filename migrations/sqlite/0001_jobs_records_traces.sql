-- Jobs, their records (the work queue) and the message traces of LLM columns.
--
-- Encodings (SQLite has no uuid, json or timestamp types):
-- * ids: 16-byte blobs (sqlx's uuid encoding). Ids are UUIDv7, so byte order is creation order.
-- * timestamps: integer microseconds since the Unix epoch, UTC, written by the application
--   (never a column default, so every row uses the same encoding). Integers sort
--   chronologically; read them with `datetime(created_at / 1000000, 'unixepoch')`.
-- * json: text, checked with `json_valid`.
-- Tables are `strict`, so a value of the wrong type is rejected instead of stored.

create table jobs (
    id blob primary key,
    -- Name of the API key that created the job; null when auth is off.
    owner text,
    status text not null
        check (status in ('queued', 'running', 'completed', 'failed', 'cancelling', 'cancelled')),
    config text not null check (json_valid(config)),
    num_records integer not null check (num_records >= 0),
    -- The u64 seed bit-cast to i64: seeds at or above 2^63 are stored as negative numbers and
    -- cast back on read, so every u64 round-trips exactly.
    seed integer not null,
    metadata text check (json_valid(metadata)),
    run_config text not null check (json_valid(run_config)),
    idempotency_key text,
    request_hash text,
    error_code text,
    error_message text,
    created_at integer not null,
    updated_at integer not null,
    started_at integer,
    finished_at integer
) strict;

-- One job per (owner, key). `coalesce` makes jobs without an owner share one key space (a
-- plain unique index treats every null owner as distinct). No API key is named ''.
create unique index jobs_owner_idempotency_key
    on jobs (coalesce(owner, ''), idempotency_key)
    where idempotency_key is not null;

-- Listing an owner's jobs, newest first.
create index jobs_owner_id on jobs (owner, id);

-- Live jobs, for claims and for finalizing after a restart. Not partial as on Postgres:
-- SQLite uses a partial index only when a query repeats its `where` term exactly.
create index jobs_status on jobs (status, id);

create table records (
    id blob primary key,
    job_id blob not null references jobs (id) on delete cascade,
    -- Position in the job's dataset, from 0.
    idx integer not null check (idx >= 0),
    status text not null
        check (status in ('pending', 'in_progress', 'completed', 'failed', 'cancelled')),
    -- `values` is a keyword, hence the quotes wherever the column is named.
    "values" text check (json_valid("values")),
    attempts integer not null default 0,
    lease_owner text,
    lease_expires_at integer,
    error_code text,
    error_message text,
    error_column text,
    error_stage text,
    created_at integer not null,
    updated_at integer not null,
    -- Also serves listing by index and the foreign key's lookups.
    unique (job_id, idx)
) strict;

-- The claim scan: a job's pending records in index order (`job_id = ? and status = 'pending'
-- order by idx` is one ordered range), likewise its in-progress ones when looking for expired
-- leases (few: at most what the workers hold). Also counts by status (covering), first
-- errors, listing filtered by status and the finalize check.
create index records_job_status on records (job_id, status, idx);

-- Lease renewal by owner. Partial: only records in flight, however large the table.
create index records_lease_owner on records (lease_owner) where status = 'in_progress';

-- Progress streams: records of a job that changed since a point in time.
create index records_job_updated on records (job_id, updated_at);

create table traces (
    record_id blob not null references records (id) on delete cascade,
    column_name text not null,
    -- The ordered message list (a JSON array).
    messages text not null check (json_valid(messages)),
    created_at integer not null,
    updated_at integer not null,
    primary key (record_id, column_name)
) strict;
