"""The job's command line, and what it prints for its submitter."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sketch_core.algebra.frontend import decode_params
from sketch_core.config import Settings
from sketch_core.errors import SketchError
from sketch_core.service import MAINTENANCE_STRATEGIES, SketchService
from sketch_core.spark.session import build_session

RESULT_PREFIX = "SKETCH_RESULT "
# What spark-submit runs (it takes a file, not a module).
JOB_SCRIPT = Path(__file__).with_name("__main__.py")
EXIT_TERMINAL, EXIT_TRANSIENT = 2, 75


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sketch_core.jobs", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    capture = verbs.add_parser("capture", help="capture a sketch on Spark")
    source = capture.add_mutually_exclusive_group(required=True)
    source.add_argument("--sql")
    source.add_argument("--sql-file", type=Path)
    capture.add_argument("--name")
    capture.add_argument("--params", type=_json_object, default={}, help="JSON, typed as stored")
    capture.add_argument("--attributes", type=_json_object)
    capture.add_argument("--fragments", type=json.loads, help="an integer or {table: integer}")
    capture.add_argument("--snapshot", type=int)
    capture.add_argument(
        "--with-state", action="store_true", help="also compute the incremental-maintenance state"
    )
    maintain = verbs.add_parser("maintain", help="maintain a sketch (recaptures run on Spark)")
    maintain.add_argument("--name", required=True)
    maintain.add_argument("--strategy", default="auto", choices=MAINTENANCE_STRATEGIES)
    return parser


def _run(args: argparse.Namespace, svc: SketchService) -> dict[str, Any]:
    if args.verb == "capture":
        sql = args.sql if args.sql is not None else args.sql_file.read_text()
        version = svc.capture(
            sql,
            name=args.name,
            params=decode_params(args.params),
            attributes=args.attributes,
            fragments=args.fragments,
            snapshot=args.snapshot,
            with_state=args.with_state,
        )
        return {
            "name": version.name,
            "version": version.version,
            "sequence": version.sequence,
            "fragments": {t: len(ids) for t, ids in version.fragments.items()},
        }
    (run,) = svc.maintain(args.name, args.strategy)
    return {
        "name": run.name,
        "strategy": run.strategy,
        "version": run.to_version,
        "delta_rows": run.delta_rows,
    }


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    settings = Settings.from_env()
    try:
        # spark-submit starts the JVM first and hands this process its gateway: its --master
        # stands. Started as a plain process, the job builds its session from the settings.
        submitted = "PYSPARK_GATEWAY_PORT" in os.environ
        svc = SketchService.from_settings(
            settings, spark=build_session(settings, "sketch-job", submitted=submitted)
        )
        try:
            result = _run(args, svc)
        finally:
            svc.close()
    except SketchError as exc:
        print(f"{type(exc).__name__}: {exc}", flush=True)
        return EXIT_TRANSIENT if exc.transient else EXIT_TERMINAL
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def parse_result(output: str) -> dict[str, Any] | None:
    """The result a job printed (its last ``SKETCH_RESULT`` line), or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_PREFIX):
            value = json.loads(line[len(RESULT_PREFIX) :])
            return value if isinstance(value, dict) else None
    return None
