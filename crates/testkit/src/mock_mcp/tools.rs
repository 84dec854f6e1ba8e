//! The mock's tools. Each one exercises one shape of `tools/call` result (text, structured,
//! image, embedded resource, tool error) or one failure mode (slow, crash, a changing tool list).

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::handler::server::tool::{ToolRouter, schema_for_output};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{schemars, tool, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::MockMcp;

/// The tool that `toggle_tools` adds and removes.
pub(super) const BONUS: &str = "bonus";

/// A valid 1x1 RGBA PNG (one half-transparent blue pixel), base64.
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// `echo` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// Returned unchanged.
    pub text: String,
}

/// `add` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// First addend.
    pub a: f64,
    /// Second addend.
    pub b: f64,
}

/// `add`'s structured output (also its `outputSchema`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AddOutput {
    /// `a + b`.
    pub sum: f64,
}

/// `fail` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct FailArgs {
    /// Goes into the error text; `boom` when absent.
    pub message: Option<String>,
}

/// `slow` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SlowArgs {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

#[tool_router(vis = "pub(super)")]
impl MockMcp {
    #[tool(description = "Returns `text` unchanged as text content.")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(
        description = "Adds two numbers: the sum as text and as structuredContent {\"sum\"}.",
        output_schema = schema_for_output::<AddOutput>()
    )]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> CallToolResult {
        let sum = a + b;
        // Whole sums go out as JSON integers: serde_json compares `5` and `5.0` as different
        // values, and tests naturally write `json!({"sum": 5})`.
        let value = if sum.fract() == 0.0 && sum.abs() < 9_007_199_254_740_992.0 {
            // Exact: whole and below 2^53.
            json!(sum as i64)
        } else {
            json!(sum)
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        result.structured_content = Some(json!({ "sum": value }));
        result
    }

    #[tool(description = "Returns one image block: a 1x1 PNG.")]
    fn image(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::image(PNG_1X1, "image/png")])
    }

    #[tool(description = "Returns text \"look\" and an image block whose data is not base64.")]
    fn broken_image(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("look"),
            ContentBlock::image("not base64!", "image/png"),
        ])
    }

    #[tool(description = "Returns text \"before\", the 1x1 PNG, then text \"after\".")]
    fn mixed(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("before"),
            ContentBlock::image(PNG_1X1, "image/png"),
            ContentBlock::text("after"),
        ])
    }

    #[tool(description = "Returns no content blocks, only structuredContent {\"k\": \"v\"}.")]
    fn structured_only(&self) -> CallToolResult {
        let mut result = CallToolResult::success(Vec::new());
        result.structured_content = Some(json!({ "k": "v" }));
        result
    }

    #[tool(description = "Returns one embedded text resource, mock://note.")]
    fn resource(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::embedded_text(
            "mock://note",
            "resource text",
        )])
    }

    #[tool(description = "Fails as a tool (isError: true): \"tool failed: <message or boom>\".")]
    fn fail(&self, Parameters(FailArgs { message }): Parameters<FailArgs>) -> CallToolResult {
        let message = message.as_deref().unwrap_or("boom");
        CallToolResult::error(vec![ContentBlock::text(format!("tool failed: {message}"))])
    }

    #[tool(description = "Sleeps `ms` milliseconds, then returns \"slept <ms>ms\". Cancellable.")]
    async fn slow(
        &self,
        Parameters(SlowArgs { ms }): Parameters<SlowArgs>,
        ct: CancellationToken,
    ) -> CallToolResult {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {
                CallToolResult::success(vec![ContentBlock::text(format!("slept {ms}ms"))])
            }
            // `ct` fires on `notifications/cancelled` for this request or when the session ends.
            // rmcp drops whatever a cancelled request returns, so this result is never seen.
            () = ct.cancelled() => {
                self.shared.record("cancel", Some("slow"));
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
        }
    }

    #[tool(
        description = "Simulates a crash: the mock-mcp binary exits with code 3; in-process, the \
                       server shuts down."
    )]
    async fn crash(&self) -> Result<CallToolResult, ErrorData> {
        self.shared.crash();
        // Only reached in-process, where the session is already closing: rmcp does not deliver
        // this, and an HTTP caller waits (like after a real crash) until its own timeout.
        Err(ErrorData::internal_error("mock-mcp crashed", None))
    }

    #[tool(
        description = "Adds the `bonus` tool, or removes it if present, and sends \
                       notifications/tools/list_changed. Returns \"tools changed\"."
    )]
    async fn toggle_tools(&self) -> String {
        self.shared.toggle_bonus().await;
        "tools changed".to_owned()
    }

    #[tool(description = "Only listed after an odd number of toggle_tools calls.")]
    fn bonus(&self) -> String {
        "bonus!".to_owned()
    }

    #[tool(description = "Returns \"pid=<process id> session=<n>\", n counting initializations.")]
    fn whoami(&self) -> String {
        format!(
            "pid={} session={}",
            std::process::id(),
            self.session_number()
        )
    }
}

/// All tools, `bonus` included; [`MockMcp`] hides `bonus` while it is toggled off.
pub(super) fn router() -> ToolRouter<MockMcp> {
    MockMcp::tool_router()
}
