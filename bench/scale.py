#!/usr/bin/env python3
"""Throughput at scale (issue 13): one scenario per row of bench/README.md's scale table.

Each scenario starts its own `target/release/synthgate serve` (and the test doubles it needs:
`mock-llm`, `mock-mcp`) on a fresh database: a temp SQLite file, or a new Postgres database
when --pg ADMIN_URL is given (dropped afterwards). It prints one JSON line per run.

  tools-cpu   LLM + tools job (3 LLM calls, 2 MCP tool calls per record), mock at 0 ms,
              --in-flight 64: service CPU ms per record (utime+stime of synthgate only)
  latency     llm-text job with the mock at --latency-ms (200), --in-flight (512, or 2048):
              records/s against the bound in_flight / latency, how the time splits from the
              mock's side (its window from first request to last answer, the mean requests in
              flight over it, the job's time outside it), and GET /healthz and
              GET /v1/jobs/{id} latency (p50/p99/max) sampled from a side thread meanwhile
  rss         LLM + tools job at each -n (5000 20000 50000 by default), a fresh service each:
              peak RSS (VmHWM), and at the largest RSS sampled (every 50 ms) its split into
              anonymous memory (heap, stacks) and file pages (the executable's code mapped in)
  quickstart  config/examples/quickstart.yaml (samplers + expressions), -n 100000: wall time
              and service CPU
  submit      POST of a -n 1000000 record job: round trip, database size right after
              (SQLite db + wal files, or pg_database_size), then the job is cancelled
  small       -n one-record llm-text jobs (20) one after the other, mock at --latency-ms (0):
              the service's time from a job's creation to its end (p50, max)
  reads       LLM + tools job (-n 20000, --in-flight 64) while --readers (64) client threads
              read the job and a page of its records as fast as they can: the job's time, the
              reads made and their status codes, read latency (p50, max), peak RSS
  replicas    --replicas K synthgate processes on one --pg database run one job (--workload
              quickstart, -n 100000; or tools): records/s, service CPU per record, and what
              Postgres spends per record (CPU of its processes, commits, WAL bytes), how many
              of its backends wait on locks, and the exactly-once check (one completed row per
              index; with tools, exactly 3 LLM requests and 2 tool calls per record)

--cpus N pins each replica of the service to N cores of its own (replica i: cores i*N to
i*N+N-1; its runtime then sizes itself to N) and the test doubles, the stdio MCP server included,
to --doubles-cpus (default: every core after the replicas'); a Postgres server is not touched, so
pin it yourself (bench/device.sh does). With --cpus, tools-cpu, quickstart and replicas rows
also report how many cores the service kept busy, its busiest threads (the share of the run's
wall time each kept a core busy) and the cores the test doubles (or the Postgres processes)
kept busy, so a row says which side ran out first. --mcp-transport http runs mock-mcp as a
streamable-HTTP server of its own instead of the service's stdio child (the row then reports
the most tool calls the server had at once, `mcp_max_in_flight`); --mcp-tls STREAMS serves it
over HTTPS with HTTP/2 and STREAMS streams per connection. --tool-ms MS makes the tools job's
first tool call `slow` for MS ms, and the row reports records/s against the bound
in_flight / MS.

--in-flight N sets workers.count, workers.max_in_flight and the model's
max_parallel_requests all to N, and above 256 the provider's llm.admission.max_in_flight too. --otlp exports the service's spans (OTEL_EXPORTER_OTLP_ENDPOINT)
to an OTLP/HTTP sink in this process, which answers every export at once; the row then says
what the sink received and what the service counted (exported, dropped, failed). Build first with `cargo build --release --workspace`.
Standard library only; traffic stays on 127.0.0.1; every run stops by itself.
"""
import argparse, http.client, json, os, signal, socket, subprocess, sys, tempfile, threading, time, uuid
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llm import ROOT, TICK, cpu_s, free_port, get, peak_rss_mib, release_bin, ts, wait_ready

TERMINAL = ("completed", "failed", "cancelled")
# --synthgate PATH: another build of the service (before/after comparisons); the doubles stay.
SYNTHGATE = None
# --perf FILE: `perf record` the service from ready to stop (its CPU figures then include perf).
PERF = None
# `llm.admission.max_in_flight`'s default (src/config/llm.rs): builds from before it existed
# refuse the key, so it is only written for rows that ask for more in flight than this.
ADMISSION_DEFAULT = 256
# Extra `workers` settings from --workers KEY=VALUE.
WORKERS = {}
# Other `database` settings (--database KEY=VALUE), e.g. max_connections.
DATABASE = {}
# --otlp: the sink the service exports its spans to (see OtlpSink).
OTLP = None
# --mcp-transport: how the tools jobs reach mock-mcp (a stdio child, or streamable HTTP).
MCP_TRANSPORT = "stdio"
# `--llm-tls N`: mock-llm over HTTPS (HTTP/2 by ALPN, N streams per connection), as hosted
# providers serve; None: plain HTTP/1.1, as vLLM or Ollama serve.
LLM_TLS = None
# This checkout's test certificates: the doubles are told where they are, since on a lent
# machine the binaries run from another checkout than the one they were built in.
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "testkit",
                        "fixtures")
TLS_CA = os.path.join(FIXTURES, "tls-ca.pem")
# --mcp-sessions N: the MCP provider's max_sessions (sessions it may open under load).
MCP_SESSIONS = 1
# `--mcp-tls N`: with --mcp-transport http, mock-mcp over HTTPS (HTTP/2 by ALPN, N streams per
# connection), as an MCP server behind a CDN or gateway answers.
MCP_TLS = None
# `--tool-ms MS`: the tools job's first tool call is `slow` for MS ms instead of `echo`.
TOOL_MS = None
# --cpus N: cores per replica (None: not pinned); --doubles-cpus: the test doubles' cores.
CPUS = None
DOUBLES_CPUS = None


