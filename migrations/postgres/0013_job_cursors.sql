-- Where each job's next chunk starts (issue 29): `claimed_upto` moves from `jobs` to a row of
-- its own. A claim carved its chunk under the job row's lock (`for update`), and every batch
-- write in progress holds that row `for key share` (the foreign key of each record it
-- inserts) until it commits, so a claim waited for the writes under way and was as slow as a
-- write. Carving `for no key update` instead made several replicas a lock convoy on the job
-- row (bench/README.md, "Where a tool record waits"). No foreign key points at this table, so
-- a carve locks only its cursor (`for update`) and shares the job row with the writers (`for
-- share`, which still keeps a cancel or a job's end from passing a carve under way).
--
-- The column is dropped rather than kept beside the cursor: a replica of an earlier build
-- would carve from it while this build carves from the cursor, handing out indexes twice. It
-- fails its claims instead until it is replaced.
create table job_cursors (
    job_id uuid primary key references jobs (id) on delete cascade,
    claimed_upto bigint not null default 0 check (claimed_upto >= 0)
);

insert into job_cursors (job_id, claimed_upto) select id, claimed_upto from jobs;

alter table jobs drop column claimed_upto;

-- Every job gets its cursor in the statement that inserts it, whoever inserts it: a replica
-- of an earlier build (still taking submits during an upgrade) knows nothing of this table,
-- and a job without a cursor would never be claimed.
create function job_cursor_open() returns trigger language plpgsql as $$
begin
    insert into job_cursors (job_id) values (new.id);
    return null;
end
$$;

create trigger job_cursor_open after insert on jobs
for each row execute function job_cursor_open();
