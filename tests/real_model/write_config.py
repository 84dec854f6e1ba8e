"""Writes config/examples/local-model.yaml with DataDesigner's own builder.

Usage: python write_config.py OUT_FILE

The job of the README's "Try it with a local model" and of the real-model tier
(tests/api/real_model.rs): the chat LLM column types DataDesigner has (text, code with its
validation, structured, judge), against a small local
model served by llama.cpp (alias `smol`, provider `local`, both defined by the server's config:
providers never come with a job). tests/api/real_model.rs runs this and checks the committed
file is what the builder writes.
"""

import sys
from pathlib import Path

from data_designer.config import column_configs as cc
from data_designer.config import sampler_params as sp
from data_designer.config.config_builder import DataDesignerConfigBuilder
from data_designer.config.models import ChatCompletionInferenceParams, ModelConfig

SMOL = ModelConfig(
    alias="smol",
    model="smol",
    provider="local",
    inference_parameters=ChatCompletionInferenceParams(
        temperature=0.7, max_tokens=192, max_parallel_requests=1
    ),
)


def main(out: Path) -> None:
    b = DataDesignerConfigBuilder(model_configs=[SMOL])
    b.add_column(
        cc.SamplerColumnConfig(
            name="topic",
            sampler_type="category",
            params=sp.CategorySamplerParams(values=["cats", "the sea", "bread", "trains", "rain"]),
        )
    )
    b.add_column(
        name="tagline",
        column_type="llm-text",
        model_alias="smol",
        system_prompt="You write one short sentence.",
        prompt="Write a tagline about {{ topic }}.",
        with_trace="all_messages",
    )
    b.add_column(
        name="snippet",
        column_type="llm-code",
        model_alias="smol",
        code_lang="python",
        prompt="Write a Python function named shout that returns the text '{{ topic }}' in capitals.",
    )
    b.add_column(
        name="snippet_check",
        column_type="validation",
        target_columns=["snippet"],
        validator_type="code",
        validator_params={"code_lang": "python"},
    )
    b.add_column(
        name="pet",
        column_type="llm-structured",
        model_alias="smol",
        prompt="Invent a pet that loves {{ topic }}.",
        output_format={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "mood": {"type": "string", "enum": ["happy", "sleepy", "curious"]},
            },
            "required": ["name", "mood"],
        },
    )
    b.add_column(
        name="grade",
        column_type="llm-judge",
        model_alias="smol",
        prompt="Rate this tagline about {{ topic }}: {{ tagline }}",
        scores=[
            {
                "name": "fun",
                "description": "How fun the tagline is",
                "options": {"1": "dull", "2": "fine", "3": "fun"},
            }
        ],
    )
    b.write_config(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
