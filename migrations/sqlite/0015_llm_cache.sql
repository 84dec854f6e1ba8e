-- The response cache (issue 51): chat answers per API key, content-addressed. See
-- migrations/postgres/0015_llm_cache.sql for the model.
create table llm_cache (
    owner text not null,
    key blob not null,
    response text not null check (json_valid(response)),
    bytes integer not null check (bytes >= 0),
    created_at integer not null,
    primary key (owner, key)
) strict;
create index llm_cache_created on llm_cache (created_at);

alter table jobs add column cache_mode text
    check (cache_mode is null or cache_mode in ('off', 'read_write', 'refresh'));

alter table job_usage add column cached_requests integer not null default 0
    check (cached_requests >= 0);
