-- The response cache (issue 51): chat answers per API key, content-addressed.
--
-- `owner` is the API key's name ('' when auth is off), never the key itself: one key never
-- reads another's answers. `key` is the SHA-256 of everything that makes an answer (provider
-- and its endpoint, model, inference parameters, the full messages, the tools offered, the
-- response format). Entries older than `llm.cache.max_age_days`, or past `llm.cache.max_mib`
-- in all (oldest first), are swept with job retention.
create table llm_cache (
    owner text not null,
    key bytea not null,
    response jsonb not null,
    bytes bigint not null check (bytes >= 0),
    created_at timestamptz not null default now(),
    primary key (owner, key)
);
create index llm_cache_created on llm_cache (created_at);

-- A job's cache mode (null: jobs stored before; read as `off`).
alter table jobs add column cache_mode text
    check (cache_mode is null or cache_mode in ('off', 'read_write', 'refresh'));

-- Calls of a job answered from the cache, per model alias (not in `requests`: no provider
-- answered them, and they cost nothing).
alter table job_usage add column cached_requests bigint not null default 0
    check (cached_requests >= 0);
