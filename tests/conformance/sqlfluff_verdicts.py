"""DataDesigner's SQL validator verdicts on a corpus: `python sqlfluff_verdicts.py CORPUS OUT`.

For each dialect DataDesigner's `code_lang` names (`sql:ansi`, `sql:sqlite`, ...) and each
query of CORPUS (a JSON list), runs DataDesigner's own `SQLValidator` (sqlfluff's lint,
counting PRS errors, plus its DECIMAL check) and writes `{"dialect|query": is_valid}` to OUT,
for tests/api/sql_conformance.rs to compare with synthgate's verdicts.
"""

import json
import logging
import sys

from data_designer.config.utils.code_lang import CodeLang
from data_designer.config.validator_params import CodeValidatorParams
from data_designer.engine.validators.sql import SQLValidator

logging.getLogger("sqlfluff").setLevel(logging.ERROR)

DIALECTS = ["ansi", "sqlite", "postgres", "mysql", "tsql", "bigquery"]


def main() -> None:
    corpus = json.load(open(sys.argv[1]))
    out = {}
    for d in DIALECTS:
        validator = SQLValidator(CodeValidatorParams(code_lang=CodeLang(f"sql:{d}")))
        for q in corpus:
            result = validator.run_validation([{"sql": q}]).data[0]
            out[f"{d}|{q}"] = bool(result.is_valid)
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
