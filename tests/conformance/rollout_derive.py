"""Run DataDesigner's own agent-rollout seed reader over a directory and print what it derives.

Usage: dd_derive.py FORMAT ROOT [--file-pattern P] [--no-recursive] [--warnings-out PATH]
       dd_derive.py --batch CASES.json


stdout: one JSON array, the hydrated rows in the order DataDesigner produces them, each row the
dict `NormalizedAgentRolloutRecord.to_dict()` returns (key order kept).
--warnings-out: a JSON array of every warning DataDesigner logged while reading, as logged.
Errors: "ERROR: <Type>: <message>" on stderr and exit status 3.
--batch: CASES.json is a list of {"format", "root", "file_pattern", "recursive"}; stdout is a
list of {"rows": [...]} or {"error": "<Type>: <message>"}, each with its "warnings" (one
interpreter start for many reads).

The read goes through `AgentRolloutSeedReader` itself: `_get_row_manifest_dataframe` (file
matching, handled/unhandled split, the empty-manifest error) and `_hydrate_rows` (per-file
parse, parse context, malformed-file skips), then the same "did not produce any rows" check
as `_get_output_dataframe`. Only the final pandas DataFrame is left out, so the rows keep the
exact Python values the reader hydrated.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from data_designer.config.seed_source import AgentRolloutFormat, AgentRolloutSeedSource
from data_designer.engine.resources.seed_reader import AgentRolloutSeedReader, SeedReaderError
from data_designer.engine.secret_resolver import PlaintextResolver


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def read(collector: _Collect, fmt: str, root: str, file_pattern: str | None, recursive: bool) -> dict:
    """One read through DataDesigner's reader: its rows, or its error, and what it logged."""
    collector.messages = []
    try:
        source = AgentRolloutSeedSource(
            format=AgentRolloutFormat(fmt), path=root, file_pattern=file_pattern, recursive=recursive
        )
        reader = AgentRolloutSeedReader()
        reader.attach(source, PlaintextResolver())
        manifest_rows = reader._get_row_manifest_dataframe().to_dict(orient="records")
        context = reader._get_filesystem_context()
        rows = reader._hydrate_rows(manifest_rows=manifest_rows, context=context)
        if not rows:
            raise SeedReaderError(f"Seed source at {source.runtime_path} did not produce any rows")
        result: dict = {"rows": rows}
    except Exception as error:  # noqa: BLE001 - every failure is reported, typed, to the caller
        result = {"error": f"{type(error).__name__}: {error}"}
    result["warnings"] = list(collector.messages)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("format", nargs="?")
    parser.add_argument("root", nargs="?")
    parser.add_argument("--file-pattern", default=None)
    parser.add_argument("--no-recursive", action="store_true")
    parser.add_argument("--warnings-out", default=None)
    parser.add_argument("--batch", default=None)
    args = parser.parse_args()

    collector = _Collect()
    dd_logger = logging.getLogger("data_designer")
    dd_logger.addHandler(collector)
    dd_logger.setLevel(logging.WARNING)

    if args.batch:
        with open(args.batch, encoding="utf-8") as handle:
            cases = json.load(handle)
        results = [
            read(collector, c["format"], c["root"], c.get("file_pattern"), c.get("recursive", True)) for c in cases
        ]
        json.dump(results, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0

    result = read(collector, args.format, args.root, args.file_pattern, not args.no_recursive)
    if args.warnings_out:
        with open(args.warnings_out, "w", encoding="utf-8") as handle:
            json.dump(result["warnings"], handle, ensure_ascii=False)
    if "error" in result:
        print(f"ERROR: {result['error']}", file=sys.stderr)
        return 3
    json.dump(result["rows"], sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
