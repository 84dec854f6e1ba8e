//! `mock-mcp`: a scripted MCP server for tests and benches (a test double, not a real tool
//! server). See `synthgate::mock_mcp`.

fn main() {
    eprintln!("mock-mcp: not built yet");
    std::process::exit(2);
}
