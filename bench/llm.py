#!/usr/bin/env python3
"""Throughput and CPU cost of an `llm-text` job against the mock LLM (a test double).

Starts `target/release/mock-llm` with a fixed latency and `target/release/synthgate serve` on a
fresh SQLite file (or a new Postgres database with --pg), submits one job of N records with one
`llm-text` column, waits for it, and prints one JSON line:

  latency_ms, records, seconds (started_at -> finished_at), records/s,
  CPU seconds of the service per record (utime+stime from /proc), peak RSS, mock requests and
  the mock's maximum in-flight requests.

Build both first with `cargo build --release --workspace` (mock-llm is in crates/testkit).
Standard library only; traffic stays on 127.0.0.1; the run stops by itself.
"""
import argparse, json, os, socket, subprocess, tempfile, time, urllib.request, uuid
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def release_bin(name):
    """The path of a release binary of the workspace, or exit saying how to build it."""
    path = os.path.join(ROOT, "target/release", name)
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: run `cargo build --release --workspace`")
    return path


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def get(url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url, data=data, headers={"content-type": "application/json"},
                               method="POST" if data else "GET")
    with urllib.request.urlopen(r, timeout=timeout) as resp:
        return json.loads(resp.read())


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def wait_ready(url):
    for _ in range(400):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception:
            time.sleep(0.05)
    raise SystemExit(f"not ready: {url}")


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def parse_args():
    """The options every LLM bench takes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--parallel", type=int, default=64, help="max_parallel_requests and workers.count")
    ap.add_argument("--pg", help="admin URL of a Postgres server; a fresh database is created")
    return ap.parse_args()


def main():
    args = parse_args()
    tmp = tempfile.mkdtemp()
    script = os.path.join(tmp, "script.json")
    with open(script, "w") as f:
        json.dump({"faults": {"latency_ms": args.latency_ms}, "history_limit": 0}, f)
    mport, sport = free_port(), free_port()
    mock = subprocess.Popen([release_bin("mock-llm"), "--port", str(mport),
                             "--script", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ)
    env.update({
        "SYNTHGATE__SERVER__PORT": str(sport),
        "SYNTHGATE__LOGGING__LEVEL": "warn",
        "SYNTHGATE__WORKERS__COUNT": str(args.parallel),
        "SYNTHGATE__MODEL_PROVIDERS__0__NAME": "mock",
        "SYNTHGATE__MODEL_PROVIDERS__0__ENDPOINT": f"http://127.0.0.1:{mport}/v1",
        "SYNTHGATE__MODEL_CONFIGS__0__ALIAS": "writer",
        "SYNTHGATE__MODEL_CONFIGS__0__MODEL": "mock-writer",
        "SYNTHGATE__MODEL_CONFIGS__0__PROVIDER": "mock",
        "SYNTHGATE__MODEL_CONFIGS__0__INFERENCE_PARAMETERS__MAX_PARALLEL_REQUESTS": str(args.parallel),
    })
    dbname = None
    if args.pg:
        dbname = "synthgate_bench_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", args.pg, "-qc", f"create database {dbname}"], check=True)
        env["SYNTHGATE__DATABASE__URL"] = args.pg.rsplit("/", 1)[0] + "/" + dbname
    else:
        env["SYNTHGATE__DATABASE__SQLITE_PATH"] = os.path.join(tmp, "bench.db")
    svc = subprocess.Popen([release_bin("synthgate"), "serve"], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{sport}"
    try:
        wait_ready(base + "/readyz")
        wait_ready(f"http://127.0.0.1:{mport}/_mock/stats")
        config = {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "history", "art"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "Write one sentence about {{ topic }}.", "with_trace": "all_messages"},
        ]}
        cpu0 = cpu_s(svc.pid)
        job = get(base + "/v1/jobs", {"config": config, "num_records": args.n, "seed": 1})
        while job["status"] not in ("completed", "failed", "cancelled"):
            time.sleep(0.1)
            job = get(f"{base}/v1/jobs/{job['id']}")
        cpu = cpu_s(svc.pid) - cpu0
        assert job["status"] == "completed" and job["counts"]["completed"] == args.n, job
        secs = (ts(job["finished_at"]) - ts(job["started_at"])).total_seconds()
        stats = get(f"http://127.0.0.1:{mport}/_mock/stats")
        model = stats["models"]["mock-writer"]
        print(json.dumps({
            "backend": "postgres" if args.pg else "sqlite",
            "latency_ms": args.latency_ms, "parallel": args.parallel, "records": args.n,
            "seconds": round(secs, 2), "records_per_s": round(args.n / secs, 1),
            "cpu_s_per_record": round(cpu / args.n, 6), "peak_rss_mib": round(peak_rss_mib(svc.pid), 1),
            "mock_requests": model["requests"], "mock_max_in_flight": model["max_in_flight"],
        }))
    finally:
        svc.terminate(); svc.wait(timeout=60)
        mock.terminate(); mock.wait(timeout=10)
        if dbname:
            subprocess.run(["psql", args.pg, "-qc", f"drop database {dbname} with (force)"])


if __name__ == "__main__":
    main()
