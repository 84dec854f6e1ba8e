//! Embedded SQLite store. INTERFACE STUB.
