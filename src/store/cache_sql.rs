//! The response cache's statements that read the same on both backends.

/// Deletes the oldest entries of `llm_cache` past `$1` bytes in all: every entry from the
/// newest one at which the running total (newest first) passes `$1`, and those older.
pub(crate) const OVER_SIZE: &str = "\
    delete from llm_cache where created_at <= ( \
        select t.created_at from ( \
            select created_at, sum(bytes) over (order by created_at desc, key desc) as total \
            from llm_cache) t \
        where t.total > $1 \
        order by t.created_at desc \
        limit 1)";