def wait_port(port, timeout_s=20):
    """Waits until something accepts connections on 127.0.0.1:port."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on 127.0.0.1:{port}")


def cpu_list(text):
    """'8-15' or '0,2,4' (or a mix) as a sorted list of core numbers."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def pin(cpus):
    """A Popen preexec_fn that pins the child to `cpus` before it execs (so every thread it
    starts inherits them), or None when not pinning."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def thread_cpu(pid):
    """{tid: (thread name, CPU seconds)} of every live thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def busiest(before, after, secs, k=5):
    """The k threads that spent the most CPU between two `thread_cpu` snapshots, each as the
    share of `secs` it kept a core busy: a thread near 1.0 is a serial limit."""
    spent = sorted(((cpu - before.get(tid, ("", 0.0))[1], name)
                    for tid, (name, cpu) in after.items()), reverse=True)[:k]
    return [[name, round(d / secs, 2)] for d, name in spent if secs > 0]


def by_name(before, after, secs):
    """Cores kept busy between two `thread_cpu` snapshots, summed by thread name: sqlx runs
    each SQLite connection on a thread of its own, so the database's share is spread thin
    over as many threads as the pool has connections."""
    out = {}
    for tid, (name, cpu) in after.items():
        out[name] = out.get(name, 0.0) + cpu - before.get(tid, ("", 0.0))[1]
    return {n: round(c / secs, 2) for n, c in sorted(out.items(), key=lambda x: -x[1])
            if secs > 0 and c / secs >= 0.01}


def children(pid):
    """The pids whose parent is `pid` (the stdio MCP server the service started)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    return out


class OtlpSink:
    """An OTLP/HTTP traces endpoint on loopback: answers every export with an empty (valid)
    ExportTraceServiceResponse at once, counting requests and bytes."""

    def __init__(self):
        sink, self.requests, self.bytes, self.lock = self, 0, 0, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("content-length", 0))
                self.rfile.read(n)
                with sink.lock:
                    sink.requests += 1
                    sink.bytes += n
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

TEXT_JOB = {"columns": [
    {"name": "topic", "column_type": "sampler", "sampler_type": "category",
     "params": {"values": ["math", "history", "art"]}},
    {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
     "prompt": "Write one sentence about {{ topic }}.", "with_trace": "all_messages"},
]}

TOOLS_JOB = {"columns": [
    {"name": "topic", "column_type": "sampler", "sampler_type": "category",
     "params": {"values": ["math", "history", "art"]}},
    {"name": "answer", "column_type": "llm-text", "model_alias": "writer", "tool_alias": "tools",
     "prompt": "Use the tools, then write one sentence about {{ topic }}.",
     "with_trace": "all_messages"},
]}

# The mock asks for two tool turns (echo, then add), then answers: 3 LLM calls, 2 tool calls.
TOOLS_RULES = [
    {"when": {"assistant_turns": 0},
     "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "first turn"}}]}},
    {"when": {"assistant_turns": 1},
     "reply": {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}},
    {"reply": {"text": "The answer is 5."}},
]


def tools_rules():
    """TOOLS_RULES, with `slow` for --tool-ms as the first call."""
    if TOOL_MS is None:
        return TOOLS_RULES
    first = {"when": {"assistant_turns": 0},
             "reply": {"tool_calls": [{"name": "slow", "arguments": {"ms": TOOL_MS}}]}}
    return [first, *TOOLS_RULES[1:]]


class Service:
    """synthgate (plus mock-llm and mock-mcp when asked) on a fresh database; a context
    manager that stops them all and drops the Postgres database on exit."""

    def __init__(self, pg=None, llm=False, tools=False, latency_ms=0, in_flight=None, extra="",
                 replicas=1):
        self.pg, self.tmp = pg, tempfile.mkdtemp(prefix="synthgate-scale-")
        self.procs, self.dbname, self.mport = [], None, None
        ports = [free_port() for _ in range(replicas)]
        self.svc_cpus = [list(range(i * CPUS, (i + 1) * CPUS)) if CPUS else None
                         for i in range(replicas)]
        doubles = DOUBLES_CPUS or (list(range(replicas * CPUS, os.cpu_count())) if CPUS else None)
        sport = ports[0]
        self.base = f"http://127.0.0.1:{sport}"
        self.bases = [f"http://127.0.0.1:{p}" for p in ports]
        if pg:
            self.dbname = "synthgate_bench_" + uuid.uuid4().hex[:12]
            subprocess.run(["psql", pg, "-qc", f"create database {self.dbname}"], check=True)
            self.db_url = pg.rsplit("/", 1)[0] + "/" + self.dbname
            db = f"  url: {self.db_url}\n"
        else:
            self.sqlite = os.path.join(self.tmp, "bench.db")
            db = f"  sqlite_path: {self.sqlite}\n"
        db += "".join(f"  {k}: {v}\n" for k, v in DATABASE.items())
        cfg = f"server: {{port: {sport}}}\nlogging: {{level: warn}}\ndatabase:\n{db}"
        workers = {"count": in_flight, "max_in_flight": in_flight} if in_flight else {}
        workers.update(WORKERS)
        if workers:
            cfg += "workers: {" + ", ".join(f"{k}: {v}" for k, v in workers.items()) + "}\n"
        if llm and in_flight and in_flight > ADMISSION_DEFAULT:
            # The provider's adaptive limit starts at llm.admission.max_in_flight (256 by
            # default) and caps every model of the provider: a row asking for more in flight
            # raises it too, or it measures the cap.
            cfg += f"llm: {{admission: {{max_in_flight: {in_flight}}}}}\n"
        if llm:
            self.mport = free_port()
            script = os.path.join(self.tmp, "script.json")
            with open(script, "w") as f:
                json.dump({"history_limit": 0, "faults": {"latency_ms": latency_ms},
                           **({"rules": tools_rules()} if tools else {})}, f)
            tls = (["--tls", "--max-streams", str(LLM_TLS), "--fixtures", FIXTURES]
                   if LLM_TLS else [])
            self.mock_base = f"{'https' if LLM_TLS else 'http'}://127.0.0.1:{self.mport}"
            self.procs.append(subprocess.Popen(
                [release_bin("mock-llm"), "--port", str(self.mport), "--script", script, *tls],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin(doubles)))
            endpoint = (f"https://127.0.0.1:{self.mport}/v1, tls_ca_file: {os.path.abspath(TLS_CA)}"
                        if LLM_TLS else f"http://127.0.0.1:{self.mport}/v1")
            cfg += f"""model_providers:
  - {{name: mock, endpoint: {endpoint}}}
