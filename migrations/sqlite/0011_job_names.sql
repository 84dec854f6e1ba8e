-- An optional name a client gives a job (issue 31), to find it again: `GET /v1/jobs?name=`
-- reads this index. Null for jobs stored before, and for jobs submitted without one.
alter table jobs add column name text;
create index jobs_name on jobs (name);
