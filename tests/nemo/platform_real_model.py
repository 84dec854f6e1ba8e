#!/usr/bin/env python3
"""nemo-platform 0.6.0's Data Designer client against synthgate in front of a real model:
`python platform_real_model.py BASE_URL`. The server's provider `local` serves the model as
alias `smol`; the config names the provider as the platform does (`default/local`).

A preview of 2 records and a job of 3 (`wait_until_done=True`, then `download_artifacts()
.load_dataset()`), each with a category sampler and an LLM text column. Prints one JSON object
on its last line: the rows of both, and the job's name and status.
"""

import json
import logging
import sys
import tempfile

import data_designer.config as dd
from nemo_platform import NeMoPlatform


def main(base_url: str) -> dict:
    logging.basicConfig(level=logging.WARNING)
    designer = NeMoPlatform(base_url=base_url, workspace="default", max_retries=0).data_designer
    b = dd.DataDesignerConfigBuilder(
        model_configs=[
            dd.ModelConfig(
                alias="smol",
                model="smol",
                provider="default/local",
                inference_parameters=dd.ChatCompletionInferenceParams(max_tokens=24, temperature=0.7),
            )
        ]
    )
    b.add_column(
        dd.SamplerColumnConfig(
            name="fruit", sampler_type="category", params=dd.CategorySamplerParams(values=["apple", "pear"])
        )
    )
    b.add_column(dd.LLMTextColumnConfig(name="line", model_alias="smol", prompt="One sentence about a {{ fruit }}."))
    out = {"preview": json.loads(designer.preview(b, num_records=2).dataset.to_json(orient="records"))}
    job = designer.create(b, num_records=3, wait_until_done=True)
    out["job_name"] = job.name
    out["job_status"] = job.get_job_status()
    with tempfile.TemporaryDirectory() as tmp:
        out["job"] = json.loads(job.download_artifacts(tmp).load_dataset().to_json(orient="records"))
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
