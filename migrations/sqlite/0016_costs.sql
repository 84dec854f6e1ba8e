-- Cost (issue 51): what a job's model calls cost at the prices of the server's model configs
-- when they were made, in billionths of the price's unit, per model alias and per column; and
-- a job's optional budget. See migrations/postgres/0016_costs.sql.
alter table job_usage add column cost_nanos integer not null default 0 check (cost_nanos >= 0);

create table job_column_usage (
    job_id blob not null references jobs (id) on delete cascade,
    column_name text not null,
    requests integer not null,
    prompt_tokens integer not null,
    completion_tokens integer not null,
    cached_requests integer not null,
    cost_nanos integer not null,
    created_at integer not null,
    updated_at integer not null,
    primary key (job_id, column_name)
) strict;

alter table jobs add column max_cost_nanos integer
    check (max_cost_nanos is null or max_cost_nanos > 0);
