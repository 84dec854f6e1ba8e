-- The columns of a dataset row, in order (a JSON array of names), as compiled at submit, so a
-- job response does not compile the job's plan to list them. Null for jobs stored before.
alter table jobs add column output_columns jsonb;
