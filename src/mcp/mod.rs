//! MCP client side: transports for the MCP servers that jobs call tools on.
pub mod sse;
