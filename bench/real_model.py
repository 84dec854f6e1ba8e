#!/usr/bin/env python3
"""synthgate and DataDesigner 0.9.6 on the same config against the same real model server.

Starts llama-cpp-python's OpenAI-compatible server (`.venv-llama`, SmolLM2-135M-Instruct: what
scripts/test installs for the real-model tier), then runs config/examples/local-model.yaml
(written by DataDesigner's own builder: llm-text, llm-code + validation, llm-structured,
llm-judge) for N records:

* through `target/release/synthgate serve` (a fresh SQLite file), straight to the server, with
  the provider's `structured_output` as given (`json_object`, the example server config's, or
  `prompt`, DataDesigner's own behaviour);
* through DataDesigner 0.9.6's `DataDesigner.create` (`.venv-datadesigner`), in a process of
  its own. DataDesigner sends message content as a list of parts, which this server's chat
  template cannot read (every request answers HTTP 500), so its requests pass a small proxy
  here that joins text parts into one string, as synthgate does itself. The proxy adds well
  under a millisecond to requests that take seconds.

The model is the bound (one request at a time on two cores); the row is about what each system
spends of its own and whether it loses records. Printed, one JSON line per system:
records asked, records returned whole (every LLM column has a value), each column's filled
count, seconds (submit to finish), records/s, the system's own CPU seconds (the service process
for synthgate, from /proc; the DataDesigner process for it, `create` alone), CPU per record,
and the model server's CPU over the same run.

Usage: python3 bench/real_model.py [--records 10] [--structured-output json_object|prompt]
                                   [--only synthgate|datadesigner]
Needs: `cargo build --release -p synthgate`, and scripts/test's venvs and model (or
SYNTHGATE_TEST_LLAMA_PYTHON, SYNTHGATE_TEST_LLAMA_MODEL, SYNTHGATE_TEST_DD_PYTHON). Traffic
stays on 127.0.0.1; the run stops by itself.
"""
import argparse
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
CONFIG = os.path.join(ROOT, "config/examples/local-model.yaml")
LLM_COLUMNS = ["tagline", "snippet", "pet", "grade"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def http_json(url, body=None, headers=None, timeout=60):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    for k, v in (headers or {"content-type": "application/json"}).items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_http(url, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {timeout} s")


def start_llama(python, model, port, log):
    proc = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", "smol",
         "--n_ctx", "2048", "--n_threads", "2", "--host", "127.0.0.1", "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    wait_http(f"http://127.0.0.1:{port}/v1/models")
    return proc


class Flatten(http.server.BaseHTTPRequestHandler):
    """Forwards to the model server, with text-only content part lists joined into a string."""

    upstream = ""
    requests = 0
    upstream_errors = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _forward(self, body):
        req = urllib.request.Request(self.upstream + self.path, data=body, method=self.command)
        if body is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                status, data, ctype = resp.status, resp.read(), resp.headers.get("content-type")
        except urllib.error.HTTPError as e:
            status, data, ctype = e.code, e.read(), e.headers.get("content-type")
        with Flatten.lock:
            Flatten.requests += 1
            Flatten.upstream_errors += status >= 500
        self.send_response(status)
        self.send_header("content-type", ctype or "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._forward(None)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            doc = json.loads(body)
            for m in doc.get("messages", []):
                parts = m.get("content")
                if isinstance(parts, list) and all(p.get("type") == "text" for p in parts):
                    m["content"] = "\n".join(p.get("text", "") for p in parts)
            body = json.dumps(doc).encode()
        except (ValueError, AttributeError):
            pass
        self._forward(body)


def run_synthgate(endpoint, records, structured_output, llama_pid, tmp):
    binary = os.path.join(ROOT, "target/release/synthgate")
    if not os.path.exists(binary):
        raise SystemExit(f"{binary} is missing: cargo build --release -p synthgate")
    port = free_port()
    cfg = os.path.join(tmp, "synthgate.yaml")
    with open(cfg, "w") as f:
        json.dump({
            "server": {"host": "127.0.0.1", "port": port},
            "database": {"sqlite_path": f"{tmp}/bench.db"},
            "model_providers": [{"name": "local", "endpoint": endpoint,
                                 "structured_output": structured_output}],
        }, f)
    log = open(os.path.join(tmp, "synthgate.log"), "w")
    proc = subprocess.Popen([binary, "serve", "--config", cfg], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log, env={**os.environ, "RUST_LOG": "warn"})
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/readyz", 60)
        with open(CONFIG, "rb") as f:
            body = f.read()
        cpu0, llama0, t0 = cpu_s(proc.pid), cpu_s(llama_pid), time.monotonic()
        job = http_json(f"{base}/v1/jobs?num_records={records}", body,
                        {"content-type": "application/yaml"})
        while job["status"] in ("queued", "running"):
            time.sleep(0.5)
            job = http_json(f"{base}/v1/jobs/{job['id']}")
        wall = time.monotonic() - t0
        cpu, llama = cpu_s(proc.pid) - cpu0, cpu_s(llama_pid) - llama0
        page = http_json(f"{base}/v1/jobs/{job['id']}/records?limit=1000")["records"]
        filled = {c: sum(1 for r in page if (r.get("values") or {}).get(c) not in (None, ""))
                  for c in LLM_COLUMNS}
        whole = sum(1 for r in page if r["status"] == "completed")
        errors = {}
        for r in page:
            if r.get("error"):
                errors[r["error"]["code"]] = errors.get(r["error"]["code"], 0) + 1
        started = datetime.fromisoformat(job["started_at"].replace("Z", "+00:00"))
        finished = datetime.fromisoformat(job["finished_at"].replace("Z", "+00:00"))
        return {"system": "synthgate", "structured_output": structured_output,
                "records": records, "whole": whole, "filled": filled, "errors": errors,
                "seconds": round(wall, 1),
                "job_seconds": round((finished - started).total_seconds(), 1),
                "records_per_s": round(whole / wall, 3), "cpu_s": round(cpu, 2),
                "cpu_ms_per_record": round(1000 * cpu / records, 1),
                "model_server_cpu_s": round(llama, 1), "usage": job.get("usage")}
    finally:
        proc.terminate()
        proc.wait(30)


DD_RUNNER = r"""
import json, sys, time, tempfile
from data_designer.config.config_builder import DataDesignerConfigBuilder
from data_designer.config.models import ModelProvider
from data_designer.interface.data_designer import DataDesigner
from data_designer.config.run_config import RunConfig
config, endpoint, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
no_early_shutdown = sys.argv[4] == "1"
provider = ModelProvider(name="local", endpoint=endpoint, provider_type="openai", api_key="unused")
with tempfile.TemporaryDirectory() as artifacts:
    dd = DataDesigner(artifact_path=artifacts, model_providers=[provider])
    if no_early_shutdown:
        dd.set_run_config(RunConfig(disable_early_shutdown=True))
    builder = DataDesignerConfigBuilder.from_config(config)
    cpu0, t0 = time.process_time(), time.monotonic()
    error = None
    try:
        df = dd.create(builder, num_records=records).load_dataset()
    except Exception as e:  # a failed run is a result too
        df, error = None, f"{type(e).__name__}: {e}"[:300]
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    filled, whole = {}, 0
    if df is not None:
        cols = [c for c in %s if c in df.columns]
        def ok(v):
            return v is not None and v == v and v != ""
        filled = {c: int(sum(1 for v in df[c] if ok(v))) for c in cols}
        whole = int(sum(1 for _, row in df.iterrows() if all(ok(row[c]) for c in cols)
                        and len(cols) == %d))
    print("RESULT " + json.dumps({"rows": 0 if df is None else len(df), "whole": whole,
          "filled": filled, "seconds": wall, "cpu_s": cpu, "error": error}))
""" % (LLM_COLUMNS, len(LLM_COLUMNS))


def run_datadesigner(python, upstream, records, llama_pid, tmp, no_early_shutdown):
    Flatten.upstream = upstream
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flatten)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1"
    log = open(os.path.join(tmp, "datadesigner.log"), "w")
    llama0 = cpu_s(llama_pid)
    out = subprocess.run([python, "-c", DD_RUNNER, CONFIG, endpoint, str(records),
                          "1" if no_early_shutdown else "0"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
                         timeout=3600)
    llama = cpu_s(llama_pid) - llama0
    server.shutdown()
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if not line:
        raise SystemExit(f"DataDesigner printed no result (exit {out.returncode}); "
                         f"see {log.name}")
    r = json.loads(line[-1][len("RESULT "):])
    return {"system": "datadesigner 0.9.6", "disable_early_shutdown": no_early_shutdown,
            "records": records, "rows": r["rows"],
            "whole": r["whole"], "filled": r["filled"], "error": r["error"],
            "seconds": round(r["seconds"], 1),
            "records_per_s": round(r["whole"] / r["seconds"], 3) if r["seconds"] else 0,
            "cpu_s": round(r["cpu_s"], 2),
            "cpu_ms_per_record": round(1000 * r["cpu_s"] / records, 1),
            "model_server_cpu_s": round(llama, 1),
            "proxied_requests": Flatten.requests, "upstream_5xx": Flatten.upstream_errors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--structured-output", default="json_object",
                    choices=["json_object", "prompt"])
    ap.add_argument("--only", choices=["synthgate", "datadesigner"])
    ap.add_argument("--dd-disable-early-shutdown", action="store_true",
                    help="DataDesigner's RunConfig(disable_early_shutdown=True): keep going when "
                         "records fail instead of stopping the run")
    args = ap.parse_args()
    llama_python = os.environ.get("SYNTHGATE_TEST_LLAMA_PYTHON",
                                  os.path.join(ROOT, ".venv-llama/bin/python"))
    model = os.environ.get("SYNTHGATE_TEST_LLAMA_MODEL", os.path.expanduser(
        "~/.cache/synthgate/wheels/SmolLM2-135M-Instruct-0.1.2.Q4_1.gguf"))
    dd_python = os.environ.get("SYNTHGATE_TEST_DD_PYTHON",
                               os.path.join(ROOT, ".venv-datadesigner/bin/python"))
    for path, what in [(llama_python, "llama-cpp-python"), (model, "the SmolLM2 model"),
                       (dd_python, "data-designer")]:
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing ({what}): run scripts/test once")
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        llama_log = open(os.path.join(tmp, "llama.log"), "w")
        llama = start_llama(llama_python, model, port, llama_log)
        upstream = f"http://127.0.0.1:{port}"
        try:
            if args.only in (None, "synthgate"):
                print(json.dumps(run_synthgate(f"{upstream}/v1", args.records,
                                               args.structured_output, llama.pid, tmp)),
                      flush=True)
            if args.only in (None, "datadesigner"):
                print(json.dumps(run_datadesigner(dd_python, upstream, args.records,
                                                  llama.pid, tmp,
                                                  args.dd_disable_early_shutdown)), flush=True)
        finally:
            llama.terminate()
            llama.wait(30)


if __name__ == "__main__":
    sys.exit(main())
