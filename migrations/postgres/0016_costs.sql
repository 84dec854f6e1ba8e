-- Cost (issue 51, DataDesigner #956): what a job's model calls cost at the prices of the
-- server's model configs when they were made. Kept in billionths of the price's unit
-- (integers: a job's cost is the exact sum of its written records', whatever the order), per
-- model alias (`job_usage`) and per column (`job_column_usage`, which also holds each column's
-- requests and tokens), added to in the transaction that writes the records, like the rest of
-- the usage.
alter table job_usage add column cost_nanos bigint not null default 0 check (cost_nanos >= 0);

create table job_column_usage (
    job_id uuid not null references jobs (id) on delete cascade,
    column_name text not null,
    requests bigint not null,
    prompt_tokens bigint not null,
    completion_tokens bigint not null,
    cached_requests bigint not null,
    cost_nanos bigint not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (job_id, column_name)
);

-- A job's budget: once its cost passes it, the job stops claiming and fails with
-- `cost_budget_exceeded` (records in flight still land). Null: no budget.
alter table jobs add column max_cost_nanos bigint
    check (max_cost_nanos is null or max_cost_nanos > 0);
