-- One row that `/readyz` writes (issue 25): a read alone (`select 1`) stayed fine on a full
-- disk while every claim and submit failed, so the service reported itself ready.
create table readiness (
    id integer primary key check (id = 1),
    checked_at integer not null
) strict;
