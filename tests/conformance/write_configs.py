"""Writes DataDesigner configs with DataDesigner's own builder, one file per case.

Usage: python write_configs.py OUT_DIR

tests/api/conformance.rs runs this and submits every file unchanged to synthgate; its table
says which cases are expected to be accepted. The seeded cases (DataDesigner's seeding
tutorial and its seed-dataset docs examples) go to OUT_DIR/seeded/ with their seed files, for
tests/api/seed_conformance.rs to submit with `synthgate submit` from that directory, which
uploads the files first. Cases: one per column type, sampler type,
constraint type, processor type and profiler DataDesigner 0.9.6 has, one builder with its
default model configs, and tutorial-style configs rebuilt from the package's documented
examples. LLM columns use model alias `writer` with provider `mock`, which the test server
defines (providers never come with a job).
"""

import json
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from data_designer.config import column_configs as cc
from data_designer.config import sampler_params as sp
from data_designer.config.analysis.column_profilers import JudgeScoreProfilerConfig
from data_designer.config.config_builder import DataDesignerConfigBuilder
from data_designer.config.custom_column import custom_column_generator
from data_designer.config.models import (
    ChatCompletionInferenceParams,
    AudioContext,
    ImageContext,
    VideoContext,
    ImageInferenceParams,
    ModelConfig,
)
from data_designer.config.processors import (
    DropColumnsProcessorConfig,
    SchemaTransformProcessorConfig,
)
from data_designer.config.sampler_constraints import (
    ColumnInequalityConstraint,
    ScalarInequalityConstraint,
)

WRITER = ModelConfig(
    alias="writer",
    model="mock-writer",
    provider="mock",
    inference_parameters=ChatCompletionInferenceParams(temperature=0.5, max_tokens=200),
)


def builder() -> DataDesignerConfigBuilder:
    return DataDesignerConfigBuilder(model_configs=[WRITER])


def sampler(name, sampler_type, params, **kw):
    return cc.SamplerColumnConfig(name=name, sampler_type=sampler_type, params=params, **kw)


def topic():
    return sampler("topic", "category", sp.CategorySamplerParams(values=["cats", "dogs"]))


