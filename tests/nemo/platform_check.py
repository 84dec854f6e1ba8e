#!/usr/bin/env python3
"""NVIDIA's second Data Designer client (nemo-platform 0.6.0) against synthgate, as a notebook
user drives it: `python platform_check.py BASE_URL` with two API keys of the server in
$CHECK_KEY_A and $CHECK_KEY_B, and one it does not know in $CHECK_KEY_UNKNOWN.

Builds a config with Data Designer's own builder (a category sampler, an expression and an LLM
text column on a model config whose provider is named as the platform names it,
`default/mock`), then, only `base_url` pointing at synthgate:

* `get_default_model_providers()`;
* `preview(builder, num_records=3)`: the DataFrame's columns and rows, and its analysis;
* a config naming a provider the server does not have (refused before any stream) and a
  preview with an unknown key: what the client raises, and its text;
* `create(builder, num_records=4, wait_until_done=True)`, the job's name and status,
  `download_artifacts(path).load_dataset()`, `load_analysis()` and `get_logs()`;
* a config with an MCP `tool_configs` entry (on the server's MCP provider `mock-mcp`), previewed
  and run as a job: the tool's answer reaches the records;
* a CSV uploaded as a fileset (`files.upload_content`, the fileset created on the way) and used
  as an `nmp` seed by a preview and a job; a seed naming a file the fileset lacks;
* key B asking for key A's job by name (refused), listing none, and a seed of
  A's fileset (not found: B's fileset of that name is B's own);
* the job routes the high-level client does not call, over HTTP as NVIDIA's generic job
  client calls them: the list with a filter, a delete refused while the job runs, a cancel, a delete.

Prints one JSON object of what it saw on its last line of stdout; the Rust test
(tests/api/platform_client.rs) asserts on it. Every call is over HTTP to the running service.
"""

import json
import logging
import os
import sys
import tempfile

import httpx

import data_designer.config as dd
from data_designer_nemo.fileset_file_seed_source import FilesetFileSeedSource
from nemo_platform import NeMoPlatform

WORKSPACE = "default"


def client(base_url: str, key: str) -> NeMoPlatform:
    # Direct mode: `base_url` and a workspace, the key as a bearer header.
    return NeMoPlatform(
        base_url=base_url,
        workspace=WORKSPACE,
        default_headers={"Authorization": f"Bearer {key}"},
        max_retries=0,
    )


def builder(
    expr: str, provider: str = "default/mock", prompt: str = "A poem about {{ color }}."
) -> dd.DataDesignerConfigBuilder:
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="writer", model="mock-writer", provider=provider)]
    )
    b.add_column(
        dd.SamplerColumnConfig(
            name="color", sampler_type="category", params=dd.CategorySamplerParams(values=["red", "blue"])
        )
    )
    b.add_column(dd.ExpressionColumnConfig(name="shout", expr=expr))
    b.add_column(dd.LLMTextColumnConfig(name="poem", model_alias="writer", prompt=prompt))
    return b


def failure(call) -> dict:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test wants whatever the client raises
        response = getattr(e, "response", None)  # httpx's HTTPStatusError has no status_code
        status = getattr(e, "status_code", None) or getattr(response, "status_code", None)
        return {"type": type(e).__name__, "text": str(e), "status": status}
    return {"type": None, "text": "", "status": None}


