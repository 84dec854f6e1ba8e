-- One row that `/readyz` writes (issue 25): a read alone (`select 1`) stayed fine on a full
-- disk or a read-only database (a failed-over replica) while every claim and submit failed, so
-- the service reported itself ready.
create table readiness (
    id smallint primary key check (id = 1),
    checked_at timestamptz not null
);
