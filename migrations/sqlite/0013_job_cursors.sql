-- Where each job's next chunk starts (issue 29): `claimed_upto` moves from `jobs` to a row of
-- its own, as on Postgres, where it keeps a claim from waiting on the job row that batch
-- writes hold (see migrations/postgres/0013_job_cursors.sql). SQLite has one writer, so here
-- it changes nothing but keeps one schema and one set of queries for both backends.
create table job_cursors (
    job_id blob primary key references jobs (id) on delete cascade,
    claimed_upto integer not null default 0 check (claimed_upto >= 0)
) strict;

insert into job_cursors (job_id, claimed_upto) select id, claimed_upto from jobs;

alter table jobs drop column claimed_upto;

-- Every job gets its cursor in the statement that inserts it, whoever inserts it (a process
-- of an earlier build sharing the file knows nothing of this table).
create trigger job_cursor_open after insert on jobs
begin
    insert into job_cursors (job_id) values (new.id);
end;
