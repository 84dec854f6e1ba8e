-- LLM usage per job and model alias, added to by the batch writer (`insert ... on conflict`).
-- Requests that a re-run record repeats are counted again: they were really made and billed.
create table job_usage (
    job_id uuid not null references jobs (id),
    model_alias text not null,
    requests bigint not null,
    prompt_tokens bigint not null,
    completion_tokens bigint not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (job_id, model_alias)
);
