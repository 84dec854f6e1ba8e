#!/usr/bin/env python3
"""NVIDIA's Data Designer client (nemo-microservices 1.5.0) against synthgate, as a notebook
user drives it: `python client_check.py BASE_URL` with two API keys of the server in
$CHECK_KEY_A and $CHECK_KEY_B, and one it does not know in $CHECK_KEY_UNKNOWN.

Builds a config with the client's own `DataDesignerConfigBuilder` (a category sampler, an
expression and an LLM text column on the server's model alias `writer`), then:

* `get_default_model_configs()` / `get_default_model_providers()`;
* `preview(builder, num_records=3)`: the DataFrame's columns and rows;
* a config the server refuses (a model config on a provider the server does not have): the
  exception the client raises and its text;
* a preview with an unknown key: the exception and its text;
* `create(builder, num_records=4, wait_until_done=True)`, the job's status, `load_dataset()`,
  `get_job_results(id)` and `list_jobs()`;
* key B asking for key A's job, and listing its own (none);
* the preview's `analysis` (`to_report()` runs on it), the job's `load_analysis()`,
  `download_artifacts()` and `get_logs()`;
* the low-level resource: the job's status, its results, the list's filters, a cancel of a
  finished job, a delete (of the seeded job);
* a seed: `upload_seed_dataset(df, "default/cities", datastore_settings={"endpoint":
  BASE_URL + "/v1/hf", "token": key})`, read back by `with_seed_dataset`, used by a preview
  and by a job; key B cannot read the repository.

Prints one JSON object of what it saw, on its last line of stdout (the client's config checks
print their own report to stdout before it); the Rust test (tests/api/nemo_client.rs) asserts on it.
Nothing here is a stub: every call is the client's, over HTTP, to the running service.
"""

import contextlib
import io
import json
import logging
import os
import sys
import tempfile

import pandas as pd

from nemo_microservices.data_designer.essentials import (
    CategorySamplerParams,
    DataDesignerConfigBuilder,
    ExpressionColumnConfig,
    LLMTextColumnConfig,
    ModelConfig,
    NeMoDataDesignerClient,
    SamplerColumnConfig,
)


def client(base_url: str, key: str) -> NeMoDataDesignerClient:
    # The client has no api_key argument: a bearer token goes in default_headers.
    return NeMoDataDesignerClient(
        base_url=base_url,
        default_headers={"Authorization": f"Bearer {key}"},
        max_retries=0,
    )


def builder(expr: str, provider: str = "mock") -> DataDesignerConfigBuilder:
    b = DataDesignerConfigBuilder(
        model_configs=[ModelConfig(alias="writer", model="mock-writer", provider=provider)]
    )
    b.add_column(
        SamplerColumnConfig(
            name="color",
            sampler_type="category",
            params=CategorySamplerParams(values=["red", "blue"]),
        )
    )
    b.add_column(ExpressionColumnConfig(name="shout", expr=expr))
    b.add_column(
        LLMTextColumnConfig(name="poem", model_alias="writer", prompt="A poem about {{ color }}.")
    )
    return b


def failure(call) -> dict:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test wants whatever the client raises
        return {"type": type(e).__name__, "text": str(e)}
    return {"type": None, "text": ""}


