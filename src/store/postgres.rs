//! Postgres store. INTERFACE STUB.
