#!/usr/bin/env python3
"""Throughput and peak memory of a sampler + expression job on the real binary.

Starts `target/release/synthgate serve` on a fresh database (a temp SQLite file, or a new
Postgres database when --pg ADMIN_URL is given), submits one job of N records, waits for it,
checks every record is there and the exports stream it, and prints:

  backend, records, seconds (started_at -> finished_at, server clock), records/s,
  peak RSS of the service (VmHWM), export seconds (JSONL, CSV)

Standard library only. Traffic goes to 127.0.0.1 only, and the run stops by itself.
"""
import argparse, json, os, subprocess, sys, tempfile, time, urllib.request, uuid, socket
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = {
    "data_designer": {
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "history", "art"], "weights": [3, 1, 1]}},
            {"name": "level", "column_type": "sampler", "sampler_type": "subcategory",
             "params": {"category": "topic", "values": {"math": ["algebra", "calculus"],
                        "history": ["ancient", "modern"], "art": ["painting"]}}},
            {"name": "difficulty", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 1, "high": 10, "decimal_places": 1}},
            {"name": "score", "column_type": "sampler", "sampler_type": "gaussian",
             "params": {"mean": 50, "stddev": 10}},
            {"name": "id", "column_type": "sampler", "sampler_type": "uuid", "params": {}},
            {"name": "when", "column_type": "sampler", "sampler_type": "datetime",
             "params": {"start": "2024-01-01", "end": "2025-01-01", "unit": "D"}},
            {"name": "title", "column_type": "expression",
             "expr": "{{ topic | upper }}: {{ level }} ({{ difficulty }})"},
            {"name": "hard", "column_type": "expression", "expr": "{{ difficulty > 5 }}", "dtype": "bool"},
            {"name": "points", "column_type": "expression", "expr": "{{ (score * 2) | round }}", "dtype": "float"},
        ]
    },
    "library_version": "0.9.7",
}


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def req(method, url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url, data=data, method=method,
                               headers={"content-type": "application/json"})
    with urllib.request.urlopen(r, timeout=timeout) as resp:
        return resp.status, resp.read()


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--pg", help="admin URL of a Postgres server; a fresh database is created")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    env = dict(os.environ)
    port = free_port()
    env.update({"SYNTHGATE__SERVER__PORT": str(port), "SYNTHGATE__LOGGING__LEVEL": "warn"})
    dbname = None
    if args.pg:
        dbname = "synthgate_bench_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", args.pg, "-qc", f"create database {dbname}"], check=True)
        env["SYNTHGATE__DATABASE__URL"] = args.pg.rsplit("/", 1)[0] + "/" + dbname
    else:
        env["SYNTHGATE__DATABASE__SQLITE_PATH"] = os.path.join(tmp, "bench.db")
    proc = subprocess.Popen([os.path.join(ROOT, "target/release/synthgate"), "serve"], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if req("GET", base + "/readyz")[0] == 200:
                    break
            except Exception:
                time.sleep(0.05)
        t0 = time.time()
        _, body = req("POST", base + "/v1/jobs", {"config": CONFIG, "num_records": args.n, "seed": 1})
        submit_s = time.time() - t0
        job = json.loads(body)
        jid = job["id"]
        deadline = time.time() + 600
        while True:
            job = json.loads(req("GET", f"{base}/v1/jobs/{jid}")[1])
            if job["status"] in ("completed", "failed", "cancelled"):
                break
            if time.time() > deadline:
                sys.exit(f"job not finished: {job}")
            time.sleep(0.05)
        assert job["status"] == "completed" and job["counts"]["completed"] == args.n, job
        run_s = (ts(job["finished_at"]) - ts(job["started_at"])).total_seconds()
        wall_s = (ts(job["finished_at"]) - ts(job["created_at"])).total_seconds()
        t1 = time.time(); _, jsonl = req("GET", f"{base}/v1/jobs/{jid}/records?format=jsonl", timeout=600)
        jsonl_s = time.time() - t1
        t2 = time.time(); _, csv = req("GET", f"{base}/v1/jobs/{jid}/records?format=csv", timeout=600)
        csv_s = time.time() - t2
        assert jsonl.count(b"\n") == args.n and csv.count(b"\n") == args.n + 1
        print(json.dumps({
            "backend": "postgres" if args.pg else "sqlite",
            "records": args.n,
            "submit_s": round(submit_s, 3),
            "generate_s": round(run_s, 3),
            "records_per_s": round(args.n / run_s),
            "created_to_finished_s": round(wall_s, 3),
            "peak_rss_mib": round(peak_rss_kib(proc.pid) / 1024, 1),
            "export_jsonl_s": round(jsonl_s, 3),
            "export_csv_s": round(csv_s, 3),
        }))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if dbname:
            subprocess.run(["psql", args.pg, "-qc", f"drop database {dbname} with (force)"])


if __name__ == "__main__":
    main()
