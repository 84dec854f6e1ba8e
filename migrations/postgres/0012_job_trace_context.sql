-- Where a job sits in an OpenTelemetry trace (issue 30): the W3C `traceparent` of its `job`
-- span, chosen at submit, and that span's parent (the submitting request's span), written as
-- `<traceparent>;<parent span id>`. Every replica parents or links the job's record spans to
-- it, and the replica that finishes the job exports the job span with it. Null when spans were
-- not exported at submit.
alter table jobs add column trace_context text;
