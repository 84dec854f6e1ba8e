"""Runs DataDesigner's own `preview` on config files against an OpenAI-compatible endpoint.

Usage: python datadesigner_preview.py CONFIG_DIR ENDPOINT OUT_JSON

Each `*.yaml` in CONFIG_DIR is loaded with `DataDesignerConfigBuilder.from_config` and
previewed (3 records) with one model provider, `mock`, at ENDPOINT. Writes
`{case: {"ok": bool, "columns": [...], "shapes": {column: json kind of the first row},
"outputs": [...], "scalars": {column: [value of each row]}, "error": str}}` to OUT_JSON
(`scalars` has the columns whose values are all strings, numbers or booleans), for
tests/api/conformance.rs to compare with what synthgate does with the same files. Offline:
nothing here needs the network (token statistics that need a download only log a warning).
"""

import json
import sys
import tempfile
from pathlib import Path

from data_designer.config.config_builder import DataDesignerConfigBuilder
from data_designer.config.models import ModelProvider
from data_designer.interface.data_designer import DataDesigner


def kind(value) -> str:
    """The JSON kind a value of the preview's DataFrame has, as synthgate would return it."""
    import numpy as np

    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "array"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if value is None or (isinstance(value, float) and value != value):
        return "null"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "number"
    return "string"


def scalars(df) -> dict:
    """The columns whose every value is a plain string, number or boolean, row by row."""
    import numpy as np

    out = {}
    for column in df.columns:
        values = [v.item() if isinstance(v, np.generic) else v for v in df[column]]
        # pandas writes a missing value as NaN, which is no JSON: such a column is not plain.
        values = [None if isinstance(v, float) and v != v else v for v in values]
        if all(isinstance(v, (str, int, float, bool)) for v in values):
            out[str(column)] = values
    return out


def main() -> None:
    config_dir, endpoint, out_path = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    provider = ModelProvider(name="mock", endpoint=endpoint, provider_type="openai", api_key="unused")
    results = {}
    with tempfile.TemporaryDirectory() as artifacts:
        dd = DataDesigner(artifact_path=artifacts, model_providers=[provider])
        for path in sorted(config_dir.glob("*.yaml")):
            try:
                preview = dd.preview(DataDesignerConfigBuilder.from_config(path), num_records=3)
                outputs = sorted((getattr(preview, "processor_artifacts", None) or {}).keys())
                first = preview.dataset.iloc[0]
                shapes = {str(c): kind(first[c]) for c in preview.dataset.columns}
                results[path.stem] = {
                    "ok": True,
                    "columns": list(preview.dataset.columns),
                    "shapes": shapes,
                    "outputs": outputs,
                    "scalars": scalars(preview.dataset),
                }
            except Exception as e:  # noqa: BLE001 - every failure is a result to report
                results[path.stem] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    out_path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