def main(base_url: str) -> dict:
    logging.basicConfig(level=logging.WARNING)
    out: dict = {}
    key_a = os.environ["CHECK_KEY_A"]
    a = client(base_url, key_a)
    designer = a.data_designer

    out["providers"] = [p.name for p in designer.get_default_model_providers()]

    preview = designer.preview(builder("{{ color | upper }}!"), num_records=3)
    out["preview_columns"] = list(preview.dataset.columns)
    out["preview_rows"] = json.loads(preview.dataset.to_json(orient="records"))
    out["preview_analysis"] = preview.analysis.model_dump(mode="json")

    bad = builder("{{ color }}", provider="default/no-such-provider")
    out["bad_model"] = failure(lambda: designer.preview(bad, num_records=1))
    unknown = client(base_url, os.environ["CHECK_KEY_UNKNOWN"])
    out["unknown_key"] = failure(lambda: unknown.data_designer.preview(builder("{{ color }}"), num_records=1))

    job = designer.create(builder("{{ color | upper }}!"), num_records=4, wait_until_done=True)
    out["job_name"] = job.name
    out["job"] = job.get_job()
    out["job_status"] = job.get_job_status()
    with tempfile.TemporaryDirectory() as tmp:
        results = job.download_artifacts(tmp)
        dataset = results.load_dataset()
        out["artifacts"] = sorted(
            os.path.relpath(os.path.join(d, f), tmp) for d, _, files in os.walk(tmp) for f in files
        )
    out["job_columns"] = list(dataset.columns)
    out["job_rows"] = json.loads(dataset.to_json(orient="records"))
    out["job_analysis"] = job.load_analysis().model_dump(mode="json")
    out["logs"] = [entry["message"] for entry in job.get_logs()]

    # MCP tool use, which NVIDIA's service refuses: a job-defined tool config on the server's
    # MCP provider, used by an LLM column; the trace keeps the tool turn.
    tools = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="writer", model="mock-writer", provider="default/mock")],
        tool_configs=[dd.ToolConfig(tool_alias="tools", providers=["mock-mcp"], allow_tools=["echo"])],
    )
    tools.add_column(
        dd.SamplerColumnConfig(name="n", sampler_type="category", params=dd.CategorySamplerParams(values=["1", "2"]))
    )
    tools.add_column(
        dd.LLMTextColumnConfig(
            name="answer", model_alias="writer", prompt="Use the tools for {{ n }}.", tool_alias="tools",
            with_trace="all_messages",
        )
    )
    tool_preview = designer.preview(tools, num_records=2)
    out["tool_preview"] = json.loads(tool_preview.dataset.to_json(orient="records"))
    tool_job = designer.create(tools, num_records=3, wait_until_done=True)
    with tempfile.TemporaryDirectory() as tmp:
        out["tool_job"] = json.loads(
            tool_job.download_artifacts(tmp).load_dataset().to_json(orient="records")
        )
    out["tool_job_id"] = tool_job.get_job()["id"]
    out["tool_job_name"] = tool_job.name

    # A seed uploaded as a fileset of the Files service, then used by a preview and a job.
    fileset = a.files.upload_content(
        content="city,country\nLyon,FR\nPorto,PT\nKyoto,JP\n",
        remote_path="cities#cities.csv",
        fileset_auto_create=True,
    )
    out["fileset"] = {"name": fileset.name, "workspace": fileset.workspace}
    seeded = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="writer", model="mock-writer", provider="default/mock")]
    )
    seeded.with_seed_dataset(FilesetFileSeedSource(path="default/cities#cities.csv"), sampling_strategy="ordered")
    seeded.add_column(dd.ExpressionColumnConfig(name="where", expr="{{ city }}, {{ country }}"))
    out["seeded_preview"] = json.loads(designer.preview(seeded, num_records=3).dataset.to_json(orient="records"))
    seeded_job = designer.create(seeded, num_records=3, wait_until_done=True)
    out["seeded_job_name"] = seeded_job.name
    with tempfile.TemporaryDirectory() as tmp:
        out["seeded_job"] = json.loads(
            seeded_job.download_artifacts(tmp).load_dataset().to_json(orient="records")
        )
    missing = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="writer", model="mock-writer", provider="default/mock")]
    )
    missing.with_seed_dataset(FilesetFileSeedSource(path="default/cities#nope.csv"))
    missing.add_column(dd.ExpressionColumnConfig(name="x", expr="{{ city }}"))
    out["missing_seed"] = failure(lambda: designer.preview(missing, num_records=1))

    b = client(base_url, os.environ["CHECK_KEY_B"])
    # B's fileset of the same name is B's own: it holds only what B uploads.
    out["other_key_fileset"] = b.files.upload_content(
        content="a\n1\n", remote_path="cities#other.csv", fileset_auto_create=True).name
    out["other_key_seed"] = failure(lambda: b.data_designer.preview(seeded, num_records=1))
    # Every route of A's job answers B as if it did not exist.
    other = httpx.Client(headers={"Authorization": f"Bearer {os.environ['CHECK_KEY_B']}"}, timeout=30)
    jobs_base = f"{base_url.rstrip('/')}/apis/data-designer/v2/workspaces/{WORKSPACE}/jobs/create/{job.name}"
    out["other_key_routes"] = {
        f"{method} {suffix or '/'}": other.request(method, jobs_base + suffix).status_code
        for method, suffix in [
            ("GET", ""), ("GET", "/status"), ("GET", "/logs"), ("GET", "/results"),
            ("GET", "/results/artifacts/download"), ("GET", "/results/analysis/download"),
            ("POST", "/cancel"), ("DELETE", ""),
        ]
    }
    out["other_key_file"] = other.get(
        f"{base_url.rstrip('/')}/apis/files/v2/workspaces/{WORKSPACE}/filesets/cities/-/cities.csv"
    ).status_code
    out["other_key_list"] = [j["name"] for j in httpx.get(
        f"{base_url.rstrip('/')}/apis/data-designer/v2/workspaces/{WORKSPACE}/jobs/create",
        headers={"Authorization": f"Bearer {os.environ['CHECK_KEY_B']}"},
    ).json()["data"]]
    out["other_key_job"] = failure(lambda: b.data_designer.get_job_resource(job.name))

    # The routes NVIDIA's generic job client calls (list, cancel, delete).
    jobs_url = f"{base_url.rstrip('/')}/apis/data-designer/v2/workspaces/{WORKSPACE}/jobs/create"
    http = httpx.Client(headers={"Authorization": f"Bearer {key_a}"}, timeout=30)
    # Its model answers only when the test releases it: the job is still running when cancelled.
    long_job = designer.create(builder("{{ color }}", prompt="Slowly, a poem about {{ color }}."), num_records=20)
    out["long_job_name"] = long_job.name
    out["delete_running"] = http.delete(f"{jobs_url}/{long_job.name}").status_code
    cancelled = http.post(f"{jobs_url}/{long_job.name}/cancel")
    out["cancel"] = {"status": cancelled.status_code, "job_status": cancelled.json().get("status"),
                     "detail": cancelled.json().get("detail")}
    listed = http.get(jobs_url, params={"filter[status]": "completed"})
    out["listed_completed"] = [j["name"] for j in listed.json()["data"]]
    out["listed_all"] = [j["name"] for j in http.get(jobs_url).json()["data"]]
    doomed = designer.create(builder("{{ color }}"), num_records=1, wait_until_done=True)
    out["delete"] = http.delete(f"{jobs_url}/{doomed.name}").status_code
    out["after_delete"] = http.get(f"{jobs_url}/{doomed.name}").status_code
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), default=str))
