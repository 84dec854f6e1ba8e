-- Stored datasets (issue 12): seed files uploaded by clients or imported from server files,
-- the Hugging Face Hub and directory listings, read in blocks by the workers of every replica.
--
-- A dataset is inserted `importing`, its blocks are written in bounded transactions, then it
-- flips to `ready`; every reader looks at `ready` rows only, so half an import is never seen.
-- An import that dies leaves an `importing` row whose `updated_at` stops moving: it is removed
-- once idle for longer than `datasets.import_idle_timeout_sec`.

create table datasets (
    id uuid primary key,
    -- Name of the API key that owns the dataset; null when auth is off.
    owner text,
    -- The file name, without directories.
    name text not null,
    format text not null check (format in ('csv', 'jsonl', 'parquet', 'listing')),
    -- `[{"name": ..., "type": ...}]`, in column order (a jsonb array keeps its order).
    columns jsonb not null,
    num_rows bigint not null check (num_rows >= 0),
    -- Bytes of the source file, and the hex sha256 of those bytes.
    size_bytes bigint not null check (size_bytes >= 0),
    sha256 text not null,
    source text not null
        check (source in ('upload', 'server_file', 'hf', 'directory', 'file_contents')),
    -- Where a server-side source came from (hf repo/revision/path, a server path with its
    -- mtime and size): the cache key that finds an earlier import of the same file.
    source_ref text,
    status text not null check (status in ('importing', 'ready')),
    created_at timestamptz not null default now(),
    -- Bumped by every block write while importing: how stale imports are recognised.
    updated_at timestamptz not null default now()
);

-- Listing and name resolution: an owner's datasets by name, newest (highest id) first.
create index datasets_owner_name on datasets (owner, name, id);
-- Idempotent re-upload and the CLI's "does the server have this file" check.
create index datasets_owner_sha256 on datasets (owner, sha256);
-- Cache lookups of server-side sources.
create index datasets_owner_source_ref on datasets (owner, source_ref)
    where source_ref is not null;
-- Listing an owner's datasets newest first.
create index datasets_owner_id on datasets (owner, id);
-- Finding stale imports; stays tiny since imports are short-lived.
create index datasets_importing on datasets (updated_at) where status = 'importing';

-- A dataset's rows, `BLOCK_ROWS` (256) per block: row i is in block i / 256 at position
-- i % 256. `rows` holds the UTF-8 bytes of one JSON array of row objects. Bytes rather than
-- jsonb: jsonb would sort each row's keys, and a row's key order is its column order. No
-- timestamps of their own: a block is written once, with its dataset.
create table dataset_blocks (
    dataset_id uuid not null references datasets (id) on delete cascade,
    block_index bigint not null check (block_index >= 0),
    rows bytea not null,
    primary key (dataset_id, block_index)
);

-- The ids (a JSON array of text uuids) of the datasets a job's seed resolved to, bound at
-- submit; null for jobs without a stored seed. Deleting a dataset is refused while a live job
-- lists it.
alter table jobs add column seed_datasets jsonb;
