"""Drives synthgate's /mcp with the official MCP Python SDK's streamable-HTTP client.

Usage: client_check.py <mcp url>, with the API keys of two callers in CHECK_KEY_A and
CHECK_KEY_B. As key A it lists the tools, previews a config (asking for progress), submits a
job, waits for it, reads a record's trace and sends a bad config; as key B it asks for A's job.
It prints one JSON object with what it saw (tests/api/mcp_server.rs asserts on it) and exits 0;
anything unexpected (a protocol error, a failed call) raises and exits non-zero.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CONFIG = {
    "columns": [
        {
            "name": "topic",
            "column_type": "sampler",
            "sampler_type": "category",
            "params": {"values": ["sea", "moon"]},
        },
        {
            "name": "poem",
            "column_type": "llm-text",
            "model_alias": "writer",
            "prompt": "Write a haiku about {{ topic }}.",
            "with_trace": "all_messages",
        },
    ]
}


def connect(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http))


def structured(result, tool: str) -> dict:
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result.structured_content


def error_code(result) -> str | None:
    """The API error code of a tool error: its text is the error envelope as JSON."""
    if result.structured_content is not None:
        raise RuntimeError(f"a tool error with structured content: {result}")
    return json.loads(result.content[0].text)["error"]["code"]


async def main(url: str) -> dict:
    out: dict = {}
    async with connect(url, os.environ["CHECK_KEY_A"]) as a:
        out["protocol_version"] = a.protocol_version
        out["tools"] = [t.name for t in (await a.list_tools()).tools]

        progress: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(done)

        preview = structured(
            await a.call_tool(
                "preview_dataset",
                {"config": CONFIG, "num_records": 2, "seed": 1},
                progress_callback=on_progress,
            ),
            "preview_dataset",
        )
        out["preview_records"] = len(preview["records"])
        out["preview_poem"] = preview["records"][0]["values"]["poem"]
        out["progress_last"] = progress[-1] if progress else None

        job = structured(
            await a.call_tool("submit_job", {"config": CONFIG, "num_records": 2}), "submit_job"
        )
        done = structured(
            await a.call_tool("wait_job", {"job_id": job["id"], "timeout_sec": 60}), "wait_job"
        )
        out["job_status"] = done["status"]
        page = structured(await a.call_tool("get_records", {"job_id": job["id"]}), "get_records")
        record_id = page["records"][0]["id"]
        trace = structured(
            await a.call_tool("get_record_trace", {"record_id": record_id}), "get_record_trace"
        )
        # The answer's content blocks: [{"type": "text", "text": ...}].
        out["trace_last_message"] = trace["traces"][0]["messages"][-1]["content"][0]["text"]

        bad = await a.call_tool(
            "submit_job",
            {"config": {"columns": [{"name": "x", "column_type": "telepathy"}]}, "num_records": 1},
        )
        out["bad_config_code"] = error_code(bad) if bad.is_error else None

    async with connect(url, os.environ["CHECK_KEY_B"]) as b:
        refused = await b.call_tool("get_job", {"job_id": job["id"]})
        out["other_key_is_error"] = refused.is_error
        out["other_key_code"] = error_code(refused)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