def cases():
    out = {}

    # One per sampler type.
    samplers = {
        "category": sp.CategorySamplerParams(values=["a", "b"], weights=[0.3, 0.7]),
        "uniform": sp.UniformSamplerParams(low=1, high=10),
        "gaussian": sp.GaussianSamplerParams(mean=0, stddev=1),
        "bernoulli": sp.BernoulliSamplerParams(p=0.4),
        "binomial": sp.BinomialSamplerParams(n=10, p=0.5),
        "poisson": sp.PoissonSamplerParams(mean=3),
        "uuid": sp.UUIDSamplerParams(prefix="id-", short_form=True),
        "datetime": sp.DatetimeSamplerParams(start="2024-01-01", end="2024-12-31", unit="D"),
        "scipy": sp.ScipySamplerParams(dist_name="beta", dist_params={"a": 2, "b": 5}),
        "bernoulli_mixture": sp.BernoulliMixtureSamplerParams(
            p=0.5, dist_name="norm", dist_params={"loc": 1, "scale": 1}
        ),
        "person": sp.PersonSamplerParams(locale="en_US"),
        "person_from_faker": sp.PersonFromFakerSamplerParams(locale="en_US"),
    }
    for st, params in samplers.items():
        b = builder()
        b.add_column(sampler("value", st, params))
        out[f"sampler_{st}"] = b
    b = builder()
    b.add_column(topic())
    b.add_column(
        sampler(
            "breed",
            "subcategory",
            sp.SubcategorySamplerParams(category="topic", values={"cats": ["siamese"], "dogs": ["beagle"]}),
        )
    )
    out["sampler_subcategory"] = b
    b = builder()
    b.add_column(sampler("start", "datetime", sp.DatetimeSamplerParams(start="2024-01-01", end="2024-02-01")))
    b.add_column(
        sampler("end", "timedelta", sp.TimeDeltaSamplerParams(dt_min=1, dt_max=5, reference_column_name="start"))
    )
    out["sampler_timedelta"] = b
    # person_from_faker beyond en_US: en_GB is DataDesigner's own all-samplers test locale; the
    # others are large markets with their own scripts and without states (issue 27).
    b = builder()
    for locale in ["en_GB", "es_MX", "hi_IN", "ja_JP", "pt_BR", "ko_KR"]:
        b.add_column(sampler(f"person_{locale}", "person_from_faker", sp.PersonFromFakerSamplerParams(locale=locale)))
    out["sampler_person_from_faker_locales"] = b

    # One per column type.
    b = builder()
    b.add_column(topic())
    b.add_column(cc.ExpressionColumnConfig(name="upper", expr="{{ topic | upper }}"))
    out["column_expression"] = b
    for ct, extra in {
        "llm-text": {},
        "llm-code": {"code_lang": "python"},
        "llm-structured": {
            "output_format": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
            }
        },
        "llm-judge": {"scores": [{"name": "quality", "description": "How good", "options": {"1": "bad", "4": "good"}}]},
    }.items():
        b = builder()
        b.add_column(topic())
        b.add_column(name="out", column_type=ct, model_alias="writer", prompt="Write about {{ topic }}.", **extra)
        out[f"column_{ct}"] = b
    b = builder()
    b.add_column(topic())
    b.add_column(name="code", column_type="llm-code", model_alias="writer", prompt="Write {{ topic }}", code_lang="python")
    b.add_column(
        name="check",
        column_type="validation",
        target_columns=["code"],
        validator_type="code",
        validator_params={"code_lang": "python"},
    )
    out["column_validation"] = b
    emb = ModelConfig(alias="embedder", model="mock-embed", provider="mock", inference_parameters={"generation_type": "embedding"})
    b = DataDesignerConfigBuilder(model_configs=[WRITER, emb])
    b.add_column(topic())
    b.add_column(name="vec", column_type="embedding", model_alias="embedder", target_column="topic")
    out["column_embedding"] = b
    # An image model whose name routes it to the images API (as DataDesigner routes it).
    painter = ModelConfig(alias="painter", model="gpt-image-1", provider="mock", inference_parameters=ImageInferenceParams())
    b = DataDesignerConfigBuilder(model_configs=[WRITER, painter])
    b.add_column(topic())
    b.add_column(cc.ImageColumnConfig(name="picture", prompt="A picture of {{ topic }}", model_alias="painter"))
    out["column_image"] = b
    # The "draw, then describe" pattern: the image goes to the writer as multi-modal context.
    b = DataDesignerConfigBuilder(model_configs=[WRITER, painter])
    b.add_column(topic())
    b.add_column(cc.ImageColumnConfig(name="picture", prompt="A picture of {{ topic }}", model_alias="painter"))
    b.add_column(
        cc.LLMTextColumnConfig(
            name="caption",
            prompt="Describe the picture of {{ topic }}.",
            model_alias="writer",
            multi_modal_context=[ImageContext(column_name="picture", data_type="base64", image_format="png")],
        )
    )
    out["tutorial_image_caption"] = b

    # A custom column names a Python function: written by the builder, refused by a service.
    @custom_column_generator(required_columns=["topic"])
    def shout(row):
        row["loud"] = row["topic"].upper()
        return row

    b = builder()
    b.add_column(topic())
    b.add_column(cc.CustomColumnConfig(name="loud", generator_function=shout))
    out["column_custom"] = b

    # Constraints.
    b = builder()
    b.add_column(sampler("x", "uniform", sp.UniformSamplerParams(low=0, high=10)))
    b.add_column(sampler("y", "uniform", sp.UniformSamplerParams(low=0, high=10)))
    b.add_constraint(ScalarInequalityConstraint(target_column="x", operator="lt", rhs=5))
    out["constraint_scalar_inequality"] = b
    b = builder()
    b.add_column(sampler("x", "uniform", sp.UniformSamplerParams(low=0, high=10)))
    b.add_column(sampler("y", "uniform", sp.UniformSamplerParams(low=0, high=10)))
    b.add_constraint(ColumnInequalityConstraint(target_column="x", operator="lt", rhs="y"))
    out["constraint_column_inequality"] = b
    # Between two dates formatted `%m/%d/%Y` (DataDesigner's engine test and community
    # notebooks order a discharge after an admission this way).
    b = builder()
    dates = sp.DatetimeSamplerParams(start="2019-01-01", end="2024-12-31", unit="D")
    b.add_column(sampler("admitted", "datetime", dates, convert_to="%m/%d/%Y"))
    b.add_column(sampler("discharged", "datetime", dates, convert_to="%m/%d/%Y"))
    b.add_constraint(ColumnInequalityConstraint(target_column="discharged", operator="gt", rhs="admitted"))
    out["constraint_datetime_columns"] = b

    # Processors and profilers.
    b = builder()
    b.add_column(topic())
    b.add_column(cc.ExpressionColumnConfig(name="tmp", expr="{{ topic }}!"))
    b.add_column(cc.ExpressionColumnConfig(name="kept", expr="{{ tmp }}?"))
    b.add_processor(DropColumnsProcessorConfig(name="drop_tmp", column_names=["tmp"]))
    out["processor_drop_columns"] = b
    b = builder()
    b.add_column(topic())
    b.add_column(name="answer", column_type="llm-text", model_alias="writer", prompt="About {{ topic }}")
    b.add_processor(
        SchemaTransformProcessorConfig(
            name="chat",
            template={"messages": [{"role": "user", "content": "{{ topic }}"}, {"role": "assistant", "content": "{{ answer }}"}]},
        )
    )
    out["processor_schema_transform"] = b
    b = builder()
    b.add_column(topic())
    b.add_column(
        name="judge",
        column_type="llm-judge",
        model_alias="writer",
        prompt="Rate {{ topic }}",
        scores=[{"name": "quality", "description": "How good", "options": {"1": "bad", "4": "good"}}],
    )
    b.add_profiler(JudgeScoreProfilerConfig(model_alias="writer"))
    out["profiler_judge_score"] = b

    # The builder with DataDesigner's own default model configs (nvidia, openai, openrouter).
    b = DataDesignerConfigBuilder()
    b.add_column(topic())
    b.add_column(cc.ExpressionColumnConfig(name="greeting", expr="Hello {{ topic }}"))
    out["builder_default_model_configs"] = b

    # Tutorial-style: DataDesigner's getting-started product-review pipeline (samplers,
    # subcategory, person names, an LLM review, a structured summary, a judge, and a chat
    # dataset for fine-tuning), rebuilt from its documented building blocks.
    b = builder()
    b.add_column(sampler("product_category", "category", sp.CategorySamplerParams(values=["Electronics", "Books", "Toys"])))
    b.add_column(
        sampler(
            "product_subcategory",
            "subcategory",
            sp.SubcategorySamplerParams(
                category="product_category",
                values={"Electronics": ["Phones", "Laptops"], "Books": ["Fiction", "Cooking"], "Toys": ["Puzzles", "Dolls"]},
            ),
        )
    )
    b.add_column(sampler("rating", "uniform", sp.UniformSamplerParams(low=1, high=5), convert_to="int"))
    b.add_column(sampler("review_id", "uuid", sp.UUIDSamplerParams(short_form=True)))
    b.add_column(
        name="product_name",
        column_type="llm-text",
        model_alias="writer",
        prompt="Name a {{ product_subcategory }} product in {{ product_category }}. Answer with the name only.",
    )
    b.add_column(
        name="review",
        column_type="llm-text",
        model_alias="writer",
        system_prompt="You write honest customer reviews.",
        prompt="Write a {{ rating }}-star review of {{ product_name }}.",
    )
    b.add_column(
        name="summary",
        column_type="llm-structured",
        model_alias="writer",
        prompt="Summarize: {{ review }}",
        output_format={
            "type": "object",
            "properties": {"sentiment": {"type": "string"}, "keywords": {"type": "array", "items": {"type": "string"}}},
            "required": ["sentiment", "keywords"],
        },
    )
    b.add_column(cc.ExpressionColumnConfig(name="headline", expr="{{ product_name }}: {{ rating }} stars"))
    b.add_processor(
        SchemaTransformProcessorConfig(
            name="sft",
            template={
                "messages": [
                    {"role": "user", "content": "Review {{ product_name }}"},
                    {"role": "assistant", "content": "{{ review }}"},
                ]
            },
        )
    )
    out["tutorial_product_reviews"] = b
    b = builder()
    b.add_column(sampler("persona", "person", sp.PersonSamplerParams(locale="en_US")))
    b.add_column(name="bio", column_type="llm-text", model_alias="writer", prompt="Write a bio of {{ persona.first_name }}.")
    out["tutorial_persona_bios"] = b

    # DataDesigner's Jinja semantics, value by value (issue 27): Python's string methods,
    # JSON-looking values read back before rendering, undefined keys printed as empty text,
    # and a skip condition over an undefined key (StrictUndefined: the cell is skipped).
    from data_designer.config.base import SkipConfig

    b = builder()
    b.add_column(cc.ExpressionColumnConfig(name="review", expr="  great soft blanket  "))
    b.add_column(cc.ExpressionColumnConfig(name="words", expr="{{ review.split() | length }}", dtype="int"))
    b.add_column(cc.ExpressionColumnConfig(name="title", expr="{{ review.strip().title() }}"))
    b.add_column(cc.ExpressionColumnConfig(name="num_str", expr="1234.5"))
    b.add_column(cc.ExpressionColumnConfig(name="doubled", expr="{{ num_str * 2 }}", dtype="float"))
    b.add_column(cc.ExpressionColumnConfig(name="obj", expr='{"a": 1, "b": {"c": "deep"}}'))
    b.add_column(cc.ExpressionColumnConfig(name="missing", expr="[{{ obj.nope }}]"))
    b.add_column(cc.ExpressionColumnConfig(name="deep", expr="{{ obj.b.c }}"))
    b.add_column(
        cc.ExpressionColumnConfig(
            name="gated", expr="{{ obj.a }}", skip=SkipConfig(when="{{ obj.nope }}", value="skipped")
        )
    )
    out["semantics_jinja"] = b

    # Issue 50 items 1-3: columns read only through a slice (synthgate left them out of the
    # template's context), Jinja's `random` (over one item, so both sides agree) and
    # `truncate(n)`, and an empty system prompt (no system message; synthgate failed the record).
    # tests/api/conformance.rs also compares the prompt both sent for `echo`.
    b = builder()
    b.add_column(cc.ExpressionColumnConfig(name="sentence", expr="hello brave new world"))
    b.add_column(cc.ExpressionColumnConfig(name="head", expr="{{ sentence[:5] }}"))
    b.add_column(cc.ExpressionColumnConfig(name="tail", expr="{{ sentence[-5:] }}"))
    b.add_column(cc.ExpressionColumnConfig(name="picked", expr="{{ ['only'] | random }}"))
    b.add_column(cc.ExpressionColumnConfig(name="short", expr="{{ sentence | truncate(14) }}"))
    b.add_column(
        name="echo",
        column_type="llm-text",
        model_alias="writer",
        system_prompt="",
        prompt="Repeat after me: {{ sentence[6:11] }}",
    )
    # Item 7: the instructions appended to structured and code prompts are DataDesigner's.
    b.add_column(
        cc.LLMStructuredColumnConfig(
            name="pet",
            model_alias="writer",
            prompt="Invent a pet named {{ head }}.",
            output_format={
                "type": "object",
                "properties": {"title": {"type": "string", "description": "its name, café-style"},
                               "keywords": {"type": "array", "items": {"type": "string"}}},
                "required": ["title"],
            },
        )
    )
    b.add_column(
        cc.LLMCodeColumnConfig(
            name="snippet", model_alias="writer", code_lang="python",
            prompt="Write a function that prints {{ tail }}.",
        )
    )
    # Item 7: the judge's prompt is DataDesigner's (the rubric travels in the schema).
    b.add_column(
        name="verdict",
        column_type="llm-judge",
        model_alias="writer",
        prompt="Judge the pet named {{ head }}.",
        scores=[{"name": "quality", "description": "Is it a good name?", "options": {"1": "bad", "4": "good"}}],
    )
    # Item 4: audio and video context, by URL and as base64, go before the prompt text as
    # DataDesigner's OpenAI-compatible adapter writes them (`audio_url`, `input_audio`,
    # `video_url`); tests/api/conformance.rs compares the whole user message both sent.
    b.add_column(cc.ExpressionColumnConfig(name="clip", expr="https://media.example/clip.mp3"))
    b.add_column(cc.ExpressionColumnConfig(name="clip_b64", expr="data:audio/x-wav;base64,UklGRiQAAABXQVZF"))
    b.add_column(cc.ExpressionColumnConfig(name="movie", expr='["https://media.example/talk.mp4", "AAAAIGZ0eXBpc29t"]'))
    b.add_column(
        cc.LLMTextColumnConfig(
            name="listen",
            model_alias="writer",
            prompt="Describe what you hear and see in {{ head }}.",
            multi_modal_context=[
                AudioContext(column_name="clip"),
                AudioContext(column_name="clip_b64"),
                VideoContext(column_name="movie", video_format="mp4"),
            ],
        )
    )
    out["round3_templates"] = b
    return out


