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
* key B asking for key A's job, and listing its own (none).

Prints one JSON object of what it saw, on its last line of stdout (the client's config checks
print their own report to stdout before it); the Rust test (tests/api/nemo_client.rs) asserts on it.
Nothing here is a stub: every call is the client's, over HTTP, to the running service.
"""

import json
import logging
import os
import sys

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
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