model_configs:
  - alias: writer
    model: mock-writer
    provider: mock
    inference_parameters: {{max_parallel_requests: {in_flight}}}
"""
        self.mcp = None
        if tools and MCP_TRANSPORT == "http":
            # The MCP double as a server of its own, over streamable HTTP: no one pipe.
            self.events = os.path.join(self.tmp, "mcp-events.log")
            port = free_port()
            tls = (["--tls", "--max-streams", str(MCP_TLS), "--fixtures", FIXTURES]
                   if MCP_TLS else [])
            self.mcp = subprocess.Popen(
                [release_bin("mock-mcp"), "http", "--addr", f"127.0.0.1:{port}", *tls],
                env=dict(os.environ, MOCK_MCP_EVENTS=self.events), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, preexec_fn=pin(doubles))
            self.procs.append(self.mcp)
            wait_port(port)
            self.mcp_base = f"{'https' if MCP_TLS else 'http'}://127.0.0.1:{port}"
            endpoint = (f"{self.mcp_base}/mcp\n    tls_ca_file: {os.path.abspath(TLS_CA)}"
                        if MCP_TLS else f"{self.mcp_base}/mcp")
            cfg += f"""mcp_providers:
  - name: mock
    provider_type: streamable_http
    endpoint: {endpoint}
    max_sessions: {MCP_SESSIONS}
tool_configs:
  - {{tool_alias: tools, providers: [mock]}}
"""
        elif tools:
            self.events = os.path.join(self.tmp, "mcp-events.log")
            # The service starts the MCP server, which would inherit the service's cores: a
            # pinned run execs it through Python, which moves it to the doubles' cores first.
            command, args = release_bin("mock-mcp"), ["stdio"]
            if doubles:
                code = ("import os, sys; os.sched_setaffinity(0, %r); "
                        "os.execv(sys.argv[1], sys.argv[1:])" % (doubles,))
                command, args = sys.executable, ["-c", code, command, "stdio"]
            cfg += f"""mcp_providers:
  - name: mock
    provider_type: stdio
    command: {json.dumps(command)}
    args: {json.dumps(args)}
    env: {{MOCK_MCP_EVENTS: {self.events}}}
    max_sessions: {MCP_SESSIONS}
tool_configs:
  - {{tool_alias: tools, providers: [mock]}}