# Seed files with the tutorial's and the docs' columns. The tutorial downloads
# gretelai_symptom_to_diagnosis.csv (`patient_summary`, `diagnosis`); nothing can be
# downloaded here, so these rows are made up in its shape, with the commas, quotes and
# non-ASCII text a real export has.
SYMPTOM_ROWS = [
    ("I've had a dry cough for two weeks, and my chest feels tight at night.", "bronchial asthma"),
    ('My skin itches and there are red, scaly patches on my elbows; "dandruff" too.', "psoriasis"),
    ("Burning when I urinate, and I need to go all the time.", "urinary tract infection"),
    ("Headache behind the eyes, fever of 39 °C and aching joints since Monday.", "dengue"),
    ("My feet tingle and I am always thirsty, even after drinking a lot.", "diabetes"),
]

PRODUCTS = [
    [("Trail Runner 2", "shoes", 89.5), ("Rain Shell", "jackets", 120.0)],
    [("Wool Socks", "socks", 12.25), ("Summit Pack 30L", "bags", 74.0), ("Camp Mug", "kitchen", 9.99)],
]


CAPTION_BATCHES = [[("img-901", "A red kite over a beach", 640)]]
OCR_BATCHES = [
    [("scan-001", "INVOICE No. 4471 Total due: 312.40 EUR"), ("scan-002", "Meeting notes: ship v2 by Friday")],
    [("scan-003", "Rezept: 200 g Mehl, 2 Eier, Prise Salz")],
]


