#!/usr/bin/env python3
"""The compose stack's scenario, run by scripts/compose-check once the engine, the images and the
Docker API socket are up (it sets COMPOSE, PROJECT, SYNTHGATE_PORT, SYNTHGATE_PORT_2).

What it checks, against the published ports only (as a user would), with Postgres read through
`compose exec` to count stored rows:

1. `up --wait`: Postgres then synthgate healthy; /readyz answers 200.
2. A job through the published port; `restart synthgate` while it runs (SIGTERM, a drain): the
   job completes with every record stored exactly once.
3. `down` (volume kept) and `up` again: the job, its counts and every record are still there,
   byte for byte.
4. The `replicas` profile: a second replica on the same Postgres; a job runs on both; the
   second is SIGKILLed mid-job; the first takes its chunks over: exactly once again.
5. `down -v`: the project's containers and volume are gone.

Standard library only: the host's python3 runs it, no venv needed.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

COMPOSE = os.environ["COMPOSE"].split()
PROJECT = os.environ["PROJECT"]
PORT = int(os.environ["SYNTHGATE_PORT"])
PORT_2 = int(os.environ["SYNTHGATE_PORT_2"])
HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ["-f", "docker-compose.yml", "-f", "tests/compose/check.yml"]
# Records per job: at mock-llm's 150 ms a reply and 8 requests at once per replica, about 10 s
# of work for one replica, long enough to restart or kill one mid-job.
NUM_RECORDS = int(os.environ.get("COMPOSE_CHECK_RECORDS", "500"))


def log(msg):
    print(f"[compose-check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def compose(*args, profiles=(), check=True, capture=False):
    cmd = COMPOSE + ["--project-directory", ".", "-p", PROJECT] + FILES
    for p in profiles:
        cmd += ["--profile", p]
    cmd += list(args)
    log("$ " + " ".join(cmd[len(COMPOSE) :]))
    return subprocess.run(cmd, check=check, text=True, capture_output=capture)


def up(profiles=()):
    compose("up", "-d", "--wait", "--wait-timeout", "180", profiles=profiles)


def http(method, port, path, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(port, path):
    status, body = http("GET", port, path)
    if status != 200:
        raise AssertionError(f"GET {path} on :{port}: {status} {body[:500]!r}")
    return json.loads(body)


def wait_ready(port, timeout=120):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = http("GET", port, "/readyz", timeout=5)
            if last[0] == 200:
                return
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"/readyz on :{port} not ready after {timeout} s: {last}")


def submit(port):
    with open(os.path.join(HERE, "job.json")) as f:
        body = json.load(f)
    body["num_records"] = NUM_RECORDS
    status, raw = http("POST", port, "/v1/jobs", body)
    if status != 202:
        raise AssertionError(f"submit: {status} {raw[:500]!r}")
    job = json.loads(raw)
    log(f"job {job['id']}: {NUM_RECORDS} records submitted on :{port}")
    return job["id"]


def done_count(job):
    c = job["counts"]
    return c["completed"] + c["failed"]


def wait_progress(port, job_id, at_least, timeout=120):
    """Waits until `at_least` records have a result, and returns the job (still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = get_json(port, f"/v1/jobs/{job_id}")
        if done_count(job) >= at_least:
            if job["status"] not in ("queued", "running"):
                raise AssertionError(f"job ended before the fault could land: {job['counts']}")
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}: not {at_least} records done after {timeout} s")


