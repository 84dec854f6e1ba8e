//! synthgate's test doubles, kept out of the product crate: they are what tests, benches and the
//! README's example and docs talk to instead of a real LLM or MCP server.
//!
//! - [`mock_llm`]: a scripted OpenAI/Anthropic-compatible LLM (binary `mock-llm`).
//! - [`mock_mcp`]: a scripted MCP server over stdio and streamable HTTP (binary `mock-mcp`).
//! - [`mock_hub`]: a Hugging Face Hub double serving dataset repositories from memory
//!   (in-process only).
//! - [`bin_path`]: where the running test finds those binaries (built on demand).
//! - [`signals`]: SIGINT/SIGTERM handling shared by the two binaries.
//! - [`tls`]: serving a double over HTTPS with HTTP/2 and a cap on a connection's streams.

pub mod bin_path;
pub mod mock_hub;
pub mod mock_llm;
pub mod mock_mcp;
pub mod signals;
pub mod tls;

pub use bin_path::bin_path;
