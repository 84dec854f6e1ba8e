#!/usr/bin/env python3
"""Throughput and CPU cost of a tool-using `llm-text` job: the mock LLM (a test double) asks for
two tool turns per record (`echo`, then `add`), answered by `mock-mcp` (an MCP test double)
over stdio through synthgate's shared MCP session pool.

Starts `target/release/mock-llm` with a fixed latency and `target/release/synthgate serve` on a
fresh SQLite file (or a new Postgres database with --pg) with one stdio MCP provider, submits
one job of N records, waits for it, and prints one JSON line:

  latency_ms, records, seconds (started_at -> finished_at), records/s, CPU seconds of the
  service per record (utime+stime from /proc), peak RSS of the service, LLM requests, MCP
  sessions opened and tools/list requests (both from mock-mcp's own event log, cross-checked
  with synthgate's /metrics), and tool calls.

Build first with `cargo build --release --workspace` (the doubles are in crates/testkit).
Standard library only; traffic stays on 127.0.0.1; the run stops by itself.
"""
import json, os, subprocess, tempfile, time, urllib.request, uuid

from llm import ROOT, cpu_s, free_port, get, parse_args, peak_rss_mib, release_bin, ts, wait_ready


def metric(text, name, provider="mock"):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'provider="{provider}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def main():
    args = parse_args()
    tmp = tempfile.mkdtemp()
    events = os.path.join(tmp, "mcp-events.log")
    script = os.path.join(tmp, "script.json")
    with open(script, "w") as f:
        json.dump({"history_limit": 0, "faults": {"latency_ms": args.latency_ms}, "rules": [
            {"when": {"assistant_turns": 0},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "first turn"}}]}},
            {"when": {"assistant_turns": 1},
             "reply": {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}},
            {"reply": {"text": "The answer is 5."}},
        ]}, f)
    mport, sport = free_port(), free_port()
    db = ""
    dbname = None
    if args.pg:
        dbname = "synthgate_bench_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", args.pg, "-qc", f"create database {dbname}"], check=True)
        db = f"  url: {args.pg.rsplit('/', 1)[0]}/{dbname}\n"
    else:
        db = f"  sqlite_path: {os.path.join(tmp, 'bench.db')}\n"
    config = os.path.join(tmp, "synthgate.yaml")
    with open(config, "w") as f:
        f.write(f"""server: {{port: {sport}}}
logging: {{level: warn}}
workers: {{count: {args.parallel}}}
database:
{db}model_providers:
  - {{name: mock, endpoint: "http://127.0.0.1:{mport}/v1"}}
model_configs:
  - alias: writer
    model: mock-writer
    provider: mock
    inference_parameters: {{max_parallel_requests: {args.parallel}}}
mcp_providers:
  - name: mock
    provider_type: stdio
    command: {release_bin("mock-mcp")}
    args: [stdio]
    env: {{MOCK_MCP_EVENTS: {events}}}
tool_configs:
  - {{tool_alias: tools, providers: [mock]}}
""")
    mock = subprocess.Popen([release_bin("mock-llm"), "--port", str(mport),
                             "--script", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    svc = subprocess.Popen([release_bin("synthgate"), "serve", "--config", config],
                           cwd=ROOT, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{sport}"
    try:
        wait_ready(base + "/readyz")
        wait_ready(f"http://127.0.0.1:{mport}/_mock/stats")
        job_config = {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "history", "art"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer", "tool_alias": "tools",
             "prompt": "Use the tools, then write one sentence about {{ topic }}.",
             "with_trace": "all_messages"},
        ]}
        cpu0 = cpu_s(svc.pid)
        job = get(base + "/v1/jobs", {"config": job_config, "num_records": args.n, "seed": 1})
        while job["status"] not in ("completed", "failed", "cancelled"):
            time.sleep(0.1)
            job = get(f"{base}/v1/jobs/{job['id']}")
        cpu = cpu_s(svc.pid) - cpu0
        assert job["status"] == "completed" and job["counts"]["completed"] == args.n, job
        secs = (ts(job["finished_at"]) - ts(job["started_at"])).total_seconds()
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        with open(events) as f:
            lines = [l.split() for l in f]
        stats = get(f"http://127.0.0.1:{mport}/_mock/stats")
        print(json.dumps({
            "backend": "postgres" if args.pg else "sqlite",
            "latency_ms": args.latency_ms, "parallel": args.parallel, "records": args.n,
            "seconds": round(secs, 2), "records_per_s": round(args.n / secs, 1),
            "cpu_s_per_record": round(cpu / args.n, 6), "peak_rss_mib": round(peak_rss_mib(svc.pid), 1),
            "llm_requests": stats["models"]["mock-writer"]["requests"],
            "mcp_sessions_opened": sum(1 for l in lines if l[0] == "init"),
            "mcp_tools_list": sum(1 for l in lines if l[0] == "list"),
            "mcp_tool_calls": sum(1 for l in lines if l[0] == "call"),
            "metrics_sessions_opened": metric(metrics, "synthgate_mcp_sessions_opened_total"),
            "metrics_tools_list": metric(metrics, "synthgate_mcp_tools_list_total"),
        }))
    finally:
        svc.terminate(); svc.wait(timeout=60)
        mock.terminate(); mock.wait(timeout=10)
        if dbname:
            subprocess.run(["psql", args.pg, "-qc", f"drop database {dbname} with (force)"])


if __name__ == "__main__":
    main()
