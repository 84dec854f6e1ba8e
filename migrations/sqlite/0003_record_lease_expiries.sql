-- How many times a record's lease expired: its worker stopped renewing it without writing a
-- result or giving it back (the process crashed or was killed, hung, or lost the database past
-- a lease). Counted by the claim that takes the record over; a clean release at drain does not
-- count. Past `workers.max_lease_expiries` the record is failed (`record_abandoned`) instead of
-- being claimed again, so a record that crashes the process cannot crash-loop it.
alter table records add column lease_expiries integer not null default 0;
