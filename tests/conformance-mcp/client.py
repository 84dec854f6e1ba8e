#!/usr/bin/env python3
"""synthgate as the MCP client of one conformance-suite client scenario.

The suite (`conformance client --command "python3 client.py"`) starts the scenario's MCP server,
then runs this with the server's URL as the last argument, the scenario's name in
$MCP_CONFORMANCE_SCENARIO and, for scenarios that hand the client credentials, a JSON object in
$MCP_CONFORMANCE_CONTEXT (`client_id`, `client_secret`, or `private_key_pem` and
`signing_algorithm`). The suite judges the client only by what its server saw; this wrapper
only has to make synthgate do what a tool-using job does:

1. write a server config with the URL as a `streamable_http` MCP provider `p` (and an `oauth`
   block when the context carries client credentials), a tool config `t` over it, and a model
   alias served by `mock-llm`;
2. start `mock-llm` and `synthgate --config FILE serve` on free loopback ports;
3. `GET /v1/tools` (connects, runs `initialize`, lists the tools);
4. if the server offers a tool: script the mock model to call the first one with arguments made
   from its input schema, then `POST /v1/preview` of one `llm-text` column using `t`;
5. stop both (SIGTERM, so synthgate closes its MCP session) and exit 0 when every step did what
   was asked, 1 otherwise (the suite records the exit status; its checks decide the verdict).

Binaries: $SYNTHGATE_BIN and $MOCK_LLM_BIN, else target/debug/{synthgate,mock-llm} of this
repository. Python standard library only.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STARTUP_TIMEOUT = 20.0
REQUEST_TIMEOUT = 25.0


def log(msg):
    print(f"client.py: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=REQUEST_TIMEOUT):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def oauth_block(context):
    """The provider's `oauth` block for a scenario context with client credentials, else None."""
    if "client_id" not in context:
        return None
    oauth = {"client_id": context["client_id"]}
    if "client_secret" in context:
        oauth["client_secret"] = context["client_secret"]
    if "private_key_pem" in context:
        oauth["private_key"] = context["private_key_pem"]
        oauth["signing_algorithm"] = context.get("signing_algorithm", "RS256")
    if "scopes" in context:
        oauth["scopes"] = context["scopes"]
    return oauth


def server_config(port, llm_url, mcp_url, context, sqlite_path):
    provider = {"name": "p", "provider_type": "streamable_http", "endpoint": mcp_url,
                "connect_timeout_sec": 10, "call_timeout_sec": 15}
    oauth = oauth_block(context)
    if oauth is not None:
        provider["oauth"] = oauth
    # JSON is YAML: synthgate reads this file as it reads its YAML config.
    return {
        "server": {"host": "127.0.0.1", "port": port, "ui": False, "docs": False,
                   "shutdown_timeout_sec": 5},
        "database": {"sqlite_path": str(sqlite_path)},
        "logging": {"format": "pretty",
                    "level": os.environ.get("CONFORMANCE_LOG", "info,rmcp=debug")},
        "model_providers": [{"name": "mock", "endpoint": llm_url}],
        "model_configs": [{"alias": "writer", "model": "mock-writer", "provider": "mock"}],
        "mcp_providers": [provider],
        "tool_configs": [{"tool_alias": "t", "providers": ["p"], "max_tool_call_turns": 2}],
    }


def example_value(schema):
    """A value that fits a (simple) JSON schema: enough for the suite's tools."""
    if not isinstance(schema, dict):
        return None
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind in ("number", "integer"):
        return 2
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: example_value(v) for k, v in props.items()}
    return "test"


def wait_ready(proc, base, log_path):
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log(f"synthgate exited with {proc.returncode} before it was ready")
            return False
        try:
            status, _ = http("GET", f"{base}/readyz", timeout=2)
            if status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    log("synthgate was not ready in time")
    return False


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def drive(base, llm_url):
    """Steps 3 and 4. True when synthgate listed the tools and called one (if any)."""
    status, tools = http("GET", f"{base}/v1/tools")
    log(f"GET /v1/tools: {status} {json.dumps(tools)}")
    view = (tools or {}).get("tool_configs", [{}])[0] if isinstance(tools, dict) else {}
    if status != 200 or view.get("error") or view.get("tools") is None:
        return False
    if not view["tools"]:
        return True
    tool = view["tools"][0]
    args = example_value(tool.get("input_schema") or {}) or {}
    script = {"rules": [
        {"when": {"last_is_tool_result": True}, "reply": {"text": "done"}},
        {"when": {"has_tools": True},
         "reply": {"tool_calls": [{"name": tool["name"], "arguments": args}]}},
    ]}
    status, _ = http("POST", f"{llm_url.removesuffix('/v1')}/_mock/script", script)
    if status not in (200, 204):
        log(f"mock-llm refused the script: {status}")
        return False
    job = {"num_records": 1, "seed": 1, "config": {"columns": [
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer", "tool_alias": "t",
         "prompt": f"Call {tool['name']}.", "with_trace": "all_messages"}]}}
    status, preview = http("POST", f"{base}/v1/preview", job, timeout=REQUEST_TIMEOUT)
    log(f"POST /v1/preview: {status} {json.dumps(preview)}")
    if status != 200:
        return False
    record = preview["records"][0]
    messages = (record.get("traces") or [{}])[0].get("messages", [])
    tool_results = [m for m in messages if m.get("role") == "tool"]
    return record.get("status") == "completed" and bool(tool_results)


def main():
    if len(sys.argv) < 2:
        log("usage: client.py SERVER_URL (run by the conformance suite)")
        return 2
    mcp_url = sys.argv[-1]
    # The suite kills a client that outlives its timeout with SIGTERM: unwind, so the `finally`
    # below stops synthgate and mock-llm instead of leaving them behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    synthgate = os.environ.get("SYNTHGATE_BIN", str(ROOT / "target/debug/synthgate"))
    mock_llm = os.environ.get("MOCK_LLM_BIN", str(ROOT / "target/debug/mock-llm"))
    log(f"scenario {scenario}, server {mcp_url}")

    with tempfile.TemporaryDirectory(prefix="synthgate-conformance-") as tmp:
        tmp = Path(tmp)
        llm_port, port = free_port(), free_port()
        llm_url = f"http://127.0.0.1:{llm_port}/v1"
        # Default replies until drive() scripts the tool call.
        llm = subprocess.Popen([mock_llm, "--port", str(llm_port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config = tmp / "synthgate.yaml"
        config.write_text(json.dumps(
            server_config(port, llm_url, mcp_url, context, tmp / "synthgate.db"), indent=2))
        log_path = tmp / "synthgate.log"
        with open(log_path, "wb") as out:
            gate = subprocess.Popen([synthgate, "--config", str(config), "serve"],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, "NO_COLOR": "1"})
        base = f"http://127.0.0.1:{port}"
        ok = False
        try:
            ok = wait_ready(gate, base, log_path) and drive(base, llm_url)
        except Exception as e:  # noqa: BLE001 - reported, then the verdict is the suite's
            log(f"error: {e!r}")
        finally:
            stop(gate)
            stop(llm)
            # synthgate's log (with rmcp's debug lines) goes to the suite's stderr.txt.
            sys.stderr.write(log_path.read_text(errors="replace"))
    log("done" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