"""
        cfg += extra
        env = dict(os.environ)
        if OTLP:
            # Exported every 100 ms rather than 5 s, so a run's spans are out by its end.
            env.update(OTEL_EXPORTER_OTLP_ENDPOINT=OTLP.endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
        # Replicas (Postgres only): the same config but for the port, one queue in one database.
        self.svcs = []
        for i, port in enumerate(ports):
            path = os.path.join(self.tmp, f"synthgate-{i}.yaml")
            with open(path, "w") as f:
                f.write(cfg.replace(f"port: {sport}}}", f"port: {port}}}", 1))
            self.svcs.append(subprocess.Popen(
                [SYNTHGATE or release_bin("synthgate"), "serve", "--config", path],
                cwd=ROOT, stdout=subprocess.DEVNULL, env=env, preexec_fn=pin(self.svc_cpus[i])))
        self.svc = self.svcs[0]
        self.procs.extend(self.svcs)

    def __enter__(self):
        try:
            for base in self.bases:
                wait_ready(base + "/readyz")
            if self.mport:
                wait_ready(f"{self.mock_base}/_mock/stats")
            if PERF:
                self.perf = subprocess.Popen(
                    ["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-o", PERF,
                     "-p", str(self.svc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if getattr(self, "perf", None):
            self.perf.send_signal(signal.SIGINT)
            self.perf.wait(timeout=120)
        # The services first, each waited for, so they close their MCP sessions while the
        # doubles still answer; then the doubles.
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.dbname:
            subprocess.run(["psql", self.pg, "-qc", f"drop database {self.dbname} with (force)"])

    @property
    def backend(self):
        return "postgres" if self.pg else "sqlite"

    def cpu(self):
        """CPU seconds of the service, all replicas together."""
        return sum(cpu_s(p.pid) for p in self.svcs)

    def rss_mib(self):
        """Peak RSS of the service (the largest replica's)."""
        return round(max(peak_rss_mib(p.pid) for p in self.svcs), 1)

    def submit_yaml(self, yaml, n):
        """POSTs a YAML config (bytes) for n records, seed 1; returns the job."""
        return http_request(self.base, "POST", f"/v1/jobs?num_records={n}&seed=1", yaml,
                            "application/yaml")

    def submit(self, config, n):
        return get(self.base + "/v1/jobs", {"config": config, "num_records": n, "seed": 1},
                   timeout=600)

    def wait(self, job, n, deadline_s=1800):
        deadline = time.time() + deadline_s
        while job["status"] not in TERMINAL:
            if time.time() > deadline:
                sys.exit(f"job not finished: {job}")
            time.sleep(0.1)
            job = get(f"{self.base}/v1/jobs/{job['id']}")
        if job["status"] != "completed" or job["counts"]["completed"] != n:
            sys.exit(f"job did not complete: {json.dumps(job)[:2000]}")
        return job

    def db_bytes(self):
        """The database's size on disk: SQLite's db + wal files, or pg_database_size."""
        if self.pg:
            out = subprocess.run(["psql", self.db_url, "-Atqc",
                                  "select pg_database_size(current_database())"],
                                 check=True, capture_output=True, text=True).stdout
            return {"pg_database_bytes": int(out.strip())}
        size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
        return {"sqlite_db_bytes": size(self.sqlite), "sqlite_wal_bytes": size(self.sqlite + "-wal")}

    def metrics(self):
        """The first replica's /metrics text."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=60) as r:
            return r.read().decode()

    def counters(self, names):
        """The unlabelled counters `names` at the first replica's /metrics (0 when absent)."""
        text = self.metrics()
        return {n: next((int(float(l[len(n) + 1:])) for l in text.splitlines()
                         if l.startswith(n + " ")), 0) for n in names}

    def claims(self):
        """How the worker pool claimed the run's records (one replica): claims, and records
        per claim. Each claim is one write transaction, so fewer, larger ones cost less."""
        c = self.counters(["synthgate_claims_total", "synthgate_records_claimed_total"])
        claims, records = c["synthgate_claims_total"], c["synthgate_records_claimed_total"]
        return {"claims": claims, "records_per_claim": round(records / claims, 1) if claims else None}

    def waits(self):
        """Where a tool record's time goes, as the first replica saw it: the mean latency of
        its LLM requests, MCP calls and claims (histogram sums over counts, all labels
        together)."""
        text = self.metrics()
        out = {}
        for key, name in (("llm_mean_ms", "synthgate_llm_request_seconds"),
                          ("mcp_call_mean_ms", "synthgate_mcp_tool_call_seconds"),
                          ("claim_mean_ms", "synthgate_claim_seconds")):
            total = {"_sum": 0.0, "_count": 0.0}
            for line in text.splitlines():
                for suffix in total:
                    if line.startswith(name + suffix + "{") or line.startswith(name + suffix + " "):
                        total[suffix] += float(line.rsplit(" ", 1)[1])
            if total["_count"]:
                out[key] = round(total["_sum"] * 1000 / total["_count"], 3)
        return out

    def otel(self):
        """With --otlp: what the sink received and the service's span counters; else nothing."""
        if not OTLP:
            return {}
        time.sleep(0.5)  # one more export interval
        kinds = ("exported", "dropped", "failed")
        c = self.counters([f"synthgate_otel_spans_{k}_total" for k in kinds])
        counts = {f"spans_{k}": c[f"synthgate_otel_spans_{k}_total"] for k in kinds}
        return {"otlp": {"requests": OTLP.requests, "bytes": OTLP.bytes, **counts}}

    def doubles_cpu(self):
        """CPU seconds of the test doubles: mock-llm, and the MCP servers the service started
        (started at the first tool call, so absent before it)."""
        out = {}
        if self.mport:
            out["mock_llm"] = cpu_s(self.procs[0].pid)
        mcp = [self.mcp.pid] if self.mcp else [c for p in self.svcs for c in children(p.pid)]
        if mcp:
            out["mock_mcp"] = sum(cpu_s(c) for c in mcp)
        return out

    def mock_stats(self):
        return get(f"{self.mock_base}/_mock/stats")["models"]["mock-writer"]


class Probe:
    """With --cpus: where a row's cores went between its creation and `summary`: how many
    cores the service kept busy, its busiest threads, and the cores the test doubles (and the
    Postgres server's processes) kept busy, so a row says which side ran out first."""

    def __init__(self, s):
        self.s, self.on = s, CPUS is not None
        if self.on:
            self.wall0, self.cpu0 = time.time(), s.cpu()
            self.threads0, self.doubles0 = thread_cpu(s.svc.pid), s.doubles_cpu()
            self.pg0 = sum(cpu_s(p) for p in postgres_pids()) if s.pg else None

    def summary(self):
        if not self.on:
            return {}
        s, wall = self.s, time.time() - self.wall0
        busy = lambda cpu: round(cpu / wall, 2)
        threads = thread_cpu(s.svc.pid)
        out = {"cpus": CPUS, "service_cores_busy": busy(s.cpu() - self.cpu0),
               "busiest_threads": busiest(self.threads0, threads, wall),
               "threads_by_name": by_name(self.threads0, threads, wall),
               "doubles_cores_busy": {k: busy(v - self.doubles0.get(k, 0.0))
                                      for k, v in s.doubles_cpu().items()}}
        if self.pg0 is not None:
            out["postgres_cores_busy"] = busy(sum(cpu_s(p) for p in postgres_pids()) - self.pg0)
        return out


def run_secs(job):
    return (ts(job["finished_at"]) - ts(job["started_at"])).total_seconds()


def emit(row):
    print(json.dumps(row), flush=True)


def tools_cpu(a):
    with Service(a.pg, llm=True, tools=True, latency_ms=0, in_flight=a.in_flight) as s:
        probe = Probe(s)
        cpu0 = s.cpu()
        sampler = InFlight(s.base)
        sampler.start()
        job = s.wait(s.submit(TOOLS_JOB, a.n), a.n)
        cpu = s.cpu() - cpu0
        cores = probe.summary()
        in_flight = sampler.summary()
        secs = run_secs(job)
        with open(s.events) as f:
            lines = f.readlines()
        calls = sum(1 for l in lines if l.startswith("call"))
        sessions = sum(1 for l in lines if l.startswith("init"))
        stats = s.mock_stats()
        extra = {}
        if MCP_TRANSPORT == "http":
            extra["mcp_max_in_flight"] = get(f"{s.mcp_base}/_mock/stats")["max_in_flight"]
        if TOOL_MS:
            # A record's time is the slow call's; the model answers at once.
            bound = a.in_flight / (TOOL_MS / 1000)
            extra.update(tool_ms=TOOL_MS, bound_records_per_s=round(bound, 1),
                         of_bound_pct=round(100 * a.n / secs / bound, 1))
        emit({"scenario": "tools-cpu", "backend": s.backend, "records": a.n,
              "in_flight": a.in_flight, "seconds": round(secs, 2),
              "records_per_s": round(a.n / secs, 1),
              "cpu_ms_per_record": round(cpu * 1000 / a.n, 3),
              "llm_requests": stats["requests"], "mcp_tool_calls": calls,
              "mcp_sessions": sessions, **s.waits(), **in_flight,
              "mock_max_in_flight": stats["max_in_flight"], **busy(stats, secs),
              "peak_rss_mib": s.rss_mib(), **extra, **s.claims(), **s.otel(), **cores})


class RssSplit(threading.Thread):
    """Reads /proc/PID/status every 50 ms until stopped and keeps the sample with the largest
    VmRSS: how much of the peak is anonymous memory and how much file pages."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, {}, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    st = {line.split(":")[0]: int(line.split()[1]) for line in f
                          if line.startswith(("VmRSS:", "RssAnon:", "RssFile:"))}
            except OSError:
                return
            if st.get("VmRSS", 0) > self.peak.get("VmRSS", 0):
                self.peak = st
            self.stop.wait(0.05)

    def summary(self):
        self.stop.set()
        self.join()
        return {"at_peak_anon_mib": round(self.peak.get("RssAnon", 0) / 1024, 1),
                "at_peak_file_mib": round(self.peak.get("RssFile", 0) / 1024, 1)}


class InFlight(threading.Thread):
    """Reads `synthgate_records_in_flight` from /metrics every 20 ms until stopped: with the
    records/s, Little's law gives how long a record spends in the service, to set against the
    time it waits on the model and the tools."""

    def __init__(self, base):
        super().__init__(daemon=True)
        self.base, self.samples = base, []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.02):
            try:
                with urllib.request.urlopen(self.base + "/metrics", timeout=10) as r:
                    text = r.read().decode()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("synthgate_records_in_flight "):
                    self.samples.append(float(line.split()[1]))

    def summary(self):
        self.stop.set()
        self.join()
        # The first and last samples are taken before the claims start and after they end.
        v = [x for x in self.samples if x > 0] or [0.0]
        return {"records_in_flight_mean": round(sum(v) / len(v), 1), "records_in_flight_max": max(v)}


class Sampler(threading.Thread):
    """Times GET /healthz and GET /v1/jobs/{id} in turn, one request every `every_s`, on one
    keep-alive connection per path, until stopped."""

    def __init__(self, base, job_id, every_s=0.05):
        super().__init__(daemon=True)
        self.host, self.port = base.rsplit("/", 1)[1].split(":")
        self.paths = {"healthz": "/healthz", "job": f"/v1/jobs/{job_id}"}
        self.samples = {k: [] for k in self.paths}
        self.errors = 0
        self.every_s = every_s
        self.stop = threading.Event()

    def run(self):
        conns = {k: http.client.HTTPConnection(self.host, int(self.port), timeout=30)
                 for k in self.paths}
        while not self.stop.is_set():
            for k, path in self.paths.items():
                t0 = time.perf_counter()
                try:
                    conns[k].request("GET", path)
                    r = conns[k].getresponse()
                    r.read()
                    if r.status != 200:
                        self.errors += 1
                except (OSError, http.client.HTTPException):
                    self.errors += 1
                    conns[k].close()
                    continue
                self.samples[k].append((time.perf_counter() - t0) * 1000)
            self.stop.wait(self.every_s)
        for c in conns.values():
            c.close()

    def summary(self):
        def pct(v, q):
            return round(v[min(len(v) - 1, int(q * len(v)))], 2) if v else None
        out = {"sample_errors": self.errors}
        for k, v in self.samples.items():
            v = sorted(v)
            out[f"{k}_ms"] = {"n": len(v), "p50": pct(v, 0.50), "p99": pct(v, 0.99),
                              "max": round(v[-1], 2) if v else None}
        return out


def busy(stats, secs):
    """How the job's time splits, from the mock's side: `mock_window_s` from the first request's
    arrival to the last one's end, the mean number in flight over it, and the job's time
    outside it (claims and prompts before the first request, writes and the finalize after
    the last)."""
    if stats.get("first_arrival_us") is None or stats.get("last_end_us") is None:
        return {}
    window = (stats["last_end_us"] - stats["first_arrival_us"]) / 1e6
    return {"mock_window_s": round(window, 3),
            "mock_mean_in_flight": round(stats["busy_us"] / 1e6 / window, 1) if window else None,
            "outside_window_s": round(secs - window, 3)}


def latency(a):
    with Service(a.pg, llm=True, latency_ms=a.latency_ms, in_flight=a.in_flight) as s:
        cpu0 = s.cpu()
        job = s.submit(TEXT_JOB, a.n)
        sampler = Sampler(s.base, job["id"])
        sampler.start()
        try:
            job = s.wait(job, a.n)
        finally:
            sampler.stop.set()
            sampler.join()
        cpu = s.cpu() - cpu0
        secs = run_secs(job)
        # One LLM call per record: at most in_flight calls finish every latency seconds.
        bound = a.in_flight / (a.latency_ms / 1000) if a.latency_ms else None
        stats = s.mock_stats()
        emit({"scenario": "latency", "backend": s.backend, "records": a.n,
              "latency_ms": a.latency_ms, "in_flight": a.in_flight, "seconds": round(secs, 2),
              "records_per_s": round(a.n / secs, 1),
              "bound_records_per_s": bound and round(bound, 1),
              "of_bound": bound and round(a.n / secs / bound, 3),
              "cpu_ms_per_record": round(cpu * 1000 / a.n, 3),
              "mock_requests": stats["requests"], "mock_max_in_flight": stats["max_in_flight"],
              **busy(stats, secs),
              "peak_rss_mib": s.rss_mib(), **s.claims(), **sampler.summary(), **s.otel()})


def rss(a):
    for n in a.sizes:
        with Service(a.pg, llm=True, tools=True, latency_ms=0, in_flight=a.in_flight) as s:
            split = RssSplit(s.svc.pid)
            split.start()
            cpu0 = s.cpu()
            job = s.wait(s.submit(TOOLS_JOB, n), n)
            cpu = s.cpu() - cpu0
            secs = run_secs(job)
            emit({"scenario": "rss", "backend": s.backend, "records": n,
                  "in_flight": a.in_flight, "seconds": round(secs, 2),
                  "records_per_s": round(n / secs, 1),
                  "cpu_ms_per_record": round(cpu * 1000 / n, 3), "peak_rss_mib": s.rss_mib(),
                  **split.summary(), **s.otel()})


def quickstart_yaml():
    """config/examples/quickstart.yaml (samplers and expressions, no model), as sent."""
    with open(os.path.join(ROOT, "config/examples/quickstart.yaml"), "rb") as f:
        return f.read()


def quickstart(a):
    yaml = quickstart_yaml()
    with Service(a.pg) as s:
        probe = Probe(s)
        cpu0 = s.cpu()
        t0 = time.time()
        r = s.submit_yaml(yaml, a.n)
        job = s.wait(r, a.n, deadline_s=3600)
        wall = time.time() - t0
        cpu = s.cpu() - cpu0
        cores = probe.summary()
        secs = run_secs(job)
        emit({"scenario": "quickstart", "backend": s.backend, "records": a.n,
              "wall_s": round(wall, 2), "generate_s": round(secs, 2),
              "records_per_s": round(a.n / secs, 1), "cpu_s": round(cpu, 2),
              "cpu_us_per_record": round(cpu * 1e6 / a.n, 1), "peak_rss_mib": s.rss_mib(),
              **s.db_bytes(), **cores})


class PgWatch(threading.Thread):
    """What one Postgres database spends while a job runs: the CPU of every `postgres` process
    on this machine (backends, WAL writer, checkpointer), the database's commits and the
    server's WAL bytes, and every 50 ms (over one psql connection) how many of the database's
    backends wait on a heavyweight lock, i.e. on another replica's row or table lock."""

    def __init__(self, url, dbname):
        super().__init__(daemon=True)
        self.dbname = dbname
        self.stop, self.samples, self.waiting, self.active = threading.Event(), 0, 0, 0
        # The statements seen waiting on a lock (the wait event, their first 50 characters and
        # the state and statement of the backends they wait for), with how often.
        self.waits = {}
        self.psql = subprocess.Popen(["psql", "-Atq", url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def query(self, sql):
        self.psql.stdin.write(sql.replace("\n", " ") + ";\n")
        self.psql.stdin.flush()
        return self.psql.stdout.readline().strip().split("|")

    def counters(self):
        (commits,) = self.query(
            f"select xact_commit from pg_stat_database where datname = '{self.dbname}'")
        (wal,) = self.query("select wal_bytes from pg_stat_wal")
        return {"commits": int(commits), "wal_bytes": int(wal),
                "cpu_s": sum(cpu_s(pid) for pid in postgres_pids())}

    def run(self):
        while not self.stop.wait(0.05):
            active, waiting, what = self.query(
                "select count(*) filter (where state = 'active'), "
                "count(*) filter (where wait_event_type = 'Lock'), "
                "coalesce(string_agg(wait_event || ': ' "
                "|| left(regexp_replace(query, '\\s+', ' ', 'g'), 50) || ' <- ' || coalesce(("
                "select string_agg(b.state || ' ' || left(regexp_replace(b.query, '\\s+', ' ', "
                "'g'), 40), ' | ') from pg_stat_activity b where b.pid = any(pg_blocking_pids(a.pid))"
                "), '?'), '~') filter (where wait_event_type = 'Lock'), '') "
                f"from pg_stat_activity a where datname = '{self.dbname}' and pid <> pg_backend_pid()")
            self.samples += 1
            self.active += int(active)
            self.waiting += int(waiting)
            for q in filter(None, what.split("~")):
                self.waits[q] = self.waits.get(q, 0) + 1

    def halt(self):
        """Stops the sampling; queries go on until `close`."""
        self.stop.set()
        self.join()

    def close(self):
        self.psql.stdin.close()
        self.psql.wait(timeout=30)


def postgres_pids():
    pids = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "postgres":
                    pids.append(int(pid))
        except (OSError, ValueError):
            pass
    return pids


def replicas(a):
    """One job run by --replicas synthgate processes sharing one Postgres database."""
    if not a.pg:
        sys.exit("replicas needs --pg: SQLite is one process's database")
    tools = a.workload == "tools"
    with Service(a.pg, llm=tools, tools=tools, latency_ms=0, in_flight=a.in_flight,
                 replicas=a.replicas) as s:
        probe = Probe(s)
        watch = PgWatch(s.db_url, s.dbname)
        before, cpu0 = watch.counters(), s.cpu()
        watch.start()
        job = s.submit(TOOLS_JOB, a.n) if tools else s.submit_yaml(quickstart_yaml(), a.n)
        job = s.wait(job, a.n, deadline_s=3600)
        cpu = s.cpu() - cpu0
        cores = probe.summary()
        watch.halt()
        time.sleep(1.5)  # backends flush their statistics about once a second
        after = watch.counters()
        secs = run_secs(job)
        # Exactly once: one row per index, every one completed, each generated once (the test
        # doubles saw exactly the calls N records make: 3 LLM requests and 2 tool calls each).
        rows, distinct, done = watch.query(
            "select count(*), count(distinct idx), count(*) filter (where status = 'completed') "
            f"from records where job_id = '{job['id']}'")
        once = {"rows": int(rows), "distinct_indexes": int(distinct), "completed": int(done)}
        if tools:
            with open(s.events) as f:
                once["mcp_tool_calls"] = sum(1 for l in f if l.startswith("call"))
            once["llm_requests"] = s.mock_stats()["requests"]
        watch.close()
        spent = {k: after[k] - before[k] for k in before}
        emit({"scenario": "replicas", "workload": a.workload, "replicas": a.replicas,
              "records": a.n, "in_flight": a.in_flight, "seconds": round(secs, 2),
              "records_per_s": round(a.n / secs, 1),
              "service_cpu_ms_per_record": round(cpu * 1000 / a.n, 3),
              "db_cpu_ms_per_record": round(spent["cpu_s"] * 1000 / a.n, 3),
              "db_commits_per_record": round(spent["commits"] / a.n, 4),
              "db_wal_bytes_per_record": round(spent["wal_bytes"] / a.n),
              "db_backends_active_avg": round(watch.active / max(watch.samples, 1), 2),
              "db_backends_waiting_on_locks_avg": round(watch.waiting / max(watch.samples, 1), 3),
              "db_lock_waits_by_statement": dict(sorted(watch.waits.items(),
                                                        key=lambda kv: -kv[1])[:5]),
              "exactly_once": once, "peak_rss_mib": s.rss_mib(), **cores})


def http_request(base, method, path, body, ctype):
    host, port = base.rsplit("/", 1)[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        c.request(method, path, body=body, headers={"content-type": ctype})
        r = c.getresponse()
        data = r.read()
        if r.status >= 300:
            sys.exit(f"{method} {path}: {r.status} {data[:500]!r}")
        return json.loads(data)
    finally:
        c.close()


def submit(a):
    # The quickstart config: no model, so nothing runs but the samplers before the cancel.
    yaml = quickstart_yaml()
    with Service(a.pg) as s:
        before = s.db_bytes()
        t0 = time.perf_counter()
        job = s.submit_yaml(yaml, a.n)
        post_s = time.perf_counter() - t0
        after = s.db_bytes()
        t1 = time.perf_counter()
        cancelled = http_request(s.base, "POST", f"/v1/jobs/{job['id']}/cancel", b"",
                                 "application/json")
        cancel_s = time.perf_counter() - t1
        emit({"scenario": "submit", "backend": s.backend, "records": a.n,
              "post_s": round(post_s, 3), "db_before": before, "db_after_submit": after,
              "cancel_s": round(cancel_s, 3), "status_after_cancel": cancelled["status"],
              "completed_before_cancel": cancelled["counts"]["completed"],
              "peak_rss_mib": s.rss_mib()})


def reads(a):
    """A tools job while --readers threads read the job and its records as fast as they can:
    what a busy API does to the job, and what the job's writes do to the reads (SQLite's
    pool is shared by both)."""
    codes, lat, lock, stop = {}, [], threading.Lock(), threading.Event()

    def reader(base, jid):
        while not stop.is_set():
            for url in (f"{base}/v1/jobs/{jid}/records?limit=100", f"{base}/v1/jobs/{jid}"):
                t = time.time()
                try:
                    with urllib.request.urlopen(url, timeout=60) as r:
                        r.read()
                        code = r.status
                except urllib.error.HTTPError as e:
                    code = e.code
                except OSError as e:
                    code = type(e).__name__
                with lock:
                    lat.append(time.time() - t)
                    codes[str(code)] = codes.get(str(code), 0) + 1

    with Service(a.pg, llm=True, tools=True, latency_ms=0, in_flight=a.in_flight) as s:
        cpu0 = s.cpu()
        job = s.submit(TOOLS_JOB, a.n)
        threads = [threading.Thread(target=reader, args=(s.base, job["id"]))
                   for _ in range(a.readers)]
        for t in threads:
            t.start()
        try:
            job = s.wait(job, a.n)
        finally:
            stop.set()
            for t in threads:
                t.join()
        secs = run_secs(job)
        lat.sort()
        emit({"scenario": "reads", "backend": s.backend, "records": a.n,
              "in_flight": a.in_flight, "readers": a.readers, "seconds": round(secs, 2),
              "records_per_s": round(a.n / secs, 1),
              "cpu_ms_per_record": round((s.cpu() - cpu0) * 1000 / a.n, 3),
              "reads": codes, "reads_per_s": round(len(lat) / secs, 1),
              "read_p50_ms": round(lat[len(lat) // 2] * 1000, 1),
              "read_max_ms": round(lat[-1] * 1000, 1), "peak_rss_mib": s.rss_mib()})


def small(a):
    """-n one-record llm-text jobs, one after the other, with the mock at --latency-ms: the
    service's time from a job's creation to its end (its `created_at` to `finished_at`),
    which is what a caller of small jobs waits for on top of the model."""
    with Service(a.pg, llm=True, latency_ms=a.latency_ms, in_flight=8) as s:
        took = []
        for _ in range(a.n):
            job = s.wait(s.submit(TEXT_JOB, 1), 1)
            took.append((ts(job["finished_at"]) - ts(job["created_at"])).total_seconds() * 1000)
        took.sort()
        emit({"scenario": "small", "backend": s.backend, "jobs": a.n,
              "latency_ms": a.latency_ms, "created_to_finished_ms": {
                  "p50": round(took[len(took) // 2], 1), "max": round(took[-1], 1)}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario",
                    choices=["tools-cpu", "latency", "rss", "quickstart", "submit", "replicas",
                             "small", "reads"])
    ap.add_argument("-n", type=int, action="append",
                    help="records (rss: repeat for several sizes)")
    ap.add_argument("--in-flight", type=int, default=None,
                    help="workers.count = workers.max_in_flight = max_parallel_requests "
                         "(latency: 512; tools-cpu, rss: 64; others: the default workers config)")
    ap.add_argument("--readers", type=int, default=64,
                    help="reads: client threads reading the job and its records meanwhile")
    ap.add_argument("--latency-ms", type=int, default=None,
                    help="latency, small: the mock's added latency (200 and 0 ms)")
    ap.add_argument("--pg", help="admin URL of a Postgres server; a fresh database is created")
    ap.add_argument("--perf", metavar="FILE",
                    help="record the service with `perf record --call-graph dwarf` into FILE")
    ap.add_argument("--synthgate", help="the service binary (default target/release/synthgate)")
    ap.add_argument("--workers", metavar="KEY=VALUE", action="append", default=[],
                    help="another `workers` setting, e.g. claim_batch_size=128 (repeatable)")
    ap.add_argument("--database", metavar="KEY=VALUE", action="append", default=[],
                    help="another `database` setting, e.g. max_connections=3 (repeatable)")
    ap.add_argument("--replicas", type=int, default=1,
                    help="replicas: synthgate processes sharing the --pg database")
    ap.add_argument("--workload", choices=["quickstart", "tools"], default="quickstart",
                    help="replicas: the quickstart config (CPU and writes) or the tools job")
    ap.add_argument("--cpus", type=int, metavar="N",
                    help="pin each replica of the service to N cores of its own, the doubles "
                         "to --doubles-cpus, and report where the cores went")
    ap.add_argument("--doubles-cpus", metavar="LIST", type=cpu_list,
                    help="cores of mock-llm and mock-mcp, e.g. 8-15 (default: all the cores "
                         "after the replicas')")
    ap.add_argument("--mcp-transport", choices=["stdio", "http"], default="stdio",
                    help="tools jobs: mock-mcp as the service's stdio child (one pipe), or as "
                         "a streamable-HTTP server of its own")
    ap.add_argument("--mcp-sessions", type=int, default=1, metavar="N",
                    help="tools jobs: the MCP provider's max_sessions (more sessions under load)")
    ap.add_argument("--llm-tls", type=int, metavar="STREAMS", default=None,
                    help="mock-llm over HTTPS with HTTP/2 (as hosted providers), STREAMS streams "
                         "per connection")
    ap.add_argument("--mcp-tls", type=int, metavar="STREAMS", default=None,
                    help="with --mcp-transport http: mock-mcp over HTTPS with HTTP/2, STREAMS "
                         "streams per connection")
    ap.add_argument("--tool-ms", type=int, metavar="MS", default=None,
                    help="tools jobs: the first tool call sleeps MS ms at the server (`slow`)")
    ap.add_argument("--otlp", action="store_true",
                    help="export spans to an OTLP sink in this process and report them")
    a = ap.parse_args()
    global SYNTHGATE, PERF, OTLP, CPUS, DOUBLES_CPUS, MCP_TRANSPORT, MCP_SESSIONS, LLM_TLS
    global MCP_TLS, TOOL_MS
    LLM_TLS, MCP_TLS, TOOL_MS = a.llm_tls, a.mcp_tls, a.tool_ms
    if MCP_TLS and a.mcp_transport != "http":
        sys.exit("--mcp-tls needs --mcp-transport http")
    if LLM_TLS or MCP_TLS:
        # This process reads the mock's stats over the same HTTPS.
        import ssl
        ssl._create_default_https_context = lambda: ssl.create_default_context(cafile=TLS_CA)
    SYNTHGATE, PERF, CPUS, DOUBLES_CPUS = a.synthgate, a.perf, a.cpus, a.doubles_cpus
    MCP_TRANSPORT, MCP_SESSIONS = a.mcp_transport, a.mcp_sessions
    if CPUS and CPUS * a.replicas > os.cpu_count():
        sys.exit(f"--cpus {CPUS} x {a.replicas} replicas: this machine has {os.cpu_count()} cores")
    OTLP = OtlpSink() if a.otlp else None
    WORKERS.update(kv.split("=", 1) for kv in a.workers)
    DATABASE.update(kv.split("=", 1) for kv in a.database)
    defaults = {"tools-cpu": [5000], "latency": [10000], "rss": [5000, 20000, 50000],
                "quickstart": [100000], "submit": [1000000], "replicas": [100000], "small": [20],
                "reads": [20000]}
    a.sizes = a.n or defaults[a.scenario]
    a.n = a.sizes[0]
    if a.latency_ms is None:
        a.latency_ms = 0 if a.scenario == "small" else 200
    if a.in_flight is None and a.scenario in ("latency", "tools-cpu", "rss", "reads"):
        a.in_flight = 512 if a.scenario == "latency" else 64
    {"tools-cpu": tools_cpu, "latency": latency, "rss": rss, "quickstart": quickstart,
     "submit": submit, "replicas": replicas, "small": small, "reads": reads}[a.scenario](a)


if __name__ == "__main__":
    main()
