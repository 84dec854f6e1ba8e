-- Tool use per job and LLM column, added to by the batch writer in the transaction that writes
-- the records it belongs to (like job_usage). Each row counts the calls of one tool that ended
-- with one outcome (ok, extraction_error, validation_error, execution_error, formatting_error,
-- refused); the row with outcome 'turns' and tool_name '' counts the column's tool-calling
-- turns. A call that named no tool counts under tool_name ''.
create table job_tool_usage (
    job_id uuid not null references jobs (id),
    column_name text not null,
    tool_name text not null,
    outcome text not null,
    n bigint not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (job_id, column_name, tool_name, outcome)
);