@contextmanager
def working_directory(path: Path):
    """DataDesigner resolves (and checks) a local seed path against the current directory."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def write_seed_files(target: Path) -> None:
    import pandas as pd

    pd.DataFrame(SYMPTOM_ROWS, columns=["patient_summary", "diagnosis"]).to_csv(
        target / "gretelai_symptom_to_diagnosis.csv", index=False
    )
    pd.DataFrame([(d, s) for s, d in SYMPTOM_ROWS], columns=["diagnosis", "symptoms"]).to_csv(
        target / "symptom_to_diagnosis.csv", index=False
    )
    products = target / "data" / "products"
    products.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(PRODUCTS):
        df = pd.DataFrame(rows, columns=["product_name", "category", "price"])
        df.to_parquet(products / f"part-{i}.parquet", index=False)
    # Two pipelines' artifacts, as DataDesigner writes them (every batch `batch_NNNNN.parquet`),
    # and another notebook's top-level seed: a glob must read only its own folder (issue 50).
    pd.DataFrame(
        [("Solar Basics", "easy"), ("Tidal Power", "hard")], columns=["topic", "difficulty"]
    ).to_parquet(target / "your_seed_data.parquet", index=False)
    # JSON Lines as DataDesigner reads them through DuckDB (issue 50 item 7): JSON text in an
    # object or in the value itself is parsed for templates, inside a list it stays text.
    (target / "notes.jsonl").write_text(
        "\n".join(
            json.dumps(row)
            for row in (
                {"n": "7", "meta": {"s": '{"z": 1}', "l": ['{"w": 2}']}, "tags": ['{"x": 1}', "plain"]},
                {"n": "8", "meta": {"s": '{"z": 2}', "l": ["[3]"]}, "tags": ["[1, 2]"]},
            )
        )
        + "\n"
    )
    # Agent trajectories in Claude Code's layout, for an `agent_rollout` seed (issue 50 item 5).
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "agent_rollout" / "claude_code"
    shutil.copytree(fixtures, target / "traces" / "claude_code", dirs_exist_ok=True)
    for pipeline, batches, columns in (
        ("captions", CAPTION_BATCHES, ["image_id", "caption", "width"]),
        ("ocr", OCR_BATCHES, ["image_id", "ocr_text"]),
    ):
        folder = target / "artifacts" / pipeline / "parquet-files"
        folder.mkdir(parents=True, exist_ok=True)
        for i, rows in enumerate(batches):
            pd.DataFrame(rows, columns=columns).to_parquet(folder / f"batch_{i:05d}.parquet", index=False)


def seeded_cases():
    """Built in the directory holding the seed files (DataDesigner checks they exist)."""
    import data_designer.config as dd

    out = {}
    # docs/notebook_source/3-seeding-with-a-dataset.py, with provider `mock` for `nvidia`.
    model_alias = "nemotron-nano-v3"
    b = dd.DataDesignerConfigBuilder(
        model_configs=[
            dd.ModelConfig(
                alias=model_alias,
                model="nvidia/nemotron-3-nano-30b-a3b",
                provider="mock",
                inference_parameters=dd.ChatCompletionInferenceParams(
                    temperature=1.0,
                    top_p=1.0,
                    max_tokens=2048,
                    extra_body={"chat_template_kwargs": {"enable_thinking": False}},
                ),
            )
        ]
    )
    b.with_seed_dataset(dd.LocalFileSeedSource(path="gretelai_symptom_to_diagnosis.csv"))
    b.add_column(name="patient_sampler", column_type="sampler", sampler_type="person_from_faker")
    b.add_column(name="doctor_sampler", column_type="sampler", sampler_type="person_from_faker")
    b.add_column(
        name="patient_id",
        column_type="sampler",
        sampler_type="uuid",
        params={"prefix": "PT-", "short_form": True, "uppercase": True},
    )
    b.add_column(name="first_name", column_type="expression", expr="{{ patient_sampler.first_name}}")
    b.add_column(name="last_name", column_type="expression", expr="{{ patient_sampler.last_name }}")
    b.add_column(name="dob", column_type="expression", expr="{{ patient_sampler.birth_date }}")
    b.add_column(
        name="symptom_onset_date",
        column_type="sampler",
        sampler_type="datetime",
        params={"start": "2024-01-01", "end": "2024-12-31"},
    )
    b.add_column(
        name="date_of_visit",
        column_type="sampler",
        sampler_type="timedelta",
        params={"dt_min": 1, "dt_max": 30, "reference_column_name": "symptom_onset_date"},
    )
    b.add_column(name="physician", column_type="expression", expr="Dr. {{ doctor_sampler.last_name }}")
    b.add_column(
        name="physician_notes",
        column_type="llm-text",
        prompt=(
            "You are a primary-care physician who just had an appointment with {{ first_name }} {{ last_name }},\n"
            "who has been struggling with symptoms from {{ diagnosis }} since {{ symptom_onset_date }}.\n"
            "The date of today's visit is {{ date_of_visit }}.\n\n{{ patient_summary }}\n\n"
            "Write careful notes about your visit with {{ first_name }},\n"
            "as Dr. {{ doctor_sampler.first_name }} {{ doctor_sampler.last_name }}.\n\n"
            "Format the notes as a busy doctor might.\nRespond with only the notes, no other text.\n"
        ),
        model_alias=model_alias,
    )
    out["seeded_tutorial_patient_notes"] = b

    # docs/concepts/seed-datasets.md, "Complete Example".
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="medical-notes", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
    )
    b.with_seed_dataset(dd.LocalFileSeedSource(path="symptom_to_diagnosis.csv"))
    b.add_column(
        dd.SamplerColumnConfig(
            name="patient",
            sampler_type=dd.SamplerType.PERSON_FROM_FAKER,
            params=dd.PersonFromFakerSamplerParams(),
        )
    )
    b.add_column(dd.ExpressionColumnConfig(name="patient_name", expr="{{ patient.first_name }} {{ patient.last_name }}"))
    b.add_column(
        dd.LLMTextColumnConfig(
            name="physician_notes",
            model_alias="medical-notes",
            prompt=(
                "You are a physician writing notes after a patient visit.\n\nPatient: {{ patient_name }}\n"
                "Diagnosis: {{ diagnosis }}\nReported Symptoms: {{ symptoms }}\n\n"
                "Write detailed clinical notes for this visit.\n"
            ),
        )
    )
    out["seeded_docs_physician_notes"] = b

    # docs/concepts/seed-datasets.md, "The Basic Pattern" with its "Parquet files with
    # wildcard" source.
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="my-model", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
    )
    b.with_seed_dataset(dd.LocalFileSeedSource(path="data/products/*.parquet"))
    b.add_column(
        dd.LLMTextColumnConfig(
            name="review",
            model_alias="my-model",
            prompt="Write a customer review for {{ product_name }}.\nCategory: {{ category }}\nPrice: ${{ price }}\n",
        )
    )
    out["seeded_docs_product_reviews"] = b

    # A notebook's own seed file at the top of the folder (`your_seed_data.parquet`).
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="my-model", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
    )
    b.with_seed_dataset(dd.LocalFileSeedSource(path="your_seed_data.parquet"))
    b.add_column(
        dd.LLMTextColumnConfig(
            name="question", model_alias="my-model", prompt="Ask one {{ difficulty }} question about {{ topic }}."
        )
    )
    out["seeded_glob_a_notebook_seed"] = b

    # DataDesigner's trace-ingestion pattern: rows derived from a folder of agent sessions,
    # each summarized by the model (the prompt reads the derived fields only).
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="my-model", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
    )
    b.with_seed_dataset(
        dd.AgentRolloutSeedSource(format=dd.AgentRolloutFormat.CLAUDE_CODE, path="traces/claude_code")
    )
    b.add_column(
        dd.LLMTextColumnConfig(
            name="recap",
            model_alias="my-model",
            prompt=(
                "Recap this {{ source_kind }} session {{ trace_id }} ({{ message_count }} messages, "
                "{{ tool_call_count }} tool calls, sidechain: {{ is_sidechain }}) that ended with: "
                "{{ final_assistant_message }}"
            ),
        )
    )
    out["seeded_rollout_claude_code"] = b

    # JSON text inside seed values, as templates read it.
    b = dd.DataDesignerConfigBuilder(
        model_configs=[dd.ModelConfig(alias="my-model", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
    )
    b.with_seed_dataset(dd.LocalFileSeedSource(path="notes.jsonl"))
    for name, expr in (
        ("next_n", "{{ n + 1 }}"),
        ("meta_z", "{{ meta.s.z }}"),
        ("meta_l0", "{{ meta.l[0] }}"),
        ("first_tag", "{{ tags[0] }}"),
        ("all_tags", "{{ tags }}"),
    ):
        b.add_column(dd.ExpressionColumnConfig(name=name, expr=expr))
    out["seeded_jsonl_values"] = b

    # Two pipelines whose artifacts share file names; each reads its own folder.
    for pipeline, prompt in (
        ("captions", "Rewrite this caption of {{ image_id }} ({{ width }} px wide): {{ caption }}"),
        ("ocr", "Summarize the text scanned from {{ image_id }}:\n{{ ocr_text }}"),
    ):
        b = dd.DataDesignerConfigBuilder(
            model_configs=[dd.ModelConfig(alias="my-model", model="nvidia/nemotron-3-nano-30b-a3b", provider="mock")]
        )
        b.with_seed_dataset(dd.LocalFileSeedSource(path=f"artifacts/{pipeline}/parquet-files/*.parquet"))
        b.add_column(dd.LLMTextColumnConfig(name="rewritten", model_alias="my-model", prompt=prompt))
        out[f"seeded_glob_{pipeline}_pipeline"] = b
    return out


def main() -> None:
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for name, b in cases().items():
        b.write_config(target / f"{name}.yaml")
    print(f"wrote {len(list(target.glob('*.yaml')))} configs to {target}")
    seeded = target / "seeded"
    seeded.mkdir(exist_ok=True)
    write_seed_files(seeded)
    with working_directory(seeded):
        for name, b in seeded_cases().items():
            b.write_config(seeded / f"{name}.yaml")
    print(f"wrote {len(list(seeded.glob('*.yaml')))} seeded configs to {seeded}")


if __name__ == "__main__":
    main()