def wait_finished(port, job_id, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            job = get_json(port, f"/v1/jobs/{job_id}")
        except (OSError, AssertionError):
            time.sleep(1)
            continue
        if job["status"] not in ("queued", "running", "cancelling"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} not finished after {timeout} s")


def all_records(port, job_id):
    """Every stored record of the job, through the paged API."""
    records, cursor = [], None
    while True:
        path = f"/v1/jobs/{job_id}/records?limit=500"
        if cursor:
            path += f"&cursor={cursor}"
        page = get_json(port, path)
        records += page["records"]
        cursor = page.get("next_cursor")
        if not cursor:
            return records


def psql(sql):
    out = compose(
        "exec", "-T", "postgres", "psql", "-U", "synthgate", "-d", "synthgate", "-tA", "-c", sql,
        capture=True,
    )
    return out.stdout.strip()


def check_exactly_once(port, job_id):
    """The job completed, with one stored record per index and a trace for each."""
    job = wait_finished(port, job_id)
    counts = job["counts"]
    if job["status"] != "completed" or counts["completed"] != NUM_RECORDS:
        raise AssertionError(f"job {job_id}: {job['status']} {counts} {job['first_errors']}")
    records = all_records(port, job_id)
    indexes = sorted(r["index"] for r in records)
    if indexes != list(range(NUM_RECORDS)):
        dup = len(indexes) - len(set(indexes))
        raise AssertionError(f"job {job_id}: {len(records)} records via the API, {dup} doubled")
    bad = [r for r in records if r["status"] != "completed" or not r["values"].get("line")]
    if bad:
        raise AssertionError(f"job {job_id}: records without a line: {bad[:3]}")
    rows = psql(
        "select count(*), count(distinct idx), "
        "(select count(*) from traces t join records r2 on r2.id = t.record_id "
        f"where r2.job_id = '{job_id}') from records where job_id = '{job_id}'"
    )
    if rows != f"{NUM_RECORDS}|{NUM_RECORDS}|{NUM_RECORDS}":
        raise AssertionError(f"job {job_id}: Postgres holds rows|indexes|traces = {rows}")
    log(f"job {job_id}: {NUM_RECORDS} records, each stored once, each with its trace")
    return job, records


def container_id(service):
    out = compose("ps", "-q", service, capture=True).stdout.split()
    if len(out) != 1:
        raise AssertionError(f"{service}: expected one container, got {out}")
    return out[0]


def main():
    started = time.monotonic()

    log("1. up: postgres, mock-llm, synthgate")
    up()
    wait_ready(PORT)
    log(f"/readyz on :{PORT}: 200")

    log("2. restart synthgate mid-job")
    job_a = submit(PORT)
    before = wait_progress(PORT, job_a, NUM_RECORDS // 10)
    log(f"job {job_a}: {done_count(before)} of {NUM_RECORDS} done; restarting synthgate")
    compose("restart", "synthgate")
    wait_ready(PORT)
    job, records = check_exactly_once(PORT, job_a)

    log("3. down (volume kept) and up again")
    compose("down")
    up()
    wait_ready(PORT)
    again = get_json(PORT, f"/v1/jobs/{job_a}")
    if again["status"] != job["status"] or again["counts"] != job["counts"]:
        raise AssertionError(f"job {job_a} after down/up: {again['status']} {again['counts']}")
    if all_records(PORT, job_a) != records:
        raise AssertionError(f"job {job_a}: its records changed across down/up")
    log(f"job {job_a}: same status, counts and {len(records)} records after down/up")

    log("4. a second replica, SIGKILLed mid-job")
    up(profiles=["replicas"])
    wait_ready(PORT_2)
    job_b = submit(PORT_2)
    before = wait_progress(PORT, job_b, NUM_RECORDS // 5)
    victim = container_id("synthgate-2")
    log(f"job {job_b}: {done_count(before)} of {NUM_RECORDS} done; SIGKILL synthgate-2 ({victim[:12]})")
    compose("kill", "-s", "KILL", "synthgate-2", profiles=["replicas"])
    _, records_b = check_exactly_once(PORT, job_b)
    # A record's `attempts` counts the claims of its chunk: above 1, the chunk was taken over
    # from the killed replica once its lease expired. None would mean the kill tested nothing.
    taken_over = sum(1 for r in records_b if r["attempts"] > 1)
    if taken_over == 0:
        raise AssertionError(f"job {job_b}: no chunk was taken over from the killed replica")
    log(f"job {job_b}: {taken_over} records came from chunks taken over from the killed replica")

    log("5. down -v")
    compose("down", "-v", profiles=["replicas"])
    left = subprocess.run(
        ["podman", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
        check=True, text=True, capture_output=True,
    ).stdout.split()
    volumes = subprocess.run(
        ["podman", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}"],
        check=True, text=True, capture_output=True,
    ).stdout.split()
    if left or volumes:
        raise AssertionError(f"after down -v: containers {left}, volumes {volumes}")
    log(f"all checks passed in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        log(f"FAILED: {e}")
        sys.exit(1)
