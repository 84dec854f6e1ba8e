-- LLM usage per job and model alias, added to by the batch writer (`insert ... on conflict`).
-- Requests that a re-run record repeats are counted again: they were really made and billed.
create table job_usage (
    job_id blob not null references jobs (id),
    model_alias text not null,
    requests integer not null,
    prompt_tokens integer not null,
    completion_tokens integer not null,
    created_at integer not null,
    updated_at integer not null,
    primary key (job_id, model_alias)
) strict;
