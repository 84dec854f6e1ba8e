"""Schemathesis hooks for the spec run of tests/api/schemathesis.rs (`SCHEMATHESIS_HOOKS`).

The seed datastore's commit (`POST /v1/hf/api/datasets/{namespace}/{name}/commit/{rev}`)
takes `application/x-ndjson`, JSON lines, which schemathesis has no serializer for: its
generated strings go out as the text they are, as `text/plain` bodies do.
"""

import schemathesis

schemathesis.serializer.alias("application/x-ndjson", "text/plain")