def main(base_url: str) -> dict:
    logging.basicConfig(level=logging.WARNING)
    out: dict = {}
    a = client(base_url, os.environ["CHECK_KEY_A"])

    out["model_configs"] = [
        {"alias": m.alias, "model": m.model, "provider": m.provider}
        for m in a.get_default_model_configs()
    ]
    out["model_providers"] = [p.name for p in a.get_default_model_providers()]

    preview = a.preview(builder("{{ color | upper }}!"), num_records=3)
    df = preview.dataset
    out["preview_columns"] = list(df.columns)
    out["preview_rows"] = json.loads(df.to_json(orient="records"))

    # The client checks column references itself; a provider the server does not have only
    # the server can refuse.
    bad = builder("{{ color }}", provider="no-such-provider")
    out["bad_config"] = failure(lambda: a.preview(bad, num_records=1))

    unknown = client(base_url, os.environ["CHECK_KEY_UNKNOWN"])
    out["unknown_key"] = failure(lambda: unknown.preview(builder("{{ color }}"), num_records=1))

    # A job, waited on as the tutorials do, then its dataset as a DataFrame.
    job = a.create(builder("{{ color | upper }}!"), num_records=4, wait_until_done=True)
    out["job_id"] = job.get_job().id
    out["job_status"] = job.get_job_status()
    dataset = job.load_dataset()
    out["job_columns"] = list(dataset.columns)
    out["job_rows"] = json.loads(dataset.to_json(orient="records"))
    again = a.get_job_results(out["job_id"])
    out["again_status"] = again.get_job_status()
    out["listed"] = [j.id for j in a.list_jobs()]

    # Another key sees none of it.
    b = client(base_url, os.environ["CHECK_KEY_B"])
    out["other_key_job"] = failure(lambda: b.get_job_results(out["job_id"]))
    out["other_key_listed"] = [j.id for j in b.list_jobs()]

    # The analyses: the preview's (its report renders), and the job's.
    out["preview_analysis"] = preview.analysis.model_dump(mode="json") if preview.analysis else None
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        preview.analysis.to_report()
    out["preview_report_chars"] = len(report.getvalue())
    out["job_analysis"] = job.load_analysis().model_dump(mode="json")
    with tempfile.TemporaryDirectory() as tmp:
        job.download_artifacts(tmp)
        out["artifacts"] = sorted(
            os.path.relpath(os.path.join(d, f), tmp)
            for d, _, files in os.walk(tmp)
            for f in files
        )
    out["logs"] = [entry["message"] for entry in job.get_logs()]

    # The low-level resource: what the high-level client does not call.
    low = a._client.data_designer.jobs
    status = low.get_status(out["job_id"])
    out["status"] = {"status": status.status, "details": status.status_details}
    out["results"] = sorted(r.result_name for r in low.results.list(out["job_id"]).data)
    out["filtered"] = {
        "completed": [j.id for j in low.list(filter={"status": "completed"}).data],
        "active": [j.id for j in low.list(filter={"status": "active"}).data],
        "named": [j.id for j in low.list(search={"name": ["designer-job"]}).data],
        "other_name": [j.id for j in low.list(filter={"name": "nope"}).data],
    }
    out["cancel_finished"] = failure(lambda: low.cancel(out["job_id"]))

    # A seed in the datastore, through the Hub API, then used by a preview and a job.
    endpoint = base_url.rstrip("/") + "/v1/hf"
    seed = pd.DataFrame({"city": ["Lyon", "Porto", "Kyoto"], "country": ["FR", "PT", "JP"]})
    ref = a.upload_seed_dataset(
        seed, "default/cities", datastore_settings={"endpoint": endpoint, "token": os.environ["CHECK_KEY_A"]}
    )
    out["seed_reference"] = ref.dataset
    seeded = DataDesignerConfigBuilder(
        model_configs=[ModelConfig(alias="writer", model="mock-writer", provider="mock")]
    )
    seeded.with_seed_dataset(ref, sampling_strategy="ordered")
    seeded.add_column(ExpressionColumnConfig(name="where", expr="{{ city }}, {{ country }}"))
    out["seeded_columns"] = [c.name for c in seeded.build().columns]
    seeded_preview = a.preview(seeded, num_records=3)
    out["seeded_preview"] = json.loads(seeded_preview.dataset.to_json(orient="records"))
    seeded_job = a.create(seeded, num_records=3, wait_until_done=True)
    out["seeded_job"] = json.loads(seeded_job.load_dataset().to_json(orient="records"))
    other_ref = type(ref)(
        dataset=ref.dataset, datastore_settings={"endpoint": endpoint, "token": os.environ["CHECK_KEY_B"]}
    )
    other = DataDesignerConfigBuilder(
        model_configs=[ModelConfig(alias="writer", model="mock-writer", provider="mock")]
    )
    out["other_key_seed"] = failure(lambda: other.with_seed_dataset(other_ref))

    # Deleted (the seeded job): gone for the client too.
    out["seeded_job_id"] = seeded_job.get_job().id
    low.delete(out["seeded_job_id"])
    out["after_delete"] = failure(lambda: a.get_job_results(out["seeded_job_id"]))
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
