//! The integration test binary: the real service over HTTP, on SQLite and Postgres.

mod auth;
mod config_cli;
mod connections;
mod db;
mod db_faults;
mod errors;
mod exports;
mod faults;
mod fuzz;
mod helpers;
mod jobs;
mod llm_client;
mod llm_jobs;
mod mcp_config;
mod mcp_jobs;
mod mcp_sse;
mod mcp_support;
mod metrics;
mod openapi;
mod process;
mod replicas;
mod restart;
mod scheduling;
mod schemathesis;
mod secrets;
mod store;
